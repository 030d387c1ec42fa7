// Small vector helpers shared by the CPU kernels: AVX2 exp, row loads, dot products.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define AE_AVX2 1
#endif

namespace ae {

template <typename T>
inline void load_row(float* dst, const T* src, int64_t n, float mul = 1.f) {
  for (int64_t d = 0; d < n; ++d) dst[d] = static_cast<float>(src[d]) * mul;
}

inline float dot(const float* a, const float* b, int64_t n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

#ifdef AE_AVX2
// The sum of the eight lanes.
inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// out[i] = dot(q + i * d, k) for i < 4 (four query vectors against one key: the key is loaded once).
inline void dot4(const float* q, const float* k, int64_t d, float* out) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t x = 0;
  for (; x + 8 <= d; x += 8) {
    const __m256 kv = _mm256_loadu_ps(k + x);
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + x), kv, a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + x), kv, a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 2 * d + x), kv, a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 3 * d + x), kv, a3);
  }
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  for (; x < d; ++x)
    for (int i = 0; i < 4; ++i) out[i] += q[i * d + x] * k[x];
}

// lo[r], hi[r] += a[r * a_stride + t] * (row t of a right-hand side of 16 columns) for r < R and
// t < steps: per step two loads, R broadcasts and 2R FMAs (R = 6: the twelve accumulators of the
// matmul and attention micro-kernels). ``b_row(t, lo, hi)`` loads row t as two float32 vectors (and may
// prefetch). Every loop over r is unrolled, so once inlined the accumulators stay in registers.
template <int R, typename RowB>
inline void fma_rows_x16(const float* a, int64_t a_stride, int64_t steps, RowB&& b_row, __m256 (&lo)[R],
                         __m256 (&hi)[R]) {
#pragma GCC unroll 2
  for (int64_t t = 0; t < steps; ++t) {
    __m256 b0, b1;
    b_row(t, b0, b1);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * a_stride + t);
      lo[r] = _mm256_fmadd_ps(x, b0, lo[r]);
      hi[r] = _mm256_fmadd_ps(x, b1, hi[r]);
    }
  }
}

// The 8 x 8 transpose of r[0..8) in place: r[i] becomes lane i of every input.
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// exp(x) for 8 floats (Cephes' expf polynomial, relative error ~1e-7); x below -87 gives ~0.
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f));
  x = _mm256_max_ps(x, _mm256_set1_ps(-88.3762626647949f));
  __m256 fx = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f));
  fx = _mm256_floor_ps(fx);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500E-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.f)));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

#if defined(__AVX512F__)
// exp8's steps on 16 floats (the same value per lane as exp8).
inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(x, _mm512_set1_ps(88.3762626647949f));
  x = _mm512_max_ps(x, _mm512_set1_ps(-88.3762626647949f));
  __m512 fx = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f));
  fx = _mm512_roundscale_ps(fx, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
  __m512 y = _mm512_set1_ps(1.9875691500E-4f);
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507E-3f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073E-3f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894E-2f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459E-1f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201E-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.f)));
  __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(fx), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(y, _mm512_castsi512_ps(e));
}
#endif
#endif

// out[c] = silu(g[c]) * u[c] for float rows.
inline void silu_mul_row(float* out, const float* g, const float* u, int64_t n) {
  int64_t c = 0;
#ifdef AE_AVX2
  const __m256 one = _mm256_set1_ps(1.f);
  for (; c + 8 <= n; c += 8) {
    const __m256 gv = _mm256_loadu_ps(g + c);
    const __m256 act = _mm256_div_ps(gv, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), gv))));
    _mm256_storeu_ps(out + c, _mm256_mul_ps(act, _mm256_loadu_ps(u + c)));
  }
#endif
  for (; c < n; ++c) out[c] = g[c] / (1.f + std::exp(-g[c])) * u[c];
}

}  // namespace ae
