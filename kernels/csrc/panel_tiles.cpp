// ``agent_engine::panel_linear_tiles(out, x, panels, silu, emulate)``: the matmul of a bfloat16 weight's
// K-pair panels (prepack.py: [ceil(N / 16), K / 2, 32], lane 2c + j of pair row kp holding column 16p +
// c's weight at k 2kp + j) in AMX tiles: out[M, N] = x[M, K] @ W^T, or with ``silu`` (a fused gate/up
// weight whose panels are interleaved, prepack.pack_gate_up: panel 2j gate columns 16j .., 2j + 1 the
// same up columns) out[M, I] = silu(x @ gate^T) * (x @ up^T), the gate/up product never written.
//
// The pair panels are TDPBF16PS's B operand as they lie (16 pair rows, 32 of K, are one tile's 1 KB):
// nothing is packed or copied per call, K must be a multiple of 32. Blocks of 32 output columns (two
// panels; for ``silu`` a gate panel and its up panel) go to the threads; x is rounded to bfloat16 once
// (tile_blocks.h), and each block's C tiles accumulate over K (in blocks that keep a chunk of x's rows
// in L2) before its outputs are written, or its 16 activations a row. The result is the product
// panel_linear's pair route computes (x rounded to bfloat16, float32 sums) up to summation order.
//
// ``emulate`` and the refusal without granted tiles: gguf_tiles.cpp's. Only a build for AVX512_BF16
// has the op; others raise.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "ops_library.h"
#include "step_ops.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "amx_tiles.h"
#include "tile_blocks.h"
#include "vec_math.h"

namespace {

#if defined(AE_AMX)
using ae::tiles::kBlockRows;
using ae::tiles::kGroupRows;
using ae::tiles::kTileK;

constexpr int64_t kMaxKBlock = 2048;         // K per block (the panels need no dequantizing: longer runs)
constexpr int64_t kChunkBytes = 512 * 1024;  // bfloat16 x rows of one K block per chunk of rows (L2)

// The thread's column blocks [g0, g1) over every chunk of x rows, on ``Tiles``: block g is panels 2g
// and 2g + 1 (``zeros`` standing in for a missing last one).
template <class Tiles>
void run_panels(int64_t g0, int64_t g1, const uint16_t* xb, int64_t m, int64_t k, ae::tiles::Blocking bl,
                const uint16_t* pp, int64_t n_panels, const uint16_t* zeros, bool silu, float* out, int64_t n) {
  const int64_t panel = k / 2 * 32;  // bfloat16 per panel
  ae::tiles::run_blocks<Tiles>(
      g0, g1, xb, m, k, bl,
      [&](int64_t g, int64_t k0, int64_t) {
        const uint16_t* first = pp + 2 * g * panel + k0 / 2 * 32;
        const uint16_t* second = 2 * g + 1 < n_panels ? first + panel : zeros;
        return ae::tiles::PanelPair{first, second};
      },
      [&](int64_t g, int64_t m0, int64_t rows, const float* acc) {
        if (silu) {  // columns 0 .. 15 gate, 16 .. 31 up: 16 activations a row
          for (int64_t i = 0; i < rows; ++i)
            ae::silu_mul_row(out + (m0 + i) * n + 16 * g, acc + i * kGroupRows, acc + i * kGroupRows + 16, 16);
          return;
        }
        const int64_t cols = std::min<int64_t>(kGroupRows, n - kGroupRows * g);
        for (int64_t i = 0; i < rows; ++i)
          std::memcpy(out + (m0 + i) * n + kGroupRows * g, acc + i * kGroupRows, cols * sizeof(float));
      });
}
#endif

}  // namespace

namespace AE_OPS_NS {

void panel_linear_tiles(at::Tensor out, const at::Tensor& x, const at::Tensor& panels, bool silu, bool emulate) {
#if defined(AE_AMX)
  TORCH_CHECK(x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat &&
                  panels.scalar_type() == at::kBFloat16 && x.dim() == 2 && out.dim() == 2 && panels.dim() == 3 &&
                  x.is_contiguous() && out.is_contiguous() && panels.is_contiguous(),
              "panel_linear_tiles: contiguous float32 x and out, bfloat16 pair panels");
  const int64_t m = x.size(0), k = x.size(1), n = out.size(1), n_panels = panels.size(0);
  TORCH_CHECK(k % kTileK == 0 && panels.size(1) == k / 2 && panels.size(2) == 32,
              "panel_linear_tiles: pair panels [P, K / 2, 32] with K a multiple of 32, got ",
              panels.sizes(), " for K=", k);
  TORCH_CHECK(out.size(0) == m && (silu ? n_panels == 2 * ((n + 15) / 16) && n % 16 == 0
                                        : (n + 15) / 16 == n_panels),
              "panel_linear_tiles: ", n_panels, " panels do not give ", n, silu ? " activations" : " columns");
  TORCH_CHECK(emulate || ae::tiles::granted(), "panel_linear_tiles: this CPU has no AMX-BF16 tiles granted to "
              "this process (kernels/amx.py asks Linux for them)");
  if (m == 0 || n == 0) return;
  const ae::tiles::Blocking bl = ae::tiles::blocking(m, k, kTileK, kMaxKBlock, kChunkBytes);
  const at::Tensor xb = ae::tiles::rounded_rows(x, (m + kBlockRows - 1) / kBlockRows * kBlockRows);
  const auto* xbp = reinterpret_cast<const uint16_t*>(xb.const_data_ptr());
  const auto* pp = reinterpret_cast<const uint16_t*>(panels.const_data_ptr());
  const std::vector<uint16_t> zeros(n_panels % 2 ? k / 2 * 32 : 0, 0);
  float* op = out.data_ptr<float>();
  at::parallel_for(0, (n_panels + 1) / 2, 1, [&](int64_t g0, int64_t g1) {
    if (emulate) run_panels<ae::amx::Emulated>(g0, g1, xbp, m, k, bl, pp, n_panels, zeros.data(), silu, op, n);
    else run_panels<ae::amx::Hardware>(g0, g1, xbp, m, k, bl, pp, n_panels, zeros.data(), silu, op, n);
  });
#else
  TORCH_CHECK(false, "panel_linear_tiles: this build has no AMX tiles (they need a build for AVX512_BF16 by a "
              "compiler that knows AMX)");
#endif
}

}  // namespace AE_OPS_NS

AE_LIBRARY_IMPL(m) { m.impl("panel_linear_tiles", &AE_OPS_NS::panel_linear_tiles); }
