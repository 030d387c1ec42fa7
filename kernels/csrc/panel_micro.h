// The register-blocked micro-kernel of ``panel_linear`` (float32 or bfloat16 column panels [K, 16],
// float32 x and out), in a header of its own for any kernel that feeds panels: out rows [0, R) x
// panel columns [0, cols) of x rows at stride x_stride, over k in [0, k_len); ``add``: out += the
// product, else out = it. Inside ``micro``, ``n_dim`` is out's row stride. Built for AVX-512 (F, DQ):
// up to 12 rows, one 16-wide accumulator each, or two per row over two panels (``micro2``); for AVX2:
// up to 6 rows, two 8-wide accumulators each.
#pragma once

#include <algorithm>
#include <cstdint>

#include "vec_math.h"

namespace ae::panel {

constexpr int64_t kPanel = 16;  // output columns per panel: two AVX2 registers, one AVX-512 register
#if defined(__AVX512F__) && defined(__AVX512DQ__)
#define AE_PANEL_AVX512 1
constexpr int64_t kRows = 12;  // output rows per micro-kernel call: 12 accumulators + 1 + broadcasts
#else
constexpr int64_t kRows = 6;   // output rows per micro-kernel call: 12 accumulators + 2 + 1 registers
#endif

// Rows of a panel yet to be read (``ahead``) that one micro-kernel call brings into L2: rows
// first, first + step, ... (the blocks of rows over a panel share its rows between them).
template <typename W>
struct Ahead {
  const W* panel = nullptr;
  int64_t first = 0, step = 1;
};

#if defined(AE_PANEL_AVX512)
// The panel row of k as one float32 vector of its 16 columns.
inline __m512 panel_row(const float* panel, int64_t k) { return _mm512_loadu_ps(panel + k * kPanel); }

inline __m512 panel_row(const uint16_t* panel, int64_t k) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + k * kPanel));
  const __m256 lo = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));  // columns 0-7
  const __m256 hi = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
  return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

// x rows at stride x_stride, k in [0, k_len) of the panel's rows; ``add``: out += the product (a later
// block of K), else out = it. One accumulator per row holds the 16 columns; a partial last panel is
// read and written under a mask.
template <int R, typename W>
inline void micro(const float* x, int64_t x_stride, int64_t k_len, const W* panel, float* out, int64_t n_dim,
                  int64_t cols, Ahead<W> ahead, bool add) {
  const __mmask16 mask = cols == kPanel ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << cols) - 1);
  __m512 acc[R];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) acc[r] = add ? _mm512_maskz_loadu_ps(mask, out + r * n_dim) : _mm512_setzero_ps();
  int64_t next = ahead.panel != nullptr ? ahead.first : k_len;
  for (int64_t k = 0; k < k_len; ++k) {
    const __m512 b = panel_row(panel, k);
    if (k == next) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead.panel + k * kPanel), _MM_HINT_T1);
      next += ahead.step;
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(x[r * x_stride + k]), b, acc[r]);
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(out + r * n_dim, mask, acc[r]);
}

template <typename W>
using MicroFn = void (*)(const float*, int64_t, int64_t, const W*, float*, int64_t, int64_t, Ahead<W>, bool);
template <typename W>
constexpr MicroFn<W> kMicro[kRows + 1] = {nullptr,        micro<1, W>,  micro<2, W>, micro<3, W>, micro<4, W>,
                                          micro<5, W>,    micro<6, W>,  micro<7, W>, micro<8, W>, micro<9, W>,
                                          micro<10, W>,   micro<11, W>, micro<12, W>};

