// Dot products of GGUF K-quant weight rows (Q4_K, Q6_K, straight from the file's blocks) with
// activations quantized to int8 per block of 256 (llama.cpp's Q8_K): the narrow-step (decode) route
// of ``gguf_linear.cpp``.
//
// Activation block (``XBlock``): d (float), q[256] (int8, x ~ d * q, |q| <= 127, round to nearest),
// bsums[16] (the sums of q over each 16). One weight row is unpacked once per block into registers
// and multiplied into up to kMaxRows activation rows (the weights are read once per step for a
// decode of that many streams).
//
// Q4_K (144 bytes / 256 weights): d, dmin (fp16), 12 bytes of 6-bit scales sc[8] and mins m[8],
// 128 bytes of nibbles (bytes 32c.. hold weights 64c.. in their low and 64c + 32.. in their high
// nibbles); weight = d * sc[j] * q - dmin * m[j] in sub-block j of 32. So a block's dot is
//   d_x * (d * sum_j sc[j] * sum_i q_i x_i  -  dmin * sum_j m[j] * (bsums[2j] + bsums[2j + 1])).
// Q6_K (210 bytes): ql[128], qh[64], int8 scales[16], d (fp16); weight 128h + r has the low nibble
// (ql[64h + r % 64] >> 4 (r / 64)) & 15 and the two high bits (qh[32h + r % 32] >> 2 (r / 32)) & 3,
// weight = d * sc[g] * (q - 32) in group g of 16: the dot is d_x * d * sum_g sc[g] * (sum_i q_i x_i -
// 32 bsums[g]).
// Integer ranges: maddubs pairs stay below 2 * 63 * 127 < 2^15, a block's sums below 2^31.
#pragma once

#include <c10/util/Half.h>

#include <cstdint>
#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX2__) || defined(__F16C__)
#include <immintrin.h>
#endif

namespace ae::kquant {

constexpr int kBlock = 256;
// Activation rows per pass over a weight row: as many as the accumulators fit in the registers.
#if defined(__AVX512BW__) && defined(__AVX512VL__)
constexpr int kMaxRows = 8;
#else
constexpr int kMaxRows = 4;
#endif

struct XBlock {
  float d;
  int8_t q[kBlock];
  int16_t bsums[kBlock / 16];
  int16_t bsums32[kBlock / 32];  // bsums[2j] + bsums[2j + 1]: Q4_K's sub-blocks
};

inline float fp16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
#if defined(__F16C__)
  return _cvtsh_ss(h);  // one instruction where the CPU has F16C (every AVX2 CPU)
#else
  return c10::detail::fp16_ieee_to_fp32_value(h);
#endif
}

// ``k`` floats (a multiple of 256) into k / 256 activation blocks.
inline void quantize_row(const float* x, int64_t k, XBlock* out) {
  for (int64_t b = 0; b < k / kBlock; ++b) {
    const float* xb = x + b * kBlock;
    float amax = 0.f;
    for (int i = 0; i < kBlock; ++i) amax = std::max(amax, std::abs(xb[i]));
    XBlock& o = out[b];
    const float inv = amax > 0.f ? 127.f / amax : 0.f;
    o.d = amax > 0.f ? amax / 127.f : 0.f;
    for (int g = 0; g < kBlock / 16; ++g) {
      int sum = 0;
      for (int i = 16 * g; i < 16 * g + 16; ++i) {
        const int v = static_cast<int>(std::nearbyint(xb[i] * inv));
        o.q[i] = static_cast<int8_t>(std::min(127, std::max(-127, v)));
        sum += o.q[i];
      }
      o.bsums[g] = static_cast<int16_t>(sum);
    }
    for (int j = 0; j < kBlock / 32; ++j) o.bsums32[j] = static_cast<int16_t>(o.bsums[2 * j] + o.bsums[2 * j + 1]);
  }
}

