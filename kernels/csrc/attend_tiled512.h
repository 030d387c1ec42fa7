// The AVX-512 route of attend_tiled.h's tile (a prefill chunk's rows of one KV head, or decode rows
// over shared blocks): the same contract as attend_tile_matrix, with the products laid out so that no
// key is ever transposed and the softmax runs down columns.
//
//   scores, transposed: S^T[j][i] = k_j . q_i for 16 query vectors a register: the queries are
//     transposed once into panels [D][16] (small: the tile's vectors), each key element is broadcast
//     straight from its cache row. One call: 8 keys x up to 3 panels (48 vectors) in 24 accumulators,
//     per head-dim step 3 panel loads and 8 broadcasts for 24 FMAs.
//   softmax, down S^T's columns: 16 vectors' running maxima, exponentials and sums in one register
//     each, a vector's causal prefix (keys past it) masked to p = 0; no horizontal reductions.
//   O = P V: 6 vectors x 64 output columns in 24 accumulators, per key 4 value loads and 6 broadcasts
//     of P^T's row for 24 FMAs.
// Keys go in blocks of kBlockKeys, flash-style: a block's scores, then the online softmax (each
// vector's running maximum and sum; its output so far scaled by exp(old max - new max)), then the
// block's share of P V, so the scores in flight are one block's whatever the context's length.
// Keys are padded to a multiple of 8 with key 0 (their scores are never read); vectors to a multiple of
// 16 with zero queries (their outputs are never written). A bfloat16 cache (C = uint16_t, the bits)
// has each block of 8 key rows widened once into a float32 scratch before its broadcasts. The walk
// over the blocks (attend_blocks) takes the products as a policy: float32 FMAs here (FloatProducts),
// bfloat16 pairs in attend_tiled_bf16.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "attend_f32.h"
#include "vec_math.h"

#if defined(AE_ATTN_AVX512)
namespace ae::tile512 {

constexpr int kKeys = 8;    // keys per scores call
constexpr int kPanels = 3;  // 16-vector panels per scores call, at most
constexpr int kVecs = 6;    // query vectors per values call, at most
constexpr int kCols = 4;    // 16-column output panels per values call (64 columns)

// A scores call's accumulators (kKeys keys x PC panels), zeroed; and stored as st[r * ld + 16 pc + lane].
template <int PC>
inline void zero_scores(__m512 (*acc)[PC]) {
#pragma GCC unroll 8
  for (int r = 0; r < kKeys; ++r)
#pragma GCC unroll 3
    for (int pc = 0; pc < PC; ++pc) acc[r][pc] = _mm512_setzero_ps();
}
template <int PC>
inline void store_scores(const __m512 (*acc)[PC], float* st, int64_t ld) {
#pragma GCC unroll 8
  for (int r = 0; r < kKeys; ++r)
#pragma GCC unroll 3
    for (int pc = 0; pc < PC; ++pc) _mm512_storeu_ps(st + r * ld + 16 * pc, acc[r][pc]);
}

// st[r * ld + 16 pc + lane] = k[r] . (vector 16 pc + lane of the panels at qt) for r < 8, pc < PC; qt's
// panels are [D][16] floats, panel_stride apart; k[r] are float32 rows of D.
template <int PC, int D>
inline void scores(const float* qt, int64_t panel_stride, const float* const* k, float* st, int64_t ld) {
  __m512 acc[kKeys][PC];
  zero_scores<PC>(acc);
#pragma GCC unroll 2
  for (int c = 0; c < D; ++c) {
    __m512 qv[PC];
#pragma GCC unroll 3
    for (int pc = 0; pc < PC; ++pc) qv[pc] = _mm512_loadu_ps(qt + pc * panel_stride + c * 16);
#pragma GCC unroll 8
    for (int r = 0; r < kKeys; ++r) {
      const __m512 kb = _mm512_set1_ps(k[r][c]);
#pragma GCC unroll 3
      for (int pc = 0; pc < PC; ++pc) acc[r][pc] = _mm512_fmadd_ps(kb, qv[pc], acc[r][pc]);
    }
  }
  store_scores<PC>(acc, st, ld);
}

// acc[r] = alpha[r] * o[r * d + c0 .. + 64) for r < R: the running outputs a values call adds to.
template <int R>
inline void load_running(const float* o, int64_t d, int c0, const float* alpha, __m512 (*acc)[kCols]) {
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    const __m512 a = _mm512_set1_ps(alpha[r]);
#pragma GCC unroll 4
    for (int cp = 0; cp < kCols; ++cp) acc[r][cp] = _mm512_mul_ps(a, _mm512_loadu_ps(o + r * d + c0 + 16 * cp));
  }
}

