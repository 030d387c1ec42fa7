// ``agent_engine::panel_linear``: out[M, N] = x[M, K] @ w[N, K]^T on a weight packed in column panels
// (float32 or bfloat16 weights, float32 x, out and accumulators; AVX2 or AVX-512), for any number of rows.
// Registered here, declared in cpu_ops.cpp. Bfloat16 weights in K-pair panels ([P, ceil(K / 2), 32],
// built for AVX512_BF16 only; refused elsewhere) multiply x rounded to bfloat16 instead (see
// panel_pairs_linear below).
//
// Layout: ``panels`` is [ceil(N / 16), K, 16]: panel p holds output columns 16p .. 16p + 15, one row
// of 16 weights per k (columns past N are zero). In bfloat16 the 16 weights of a row are interleaved,
// column c at slot 2c for c < 8 and at slot 2(c - 8) + 1 above, so one 256-bit load gives both halves
// as float32 by a shift (low halves: columns 0-7) and a mask (high halves: columns 8-15): the
// exact float32 values of the bf16 weights, with no convert. The micro-kernel keeps a block of the
// output in accumulator registers while it walks K (AVX2: 6 x 16 in twelve, per k the panel row's two
// loads, six broadcasts of x and twelve FMAs; AVX-512: 12 x 32 over two neighbouring panels in 24,
// per k two loads, twelve broadcasts and 24 FMAs; a lone last panel 12 x 16), so the FMA units, not
// memory or the load ports, set the pace. Panels are split
// between the threads; a long K goes in blocks (later blocks add to out); rows go in chunks small
// enough that a chunk of x (over one block of K) stays in L2 while every
// panel of the thread passes over it, each panel read from memory once per chunk (once in all for
// a decode step's rows); each block of rows over a group of panels brings its share of the next
// group into L2 (panel rows b, b + blocks, ...: a cache line per fp32 row), so the next group's
// loads spread over all of this group's FMAs rather than crowding the first block's.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/to.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/silu.h>
#include <torch/library.h>

#include "ops_library.h"
#include "step_ops.h"

#include <algorithm>

#include "panel_bf16.h"
#include "panel_micro.h"
#include "vec_math.h"

namespace {

using ae::panel::kPanel;
using ae::panel::kRows;

#ifdef AE_AVX2
using ae::panel::Ahead;
using ae::panel::kMicro;

// K in blocks of at most kMaxKBlock (balanced): a block of x rows and a group of panels stay in L2
// however long K is (a long K, as a down projection's, would otherwise shrink the chunks of rows to
// a few, each pass over the panels using a part of the accumulators). Blocks after the first add
// their product to out.
constexpr int64_t kMaxKBlock = 1024;
#if defined(AE_PANEL_AVX512)
constexpr bool kTwoPanels = true;  // micro2: two panels a pass
#else
constexpr bool kTwoPanels = false;
#endif

// The blocking every panel product shares. Panels are split between the threads; per thread, rows go
// in balanced chunks whose x over one K block takes at most ~256 KiB of L2, and within a chunk in
// balanced blocks of at most kRows (32 rows on AVX2: 6+6+5+5+5+5, never a lone 2-row block); K goes in
// balanced blocks of at most ``max_units`` units (a K element, or a K pair: x takes 4 bytes a unit
// either way); panels in groups that stay in L2 (``unit_bytes`` a unit of one panel column) while each
// block of rows (in L1) passes over all of them. ``step(p, both, m, rows, u0, u_len, next, b, blocks)``
// multiplies rows [m, m + rows) by panel p, and p + 1 when ``both`` == 2 (``two`` and two left in the
// group), over units [u0, u0 + u_len); meanwhile it brings share b of ``blocks`` of panel ``next`` (the
// next group's; -1: none) into L2, so the next group's loads spread over this group's FMAs. units >= 1.
template <class Step>
void walk_panels(int64_t m_dim, int64_t units, int64_t max_units, int64_t unit_bytes, int64_t n_panels, bool two,
                 Step&& step) {
  TORCH_CHECK(units >= 1 && max_units >= 1, "walk_panels: an empty K has no blocks");
  const int64_t k_blocks = (units + max_units - 1) / max_units;
  const int64_t k_block = (units + k_blocks - 1) / k_blocks;
  const int64_t max_chunk = std::max<int64_t>(kRows, 256 * 1024 / 4 / k_block);
  const int64_t n_chunks = (m_dim + max_chunk - 1) / max_chunk;
  const int64_t chunk = (m_dim + n_chunks - 1) / n_chunks;
  const int64_t group = std::max<int64_t>(1, 128 * 1024 / unit_bytes / (k_block * kPanel));
  at::parallel_for(0, n_panels, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t m0 = 0; m0 < m_dim; m0 += chunk) {
      const int64_t rows_here = std::min(chunk, m_dim - m0);
      const int64_t blocks = (rows_here + kRows - 1) / kRows;
      for (int64_t u0 = 0; u0 < units; u0 += k_block) {
        const int64_t u_len = std::min(k_block, units - u0);
        for (int64_t g = p0; g < p1; g += group) {
          const int64_t g1 = std::min(p1, g + group);
          for (int64_t b = 0, m = m0; b < blocks; ++b) {
            const int64_t rows = rows_here / blocks + (b < rows_here % blocks ? 1 : 0);
            for (int64_t p = g; p < g1;) {
              const int64_t both = two && p + 1 < g1 ? 2 : 1, next = p + (g1 - g);
              step(p, both, m, rows, u0, u_len, next < p1 ? next : int64_t{-1}, b, blocks);
              p += both;
            }
            m += rows;
          }
        }
      }
    }
  });
}

