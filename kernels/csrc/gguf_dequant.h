// A span of a GGUF weight row's blocks as float32, in vector code: what the wide-step route
// (gguf_wide.cpp) multiplies. The values are gguf_blocks.h's, fma(code, s, o) rounded once, so bit
// for bit gguf-py's (but for the sign of a zero): code * s is exact in float32 for every type here and
// the offsets are exact multiples of s (Q4_0: -8 d, Q5_0: -16 d, Q6_K: -32 d sc) or the block's own
// fp16 min (Q4_1, Q5_1, Q4_K).
//
// row_span<T>(w, b0, b1, dst): blocks [b0, b1) of the row at w into dst[0 .. (b1 - b0) * T::kBlock).
// Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 reuse q32_dot.h's code extraction (32 codes a block in one vector);
// Q4_K and Q6_K unpack their nibbles (and Q6_K's two high bits) the way kquant_dot.h's AVX2 route does.
// Without AVX2, gguf_blocks.h's scalar decode serves.
#pragma once

#include <cstdint>

#include "gguf_blocks.h"
#include "kquant_dot.h"
#include "q32_dot.h"

namespace ae::dequant {

#if defined(__AVX2__) && defined(__FMA__)
// dst[0 .. 32) = fma(code_i, s, o) for the 32 byte codes (unsigned, or signed for Q8_0): codes 0-15
// with (s_lo, o_lo), 16-31 with (s_hi, o_hi).
template <bool Signed>
inline void store32(__m256i codes, float s_lo, float o_lo, float s_hi, float o_hi, float* dst) {
  const __m128i halves[2] = {_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1)};
#if defined(__AVX512F__)
  for (int h = 0; h < 2; ++h) {
    const __m512i i32 = Signed ? _mm512_cvtepi8_epi32(halves[h]) : _mm512_cvtepu8_epi32(halves[h]);
    _mm512_storeu_ps(dst + 16 * h, _mm512_fmadd_ps(_mm512_cvtepi32_ps(i32), _mm512_set1_ps(h ? s_hi : s_lo),
                                                   _mm512_set1_ps(h ? o_hi : o_lo)));
  }
#else
  for (int h = 0; h < 2; ++h) {
    const __m256 s = _mm256_set1_ps(h ? s_hi : s_lo), o = _mm256_set1_ps(h ? o_hi : o_lo);
    for (int q = 0; q < 2; ++q) {
      const __m128i b8 = q ? _mm_srli_si128(halves[h], 8) : halves[h];
      const __m256i i32 = Signed ? _mm256_cvtepi8_epi32(b8) : _mm256_cvtepu8_epi32(b8);
      _mm256_storeu_ps(dst + 16 * h + 8 * q, _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32), s, o));
    }
  }
#endif
}

// Blocks of 32 (q32_dot.h's types): one scale and offset a block.
template <class T>
inline void q32_span(const uint8_t* w, int64_t b0, int64_t b1, float* dst) {
  for (int64_t b = b0; b < b1; ++b, dst += 32) {
    const uint8_t* blk = w + b * T::kBytes;
    const float s = T::scale(blk), o = T::offset(blk);
    store32<T::kSigned>(T::codes(blk), s, o, s, o, dst);
  }
}

// Q4_K: chunk c of 64 weights is the low nibbles (sub-block 2c) then the high nibbles (2c + 1) of
// bytes 16 + 32c ..; weight = (d sc[j]) q - dmin m[j].
inline void q4k_span(const uint8_t* w, int64_t b0, int64_t b1, float* dst) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = b0; b < b1; ++b, dst += 256) {
    const uint8_t* blk = w + b * 144;
    uint8_t sc[8], m[8];
    ae::kquant::q4k_scales(blk + 4, sc, m);
    const float d = ae::kquant::fp16(blk), dmin = ae::kquant::fp16(blk + 2);
    for (int c = 0; c < 4; ++c) {
      const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * c));
      const float s0 = d * static_cast<float>(sc[2 * c]), o0 = -(dmin * static_cast<float>(m[2 * c]));
      const float s1 = d * static_cast<float>(sc[2 * c + 1]), o1 = -(dmin * static_cast<float>(m[2 * c + 1]));
      store32<false>(_mm256_and_si256(q4, low4), s0, o0, s0, o0, dst + 64 * c);
      store32<false>(_mm256_and_si256(_mm256_srli_epi16(q4, 4), low4), s1, o1, s1, o1, dst + 64 * c + 32);
    }
  }
}

// Q6_K: weights 128h + 32t + i (t < 4) have the low nibble of ql[64h + 32 (t % 2) + i] >> 4 (t / 2)
// and the high bits of qh[32h + i] >> 2t; group g of 16 has scale d sc[g]; weight = s (q - 32).
inline void q6k_span(const uint8_t* w, int64_t b0, int64_t b1, float* dst) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(3);
  for (int64_t b = b0; b < b1; ++b, dst += 256) {
    const uint8_t* blk = w + b * 210;
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
    const float d = ae::kquant::fp16(blk + 208);
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
      for (int t = 0; t < 4; ++t) {
        const __m256i ql = t % 2 == 0 ? ql0 : ql1;
        const __m256i lo = _mm256_and_si256(t < 2 ? ql : _mm256_srli_epi16(ql, 4), low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * t), two);
        const int g = 8 * h + 2 * t;
        const float s0 = d * static_cast<float>(sc[g]), s1 = d * static_cast<float>(sc[g + 1]);
        store32<false>(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), s0, -32.f * s0, s1, -32.f * s1,
                       dst + 128 * h + 32 * t);
      }
    }
  }
}
#endif

// Blocks [b0, b1) of the row ``w`` of GGML type ``qtype`` into dst (T::kBlock floats a block); false
// for a type with no block decoder.
inline bool row_span(int64_t qtype, const uint8_t* w, int64_t b0, int64_t b1, float* dst) {
#if defined(__AVX2__) && defined(__FMA__)
  if (qtype == ae::gguf::Q4_K::kType) {
    q4k_span(w, b0, b1, dst);
    return true;
  }
  if (qtype == ae::gguf::Q6_K::kType) {
    q6k_span(w, b0, b1, dst);
    return true;
  }
  return ae::q32::with_type(qtype, [&]<class T>() { q32_span<T>(w, b0, b1, dst); });
#else
  return ae::gguf::with_block_type(qtype, [&]<class T>() {
    int8_t q[T::kBlock];
    float s[T::kBlock / T::kGroup], o[T::kBlock / T::kGroup];
    for (int64_t b = b0; b < b1; ++b, dst += T::kBlock) {
      T::decode(w + b * T::kBytes, q, s, o);
      for (int j = 0; j < T::kBlock; ++j) dst[j] = __builtin_fmaf(static_cast<float>(q[j]), s[j / T::kGroup], o[j / T::kGroup]);
    }
  });
#endif
}

}  // namespace ae::dequant
