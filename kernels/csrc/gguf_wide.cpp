// ``agent_engine::gguf_linear_wide(out, x, raws, qtypes, bf16)``: out[M, sum N_i] = x[M, K] @ [W_1; W_2; ...]^T
// for the GGUF weights of a fused matmul (same arguments and output as gguf_linear_int8), the route
// for wide steps: prefill chunks and many decoding streams. Registered here, declared in cpu_ops.cpp.
//
// The int8 route (gguf_linear.cpp) unpacks a weight row once per four or eight rows of x and reduces
// every output to a scalar: right for a decode step's few rows, where reading the weights sets the
// pace, and compute-poor for hundreds of rows. Here each weight's rows are dequantized to float32 a
// block of K at a time (gguf_dequant.h: gguf-py's exact values) into a small buffer and multiplied by
// the float32 panel micro-kernel (panel_micro.h) with the roles turned: the dequantized weight rows
// are its broadcast side (kRows of them per call) and x, transposed once per call into panels of 16
// rows, its panel side; each call leaves a kRows x 16 (or 32) block of out^T in a per-thread buffer,
// written to out when the group's K is done. So a weight element is dequantized once per chunk of
// x rows and used for all of them, and nothing is rounded but float32 sums: the result is
// ``x @ dequantize()^T`` up to summation order (the int8 route also rounds x to 8 bits).
//
// ``bf16`` (only where the build targets AVX512_BF16: isa.py's ``bf16_products`` variants, else an
// error): the same blocking multiplies in bfloat16 pairs (panel_bf16.h's ``vdpbf16ps``, twice the
// multiply-adds an instruction where the CPU runs it at the FMA's rate): x is rounded to bfloat16
// (nearest even) before its transpose, the dequantized weight rows after their dequantization, and
// the sums stay float32. The result is then the product of the two rounded operands up to summation
// order (about half the int8 route's error against the exact product). Whether it is faster is the
// CPU's to say: kernels/quant_routes.py measures both forms.
//
// Blocking: weight rows go in groups of kRows (never across two weights), split between the threads;
// K in balanced blocks of about kMaxKBlock (rounded up to whole quantization blocks); x rows in chunks
// whose panels over one K block stay in L2 while every group of the thread passes over them.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/to.h>
#include <torch/library.h>

#include "ops_library.h"
#include "step_ops.h"

#include <algorithm>
#include <vector>

#include "gguf_dequant.h"
#include "gguf_parts.h"
#include "panel_bf16.h"
#include "panel_micro.h"
#include "vec_math.h"

namespace {

using ae::panel::kPanel;
using ae::panel::kRows;

constexpr int64_t kMaxKBlock = 512;          // K per dequantized block, about (whole quantization blocks)
constexpr int64_t kChunkBytes = 384 * 1024;  // x panels of one K block per chunk of rows (L2)

#if defined(AE_PANEL_BF16)
static_assert(ae::panel_bf16::kRows == kRows && ae::panel_bf16::kPanel == kPanel, "one group shape for both routes");
constexpr bool kBf16Products = true;
#else
constexpr bool kBf16Products = false;
#endif

using Part = ae::gguf::WidePart;

// kRows (or fewer, a weight's last) consecutive rows of one part.
struct Group {
  int32_t part;
  int64_t n0, n1;
};

#ifdef AE_AVX2
using ae::panel::Ahead;
using ae::panel::kMicro;

// x [M, K] as ceil(M / 16) panels [K, 16] of 16 rows each, rows past M zero: 8 x 8 blocks transposed
// in registers (K's last K % 8 columns one by one).
void transpose_to_panels(const float* x, int64_t m, int64_t k, float* xt) {
  const int64_t panels = (m + kPanel - 1) / kPanel;
  at::parallel_for(0, panels, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      float* dst = xt + p * k * kPanel;
      for (int64_t h = 0; h < kPanel; h += 8) {  // rows 16p + h .. + 7 into columns h .. h + 7 of the panel
        const float* src[8];
        for (int j = 0; j < 8; ++j) src[j] = p * kPanel + h + j < m ? x + (p * kPanel + h + j) * k : nullptr;
        int64_t c = 0;
        for (; c + 8 <= k; c += 8) {
          __m256 r[8];
          for (int j = 0; j < 8; ++j) r[j] = src[j] != nullptr ? _mm256_loadu_ps(src[j] + c) : _mm256_setzero_ps();
          ae::transpose8(r);
          for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + (c + i) * kPanel + h, r[i]);
        }
        for (; c < k; ++c)
          for (int j = 0; j < 8; ++j) dst[c * kPanel + h + j] = src[j] != nullptr ? src[j][c] : 0.f;
      }
    }
  });
}

