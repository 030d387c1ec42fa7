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
// Keys are padded to a multiple of 8 with key 0 (their scores are never read); vectors to a multiple of
// 16 with zero queries (their outputs are never written). A bfloat16 cache (C = uint16_t, the bits)
// has each block of 8 key rows widened once into a float32 scratch before its broadcasts.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attend_f32.h"
#include "vec_math.h"

#if defined(AE_ATTN_AVX512)
namespace ae::tile512 {

constexpr int kKeys = 8;    // keys per scores call
constexpr int kPanels = 3;  // 16-vector panels per scores call, at most
constexpr int kVecs = 6;    // query vectors per values call, at most
constexpr int kCols = 4;    // 16-column output panels per values call (64 columns)

// st[r * ld + 16 pc + lane] = k[r] . (vector 16 pc + lane of the panels at qt) for r < 8, pc < PC; qt's
// panels are [D][16] floats, panel_stride apart; k[r] are float32 rows of D.
template <int PC, int D>
inline void scores(const float* qt, int64_t panel_stride, const float* const* k, float* st, int64_t ld) {
  __m512 acc[kKeys][PC];
#pragma GCC unroll 8
  for (int r = 0; r < kKeys; ++r)
#pragma GCC unroll 3
    for (int pc = 0; pc < PC; ++pc) acc[r][pc] = _mm512_setzero_ps();
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
#pragma GCC unroll 8
  for (int r = 0; r < kKeys; ++r)
#pragma GCC unroll 3
    for (int pc = 0; pc < PC; ++pc) _mm512_storeu_ps(st + r * ld + 16 * pc, acc[r][pc]);
}

// o[r * D + cp * 16 ..] = sum_{j < keys} st[j * ld + r] * v[j][c0 + 16 cp ..] for r < R, cp < 4.
template <int R, int D, typename C>
inline void values(const float* st, int64_t ld, const C* const* v, int64_t keys, int c0, float* o) {
  __m512 acc[R][kCols];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int cp = 0; cp < kCols; ++cp) acc[r][cp] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t j = 0; j < keys; ++j) {
    __m512 vv[kCols];
#pragma GCC unroll 4
    for (int cp = 0; cp < kCols; ++cp) vv[cp] = load16z(v[j] + c0 + 16 * cp);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m512 p = _mm512_set1_ps(st[j * ld + r]);
#pragma GCC unroll 4
      for (int cp = 0; cp < kCols; ++cp) acc[r][cp] = _mm512_fmadd_ps(p, vv[cp], acc[r][cp]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int cp = 0; cp < kCols; ++cp) _mm512_storeu_ps(o + r * D + c0 + 16 * cp, acc[r][cp]);
}

template <int D, typename C>
inline void values_upto6(int64_t rows, const float* st, int64_t ld, const C* const* v, int64_t keys, int c0,
                         float* o) {
  switch (rows) {
    case 1: return values<1, D, C>(st, ld, v, keys, c0, o);
    case 2: return values<2, D, C>(st, ld, v, keys, c0, o);
    case 3: return values<3, D, C>(st, ld, v, keys, c0, o);
    case 4: return values<4, D, C>(st, ld, v, keys, c0, o);
    case 5: return values<5, D, C>(st, ld, v, keys, c0, o);
    default: return values<6, D, C>(st, ld, v, keys, c0, o);
  }
}

// Softmax down the columns of one 16-vector panel of S^T (rows [0, n), column stride ld): lane i sees
// rows below nkv[i]; p = 0 elsewhere. inv[lane] = 1 / sum; lse (when given) = max + log(sum).
inline void softmax_columns(float* st, int64_t ld, int64_t n, __m512i nkv, float* inv, float* lse_lanes) {
  __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < n; ++j) {
    const __mmask16 seen = _mm512_cmpgt_epi32_mask(nkv, _mm512_set1_epi32(static_cast<int>(j)));
    mx = _mm512_mask_max_ps(mx, seen, mx, _mm512_loadu_ps(st + j * ld));
  }
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    const __mmask16 seen = _mm512_cmpgt_epi32_mask(nkv, _mm512_set1_epi32(static_cast<int>(j)));
    const __m512 e = _mm512_maskz_mov_ps(seen, exp16(_mm512_sub_ps(_mm512_loadu_ps(st + j * ld), mx)));
    _mm512_storeu_ps(st + j * ld, e);
    sum = _mm512_add_ps(sum, e);
  }
  _mm512_storeu_ps(inv, _mm512_div_ps(_mm512_set1_ps(1.f), sum));
  if (lse_lanes != nullptr) {
    alignas(64) float m[16], s[16];
    _mm512_store_ps(m, mx);
    _mm512_store_ps(s, sum);
    for (int i = 0; i < 16; ++i) lse_lanes[i] = m[i] + std::log(s[i]);
  }
}

