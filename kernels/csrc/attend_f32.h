// The float32 attention inner loops for head dims that are a multiple of 8 (AVX2 + FMA), over a
// float32 or a bfloat16 KV cache (C = float or uint16_t, the bf16 bits: widened exactly to float32).
//
// The query vectors of a GQA group go together, keys addressed through a row-pointer table (no
// div/mod per key), block by block of 16 keys: each block of K (then V) rows comes from memory once
// and serves every vector of the group from L1.
//   scores: eight keys per pass, one accumulator register per key, one transposing reduction per
//           eight keys (not one horizontal sum per key);
//   softmax: max, then a vectorized exp and sum, per vector;
//   P V:    a vector's output (64 floats = 8 registers per pass; longer heads take several passes)
//           stays in registers over a block, one broadcast and D / 8 FMAs per key.
// Built with AVX-512 (AE_ATTN_AVX512), head dims that are a multiple of 16 run both products on
// 512-bit registers: a key's dot product in D / 16 FMAs (folded to eight lanes before the same
// transposing reduction), a vector's output in D / 16 registers per pass of 64 columns.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "vec_math.h"

#ifdef AE_AVX2
#if defined(__AVX512F__)
#define AE_ATTN_AVX512 1
#endif
namespace ae {

#if defined(AE_ATTN_AVX512)
// Sixteen cache values as float32.
inline __m512 load16z(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16z(const uint16_t* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// The sixteen lanes of v folded to eight: lanes i and i + 8 added.
inline __m256 fold16(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}
#endif

// [sum(a0), sum(a1), ..., sum(a7)] of eight vectors.
inline __m256 transpose_sum8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5, __m256 a6,
                             __m256 a7) {
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// Eight cache values as float32.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

#if defined(AE_ATTN_AVX512)
// s[u * n + j] = dot(q + u * D, k[j]) for the eight keys j0 .. j0 + 7 and V vectors (V = 2: each key
// row loaded once for both). A (vector, key) sum runs its D / 16 FMAs in the same order whatever V, so
// the scores are bit for bit those of one vector at a time.
template <int D, typename C, int V>
inline void scores8_f32z(const float* q, const C* const* k, int64_t j0, float* s, int64_t n) {
  static_assert(D % 16 == 0, "512-bit rows");
  __m512 z[V][8];
#pragma GCC unroll 16
  for (int u = 0; u < V; ++u)
    for (int r = 0; r < 8; ++r) z[u][r] = _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int c = 0; c < D; c += 16) {
    __m512 qc[V];
#pragma GCC unroll 2
    for (int u = 0; u < V; ++u) qc[u] = _mm512_loadu_ps(q + u * D + c);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      const __m512 kr = load16z(k[j0 + r] + c);
#pragma GCC unroll 2
      for (int u = 0; u < V; ++u) z[u][r] = _mm512_fmadd_ps(qc[u], kr, z[u][r]);
    }
  }
#pragma GCC unroll 2
  for (int u = 0; u < V; ++u)
    _mm256_storeu_ps(s + u * n + j0, transpose_sum8(fold16(z[u][0]), fold16(z[u][1]), fold16(z[u][2]), fold16(z[u][3]),
                                                    fold16(z[u][4]), fold16(z[u][5]), fold16(z[u][6]), fold16(z[u][7])));
}
#endif

// s[j] = dot(q, k[j]) for the eight keys j0 .. j0 + 7.
template <int D, typename C>
inline void scores8_f32(const float* q, const C* const* k, int64_t j0, float* s) {
#if defined(AE_ATTN_AVX512)
  if constexpr (D % 16 == 0) {
    scores8_f32z<D, C, 1>(q, k, j0, s, 0);
    return;
  }
#endif
  __m256 a[8];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) a[r] = _mm256_setzero_ps();
#pragma GCC unroll 16
  for (int c = 0; c < D; c += 8) {
    const __m256 qc = _mm256_loadu_ps(q + c);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) a[r] = _mm256_fmadd_ps(qc, load8(k[j0 + r] + c), a[r]);
  }
  _mm256_storeu_ps(s + j0, transpose_sum8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]));
}