// A thread's buffers: the dequantized rows of a group over one K block (float32, and for the bfloat16
// route those rows rounded), the group's outputs over a chunk of x rows.
struct Scratch {
  std::vector<float> w;
  std::vector<uint16_t> w16;
  std::vector<float> acc;
};

// The groups [g0, g1) for rows [m0, m0 + rows) of x: per group, every K block's dequantized rows times
// the chunk's panels into ``acc`` (group rows x chunk columns), then acc into out's columns. ``xt``: x
// as panels of float32 [K, 16], or for ``Bf16`` of bfloat16 pairs [K / 2, 16] (32-bit lanes).
template <bool Bf16>
void groups_over_chunk(const std::vector<Part>& parts, const std::vector<Group>& groups, int64_t g0, int64_t g1,
                       const float* xt, int64_t k, int64_t k_block, int64_t m0, int64_t rows, float* out,
                       int64_t ldo, Scratch& s) {
  const int64_t p_first = m0 / kPanel, p_count = (rows + kPanel - 1) / kPanel, ld = p_count * kPanel;
  constexpr int64_t per_lane = Bf16 ? 2 : 1;  // K values per 32-bit lane of a panel row
  const int64_t panel_stride = k / per_lane * kPanel;
  s.w.resize(kRows * k_block);
  s.acc.resize(kRows * ld);
  if constexpr (Bf16) s.w16.resize(kRows * k_block);
  for (int64_t g = g0; g < g1; ++g) {
    const Part& part = parts[groups[g].part];
    const int64_t wrows = groups[g].n1 - groups[g].n0;
    for (int64_t k0 = 0; k0 < k; k0 += k_block) {
      const int64_t k_len = std::min(k_block, k - k0);
      for (int64_t r = 0; r < wrows; ++r)
        ae::dequant::row_span(part.qtype, part.w + (groups[g].n0 + r) * part.stride, k0 / part.block,
                              (k0 + k_len) / part.block, s.w.data() + r * k_len);
#if defined(AE_PANEL_BF16)
      if constexpr (Bf16) ae::panel_bf16::round_row(s.w.data(), wrows * k_len, s.w16.data());
#endif
      for (int64_t p = 0; p < p_count;) {
        const float* panel = xt + (p_first + p) * panel_stride + k0 / per_lane * kPanel;
        const int64_t both = p + 1 < p_count ? 2 : 1;  // two panels (32 rows of x) a call where two are left
        float* acc = s.acc.data() + p * kPanel;
#if defined(AE_PANEL_BF16)
        if constexpr (Bf16) {
          const auto* lanes = reinterpret_cast<const uint32_t*>(panel);
          (both == 2 ? ae::panel_bf16::kMicro<2> : ae::panel_bf16::kMicro<1>)[wrows](
              s.w16.data(), k_len, k_len / 2, lanes, panel_stride, acc, ld, kPanel, ae::panel_bf16::Ahead{}, k0 > 0);
          p += both;
          continue;
        }
#endif
#if defined(AE_PANEL_AVX512)
        if (both == 2) {
          ae::panel::kMicro2<float>[wrows](s.w.data(), k_len, k_len, panel, panel_stride, acc, ld, kPanel,
                                           Ahead<float>{}, k0 > 0);
          p += 2;
          continue;
        }
#endif
        kMicro<float>[wrows](s.w.data(), k_len, k_len, panel, acc, ld, kPanel, Ahead<float>{}, k0 > 0);
        ++p;
      }
    }
    float* dst = out + m0 * ldo + part.col + groups[g].n0;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t r = 0; r < wrows; ++r) dst[i * ldo + r] = s.acc[r * ld + i];
  }
}
#endif

}  // namespace