template <typename W>
void panel_linear_avx2(float* op, const float* xp, const W* pp, int64_t m_dim, int64_t k_dim, int64_t n_dim,
                       int64_t n_panels) {
  walk_panels(m_dim, k_dim, kMaxKBlock, sizeof(W), n_panels, kTwoPanels,
              [&](int64_t p, int64_t both, int64_t m, int64_t rows, int64_t k0, int64_t k_len, int64_t next, int64_t b,
                  int64_t blocks) {
                const Ahead<W> ahead{next >= 0 ? pp + (next * k_dim + k0) * kPanel : nullptr, b, blocks};
                const W* panel = pp + (p * k_dim + k0) * kPanel;
                float* out = op + m * n_dim + p * kPanel;
                const int64_t cols = std::min(kPanel, n_dim - (p + both - 1) * kPanel);
#if defined(AE_PANEL_AVX512)
                if (both == 2) {  // a prefetch past the end never faults
                  ae::panel::kMicro2<W>[rows](xp + m * k_dim + k0, k_dim, k_len, panel, k_dim * kPanel, out, n_dim,
                                              cols, ahead, k0 > 0);
                  return;
                }
#endif
                kMicro<W>[rows](xp + m * k_dim + k0, k_dim, k_len, panel, out, n_dim, cols, ahead, k0 > 0);
              });
}

// out[M, I] = silu(x @ gate^T) * (x @ up^T) on a gate/up weight packed with its panels interleaved
// (panel 2j: gate columns 16j .. 16j + 15, panel 2j + 1: the same up columns; I a multiple of 16): each
// block of rows times a pair of panels stays in registers over all of K (the micro-kernel's own
// order, so the sums equal panel_linear's for K <= kMaxKBlock), and only silu(gate) * up is written.
// The gate_up product never reaches memory. Rows and panel pairs are blocked as in panel_linear (one
// "panel" of walk_panels is a gate/up pair here, K one block).
template <typename W>
void panel_silu_avx2(float* op, const float* xp, const W* pp, int64_t m_dim, int64_t k_dim, int64_t inter) {
  walk_panels(m_dim, k_dim, k_dim, 2 * sizeof(W), inter / kPanel, false,
              [&](int64_t q, int64_t, int64_t m, int64_t rows, int64_t, int64_t, int64_t next, int64_t b,
                  int64_t blocks) {
                alignas(64) float tmp[kRows * 2 * kPanel];
                const W* gate = pp + 2 * q * k_dim * kPanel;
                const W* ahead = next >= 0 ? pp + 2 * next * k_dim * kPanel : nullptr;
#if defined(AE_PANEL_AVX512)
                ae::panel::kMicro2<W>[rows](xp + m * k_dim, k_dim, k_dim, gate, k_dim * kPanel, tmp, 2 * kPanel,
                                            kPanel, Ahead<W>{ahead, b, blocks}, false);
#else
                kMicro<W>[rows](xp + m * k_dim, k_dim, k_dim, gate, tmp, 2 * kPanel, kPanel, Ahead<W>{ahead, b, blocks},
                                false);
                kMicro<W>[rows](xp + m * k_dim, k_dim, k_dim, gate + k_dim * kPanel, tmp + kPanel, 2 * kPanel, kPanel,
                                Ahead<W>{ahead != nullptr ? ahead + k_dim * kPanel : nullptr, b, blocks}, false);
#endif
                for (int64_t r = 0; r < rows; ++r)
                  ae::silu_mul_row(op + (m + r) * inter + q * kPanel, tmp + r * 2 * kPanel,
                                   tmp + r * 2 * kPanel + kPanel, kPanel);
              });
}

#if defined(AE_PANEL_BF16)
static_assert(ae::panel_bf16::kRows >= kRows && ae::panel_bf16::kPanel == kPanel,
              "walk_panels' row blocks index the bfloat16 kernels too");
