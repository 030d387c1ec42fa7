// A tile of query vectors (a prefill chunk's rows of one KV head, or decode rows over shared blocks)
// over a bfloat16 KV cache in AVX512_BF16 products (``vdpbf16ps``): attend_tiled512.h's layout and its
// driver (tile512::attend_blocks: flash-style blocks of keys, the online softmax) with this file's
// products, each taking two terms a lane, built only where the compiler targets AVX512_BF16
// (``AE_ATTN_BF16``); the same contract as attend_tile_matrix.
//
//   scores, transposed: the queries rounded to bfloat16 once, as panels of head-dim pairs [D / 2][16]
//     (lane i: vector i's elements 2c and 2c + 1); a key's pair of elements is one 32-bit broadcast
//     straight from its cache row (no widening); 8 keys x up to 3 panels in 24 accumulators, per pair
//     3 panel loads and 8 broadcasts for 24 ``vdpbf16ps``.
//   softmax: float32, down S^T's columns, as attend_tiled512.h's.
//   O = P V: keys in pairs, the two value rows interleaved (``vpunpck[lh]wd``), each vector's two
//     numerators rounded to bfloat16 as one lane: up to 6 vectors x 64 columns in 24 accumulators,
//     per key pair 4 value loads, 4 unpacks and 6 broadcasts for 24 ``vdpbf16ps``. The running
//     outputs keep the unpack's column order and are put back in place at the end.
// Numerics as attend_bf16.h's decode rows: the scaled queries and the softmax numerators rounded to
// bfloat16, float32 sums and softmax.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "attend_bf16.h"
#include "attend_tiled512.h"

#if defined(AE_ATTN_BF16)
namespace ae::tile_bf16 {

using tile512::kBlockKeys;
using tile512::kCols;
using tile512::kKeys;
using tile512::kPanels;
using tile512::kVecs;

// st[r * ld + 16 pc + lane] = k[r] . (vector 16 pc + lane of the pair panels at qt) for r < 8, pc < PC;
// qt's panels are [D / 2][16] pairs, panel_stride lanes apart; k[r] are bfloat16 rows of D.
template <int PC, int D>
inline void scores(const uint32_t* qt, int64_t panel_stride, const uint16_t* const* k, float* st, int64_t ld) {
  __m512 acc[kKeys][PC];
  tile512::zero_scores<PC>(acc);
#pragma GCC unroll 2
  for (int c = 0; c < D / 2; ++c) {
    __m512i qv[PC];
#pragma GCC unroll 3
    for (int pc = 0; pc < PC; ++pc) qv[pc] = _mm512_loadu_si512(qt + pc * panel_stride + c * 16);
#pragma GCC unroll 8
    for (int r = 0; r < kKeys; ++r) {
      int32_t pair;
      std::memcpy(&pair, k[r] + 2 * c, sizeof pair);
      const __m512bh kb = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 3
      for (int pc = 0; pc < PC; ++pc) acc[r][pc] = _mm512_dpbf16_ps(acc[r][pc], kb, (__m512bh)qv[pc]);
    }
  }
  tile512::store_scores<PC>(acc, st, ld);
}

// o[r * D + c0 ..c0 + 64) (in the unpack's column order) = alpha[r] o[..] + the block's P V for the
// vectors r < R: key pairs [0, pairs) of the block, pt[kp * ld + r] vector r's two numerators in
// bfloat16, v[j0 + 2 kp] and its successor the rows (a pair past ``j_end`` reads row j_end - 1: its
// numerators are zero).
template <int R>
inline void values(const uint32_t* pt, int64_t ld, const uint16_t* const* v, int64_t j0, int64_t j_end, int c0,
                   const float* alpha, float* o, int64_t d) {
  __m512 acc[R][kCols];
  tile512::load_running<R>(o, d, c0, alpha, acc);
  for (int64_t j = j0; j < j_end; j += 2) {
    __m512i pair[kCols];
    bf16attn::interleave_rows64(v[j] + c0, v[j + 1 < j_end ? j + 1 : j] + c0, pair);
    const uint32_t* prow = pt + ((j - j0) / 2) * ld;
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m512bh p = (__m512bh)_mm512_set1_epi32(static_cast<int>(prow[r]));
#pragma GCC unroll 4
      for (int cp = 0; cp < kCols; ++cp) acc[r][cp] = _mm512_dpbf16_ps(acc[r][cp], p, (__m512bh)pair[cp]);
    }
  }
  tile512::store_running<R>(acc, d, c0, o);
}

