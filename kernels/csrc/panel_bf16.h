// The bfloat16 register-blocked micro-kernel (AVX512_BF16 ``vdpbf16ps``): out rows [0, R) x the
// columns of P panels (one or two) over K in pairs, float32 sums. Built only where the compiler
// targets AVX512_BF16 (``AE_PANEL_BF16``).
//
// Operands, both bfloat16 (uint16 bit patterns):
// - ``w``: R rows of K values (row r at w + r * w_stride), the broadcast side: each K pair of a row
//   is one 32-bit lane broadcast to the vector (the even K in its low half);
// - ``panel``: [K / 2, 16] 32-bit lanes, lane j of pair row kp = (column j's K 2kp, K 2kp + 1).
// One ``vdpbf16ps`` adds both products of a pair into the float32 accumulator of a lane, so a pair row
// costs one panel load (per panel) and R broadcasts for R (or 2 R) instructions, twice the multiply-adds
// of the float32 micro-kernel's R FMAs. ``vdpbf16ps`` and ``vcvtneps2bf16`` treat denormal inputs as
// zero (and flush denormal results): otherwise the result is the product of the rounded operands.
#pragma once

#if defined(__AVX512BF16__) && defined(__AVX512F__)
#define AE_PANEL_BF16 1

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "panel_micro.h"

namespace ae::panel_bf16 {

using Ahead = ae::panel::Ahead<uint32_t>;  // pair rows of a panel yet to be read, brought into L2

constexpr int64_t kPanel = 16;  // output columns per panel: one AVX-512 register of float32
constexpr int kRows = 12;       // rows per call: 2 x 12 accumulators + 2 panel rows + a broadcast

// ``add``: out += the product (a later block of K), else out = it. With P == 2 the first panel is whole
// and ``second`` (at ``panel_stride`` lanes) has ``cols`` columns; with P == 1 the one panel has them.
// A partial panel is read and written under a mask. ``ahead``: pair rows first, first + step, ... of
// the P panels at ahead.panel are prefetched into L2 on the way (panel_micro.h's Ahead).
template <int R, int P>
inline void micro(const uint16_t* w, int64_t w_stride, int64_t pairs, const uint32_t* panel, int64_t panel_stride,
                  float* out, int64_t n_dim, int64_t cols, Ahead ahead, bool add) {
  static_assert(P == 1 || P == 2, "one or two panels a call");
  const __mmask16 full = 0xFFFF;
  const __mmask16 last = cols == kPanel ? full : static_cast<__mmask16>((1u << cols) - 1);
  __m512 acc[P][R];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int q = 0; q < P; ++q)
      acc[q][r] = add ? _mm512_maskz_loadu_ps(q == P - 1 ? last : full, out + r * n_dim + q * kPanel)
                      : _mm512_setzero_ps();
  int64_t next = ahead.panel != nullptr ? ahead.first : pairs;
  for (int64_t kp = 0; kp < pairs; ++kp) {
    __m512i b[P];
#pragma GCC unroll 2
    for (int q = 0; q < P; ++q) b[q] = _mm512_loadu_si512(panel + q * panel_stride + kp * kPanel);
    if (kp == next) {
#pragma GCC unroll 2
      for (int q = 0; q < P; ++q)
        _mm_prefetch(reinterpret_cast<const char*>(ahead.panel + q * panel_stride + kp * kPanel), _MM_HINT_T1);
      next += ahead.step;
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, w + r * w_stride + 2 * kp, sizeof pair);
      const __m512bh a = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 2
      for (int q = 0; q < P; ++q) acc[q][r] = _mm512_dpbf16_ps(acc[q][r], a, (__m512bh)b[q]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int q = 0; q < P; ++q) _mm512_mask_storeu_ps(out + r * n_dim + q * kPanel, q == P - 1 ? last : full, acc[q][r]);
}

using MicroFn = void (*)(const uint16_t*, int64_t, int64_t, const uint32_t*, int64_t, float*, int64_t, int64_t, Ahead,
                         bool);

template <int P>
constexpr MicroFn kMicro[kRows + 1] = {nullptr,         micro<1, P>,  micro<2, P>,  micro<3, P>, micro<4, P>,
                                       micro<5, P>,     micro<6, P>,  micro<7, P>,  micro<8, P>, micro<9, P>,
                                       micro<10, P>,    micro<11, P>, micro<12, P>};

// n float32 values (n a multiple of 16) rounded to bfloat16, nearest even.
inline void round_row(const float* src, int64_t n, uint16_t* dst) {
  for (int64_t i = 0; i < n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
}

}  // namespace ae::panel_bf16

#endif