// Two neighbouring panels at once (``panel`` and the next, at ``panel_stride`` elements): 2 R
// accumulators, per k two panel-row loads and R broadcasts feed 2 R FMAs (one panel: 1 + R loads for
// R FMAs, which leaves the load ports, not the FMA units, setting the pace). The first panel is
// whole; the second has ``cols`` columns (masked when fewer than 16). Same contract as ``micro``.
template <int R, typename W>
inline void micro2(const float* x, int64_t x_stride, int64_t k_len, const W* panel, int64_t panel_stride,
                   float* out, int64_t n_dim, int64_t cols, Ahead<W> ahead, bool add) {
  const __mmask16 mask = cols == kPanel ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << cols) - 1);
  const W* second = panel + panel_stride;
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    acc0[r] = add ? _mm512_loadu_ps(out + r * n_dim) : _mm512_setzero_ps();
    acc1[r] = add ? _mm512_maskz_loadu_ps(mask, out + r * n_dim + kPanel) : _mm512_setzero_ps();
  }
  int64_t next = ahead.panel != nullptr ? ahead.first : k_len;
  for (int64_t k = 0; k < k_len; ++k) {
    const __m512 b0 = panel_row(panel, k);
    const __m512 b1 = panel_row(second, k);
    if (k == next) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead.panel + k * kPanel), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(ahead.panel + panel_stride + k * kPanel), _MM_HINT_T1);
      next += ahead.step;
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512 xb = _mm512_set1_ps(x[r * x_stride + k]);
      acc0[r] = _mm512_fmadd_ps(xb, b0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(xb, b1, acc1[r]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(out + r * n_dim, acc0[r]);
    _mm512_mask_storeu_ps(out + r * n_dim + kPanel, mask, acc1[r]);
  }
}

template <typename W>
using Micro2Fn = void (*)(const float*, int64_t, int64_t, const W*, int64_t, float*, int64_t, int64_t, Ahead<W>,
                          bool);
template <typename W>
constexpr Micro2Fn<W> kMicro2[kRows + 1] = {nullptr,         micro2<1, W>,  micro2<2, W>, micro2<3, W>,
                                            micro2<4, W>,    micro2<5, W>,  micro2<6, W>, micro2<7, W>,
                                            micro2<8, W>,    micro2<9, W>,  micro2<10, W>, micro2<11, W>,
                                            micro2<12, W>};
#elif defined(AE_AVX2)
// out rows [0, R) x panel columns [0, cols): x is R rows of stride k_dim, panel is [K, 16].
// The panel row of k as two float32 vectors: columns 0-7 and 8-15.
inline void panel_row(const float* panel, int64_t k, __m256& b0, __m256& b1) {
  b0 = _mm256_loadu_ps(panel + k * kPanel);
  b1 = _mm256_loadu_ps(panel + k * kPanel + 8);
}

inline void panel_row(const uint16_t* panel, int64_t k, __m256& b0, __m256& b1) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + k * kPanel));
  b0 = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  b1 = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// x rows at stride x_stride, k in [0, k_len) of the panel's rows; ``add``: out += the product
// (a later block of K), else out = it.
template <int R, typename W>
inline void micro(const float* x, int64_t x_stride, int64_t k_len, const W* panel, float* out, int64_t n_dim,
                  int64_t cols, Ahead<W> ahead, bool add) {
  __m256 acc0[R], acc1[R];
  alignas(32) float tail[R][kPanel];
  const bool full = cols == kPanel;
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    if (!add) {
      acc0[r] = acc1[r] = _mm256_setzero_ps();
      continue;
    }
    const float* src = out + r * n_dim;
    if (!full) {  // the last panel of an N that is not a multiple of 16
      std::fill(tail[r], tail[r] + kPanel, 0.f);
      std::copy(src, src + cols, tail[r]);
      src = tail[r];
    }
    acc0[r] = _mm256_loadu_ps(src);
    acc1[r] = _mm256_loadu_ps(src + 8);
  }
  int64_t next = ahead.panel != nullptr ? ahead.first : k_len;
  auto row = [&](int64_t k, __m256& b0, __m256& b1) {
    panel_row(panel, k, b0, b1);
    if (k == next) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead.panel + k * kPanel), _MM_HINT_T1);
      next += ahead.step;
    }
  };
  ae::fma_rows_x16<R>(x, x_stride, k_len, row, acc0, acc1);
  // Every loop over r is unrolled, so the accumulators live in registers (an indexed access would
  // put the arrays on the stack, stored on every k).
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    float* dst = full ? out + r * n_dim : tail[r];
    _mm256_storeu_ps(dst, acc0[r]);
    _mm256_storeu_ps(dst + 8, acc1[r]);
  }
  if (!full) {
    for (int r = 0; r < R; ++r) std::copy(tail[r], tail[r] + cols, out + r * n_dim);
  }
}

template <typename W>
using MicroFn = void (*)(const float*, int64_t, int64_t, const W*, float*, int64_t, int64_t, Ahead<W>, bool);
template <typename W>
constexpr MicroFn<W> kMicro[kRows + 1] = {nullptr, micro<1, W>, micro<2, W>, micro<3, W>,
                                          micro<4, W>, micro<5, W>, micro<6, W>};
#endif

}  // namespace ae::panel
