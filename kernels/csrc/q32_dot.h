// Dot products of GGUF weight rows in the 32-weight block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// straight from the file's blocks) with activations quantized to int8 per block of 32 (llama.cpp's
// Q8_0 with the block's sum kept): the narrow-step (decode) route of ``gguf_linear.cpp`` for them.
//
// Activation block (``X32``): d (float), ds = d * sum(q) (float), q[32] (int8, x ~ d * q), and -16 times
// the sum of each group of four q bytes (``minus16``).
// A weight block is d_w (fp16), maybe m (fp16), maybe qh (the fifth bits), 16 bytes of nibbles
// (weight i < 16 in the low nibble of byte i, weight 16 + i in its high nibble) or, for Q8_0, 32 int8.
// With u the unsigned code of a weight (0..15, 0..31 or, for Q8_0, the signed byte):
// - Q4_0, Q5_0: weight = d_w * (u - c), c = 8 or 16 (``kCentre``), so a block's dot is
//   d_w * d * (sum_i u_i q_i - c * sum_i q_i); the vector routes start each group of four's integer sum
//   at -c times its q sum (``minus16``, halved for c = 8), so the offset costs no float term;
// - Q4_1, Q5_1: weight = d_w * u + m (``kMin``): d_w * d * sum_i u_i q_i + m * ds;
// - Q8_0: weight = d_w * u: d_w * d * sum_i u_i q_i.
// The scalar route uses the float form (offset * ds) for every type.
// Integer ranges: maddubs pairs stay within 2 * 128 * 127 < 2^15 (Q8_0 goes through |w| and sign(q, w));
// a group of four's sum within 4 * 31 * 127 + 16 * 4 * 127.
#pragma once

#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kquant_dot.h"

namespace ae::q32 {

struct X32 {
  float d;
  float ds;
  int8_t q[32];
  // -16 times the sum of each group of four q bytes (one int32 lane of a dot product): where a Q5_0
  // block's integer dot starts, halved for Q4_0 (sum_i (u_i - c) q_i = sum_i u_i q_i - c sum_i q_i).
  int32_t minus16[8];
};

using ae::kquant::fp16;

// ``k`` floats (a multiple of 32) into k / 32 activation blocks.
inline void quantize_row(const float* x, int64_t k, X32* out) {
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::abs(xb[i]));
    const float inv = amax > 0.f ? 127.f / amax : 0.f;
    X32& o = out[b];
    o.d = amax > 0.f ? amax / 127.f : 0.f;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      o.q[i] = static_cast<int8_t>(std::min(127, std::max(-127, static_cast<int>(std::nearbyint(xb[i] * inv)))));
      sum += o.q[i];
    }
    o.ds = o.d * static_cast<float>(sum);
    for (int group = 0; group < 8; ++group) {
      const int8_t* four = o.q + 4 * group;
      o.minus16[group] = -16 * (four[0] + four[1] + four[2] + four[3]);
    }
  }
}

// The block types: kId (GGML type), kBytes, kSigned (codes are signed bytes: Q8_0), kMin (a float min:
// the offset is ``offset(b) * ds``), kCentre (else the integer centre of the codes, 0 for Q8_0),
// scale(b), offset(b), code(b, i) (scalar), with AVX2 codes(b) (the 32 codes as bytes) and with
// AVX-512 codes64(b) (two consecutive blocks' codes, b's in bytes 0-31).
template <int Id, int Bytes, bool Min, bool Fifth>
struct Nibbles {
  static constexpr int kId = Id, kBytes = Bytes;
  static constexpr bool kSigned = false;
  // Without a min, weight = d_w * (u - kCentre): the vector routes fold the offset into the integer
  // sums; with one, it is a float (``offset``).
  static constexpr bool kMin = Min;
  static constexpr int kCentre = Min ? 0 : (Fifth ? 16 : 8);
  static float scale(const uint8_t* b) { return fp16(b); }
  static float offset(const uint8_t* b) { return Min ? fp16(b + 2) : -static_cast<float>(kCentre) * fp16(b); }
  static const uint8_t* qs(const uint8_t* b) { return b + Bytes - 16; }
  static uint32_t qh(const uint8_t* b) {
    uint32_t v = 0;
    if (Fifth) std::memcpy(&v, b + (Min ? 4 : 2), 4);
    return v;
  }
  static int code(const uint8_t* b, int i) {
    const int v = (qs(b)[i % 16] >> (4 * (i / 16))) & 0xF;
    return Fifth ? v | (((qh(b) >> i) & 1) << 4) : v;
  }
#if defined(__AVX2__)
  static __m256i codes(const uint8_t* b) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs(b)));
    const __m128i low4 = _mm_set1_epi8(0x0F);
    __m256i v = _mm256_setr_m128i(_mm_and_si128(q, low4), _mm_and_si128(_mm_srli_epi16(q, 4), low4));
    if (Fifth) {  // byte i gets bit i of qh as 0x10
      const __m256i spread = _mm256_shuffle_epi8(
          _mm256_set1_epi32(static_cast<int>(qh(b))),
          _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
      const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
      const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
      v = _mm256_or_si256(v, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
    }
    return v;
  }
#endif
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  // The codes of two consecutive blocks b0, b1 = b0 + kBytes in one vector (bytes 0-31: b0's, 32-63:
  // b1's): both blocks' nibble bytes in 128-bit lanes (q0, q0, q1, q1), the second copy of each shifted
  // down four bits, masked; the fifth bits set from the two qh words as one 64-bit byte mask.
  static __m512i codes64(const uint8_t* b0) {
    const uint8_t* b1 = b0 + Bytes;
    const __m256i both = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs(b0)))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs(b1))), 1);
    const __m512i wide = _mm512_castsi256_si512(both);
    const __m512i lanes = _mm512_shuffle_i64x2(wide, wide, 0x50);  // 128-bit lanes 0, 0, 1, 1
    __m512i v = _mm512_and_si512(_mm512_srlv_epi64(lanes, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(0x0F));
    if (Fifth) {
      const __mmask64 fifth = static_cast<__mmask64>(qh(b0)) | (static_cast<__mmask64>(qh(b1)) << 32);
      v = _mm512_mask_add_epi8(v, fifth, v, _mm512_set1_epi8(0x10));
    }
    return v;
  }