// The 6-bit scales and mins of a Q4_K block (``s`` = its 12 scale bytes): sub-block j's scale is
// the low 6 bits of byte j (j < 4) or the low nibble of byte j + 4 with the top 2 bits of byte j - 4 above
// it; its min likewise from bytes j + 4 / the high nibble of byte j + 4 and the top bits of byte j.
// Four 32-bit words at a time (as llama.cpp decodes them) rather than sixteen byte operations.
inline void q4k_scales(const uint8_t* s, uint8_t sc[8], uint8_t m[8]) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  const uint32_t scales[2] = {u[0] & kLow6, (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4)};
  const uint32_t mins[2] = {u[1] & kLow6, ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4)};
  std::memcpy(sc, scales, 8);
  std::memcpy(m, mins, 8);
}

// Scalar references (and the route of CPUs without AVX2): out[r * stride] = the dots of one weight
// row ``w`` with R activation rows ``x`` (each k / 256 blocks, rows ``x_row`` blocks apart).
template <int R>
void q4k_rows_scalar(const uint8_t* w, const XBlock* x, int64_t x_row, int64_t blocks, float* out, int64_t stride) {
  float acc[R] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = w + b * 144;
    uint8_t sc[8], m[8];
    q4k_scales(blk + 4, sc, m);
    const float d = fp16(blk), dmin = fp16(blk + 2);
    for (int r = 0; r < R; ++r) {
      const XBlock& xb = x[r * x_row + b];
      int32_t sumq = 0, summ = 0;
      for (int j = 0; j < 8; ++j) {
        int32_t s = 0;
        for (int i = 0; i < 32; ++i) s += ((blk[16 + 32 * (j / 2) + i] >> (4 * (j % 2))) & 0xF) * xb.q[32 * j + i];
        sumq += sc[j] * s;
        summ += m[j] * (xb.bsums[2 * j] + xb.bsums[2 * j + 1]);
      }
      acc[r] += xb.d * (d * static_cast<float>(sumq) - dmin * static_cast<float>(summ));
    }
  }
  for (int r = 0; r < R; ++r) out[r * stride] = acc[r];
}

template <int R>
void q6k_rows_scalar(const uint8_t* w, const XBlock* x, int64_t x_row, int64_t blocks, float* out, int64_t stride) {
  float acc[R] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = w + b * 210;
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
    const float d = fp16(blk + 208);
    for (int r = 0; r < R; ++r) {
      const XBlock& xb = x[r * x_row + b];
      int32_t sum = 0;
      for (int g = 0; g < 16; ++g) {
        int32_t s = 0;
        for (int i = 16 * g; i < 16 * g + 16; ++i) {
          const int h = i / 128, t = i % 128;
          const int lo = (blk[64 * h + t % 64] >> (4 * (t / 64))) & 0xF;
          const int hi = (blk[128 + 32 * h + t % 32] >> (2 * (t / 32))) & 3;
          s += (lo | (hi << 4)) * xb.q[i];
        }
        sum += sc[g] * (s - 32 * xb.bsums[g]);
      }
      acc[r] += xb.d * d * static_cast<float>(sum);
    }
  }
  for (int r = 0; r < R; ++r) out[r * stride] = acc[r];
}

#if defined(__AVX2__)
// The sum of the four lanes.
inline float hsum4(__m128 v) {
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  return _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
}

// The sum of the eight lanes.
inline float hsum8(__m256 v) { return hsum4(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1))); }
#endif

#if defined(__AVX512BW__) && defined(__AVX512VL__)
// 512-bit route: 64 weights a vector. With VNNI the scale multiply and the add are one vpdpwssd.
inline __m512i scaled_add(__m512i acc, __m512i pairs, __m512i scales) {
#if defined(__AVX512VNNI__)
  return _mm512_dpwssd_epi32(acc, pairs, scales);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, scales));
#endif
}

inline float hsum16(__m512 v) { return _mm512_reduce_add_ps(v); }