// o[r * d + c0 .. + 64) = acc[r] for r < R.
template <int R>
inline void store_running(const __m512 (*acc)[kCols], int64_t d, int c0, float* o) {
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int cp = 0; cp < kCols; ++cp) _mm512_storeu_ps(o + r * d + c0 + 16 * cp, acc[r][cp]);
}

// o[r * D + cp * 16 ..] = alpha[r] o[..] + sum_{j_begin <= j < j_end} st[(j - j_begin) * ld + r] *
// v[j][c0 + 16 cp ..] for r < R, cp < 4
// (o is first scaled by alpha[r], then added to: the online softmax's running output.)
template <int R, int D, typename C>
inline void values(const float* st, int64_t ld, const C* const* v, int64_t j_begin, int64_t j_end, int c0,
                   const float* alpha, float* o) {
  __m512 acc[R][kCols];
  load_running<R>(o, D, c0, alpha, acc);
#pragma GCC unroll 2
  for (int64_t j = j_begin; j < j_end; ++j) {
    __m512 vv[kCols];
#pragma GCC unroll 4
    for (int cp = 0; cp < kCols; ++cp) vv[cp] = load16z(v[j] + c0 + 16 * cp);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m512 p = _mm512_set1_ps(st[(j - j_begin) * ld + r]);
#pragma GCC unroll 4
      for (int cp = 0; cp < kCols; ++cp) acc[r][cp] = _mm512_fmadd_ps(p, vv[cp], acc[r][cp]);
    }
  }
  store_running<R>(acc, D, c0, o);
}

template <int D, typename C>
inline void values_upto6(int64_t rows, const float* st, int64_t ld, const C* const* v, int64_t j_begin,
                         int64_t j_end, int c0, const float* alpha, float* o) {
  switch (rows) {
    case 1: return values<1, D, C>(st, ld, v, j_begin, j_end, c0, alpha, o);
    case 2: return values<2, D, C>(st, ld, v, j_begin, j_end, c0, alpha, o);
    case 3: return values<3, D, C>(st, ld, v, j_begin, j_end, c0, alpha, o);
    case 4: return values<4, D, C>(st, ld, v, j_begin, j_end, c0, alpha, o);
    case 5: return values<5, D, C>(st, ld, v, j_begin, j_end, c0, alpha, o);
    default: return values<6, D, C>(st, ld, v, j_begin, j_end, c0, alpha, o);
  }
}

// The online softmax down the columns of one 16-vector panel of a block of S^T: rows [0, n) are keys
// j0 .. j0 + n (column stride ld); lane i sees keys below nkv[i], p = 0 elsewhere. mx and sum are the
// lanes' running maximum and denominator over the earlier blocks, updated here; alpha[lane] receives
// exp(old max - new max), the factor the lanes' running outputs take before this block's are added.
inline void softmax_block(float* st, int64_t ld, int64_t n, int64_t j0, __m512i nkv, __m512& mx, __m512& sum,
                          float* alpha) {
  __m512 m = mx;
  for (int64_t j = 0; j < n; ++j) {
    const __mmask16 seen = _mm512_cmpgt_epi32_mask(nkv, _mm512_set1_epi32(static_cast<int>(j0 + j)));
    m = _mm512_mask_max_ps(m, seen, m, _mm512_loadu_ps(st + j * ld));
  }
  // A lane that has seen no key yet keeps -inf: its factor is 0 (nothing to rescale), never NaN.
  const __mmask16 had = _mm512_cmp_ps_mask(mx, _mm512_set1_ps(-std::numeric_limits<float>::infinity()), _CMP_NEQ_OQ);
  const __m512 a = _mm512_maskz_mov_ps(had, exp16(_mm512_sub_ps(mx, m)));
  __m512 s = _mm512_mul_ps(sum, a);
  for (int64_t j = 0; j < n; ++j) {
    const __mmask16 seen = _mm512_cmpgt_epi32_mask(nkv, _mm512_set1_epi32(static_cast<int>(j0 + j)));
    const __m512 e = _mm512_maskz_mov_ps(seen, exp16(_mm512_sub_ps(_mm512_loadu_ps(st + j * ld), m)));
    _mm512_storeu_ps(st + j * ld, e);
    s = _mm512_add_ps(s, e);
  }
  _mm512_storeu_ps(alpha, a);
  mx = m;
  sum = s;
}

