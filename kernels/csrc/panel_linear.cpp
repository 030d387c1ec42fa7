// ``agent_engine::panel_linear``: out[M, N] = x[M, K] @ w[N, K]^T on a weight packed in column panels
// (float32, AVX2), for the tens of rows of a busy decode step or a short prompt chunk.
// Registered here, declared in cpu_ops.cpp.
//
// Layout: ``panels`` is [ceil(N / 16), K, 16]: panel p holds output columns 16p .. 16p + 15, one row
// of 16 weights per k (columns past N are zero). The micro-kernel keeps a 6 x 16 block of the output
// in twelve accumulator registers while it walks K: per k, two loads of the panel row, six
// broadcasts of x and twelve FMAs, so the FMA units, not memory, set the pace. Panels are split
// between the threads; rows go in chunks small enough that a chunk of x stays in L2 while every
// panel of the thread passes over it, each panel read from memory once per chunk (once in all for
// a decode step's rows).
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/mm.h>
#include <torch/library.h>

#include <algorithm>

#include "vec_math.h"

namespace {

constexpr int64_t kPanel = 16;  // output columns per panel: two AVX2 registers
constexpr int64_t kRows = 6;    // output rows per micro-kernel call: 12 accumulators + 2 + 1 registers

#ifdef AE_AVX2
// out rows [0, R) x panel columns [0, cols): x is R rows of stride k_dim, panel is [K, 16].
template <int R>
inline void micro(const float* x, int64_t k_dim, const float* panel, float* out, int64_t n_dim, int64_t cols) {
  __m256 acc0[R], acc1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
#pragma GCC unroll 2
  for (int64_t k = 0; k < k_dim; ++k) {
    const __m256 b0 = _mm256_loadu_ps(panel + k * kPanel);
    const __m256 b1 = _mm256_loadu_ps(panel + k * kPanel + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(x + r * k_dim + k);
      acc0[r] = _mm256_fmadd_ps(a, b0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(a, b1, acc1[r]);
    }
  }
  // Every loop over r is unrolled, so the accumulators live in registers (an indexed access would
  // put the arrays on the stack, stored on every k).
  alignas(32) float tail[R][kPanel];
  const bool full = cols == kPanel;
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    float* dst = full ? out + r * n_dim : tail[r];
    _mm256_storeu_ps(dst, acc0[r]);
    _mm256_storeu_ps(dst + 8, acc1[r]);
  }
  if (!full) {  // the last panel of an N that is not a multiple of 16
    for (int r = 0; r < R; ++r) std::copy(tail[r], tail[r] + cols, out + r * n_dim);
  }
}

using MicroFn = void (*)(const float*, int64_t, const float*, float*, int64_t, int64_t);
constexpr MicroFn kMicro[kRows + 1] = {nullptr, micro<1>, micro<2>, micro<3>, micro<4>, micro<5>, micro<6>};
#endif

void panel_linear(at::Tensor out, const at::Tensor& x, const at::Tensor& panels) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && panels.scalar_type() == at::kFloat &&
                  out.scalar_type() == at::kFloat, "panel_linear is float32 only");
  TORCH_CHECK(x.dim() == 2 && panels.dim() == 3 && out.dim() == 2 && x.is_contiguous() &&
                  panels.is_contiguous() && out.is_contiguous(), "panel_linear needs contiguous tensors");
  const int64_t m_dim = x.size(0), k_dim = x.size(1), n_dim = out.size(1), n_panels = panels.size(0);
  TORCH_CHECK(panels.size(1) == k_dim && panels.size(2) == kPanel && out.size(0) == m_dim &&
                  (n_dim + kPanel - 1) / kPanel == n_panels, "panel_linear: bad shapes");
  if (m_dim == 0 || n_dim == 0) return;
  if (k_dim == 0) {  // an empty sum
    out.zero_();
    return;
  }
#ifdef AE_AVX2
  const float* xp = x.data_ptr<float>();
  const float* pp = panels.data_ptr<float>();
  float* op = out.data_ptr<float>();
  // Rows go in balanced chunks whose x (rows x K floats) takes at most ~256 KiB of L2, and within a
  // chunk in balanced blocks of at most six rows (32 rows: 6+6+5+5+5+5, never a lone 2-row block).
  const int64_t max_chunk = std::max<int64_t>(kRows, 256 * 1024 / 4 / k_dim);
  const int64_t n_chunks = (m_dim + max_chunk - 1) / max_chunk;
  const int64_t chunk = (m_dim + n_chunks - 1) / n_chunks;
  // Panels go in groups that stay in L2 while each block of rows (in L1) passes over all of them.
  const int64_t group = std::max<int64_t>(1, 128 * 1024 / 4 / (k_dim * kPanel));
  at::parallel_for(0, n_panels, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t m0 = 0; m0 < m_dim; m0 += chunk) {
      const int64_t rows_here = std::min(chunk, m_dim - m0);
      const int64_t blocks = (rows_here + kRows - 1) / kRows;
      for (int64_t g = p0; g < p1; g += group) {
        const int64_t g1 = std::min(p1, g + group);
        for (int64_t b = 0, m = m0; b < blocks; ++b) {
          const int64_t rows = rows_here / blocks + (b < rows_here % blocks ? 1 : 0);
          for (int64_t p = g; p < g1; ++p) {
            kMicro[rows](xp + m * k_dim, k_dim, pp + p * k_dim * kPanel, op + m * n_dim + p * kPanel, n_dim,
                         std::min(kPanel, n_dim - p * kPanel));
          }
          m += rows;
        }
      }
    }
  });
#else
  // No AVX2 on the build machine: the same product through ATen (panels back to [N, K]).
  out.copy_(at::mm(x, panels.permute({1, 0, 2}).reshape({k_dim, n_panels * kPanel}).narrow(1, 0, n_dim)));
#endif
}

}  // namespace

TORCH_LIBRARY_IMPL(agent_engine, CPU, m) { m.impl("panel_linear", &panel_linear); }