#endif
};

struct Q8 {
  static constexpr int kId = 8, kBytes = 34;
  static constexpr bool kSigned = true;
  static constexpr bool kMin = false;
  static constexpr int kCentre = 0;
  static float scale(const uint8_t* b) { return fp16(b); }
  static float offset(const uint8_t*) { return 0.f; }
  static int code(const uint8_t* b, int i) { return reinterpret_cast<const int8_t*>(b + 2)[i]; }
#if defined(__AVX2__)
  static __m256i codes(const uint8_t* b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)); }
#endif
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  static __m512i codes64(const uint8_t* b0) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(codes(b0)), codes(b0 + kBytes), 1);
  }
#endif
};

using Q4_0 = Nibbles<2, 18, false, false>;
using Q4_1 = Nibbles<3, 20, true, false>;
using Q5_0 = Nibbles<6, 22, false, true>;
using Q5_1 = Nibbles<7, 24, true, true>;

constexpr int kMaxRows = 4;

#if defined(__AVX512BW__) && defined(__AVX512VL__)
// The 512-bit route takes two blocks a vector and up to eight rows per pass over a weight row; its
// activations come in pairs of blocks (``X64``: the two scales spread over the lanes each block's
// sums land in), so K must be a multiple of 64 (else the 256-bit route serves).
constexpr int kMaxRows64 = 8;

struct X64 {
  float sx[16];  // lanes 0-7: the first block's d, 8-15: the second's
  float ds[2];
  int8_t q[64];
  // The two blocks' ``X32::minus16``, side by side (lanes 0-7, 8-15).
  int32_t minus16[16];
};

inline void quantize_row64(const float* x, int64_t k, X64* out) {
  X32 pair[2];
  for (int64_t p = 0; p < k / 64; ++p) {
    quantize_row(x + 64 * p, 64, pair);
    X64& o = out[p];
    for (int h = 0; h < 2; ++h) {
      std::fill(o.sx + 8 * h, o.sx + 8 * h + 8, pair[h].d);
      o.ds[h] = pair[h].ds;
      std::memcpy(o.q + 32 * h, pair[h].q, 32);
      std::memcpy(o.minus16 + 8 * h, pair[h].minus16, sizeof(pair[h].minus16));
    }
  }
}

// acc + the sixteen int32 sums of four u * q (u unsigned codes, or signed for Q8_0).
template <bool Signed>
inline __m512i dot64(__m512i acc, __m512i u, __m512i q) {
  if (Signed) {
    const __mmask64 neg = _mm512_movepi8_mask(u);
    q = _mm512_mask_sub_epi8(q, neg, _mm512_setzero_si512(), q);
    u = _mm512_abs_epi8(u);
  }
#if defined(__AVX512VNNI__)
  return _mm512_dpbusd_epi32(acc, u, q);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, q), _mm512_set1_epi16(1)));
#endif
}

