// The float32 attention of a tile of query rows (a prefill chunk's rows of one request and KV head)
// as two register-blocked matrix products (AVX2 + FMA), over a float32 or a bfloat16 KV cache
// (C = float or uint16_t, the bf16 bits).
//
// A decode row has a few query vectors (one GQA group) and reads each key once: attend_f32.h. A tile
// of R rows has R x group vectors that all read the same keys, so the work is matrix-shaped:
//   scores S = Q K^T: each 16 keys transposed once into a [D, 16] panel, then blocks of 6 vectors x
//                     16 keys in twelve accumulators over the head dim;
//   softmax:          per vector over the keys it sees (its causal prefix); p = 0 past it;
//   O = P V:          blocks of 6 vectors x 16 output columns in twelve accumulators over the keys.
// Both products run one micro-kernel (block_6x16), the shape of panel_linear's: per step two loads,
// six broadcasts and twelve FMAs. Vectors are padded to a multiple of 6 (zero queries, p = 0) and keys
// to a multiple of 16 (the padding points at key 0, its scores land past every vector's prefix): no
// tails. With AVX-512 (AE_ATTN_AVX512) the tile takes attend_tiled512.h's route instead: no key
// transposed, the softmax down 16-vector columns; over a bfloat16 cache where the build has bfloat16
// products (AE_ATTN_BF16), attend_tiled_bf16.h's, the same in bfloat16 products.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "attend_f32.h"
#include "attend_tiled512.h"
#include "attend_tiled_bf16.h"
#include "vec_math.h"

#ifdef AE_AVX2
namespace ae {

constexpr int64_t kTileVecs = 6;  // query vectors per micro-kernel block (twelve accumulators)

// Sixteen cache values as two float32 vectors.
inline void load16(const float* p, __m256& lo, __m256& hi) {
  lo = _mm256_loadu_ps(p);
  hi = _mm256_loadu_ps(p + 8);
}
inline void load16(const uint16_t* p, __m256& lo, __m256& hi) {
  lo = load8(p);
  hi = load8(p + 8);
}

// The keys k[j0 .. j0 + 16) as a [D, 16] panel: kt[c * 16 + t] = k[j0 + t][c].
template <int D, typename C>
inline void key_panel(const C* const* k, int64_t j0, float* kt) {
  for (int half = 0; half < 2; ++half) {
    const C* const* rows = k + j0 + 8 * half;
    for (int c = 0; c < D; c += 8) {
      __m256 r[8];
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t) r[t] = load8(rows[t] + c);
      transpose8(r);
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(kt + (c + i) * 16 + 8 * half, r[i]);
    }
  }
}