// attend_tile_matrix's contract (attend_tiled.h) on AVX-512, for D a multiple of 64.
template <int D, typename C>
inline void attend_tile(const float* q, int64_t nq, const int64_t* nk, const C* const* k, const C* const* v,
                        int64_t group, float* out, int64_t out_row_stride, float* lse, int64_t lse_row_stride) {
  static_assert(D % 64 == 0, "the values kernel takes 64 columns a pass");
  thread_local std::vector<float> qt, st, o, inv, lse_all, kf;
  thread_local std::vector<const float*> kp;
  const int64_t panels = (nq + 15) / 16, ld = panels * 16;
  const int64_t n = nk[nq - 1], n_pad = (n + kKeys - 1) / kKeys * kKeys;
  qt.assign(panels * D * 16, 0.f);  // the queries as panels [D][16]
  for (int64_t i = 0; i < nq; ++i)
    for (int c = 0; c < D; ++c) qt[(i / 16) * D * 16 + c * 16 + i % 16] = q[i * D + c];
  st.resize(n_pad * ld);
  kp.resize(kKeys);
  if constexpr (!std::is_same_v<C, float>) kf.resize(kKeys * D);
  for (int64_t j0 = 0; j0 < n_pad; j0 += kKeys) {
    for (int r = 0; r < kKeys; ++r) {  // padded keys read key 0
      const C* row = k[j0 + r < n ? j0 + r : 0];
      if constexpr (std::is_same_v<C, float>) {
        kp[r] = row;
      } else {
        for (int c = 0; c < D; c += 16) _mm512_storeu_ps(&kf[r * D + c], load16z(row + c));
        kp[r] = &kf[r * D];
      }
    }
    for (int64_t p = 0; p < panels; p += kPanels) {
      const int64_t pc = std::min<int64_t>(kPanels, panels - p);
      if (nk[std::min(nq, 16 * (p + pc)) - 1] <= j0) continue;  // no vector of these panels sees these keys
      const float* panel = &qt[p * D * 16];
      float* dst = &st[j0 * ld + 16 * p];
      if (pc == 3) scores<3, D>(panel, D * 16, kp.data(), dst, ld);
      else if (pc == 2) scores<2, D>(panel, D * 16, kp.data(), dst, ld);
      else scores<1, D>(panel, D * 16, kp.data(), dst, ld);
    }
  }
  inv.resize(ld);
  lse_all.resize(ld);
  for (int64_t p = 0; p < panels; ++p) {
    alignas(64) int32_t lanes[16];
    for (int i = 0; i < 16; ++i) lanes[i] = 16 * p + i < nq ? static_cast<int32_t>(nk[16 * p + i]) : 1;
    softmax_columns(&st[16 * p], ld, n, _mm512_load_si512(lanes), &inv[16 * p], lse != nullptr ? &lse_all[16 * p] : nullptr);
  }
  o.resize(ld * D);
  for (int64_t i0 = 0; i0 < nq; i0 += kVecs) {
    const int64_t rows = std::min<int64_t>(kVecs, nq - i0);
    const int64_t keys = nk[i0 + rows - 1];
    for (int c0 = 0; c0 < D; c0 += 64) values_upto6<D, C>(rows, &st[i0], ld, v, keys, c0, &o[i0 * D]);
  }
  for (int64_t i = 0; i < nq; ++i) {
    const __m512 m = _mm512_set1_ps(inv[i]);
    float* dst = out + (i / group) * out_row_stride + (i % group) * D;
    for (int c = 0; c < D; c += 16) _mm512_storeu_ps(dst + c, _mm512_mul_ps(_mm512_loadu_ps(&o[i * D + c]), m));
    if (lse != nullptr) lse[(i / group) * lse_row_stride + i % group] = lse_all[i];
  }
}

}  // namespace ae::tile512
#endif