// Where a block pair's integer dot starts: minus its code offset times the q sums (zero for Q8_0 and
// for the types with a float min).
template <class T>
inline __m512i centred_start(const X64& xb) {
  static_assert(T::kCentre == 0 || T::kCentre == 8 || T::kCentre == 16, "a centre the sums hold");
  if constexpr (T::kCentre == 16) return _mm512_loadu_si512(xb.minus16);
  else if constexpr (T::kCentre == 8) return _mm512_srai_epi32(_mm512_loadu_si512(xb.minus16), 1);
  else return _mm512_setzero_si512();
}

template <class T, int R>
void rows64(const uint8_t* w, const X64* x, int64_t x_row, int64_t pairs, float* out, int64_t stride) {
  __m512 acc[R];
  float off[R] = {};
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    const uint8_t* b0 = w + 2 * p * T::kBytes;
    const uint8_t* b1 = b0 + T::kBytes;
    const __m512i u = T::codes64(b0);
    const __m512 sw = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(T::scale(b0))),
                                         _mm256_set1_ps(T::scale(b1)), 1);
    float o0 = 0.f, o1 = 0.f;
    if constexpr (T::kMin) o0 = T::offset(b0), o1 = T::offset(b1);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const X64& xb = x[r * x_row + p];
      const __m512i s = dot64<T::kSigned>(centred_start<T>(xb), u, _mm512_loadu_si512(xb.q));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(sw, _mm512_loadu_ps(xb.sx)), acc[r]);
      if constexpr (T::kMin) off[r] += o0 * xb.ds[0] + o1 * xb.ds[1];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) out[r * stride] = _mm512_reduce_add_ps(acc[r]) + off[r];
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
// acc + the eight int32 sums of four u * q over 32 bytes (u unsigned codes, or signed for Q8_0).
template <bool Signed>
inline __m256i dot32(__m256i acc, __m256i u, __m256i q) {
  if (Signed) {
    q = _mm256_sign_epi8(q, u);
    u = _mm256_abs_epi8(u);
  }
#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
  return _mm256_dpbusd_epi32(acc, u, q);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), _mm256_set1_epi16(1)));
#endif
}

// Where a block's integer dot starts on the 256-bit route (as ``centred_start`` on the 512-bit one).
template <class T>
inline __m256i centred_start32(const X32& xb) {
  static_assert(T::kCentre == 0 || T::kCentre == 8 || T::kCentre == 16, "a centre the sums hold");
  if constexpr (T::kCentre == 0) return _mm256_setzero_si256();
  const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.minus16));
  return T::kCentre == 16 ? sums : _mm256_srai_epi32(sums, 1);
}
#endif

// out[r * stride] = the dots of one weight row ``w`` (``blocks`` blocks of T) with R activation rows
// (rows ``x_row`` blocks apart).
template <class T, int R>
void rows(const uint8_t* w, const X32* x, int64_t x_row, int64_t blocks, float* out, int64_t stride) {
  float off[R] = {};
#if defined(__AVX2__) && defined(__FMA__)
  __m256 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = w + b * T::kBytes;
    const __m256i u = T::codes(blk);
    const float d = T::scale(blk);
    float o = 0.f;
    if constexpr (T::kMin) o = T::offset(blk);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const X32& xb = x[r * x_row + b];
      const __m256i s = dot32<T::kSigned>(centred_start32<T>(xb), u, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.q)));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * xb.d), acc[r]);
      if constexpr (T::kMin) off[r] += o * xb.ds;
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r * stride] = ae::kquant::hsum8(acc[r]) + off[r];
#else
  float acc[R] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = w + b * T::kBytes;
    const float d = T::scale(blk), o = T::offset(blk);
    for (int r = 0; r < R; ++r) {
      const X32& xb = x[r * x_row + b];
      int32_t s = 0;
      for (int i = 0; i < 32; ++i) s += T::code(blk, i) * xb.q[i];
      acc[r] += d * xb.d * static_cast<float>(s);
      off[r] += o * xb.ds;
    }
  }
  for (int r = 0; r < R; ++r) out[r * stride] = acc[r] + off[r];
#endif
}

// Calls f.template operator()<T>() for the 32-weight block type with GGML id ``qtype``; false if none.
template <class F>
bool with_type(int64_t qtype, F&& f) {
  switch (qtype) {
    case Q4_0::kId: f.template operator()<Q4_0>(); return true;
    case Q4_1::kId: f.template operator()<Q4_1>(); return true;
    case Q5_0::kId: f.template operator()<Q5_0>(); return true;
    case Q5_1::kId: f.template operator()<Q5_1>(); return true;
    case Q8::kId: f.template operator()<Q8>(); return true;
    default: return false;
  }
}

}  // namespace ae::q32