// Keys go in blocks of kBlockKeys (flash-style): a block's scores, its online softmax and its part of
// P V, so the scores in flight stay a block (48 vectors x 256 keys: 48 KB) however long the context,
// instead of a context's worth of S^T that no longer fits L2 past a few thousand keys.
constexpr int64_t kBlockKeys = 256;

// attend_tile_matrix's contract (attend_tiled.h) on AVX-512, for D a multiple of 64: the blocks' walk,
// the online softmax and the output, shared by every form of the products. ``P`` is the form (float32
// FMAs: FloatProducts below; bfloat16 pairs: attend_tiled_bf16.h), a per-thread object that holds the
// queries in its panel layout and runs: ``pack_queries<D>(q, nq, panels)``; ``key_rows<D>(k, j0, n)``
// (the kKeys rows of a scores call, padded keys reading key 0); ``scores<D>(p, pc, st, ld)`` (S^T for
// pc <= kPanels panels from panel p); ``block_done(st, ld, keys)`` (after a block's softmax: its
// numerators as the values kernel reads them); ``values<D>(rows, i0, st, ld, v, j0, j_end, c0, alpha,
// o)`` (rows <= kVecs vectors from i0); ``finish<D>(o, inv_sum, dst)`` (a vector's output).
template <class P, int D>
inline void attend_blocks(const float* q, int64_t nq, const int64_t* nk, const typename P::Cache* const* k,
                          const typename P::Cache* const* v, int64_t group, float* out, int64_t out_row_stride,
                          float* lse, int64_t lse_row_stride) {
  static_assert(D % 64 == 0, "the values kernel takes 64 columns a pass");
  static_assert(kBlockKeys % kKeys == 0 && kKeys % 2 == 0, "a block holds whole calls and whole key pairs");
  thread_local P products;
  thread_local std::vector<float> st, o, alpha, mx_all, sum_all;
  thread_local std::vector<int32_t> lanes;
  const int64_t panels = (nq + 15) / 16, ld = panels * 16;
  const int64_t n = nk[nq - 1];
  products.template pack_queries<D>(q, nq, panels);
  lanes.resize(ld);
  for (int64_t i = 0; i < ld; ++i) lanes[i] = i < nq ? static_cast<int32_t>(nk[i]) : 1;
  st.resize((kBlockKeys + 1) * ld);  // rows are written before they are read (one past a block: a pair's)
  o.assign(ld * D, 0.f);
  alpha.resize(ld);
  mx_all.assign(ld, -std::numeric_limits<float>::infinity());
  sum_all.assign(ld, 0.f);
  for (int64_t b0 = 0; b0 < n; b0 += kBlockKeys) {
    const int64_t b1 = std::min(n, b0 + kBlockKeys), b_pad = b0 + (b1 - b0 + kKeys - 1) / kKeys * kKeys;
    for (int64_t j0 = b0; j0 < b_pad; j0 += kKeys) {
      products.template key_rows<D>(k, j0, n);
      for (int64_t p = 0; p < panels; p += kPanels) {
        const int64_t pc = std::min<int64_t>(kPanels, panels - p);
        if (nk[std::min(nq, 16 * (p + pc)) - 1] <= j0) continue;  // no vector of these panels sees these keys
        products.template scores<D>(p, pc, &st[(j0 - b0) * ld + 16 * p], ld);
      }
    }
    // Every panel, even one that sees none of the block: its lanes get alpha 1 and p = 0, which a block
    // of six vectors straddling it and a panel that does see the block reads.
    for (int64_t p = 0; p < panels; ++p) {
      __m512 mx = _mm512_loadu_ps(&mx_all[16 * p]), sum = _mm512_loadu_ps(&sum_all[16 * p]);
      softmax_block(&st[16 * p], ld, b1 - b0, b0, _mm512_loadu_si512(&lanes[16 * p]), mx, sum, &alpha[16 * p]);
      _mm512_storeu_ps(&mx_all[16 * p], mx);
      _mm512_storeu_ps(&sum_all[16 * p], sum);
    }
    products.block_done(st.data(), ld, b1 - b0);
    for (int64_t i0 = 0; i0 < nq; i0 += kVecs) {
      const int64_t rows = std::min<int64_t>(kVecs, nq - i0);
      const int64_t keys = std::min(b1, nk[i0 + rows - 1]);
      if (keys <= b0) continue;  // none of the six sees this block: their outputs stand (alpha 1)
      for (int c0 = 0; c0 < D; c0 += 64)
        products.template values<D>(rows, i0, st.data(), ld, v, b0, keys, c0, &alpha[i0], &o[i0 * D]);
    }
  }
  for (int64_t i = 0; i < nq; ++i) {
    products.template finish<D>(&o[i * D], 1.f / sum_all[i], out + (i / group) * out_row_stride + (i % group) * D);
    if (lse != nullptr) lse[(i / group) * lse_row_stride + i % group] = mx_all[i] + std::log(sum_all[i]);
  }
}