// The bfloat16-pair form (panels [P, K2, 32]: lane c of pair row kp = (column c's k 2kp, k 2kp + 1), K2
// = ceil(K / 2), a zero past K): x rounded to bfloat16 ([M, 2 K2], a zero column past an odd K), then
// panel_bf16.h's micro-kernel, one vdpbf16ps per K pair, blocked by walk_panels in K pairs. Float32
// sums: the product of the rounded x and the weights up to summation order.
at::Tensor rounded_pairs(const at::Tensor& x, int64_t k2) {
  at::Tensor xb = x.to(at::kBFloat16);
  if (2 * k2 != x.size(1)) xb = at::constant_pad_nd(xb, {0, 1});
  return xb.contiguous();
}

void panel_pairs_linear(float* op, const uint16_t* xp, const uint32_t* pp, int64_t m_dim, int64_t k2, int64_t n_dim,
                        int64_t n_panels) {
  walk_panels(m_dim, k2, kMaxKBlock / 2, 4, n_panels, true,
              [&](int64_t p, int64_t both, int64_t m, int64_t rows, int64_t q0, int64_t q_len, int64_t next, int64_t b,
                  int64_t blocks) {
                const ae::panel_bf16::Ahead ahead{next >= 0 ? pp + (next * k2 + q0) * kPanel : nullptr, b, blocks};
                (both == 2 ? ae::panel_bf16::kMicro<2> : ae::panel_bf16::kMicro<1>)[rows](
                    xp + m * 2 * k2 + 2 * q0, 2 * k2, q_len, pp + (p * k2 + q0) * kPanel, k2 * kPanel,
                    op + m * n_dim + p * kPanel, n_dim, std::min(kPanel, n_dim - (p + both - 1) * kPanel), ahead,
                    q0 > 0);
              });
}

// panel_silu_avx2 on gate/up pair panels interleaved by panel (2j gate, 2j + 1 up).
void panel_pairs_silu(float* op, const uint16_t* xp, const uint32_t* pp, int64_t m_dim, int64_t k2, int64_t inter) {
  walk_panels(m_dim, k2, k2, 2 * 4, inter / kPanel, false,
              [&](int64_t q, int64_t, int64_t m, int64_t rows, int64_t, int64_t, int64_t next, int64_t b,
                  int64_t blocks) {
                alignas(64) float tmp[kRows * 2 * kPanel];
                const ae::panel_bf16::Ahead ahead{next >= 0 ? pp + 2 * next * k2 * kPanel : nullptr, b, blocks};
                ae::panel_bf16::kMicro<2>[rows](xp + m * 2 * k2, 2 * k2, k2, pp + 2 * q * k2 * kPanel, k2 * kPanel,
                                                tmp, 2 * kPanel, kPanel, ahead, false);
                for (int64_t r = 0; r < rows; ++r)
                  ae::silu_mul_row(op + (m + r) * inter + q * kPanel, tmp + r * 2 * kPanel,
                                   tmp + r * 2 * kPanel + kPanel, kPanel);
              });
}
#endif
#else
// The [K, N] float32 weight of the panels (the fallback's view).
at::Tensor panels_as_weight(const at::Tensor& panels, int64_t n_dim) {
  const int64_t n_panels = panels.size(0), k_dim = panels.size(1);
  at::Tensor cols = panels;
  if (panels.scalar_type() == at::kBFloat16) {  // undo the interleave: slot 2c + h holds column c + 8h
    cols = panels.view({n_panels, k_dim, 8, 2}).transpose(2, 3).reshape({n_panels, k_dim, kPanel});
  }
  return cols.to(at::kFloat).permute({1, 0, 2}).reshape({k_dim, n_panels * kPanel}).narrow(1, 0, n_dim);
}
#endif

// Whether ``panels`` hold bfloat16 K pairs ([P, ceil(K / 2), 32]) rather than one panel row per k
// ([P, K, 16]), checked against K and against the build (pairs need AVX512_BF16).
bool pair_layout(const at::Tensor& panels, int64_t k_dim, const char* op) {
  const bool pairs = panels.scalar_type() == at::kBFloat16 && panels.size(2) == 2 * kPanel;
  TORCH_CHECK(panels.size(1) == (pairs ? (k_dim + 1) / 2 : k_dim) && panels.size(2) == (pairs ? 2 : 1) * kPanel, op,
              ": the panels do not hold K=", k_dim);
#if !defined(AE_PANEL_BF16)
  TORCH_CHECK(!pairs, op, ": bfloat16 pair panels need a build for AVX512_BF16 (this one is not)");
#endif
  return pairs;
}

}  // namespace