// s[j] = dot(q, k[j]) for one key j.
template <int D, typename C>
inline void score1_f32(const float* q, const C* const* k, int64_t j, float* s) {
  __m256 a = _mm256_setzero_ps();
#pragma GCC unroll 16
  for (int c = 0; c < D; c += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), load8(k[j] + c), a);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, a);
  s[j] = lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
}

// Columns [c0, c0 + 64) of the rows k[j0 .. j1) on their way to L1 (or the cache level ``Hint``
// names), a cache line at a time.
template <int D, typename C, auto Hint = _MM_HINT_T0>
inline void prefetch_rows(const C* const* k, int64_t j0, int64_t j1, int c0 = 0) {
  constexpr int kLine = 64 / static_cast<int>(sizeof(C));
  for (int64_t r = j0; r < j1; ++r)
    for (int c = 0; c < (D < 64 ? D : 64); c += kLine) _mm_prefetch(reinterpret_cast<const char*>(k[r] + c0 + c), Hint);
}

// Rows are read from memory in many flight at once only if asked for well ahead: the next block of
// keys goes to L1 (prefetch_rows) and the block kFar keys ahead to L2, whose miss buffers outnumber
// L1's (a decode row's cache rows lie in blocks scattered over the cache and strided by the KV heads,
// past what the hardware prefetcher runs ahead of).
constexpr int64_t kFar = 64;

// Rows [j0, j1) of ``rows`` (none when j0 >= j1), every cache line of their D values, on their way to L2.
template <int D, typename C>
inline void prefetch_far_rows(const C* const* rows, int64_t j0, int64_t j1) {
  for (int c0 = 0; c0 < D; c0 += 64) prefetch_rows<D, C, _MM_HINT_T1>(rows, j0, j1, c0);
}

// A scores pass's far prefetch at the block of keys from j0 (of n): the keys kFar ahead, and once those
// run past the end, the first value rows (the values pass reads them first).
template <int D, typename C>
inline void prefetch_far_keys(const C* const* k, const C* const* v, int64_t j0, int64_t block, int64_t n) {
  prefetch_far_rows<D>(k, j0 + kFar, std::min(n, j0 + kFar + block));
  if (j0 + kFar >= n) prefetch_far_rows<D>(v, std::max<int64_t>(0, j0 + kFar - n), std::min(n, j0 + kFar + block - n));
}

// p[0..n) = exp(p - max(p)); returns the sum (and the max in ``max_out`` when given). With AVX-512,
// sixteen scores a step.
inline float softmax_numerators(float* p, int64_t n, float* max_out = nullptr) {
  float mx = p[0];
  int64_t t = 0;
#if defined(AE_ATTN_AVX512)
  if (n >= 16) {  // sixteen running maxima, then their max: no serial chain through every score
    __m512 m16 = _mm512_loadu_ps(p);
    for (t = 16; t + 16 <= n; t += 16) m16 = _mm512_max_ps(m16, _mm512_loadu_ps(p + t));
    mx = _mm512_reduce_max_ps(m16);
  }
#else
  if (n >= 8) {  // eight running maxima, then their max
    __m256 m8 = _mm256_loadu_ps(p);
    for (t = 8; t + 8 <= n; t += 8) m8 = _mm256_max_ps(m8, _mm256_loadu_ps(p + t));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, m8);
    mx = *std::max_element(lanes, lanes + 8);
  }
#endif
  for (; t < n; ++t) mx = std::max(mx, p[t]);
  if (max_out != nullptr) *max_out = mx;
  float sum = 0.f;
  t = 0;