// The products in float32 FMAs over a float32 or bfloat16 cache (C = float or uint16_t, the bits; a
// bfloat16 block of kKeys key rows is widened once into a float32 scratch before its broadcasts).
template <typename C>
struct FloatProducts {
  using Cache = C;
  std::vector<float> qt, kf;  // the queries as panels [D][16]; widened key rows
  const float* kp[kKeys];

  template <int D>
  void pack_queries(const float* q, int64_t nq, int64_t panels) {
    qt.assign(panels * D * 16, 0.f);
    for (int64_t i = 0; i < nq; ++i)
      for (int c = 0; c < D; ++c) qt[(i / 16) * D * 16 + c * 16 + i % 16] = q[i * D + c];
    if constexpr (!std::is_same_v<C, float>) kf.resize(kKeys * D);
  }
  template <int D>
  void key_rows(const C* const* k, int64_t j0, int64_t n) {
    for (int r = 0; r < kKeys; ++r) {
      const C* row = k[j0 + r < n ? j0 + r : 0];
      if constexpr (std::is_same_v<C, float>) {
        kp[r] = row;
      } else {
        for (int c = 0; c < D; c += 16) _mm512_storeu_ps(&kf[r * D + c], load16z(row + c));
        kp[r] = &kf[r * D];
      }
    }
  }
  template <int D>
  void scores(int64_t p, int64_t pc, float* st, int64_t ld) const {
    const float* panel = &qt[p * D * 16];
    if (pc == 3) tile512::scores<3, D>(panel, D * 16, kp, st, ld);
    else if (pc == 2) tile512::scores<2, D>(panel, D * 16, kp, st, ld);
    else tile512::scores<1, D>(panel, D * 16, kp, st, ld);
  }
  void block_done(float*, int64_t, int64_t) {}
  template <int D>
  void values(int64_t rows, int64_t i0, const float* st, int64_t ld, const C* const* v, int64_t j0, int64_t j_end,
              int c0, const float* alpha, float* o) const {
    values_upto6<D, C>(rows, st + i0, ld, v, j0, j_end, c0, alpha, o);
  }
  template <int D>
  void finish(const float* o, float inv_sum, float* dst) const {
    const __m512 m = _mm512_set1_ps(inv_sum);
    for (int c = 0; c < D; c += 16) _mm512_storeu_ps(dst + c, _mm512_mul_ps(_mm512_loadu_ps(o + c), m));
  }
};

template <int D, typename C>
inline void attend_tile(const float* q, int64_t nq, const int64_t* nk, const C* const* k, const C* const* v,
                        int64_t group, float* out, int64_t out_row_stride, float* lse, int64_t lse_row_stride) {
  attend_blocks<FloatProducts<C>, D>(q, nq, nk, k, v, group, out, out_row_stride, lse, lse_row_stride);
}

}  // namespace ae::tile512
#endif