// The ops, callable from this library's other sources (step_ops.h).
namespace AE_OPS_NS {

void panel_linear(at::Tensor out, const at::Tensor& x, const at::Tensor& panels) {
  const bool bf16 = panels.scalar_type() == at::kBFloat16;
  TORCH_CHECK(x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat &&
                  (bf16 || panels.scalar_type() == at::kFloat),
              "panel_linear: x and out float32, panels float32 or bfloat16");
  TORCH_CHECK(x.dim() == 2 && panels.dim() == 3 && out.dim() == 2 && x.is_contiguous() &&
                  panels.is_contiguous() && out.is_contiguous(), "panel_linear needs contiguous tensors");
  const int64_t m_dim = x.size(0), k_dim = x.size(1), n_dim = out.size(1), n_panels = panels.size(0);
  [[maybe_unused]] const bool pairs = pair_layout(panels, k_dim, "panel_linear");
  TORCH_CHECK(out.size(0) == m_dim && (n_dim + kPanel - 1) / kPanel == n_panels, "panel_linear: bad shapes");
  if (m_dim == 0 || n_dim == 0) return;
  if (k_dim == 0) {  // an empty sum
    out.zero_();
    return;
  }
#if defined(AE_PANEL_BF16)
  if (pairs) {
    const at::Tensor xb = rounded_pairs(x, (k_dim + 1) / 2);
    panel_pairs_linear(out.data_ptr<float>(), reinterpret_cast<const uint16_t*>(xb.const_data_ptr()),
                       reinterpret_cast<const uint32_t*>(panels.const_data_ptr()), m_dim, (k_dim + 1) / 2, n_dim,
                       n_panels);
    return;
  }
#endif
#ifdef AE_AVX2
  float* op = out.data_ptr<float>();
  const float* xp = x.data_ptr<float>();
  if (bf16) {
    panel_linear_avx2(op, xp, reinterpret_cast<const uint16_t*>(panels.data_ptr<at::BFloat16>()), m_dim, k_dim,
                      n_dim, n_panels);
  } else {
    panel_linear_avx2(op, xp, panels.data_ptr<float>(), m_dim, k_dim, n_dim, n_panels);
  }
#else
  // No AVX2 on the build machine: the same product through ATen.
  out.copy_(at::mm(x, panels_as_weight(panels, n_dim)));
#endif
}

void panel_linear_silu(at::Tensor out, const at::Tensor& x, const at::Tensor& panels) {
  const bool bf16 = panels.scalar_type() == at::kBFloat16;
  TORCH_CHECK(x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat &&
                  (bf16 || panels.scalar_type() == at::kFloat),
              "panel_linear_silu: x and out float32, panels float32 or bfloat16");
  TORCH_CHECK(x.dim() == 2 && panels.dim() == 3 && out.dim() == 2 && x.is_contiguous() && panels.is_contiguous() &&
                  out.is_contiguous(), "panel_linear_silu needs contiguous tensors");
  const int64_t m_dim = x.size(0), k_dim = x.size(1), inter = out.size(1);
  [[maybe_unused]] const bool pairs = pair_layout(panels, k_dim, "panel_linear_silu");
  TORCH_CHECK(inter % kPanel == 0 && panels.size(0) == 2 * inter / kPanel && out.size(0) == m_dim,
              "panel_linear_silu: gate/up panels interleaved for an intermediate size that is a multiple of 16");
  if (m_dim == 0 || inter == 0) return;
  if (k_dim == 0) {  // silu(0) * 0
    out.zero_();
    return;
  }
#if defined(AE_PANEL_BF16)
  if (pairs) {
    const at::Tensor xb = rounded_pairs(x, (k_dim + 1) / 2);
    panel_pairs_silu(out.data_ptr<float>(), reinterpret_cast<const uint16_t*>(xb.const_data_ptr()),
                     reinterpret_cast<const uint32_t*>(panels.const_data_ptr()), m_dim, (k_dim + 1) / 2, inter);
    return;
  }
#endif
#ifdef AE_AVX2
  float* op = out.data_ptr<float>();
  const float* xp = x.data_ptr<float>();
  if (bf16) {
    panel_silu_avx2(op, xp, reinterpret_cast<const uint16_t*>(panels.data_ptr<at::BFloat16>()), m_dim, k_dim, inter);
  } else {
    panel_silu_avx2(op, xp, panels.data_ptr<float>(), m_dim, k_dim, inter);
  }
#else
  // No AVX2 on the build machine: undo the interleave, then the product and the activation through ATen.
  at::Tensor w = panels_as_weight(panels, 2 * inter).view({k_dim, inter / kPanel, 2, kPanel});
  at::Tensor gate = w.select(2, 0).reshape({k_dim, inter}), up = w.select(2, 1).reshape({k_dim, inter});
  out.copy_(at::mul(at::silu(at::mm(x, gate)), at::mm(x, up)));
#endif
}

}  // namespace AE_OPS_NS

AE_LIBRARY_IMPL(m) {
  m.impl("panel_linear", &AE_OPS_NS::panel_linear);
  m.impl("panel_linear_silu", &AE_OPS_NS::panel_linear_silu);
}