// out[r * out_stride + 0 .. 16) = sum over t < steps of a[r * a_stride + t] * b_t[0 .. 16) for the six
// vectors r < 6, where ``b_row(t, lo, hi)`` loads row t of the right-hand side as two float32 vectors.
template <typename RowB>
inline void block_6x16(const float* a, int64_t a_stride, int64_t steps, RowB b_row, float* out,
                       int64_t out_stride) {
  __m256 lo[kTileVecs], hi[kTileVecs];
#pragma GCC unroll 6
  for (int r = 0; r < kTileVecs; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  fma_rows_x16<kTileVecs>(a, a_stride, steps, b_row, lo, hi);
#pragma GCC unroll 6
  for (int r = 0; r < kTileVecs; ++r) {
    _mm256_storeu_ps(out + r * out_stride, lo[r]);
    _mm256_storeu_ps(out + r * out_stride + 8, hi[r]);
  }
}

// p[0..n) = exp(p - max) over a vector's prefix of n keys, zero over [n, padded); returns 1 / sum
// (and log(sum) + max in ``lse`` when given).
inline float softmax_prefix(float* p, int64_t n, int64_t padded, float* lse = nullptr) {
  float mx;
  const float sum = softmax_numerators(p, n, &mx);
  if (lse != nullptr) *lse = mx + std::log(sum);
  std::fill(p + n, p + padded, 0.f);
  return 1.f / sum;
}

// The tile's ``nq`` query vectors (q: nq x D floats, pre-scaled; vector i = row * group + g sees keys
// [0, nk[i]), nk non-decreasing, nk[nq - 1] <= the rows in k and v) against k, v: the output of
// vector i, softmax(q_i K^T) V, goes to out + (i / group) * out_row_stride + (i % group) * D; with
// ``lse``, the log of vector i's softmax denominator to lse[(i / group) * lse_row_stride + i % group].
template <int D, typename C>
inline void attend_tile_matrix(const float* q, int64_t nq, const int64_t* nk, const C* const* k,
                               const C* const* v, int64_t group, float* out, int64_t out_row_stride,
                               float* lse = nullptr, int64_t lse_row_stride = 0) {
#if defined(AE_ATTN_BF16)
  if constexpr (std::is_same_v<C, uint16_t> && D % 64 == 0) {  // a bfloat16 cache in bfloat16 products
    tile_bf16::attend_tile<D>(q, nq, nk, k, v, group, out, out_row_stride, lse, lse_row_stride);
    return;
  }
#endif
#if defined(AE_ATTN_AVX512)
  if constexpr (D % 64 == 0) {
    tile512::attend_tile<D, C>(q, nq, nk, k, v, group, out, out_row_stride, lse, lse_row_stride);
    return;
  }
#endif
  thread_local std::vector<float> qp, s, o, inv, kt;
  thread_local std::vector<const C*> kp;
  const int64_t nq_pad = (nq + kTileVecs - 1) / kTileVecs * kTileVecs;
  const int64_t n = nk[nq - 1], ld = (n + 15) / 16 * 16;
  qp.assign(nq_pad * D, 0.f);
  std::copy(q, q + nq * D, qp.begin());
  kp.assign(k, k + n);
  kp.resize(ld, k[0]);
  s.resize(nq_pad * ld);
  o.resize(nq_pad * D);
  kt.resize(D * 16);
  inv.assign(nq_pad, 0.f);
  for (int64_t j0 = 0; j0 < ld; j0 += 16) {  // each panel of keys serves every block of vectors that sees it
    key_panel<D, C>(kp.data(), j0, kt.data());
    for (int64_t i0 = 0; i0 < nq_pad; i0 += kTileVecs) {
      if (nk[std::min(nq, i0 + kTileVecs) - 1] <= j0) continue;
      const float* panel = kt.data();
      block_6x16(&qp[i0 * D], D, D, [panel](int64_t c, __m256& lo, __m256& hi) { load16(panel + c * 16, lo, hi); },
                 &s[i0 * ld + j0], ld);
    }
  }
  for (int64_t i = 0; i < nq_pad; ++i) {
    if (i < nq) inv[i] = softmax_prefix(&s[i * ld], nk[i], ld,
                                        lse != nullptr ? lse + (i / group) * lse_row_stride + i % group : nullptr);
    else std::fill(&s[i * ld], &s[i * ld] + ld, 0.f);
  }
  for (int64_t i0 = 0; i0 < nq_pad; i0 += kTileVecs) {
    const int64_t keys = nk[std::min(nq, i0 + kTileVecs) - 1];
    for (int c0 = 0; c0 < D; c0 += 16) {
      block_6x16(&s[i0 * ld], ld, keys, [v, c0](int64_t j, __m256& lo, __m256& hi) { load16(v[j] + c0, lo, hi); },
                 &o[i0 * D + c0], D);
    }
  }
  for (int64_t i = 0; i < nq; ++i) {
    const __m256 m = _mm256_set1_ps(inv[i]);
    float* dst = out + (i / group) * out_row_stride + (i % group) * D;
    for (int c = 0; c < D; c += 8) _mm256_storeu_ps(dst + c, _mm256_mul_ps(_mm256_loadu_ps(&o[i * D + c]), m));
  }
}

}  // namespace ae
#endif