template <int R>
void q4k_rows(const uint8_t* w, const XBlock* x, int64_t x_row, int64_t blocks, float* out, int64_t stride) {
  __m512 acc[R];
  __m128 mins[R];  // sum over blocks of d_x * dmin * (m[j] * bsums32[j] pairs), four lanes
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm512_setzero_ps();
    mins[r] = _mm_setzero_ps();
  }
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = w + b * 144;
    uint8_t sc[8], m[8];
    q4k_scales(blk + 4, sc, m);
    const float d = fp16(blk), dmin = fp16(blk + 2);
    const __m128i sc16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc)));
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(m)));
    __m512i wv[4], sv[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * c));
      wv[c] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(q4, low4)),
                                 _mm256_and_si256(_mm256_srli_epi16(q4, 4), low4), 1);
      // s16 lanes 0-15: sc[2c], 16-31: sc[2c + 1]
      const __m512i idx = _mm512_set_epi16(2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1,
                                           2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1,
                                           2 * c + 1, 2 * c + 1, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c,
                                           2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c);
      sv[c] = _mm512_permutexvar_epi16(idx, _mm512_castsi128_si512(sc16));
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const XBlock& xb = x[r * x_row + b];
      __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m512i xq = _mm512_loadu_si512(xb.q + 64 * c);
        sum = scaled_add(sum, _mm512_maddubs_epi16(wv[c], xq), sv[c]);
      }
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(xb.d * d), acc[r]);
      const __m128i mm = _mm_madd_epi16(m16, _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums32)));
      mins[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(mm), _mm_set1_ps(xb.d * dmin), mins[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) out[r * stride] = hsum16(acc[r]) - hsum4(mins[r]);
}

template <int R>
void q6k_rows(const uint8_t* w, const XBlock* x, int64_t x_row, int64_t blocks, float* out, int64_t stride) {
  __m512 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0x0F), two = _mm512_set1_epi8(3);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = w + b * 210;
    const float d = fp16(blk + 208);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
    __m512i wv[4], sv[4];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(blk + 64 * h);
      const __m256i qh32 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
      // bytes 0-31: qh, 32-63: qh >> 2 (the high bits of weights r % 32 and 32 + r % 32)
      const __m512i qh = _mm512_inserti64x4(_mm512_castsi256_si512(qh32), _mm256_srli_epi16(qh32, 2), 1);
#pragma GCC unroll 2
      for (int c = 0; c < 2; ++c) {
        const __m512i lo = _mm512_and_si512(c == 0 ? ql : _mm512_srli_epi16(ql, 4), low4);
        const __m512i hi = _mm512_and_si512(c == 0 ? qh : _mm512_srli_epi16(qh, 4), two);
        wv[2 * h + c] = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
        const int g = 8 * h + 4 * c;  // s16 lanes 8t .. 8t + 7 hold group g + t's scale
        const __m512i idx = _mm512_set_epi16(g + 3, g + 3, g + 3, g + 3, g + 3, g + 3, g + 3, g + 3, g + 2, g + 2,
                                             g + 2, g + 2, g + 2, g + 2, g + 2, g + 2, g + 1, g + 1, g + 1, g + 1,
                                             g + 1, g + 1, g + 1, g + 1, g, g, g, g, g, g, g, g);
        sv[2 * h + c] = _mm512_permutexvar_epi16(idx, _mm512_castsi256_si512(sc16));
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const XBlock& xb = x[r * x_row + b];
      __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m512i xq = _mm512_loadu_si512(xb.q + 64 * c);
        sum = scaled_add(sum, _mm512_maddubs_epi16(wv[c], xq), sv[c]);
      }
      // - 32 * sum_g sc[g] * bsums[g], eight lanes of pairs
      const __m256i corr = _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums)));
      sum = _mm512_sub_epi32(sum, _mm512_zextsi256_si512(_mm256_slli_epi32(corr, 5)));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(xb.d * d), acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r * stride] = hsum16(acc[r]);
}
#elif defined(__AVX2__) && defined(__FMA__)
// 256-bit route: 32 weights a vector (maddubs, then madd by the sub-block scales).