template <int D>
inline void values_upto6(int64_t rows, const uint32_t* pt, int64_t ld, const uint16_t* const* v, int64_t j0,
                         int64_t j_end, int c0, const float* alpha, float* o) {
  switch (rows) {
    case 1: return values<1>(pt, ld, v, j0, j_end, c0, alpha, o, D);
    case 2: return values<2>(pt, ld, v, j0, j_end, c0, alpha, o, D);
    case 3: return values<3>(pt, ld, v, j0, j_end, c0, alpha, o, D);
    case 4: return values<4>(pt, ld, v, j0, j_end, c0, alpha, o, D);
    case 5: return values<5>(pt, ld, v, j0, j_end, c0, alpha, o, D);
    default: return values<6>(pt, ld, v, j0, j_end, c0, alpha, o, D);
  }
}

// pt[kp * ld + i] = (st[2 kp][i], st[2 kp + 1][i]) rounded to bfloat16, for key pairs kp < pairs and
// the ld lanes (st's row 2 pairs - 1 is zero where the block's key count is odd).
inline void numerator_pairs(const float* st, int64_t ld, int64_t pairs, uint32_t* pt) {
  for (int64_t kp = 0; kp < pairs; ++kp)
    for (int64_t i = 0; i < ld; i += 16) {
      const __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(st + 2 * kp * ld + i)));
      const __m512i hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(st + (2 * kp + 1) * ld + i)));
      _mm512_storeu_si512(pt + kp * ld + i, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
}

// The products in bfloat16 pairs (tile512::attend_blocks' form): the queries rounded to bfloat16 as pair
// panels [D / 2][16], key rows read in place, a block's numerators paired after its softmax, the
// outputs put back in column order at the end.
struct Bf16Products {
  using Cache = uint16_t;
  std::vector<uint32_t> qt, pt;  // the query pair panels; the block's numerator pairs [kBlockKeys / 2][ld]
  const uint16_t* kp[kKeys];

  template <int D>
  void pack_queries(const float* q, int64_t nq, int64_t panels) {
    qt.assign(panels * (D / 2) * 16, 0u);
    for (int64_t i = 0; i < nq; ++i)
      for (int c = 0; c < D; c += 32) {
        alignas(64) uint32_t lanes32[16];
        _mm512_store_si512(lanes32, bf16attn::round32(q + i * D + c));
        for (int x = 0; x < 16; ++x) qt[(i / 16) * (D / 2) * 16 + (c / 2 + x) * 16 + i % 16] = lanes32[x];
      }
    pt.resize(kBlockKeys / 2 * panels * 16);
  }
  template <int D>
  void key_rows(const uint16_t* const* k, int64_t j0, int64_t n) {
    for (int r = 0; r < kKeys; ++r) kp[r] = k[j0 + r < n ? j0 + r : 0];
  }
  template <int D>
  void scores(int64_t p, int64_t pc, float* st, int64_t ld) const {
    const uint32_t* panel = &qt[p * (D / 2) * 16];
    if (pc == 3) tile_bf16::scores<3, D>(panel, (D / 2) * 16, kp, st, ld);
    else if (pc == 2) tile_bf16::scores<2, D>(panel, (D / 2) * 16, kp, st, ld);
    else tile_bf16::scores<1, D>(panel, (D / 2) * 16, kp, st, ld);
  }
  // The block's numerators as pairs of keys (an odd block's last pair: its missing key's row zeroed).
  void block_done(float* st, int64_t ld, int64_t keys) {
    if (keys % 2 != 0) std::fill_n(st + keys * ld, ld, 0.f);
    numerator_pairs(st, ld, (keys + 1) / 2, pt.data());
  }
  template <int D>
  void values(int64_t rows, int64_t i0, const float*, int64_t ld, const uint16_t* const* v, int64_t j0,
              int64_t j_end, int c0, const float* alpha, float* o) const {
    values_upto6<D>(rows, &pt[i0], ld, v, j0, j_end, c0, alpha, o);
  }
  template <int D>
  void finish(const float* o, float inv_sum, float* dst) const {
    for (int c0 = 0; c0 < D; c0 += 64) {
      __m512 acc[kCols];
      for (int cp = 0; cp < kCols; ++cp) acc[cp] = _mm512_loadu_ps(o + c0 + 16 * cp);
      bf16attn::unpermute64(acc, inv_sum, dst + c0);
    }
  }
};

// attend_tile_matrix's contract (attend_tiled.h) over bfloat16 rows, for D a multiple of 64.
template <int D>
inline void attend_tile(const float* q, int64_t nq, const int64_t* nk, const uint16_t* const* k,
                        const uint16_t* const* v, int64_t group, float* out, int64_t out_row_stride, float* lse,
                        int64_t lse_row_stride) {
  tile512::attend_blocks<Bf16Products, D>(q, nq, nk, k, v, group, out, out_row_stride, lse, lse_row_stride);
}

}  // namespace ae::tile_bf16
#endif