#if defined(AE_ATTN_AVX512)
  __m512 acc16 = _mm512_setzero_ps();
  const __m512 m16 = _mm512_set1_ps(mx);
  for (; t + 16 <= n; t += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(p + t), m16));
    _mm512_storeu_ps(p + t, e);
    acc16 = _mm512_add_ps(acc16, e);
  }
  sum = _mm512_reduce_add_ps(acc16);
#endif
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

#if defined(AE_ATTN_AVX512)
// o[u * D + c] += the sum over keys j in [j0, j1) of p[u * n + j] * v[j][c0 + c], c < 64, for V vectors
// (V = 2: each value row loaded once for both, and twice the independent FMA chains). A vector's
// accumulators take the same FMAs in the same order whatever V.
template <int D, typename C, int V>
inline void values_block_f32z(const float* p, int64_t n, const C* const* v, int64_t j0, int64_t j1, int c0, float* o) {
  constexpr int kRegs = (D < 64 ? D : 64) / 16;
  __m512 a[V][kRegs];
#pragma GCC unroll 8
  for (int u = 0; u < V; ++u)
    for (int r = 0; r < kRegs; ++r) a[u][r] = _mm512_loadu_ps(o + u * D + 16 * r);
  for (int64_t j = j0; j < j1; ++j) {
    __m512 pj[V];
#pragma GCC unroll 2
    for (int u = 0; u < V; ++u) pj[u] = _mm512_set1_ps(p[u * n + j]);
#pragma GCC unroll 4
    for (int r = 0; r < kRegs; ++r) {
      const __m512 vr = load16z(v[j] + c0 + 16 * r);
#pragma GCC unroll 2
      for (int u = 0; u < V; ++u) a[u][r] = _mm512_fmadd_ps(pj[u], vr, a[u][r]);
    }
  }
#pragma GCC unroll 8
  for (int u = 0; u < V; ++u)
    for (int r = 0; r < kRegs; ++r) _mm512_storeu_ps(o + u * D + 16 * r, a[u][r]);
}

// out + g * D = (p_g V) * inv_sum[g] for the G vectors of a group, p_g = s + g * n (the softmax
// numerators over keys [0, n)): 64 output columns per pass in four 512-bit registers per vector, the
// values block by block of 16 keys (from L1 for every vector of the group).
template <int D, typename C>
inline void values_group_f32z(const float* s, int64_t group, const C* const* v, int64_t n, const float* inv_sum,
                              float* out) {
  constexpr int64_t kBlock = 16;
  constexpr int kRegs = (D < 64 ? D : 64) / 16;
  for (int c0 = 0; c0 < D; c0 += 64) {
    for (int64_t g = 0; g < group; ++g)
      for (int r = 0; r < kRegs; ++r) _mm512_storeu_ps(out + g * D + c0 + 16 * r, _mm512_setzero_ps());
    for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
      const int64_t j1 = std::min(n, j0 + kBlock);
      prefetch_rows<D, C>(v, j1, std::min(n, j1 + kBlock), c0);
      prefetch_rows<D, C, _MM_HINT_T1>(v, std::min(n, j0 + kFar), std::min(n, j0 + kFar + kBlock), c0);
      int64_t g = 0;
      for (; g + 2 <= group; g += 2) values_block_f32z<D, C, 2>(s + g * n, n, v, j0, j1, c0, out + g * D + c0);
      for (; g < group; ++g) values_block_f32z<D, C, 1>(s + g * n, n, v, j0, j1, c0, out + g * D + c0);
    }
    for (int64_t g = 0; g < group; ++g) {
      const __m512 m = _mm512_set1_ps(inv_sum[g]);
      for (int r = 0; r < kRegs; ++r) {
        float* o = out + g * D + c0 + 16 * r;
        _mm512_storeu_ps(o, _mm512_mul_ps(_mm512_loadu_ps(o), m));
      }
    }
  }
}
#endif