inline __m256i scaled_add(__m256i acc, __m256i pairs, __m256i scales) {
#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
  return _mm256_dpwssd_epi32(acc, pairs, scales);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, scales));
#endif
}

template <int R>
void q4k_rows(const uint8_t* w, const XBlock* x, int64_t x_row, int64_t blocks, float* out, int64_t stride) {
  __m256 acc[R];
  __m128 mins[R];  // sum over blocks of d_x * dmin * (m[j] * bsums32[j] pairs), four lanes
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    mins[r] = _mm_setzero_ps();
  }
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = w + b * 144;
    uint8_t sc[8], m[8];
    q4k_scales(blk + 4, sc, m);
    const float d = fp16(blk), dmin = fp16(blk + 2);
    // Sub-block by sub-block, every row's sum beside it: the codes and the scale of one sub-block
    // live in registers at a time (sixteen 256-bit registers hold R sums, R accumulators and them).
    __m256i sum[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * c));
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        const __m256i wv = _mm256_and_si256(half == 0 ? q4 : _mm256_srli_epi16(q4, 4), low4);
        const __m256i sv = _mm256_set1_epi16(sc[2 * c + half]);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r * x_row + b].q + 64 * c + 32 * half));
          sum[r] = scaled_add(sum[r], _mm256_maddubs_epi16(wv, xq), sv);
        }
      }
    }
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(m)));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const XBlock& xb = x[r * x_row + b];
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[r]), _mm256_set1_ps(xb.d * d), acc[r]);
      const __m128i mm = _mm_madd_epi16(m16, _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums32)));
      mins[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(mm), _mm_set1_ps(xb.d * dmin), mins[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r * stride] = hsum8(acc[r]) - hsum4(mins[r]);
}

template <int R>
void q6k_rows(const uint8_t* w, const XBlock* x, int64_t x_row, int64_t blocks, float* out, int64_t stride) {
  __m256 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(3);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = w + b * 210;
    const float d = fp16(blk + 208);
    const int8_t* s = reinterpret_cast<const int8_t*>(blk + 192);
    // As q4k_rows: 32 weights at a time, every row's sum beside them.
    __m256i sum[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
      // weights 128h + 32t + i (t < 4): low nibble of ql[64h + 32 (t % 2) + i] >> 4 (t / 2), high bits of
      // qh[32h + i] >> 2t
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32 * (t % 2)));
        const __m256i lo = _mm256_and_si256(t < 2 ? ql : _mm256_srli_epi16(ql, 4), low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * t), two);
        const __m256i wv = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
        const int g = 8 * h + 2 * t;  // s16 lanes 0-7: group g, 8-15: group g + 1
        const __m256i sv = _mm256_setr_m128i(_mm_set1_epi16(s[g]), _mm_set1_epi16(s[g + 1]));
        const int j = 4 * h + t;
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r * x_row + b].q + 32 * j));
          sum[r] = scaled_add(sum[r], _mm256_maddubs_epi16(wv, xq), sv);
        }
      }
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const XBlock& xb = x[r * x_row + b];
      const __m256i corr = _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums)));
      const __m256i total = _mm256_sub_epi32(sum[r], _mm256_slli_epi32(corr, 5));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_set1_ps(xb.d * d), acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r * stride] = hsum8(acc[r]);
}
#else
template <int R>
void q4k_rows(const uint8_t* w, const XBlock* x, int64_t x_row, int64_t blocks, float* out, int64_t stride) {
  q4k_rows_scalar<R>(w, x, x_row, blocks, out, stride);
}
template <int R>
void q6k_rows(const uint8_t* w, const XBlock* x, int64_t x_row, int64_t blocks, float* out, int64_t stride) {
  q6k_rows_scalar<R>(w, x, x_row, blocks, out, stride);
}
#endif

}  // namespace ae::kquant