// The ops, callable from this library's other sources (step_ops.h).
namespace AE_OPS_NS {

void gguf_linear_wide(at::Tensor out, const at::Tensor& x, at::TensorList raws, at::IntArrayRef qtypes, bool bf16) {
  TORCH_CHECK(!bf16 || kBf16Products, "gguf_linear_wide: bf16 products need a build for AVX512_BF16 (this one is not)");
  const std::vector<Part> parts = ae::gguf::wide_parts("gguf_linear_wide", out, x, raws, qtypes);
  const int64_t m = x.size(0), k = x.size(1), col = out.size(1);
  if (m == 0 || col == 0) return;
#ifdef AE_AVX2
  std::vector<Group> groups;
  for (size_t i = 0; i < parts.size(); ++i)
    for (int64_t n0 = 0; n0 < parts[i].rows; n0 += kRows)
      groups.push_back({static_cast<int32_t>(i), n0, std::min(parts[i].rows, n0 + kRows)});
  // K blocks: balanced, about kMaxKBlock at most, of whole quantization blocks of every part (32 or
  // 256 weights; 32 divides 256). Rows: balanced chunks of whole panels whose x panels over one K block
  // take about kChunkBytes.
  int64_t quantum = 32;
  for (const Part& p : parts) quantum = std::max(quantum, p.block);
  const int64_t k_blocks = (k + kMaxKBlock - 1) / kMaxKBlock;
  const int64_t k_block = ((k + k_blocks - 1) / k_blocks + quantum - 1) / quantum * quantum;
  const int64_t max_chunk = std::max<int64_t>(2 * kPanel, kChunkBytes / (bf16 ? 2 : 4) / k_block);
  const int64_t n_chunks = (m + max_chunk - 1) / max_chunk;
  const int64_t chunk = ((m + n_chunks - 1) / n_chunks + kPanel - 1) / kPanel * kPanel;
  // x as panels: float32 values, or bfloat16 pairs (x rounded, then its [M, K / 2] 32-bit pairs
  // transposed like floats: the transpose only moves bits).
  const at::Tensor xr = bf16 ? x.to(at::kBFloat16) : x;
  const int64_t lanes = bf16 ? k / 2 : k;
  at::Tensor xt = at::empty({(m + kPanel - 1) / kPanel * kPanel * lanes}, x.options());
  transpose_to_panels(static_cast<const float*>(xr.const_data_ptr()), m, lanes, xt.data_ptr<float>());
  const float* xtp = xt.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const int64_t ldo = out.stride(0);
  at::parallel_for(0, static_cast<int64_t>(groups.size()), 1, [&](int64_t g0, int64_t g1) {
    thread_local Scratch scratch;
    for (int64_t m0 = 0; m0 < m; m0 += chunk) {
      const int64_t rows = std::min(chunk, m - m0);
      if (bf16) groups_over_chunk<true>(parts, groups, g0, g1, xtp, k, k_block, m0, rows, op, ldo, scratch);
      else groups_over_chunk<false>(parts, groups, g0, g1, xtp, k, k_block, m0, rows, op, ldo, scratch);
    }
  });
#else
  // No AVX2 on the build machine: the dequantized weights through ATen.
  for (const Part& p : parts) {
    at::Tensor w = at::empty({p.rows, k}, x.options());
    float* wp = w.data_ptr<float>();
    for (int64_t n = 0; n < p.rows; ++n) ae::dequant::row_span(p.qtype, p.w + n * p.stride, 0, k / p.block, wp + n * k);
    out.narrow(1, p.col, p.rows).copy_(at::mm(x, w.t()));
  }
#endif
}

}  // namespace AE_OPS_NS

AE_LIBRARY_IMPL(m) { m.impl("gguf_linear_wide", &AE_OPS_NS::gguf_linear_wide); }