// The G query vectors of a GQA group (q: G x D floats, pre-scaled) against keys/values [0, n):
// out + g * D = softmax(q_g K^T) V; with ``lse``, lse[g] = log(sum_j exp(q_g k_j)) (to merge this
// softmax with one over other keys). ``s`` is scratch of at least G * n floats.
template <int D, typename C>
inline void attend_group_f32(const float* q, int64_t group, const C* const* k, const C* const* v,
                             int64_t n, float* s, float* out, float* lse = nullptr) {
  constexpr int64_t kBlock = 16;  // keys per block: 16 rows of K or V stay in L1 for the whole group
  for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
    const int64_t j1 = std::min(n, j0 + kBlock);
    prefetch_rows<D, C>(k, j1, std::min(n, j1 + kBlock));
    prefetch_far_keys<D, C>(k, v, j0, kBlock, n);
    int64_t g = 0;
#if defined(AE_ATTN_AVX512)
    if constexpr (D % 16 == 0) {
      for (; g + 2 <= group; g += 2) {  // two vectors a pass: each key row loaded once for both
        int64_t j = j0;
        for (; j + 8 <= j1; j += 8) scores8_f32z<D, C, 2>(q + g * D, k, j, s + g * n, n);
        for (; j < j1; ++j) {
          score1_f32<D, C>(q + g * D, k, j, s + g * n);
          score1_f32<D, C>(q + (g + 1) * D, k, j, s + (g + 1) * n);
        }
      }
    }
#endif
    for (; g < group; ++g) {
      int64_t j = j0;
      for (; j + 8 <= j1; j += 8) scores8_f32<D, C>(q + g * D, k, j, s + g * n);
      for (; j < j1; ++j) score1_f32<D, C>(q + g * D, k, j, s + g * n);
    }
  }
  thread_local std::vector<float> inv_sum;
  inv_sum.resize(group);
  for (int64_t g = 0; g < group; ++g) {
    float mx;
    const float sum = softmax_numerators(s + g * n, n, &mx);
    inv_sum[g] = 1.f / sum;
    if (lse != nullptr) lse[g] = mx + std::log(sum);
  }
#if defined(AE_ATTN_AVX512)
  if constexpr (D % 16 == 0) {
    values_group_f32z<D, C>(s, group, v, n, inv_sum.data(), out);
    return;
  }
#endif
  for (int c0 = 0; c0 < D; c0 += 64) {
    constexpr int kRegs = (D < 64 ? D : 64) / 8;
    for (int64_t g = 0; g < group; ++g)
      for (int r = 0; r < kRegs; ++r) _mm256_storeu_ps(out + g * D + c0 + 8 * r, _mm256_setzero_ps());
    for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
      const int64_t j1 = std::min(n, j0 + kBlock);
      prefetch_rows<D, C>(v, j1, std::min(n, j1 + kBlock), c0);
      for (int64_t g = 0; g < group; ++g) {
        float* o = out + g * D + c0;
        const float* p = s + g * n;
        __m256 a[kRegs];
#pragma GCC unroll 8
        for (int r = 0; r < kRegs; ++r) a[r] = _mm256_loadu_ps(o + 8 * r);
        for (int64_t j = j0; j < j1; ++j) {
          const __m256 pj = _mm256_broadcast_ss(p + j);
#pragma GCC unroll 8
          for (int r = 0; r < kRegs; ++r) a[r] = _mm256_fmadd_ps(pj, load8(v[j] + c0 + 8 * r), a[r]);
        }
#pragma GCC unroll 8
        for (int r = 0; r < kRegs; ++r) _mm256_storeu_ps(o + 8 * r, a[r]);
      }
    }
    for (int64_t g = 0; g < group; ++g) {
      const __m256 m = _mm256_set1_ps(inv_sum[g]);
      for (int r = 0; r < kRegs; ++r) {
        float* o = out + g * D + c0 + 8 * r;
        _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_loadu_ps(o), m));
      }
    }
  }
}

}  // namespace ae
#endif
