// The float32 attention inner loops for head dims that are a multiple of 8 (AVX2 + FMA).
//
// One query vector at a time, keys addressed through a row-pointer table (no div/mod per key):
//   scores: eight keys per pass, one accumulator register per key, one transposing reduction per
//           eight keys (not one horizontal sum per key);
//   softmax: max, then a vectorized exp and sum;
//   P V:    the output row lives in registers (64 floats = 8 registers per pass; longer heads take
//           several passes), one broadcast and D / 8 FMAs per key.
// Every key row is reloaded per query vector of a GQA group: after the first vector it is in L1/L2.
#pragma once

#include <algorithm>
#include <cstdint>

#include "vec_math.h"

#ifdef AE_AVX2
namespace ae {

// [sum(a0), sum(a1), ..., sum(a7)] of eight vectors.
inline __m256 transpose_sum8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5, __m256 a6,
                             __m256 a7) {
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// s[j] = dot(q, k[j]) for j < n; q is D floats (already scaled), k[j] points at D floats.
template <int D>
inline void scores_f32(const float* q, const float* const* k, int64_t n, float* s) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    // The next eight rows are on their way while these eight are summed (a first pass over a
    // request's keys reads them from L3 or memory; the GQA group's later vectors find them in L2).
    for (int64_t r = j + 8; r < std::min<int64_t>(j + 16, n); ++r)
      for (int c = 0; c < D; c += 16) _mm_prefetch(reinterpret_cast<const char*>(k[r] + c), _MM_HINT_T0);
    __m256 a[8];
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) a[r] = _mm256_setzero_ps();
#pragma GCC unroll 16
    for (int c = 0; c < D; c += 8) {
      const __m256 qc = _mm256_loadu_ps(q + c);
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) a[r] = _mm256_fmadd_ps(qc, _mm256_loadu_ps(k[j + r] + c), a[r]);
    }
    _mm256_storeu_ps(s + j, transpose_sum8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]));
  }
  for (; j < n; ++j) {
    __m256 a = _mm256_setzero_ps();
#pragma GCC unroll 16
    for (int c = 0; c < D; c += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(k[j] + c), a);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, a);
    s[j] = lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
  }
}

// p[0..n) = exp(p - max(p)); returns the sum.
inline float softmax_numerators(float* p, int64_t n) {
  float mx = p[0];
  for (int64_t j = 1; j < n; ++j) mx = std::max(mx, p[j]);
  float sum = 0.f;
  int64_t t = 0;
  __m256 acc = _mm256_setzero_ps();
  const __m256 m8 = _mm256_set1_ps(mx);
  for (; t + 8 <= n; t += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(p + t), m8));
    _mm256_storeu_ps(p + t, e);
    acc = _mm256_add_ps(acc, e);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  for (float v : lanes) sum += v;
  for (; t < n; ++t) {
    p[t] = std::exp(p[t] - mx);
    sum += p[t];
  }
  return sum;
}

// out[0..D) = mul * sum_j p[j] * v[j][0..D), 64 output floats per pass held in registers.
template <int D>
inline void weighted_sum_f32(const float* p, const float* const* v, int64_t n, float mul, float* out) {
  for (int c0 = 0; c0 < D; c0 += 64) {
    constexpr int kRegs = (D < 64 ? D : 64) / 8;
    __m256 a[kRegs];
#pragma GCC unroll 8
    for (int r = 0; r < kRegs; ++r) a[r] = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; ++j) {
      if (j + 8 < n)
        for (int c = 0; c < (D < 64 ? D : 64); c += 16)
          _mm_prefetch(reinterpret_cast<const char*>(v[j + 8] + c0 + c), _MM_HINT_T0);
      const __m256 pj = _mm256_broadcast_ss(p + j);
      const float* vj = v[j] + c0;
#pragma GCC unroll 8
      for (int r = 0; r < kRegs; ++r) a[r] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 8 * r), a[r]);
    }
    const __m256 m = _mm256_set1_ps(mul);
#pragma GCC unroll 8
    for (int r = 0; r < kRegs; ++r) _mm256_storeu_ps(out + c0 + 8 * r, _mm256_mul_ps(a[r], m));
  }
}

// One query vector (D floats, pre-scaled) against keys/values [0, n): out = softmax(q K^T) V.
// ``s`` is scratch of at least n floats.
template <int D>
inline void attend_one_f32(const float* q, const float* const* k, const float* const* v, int64_t n,
                           float* s, float* out) {
  scores_f32<D>(q, k, n, s);
  const float sum = softmax_numerators(s, n);
  weighted_sum_f32<D>(s, v, n, 1.f / sum, out);
}

}  // namespace ae
#endif
