// ``agent_engine::small_linear``: out[M, N] = x[M, K] @ w[N, K]^T for the few rows of a decode step
// (float32, AVX2). Registered here, declared in cpu_ops.cpp.
//
// A decode step's matmuls have few rows (one per running request) and weights far larger than the
// caches: they are bound by how fast the weights stream in from memory. Each weight row is read once
// (from memory, then from L1 for every further group of eight input rows) and multiplied into up to
// eight input rows at a time, one accumulator register per input row and one transposing reduction
// per (weight row, group). Output columns are split between the threads.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/mm.h>
#include <torch/library.h>

#include "ops_library.h"

#include <algorithm>

#include "attend_f32.h"
#include "vec_math.h"

namespace {

#ifdef AE_AVX2
// The eight (or fewer: ``rows``) dot products of weight row ``wr`` with input rows x[0..rows).
inline __m256 dots8(const float* wr, const float* x, int64_t k_dim, int64_t rows) {
  __m256 a[8];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) a[r] = _mm256_setzero_ps();
  if (rows == 8) {
    for (int64_t k = 0; k < k_dim; k += 8) {
      const __m256 wv = _mm256_loadu_ps(wr + k);
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) a[r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + r * k_dim + k), a[r]);
    }
  } else {
    for (int64_t k = 0; k < k_dim; k += 8) {
      const __m256 wv = _mm256_loadu_ps(wr + k);
      for (int r = 0; r < rows; ++r) a[r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + r * k_dim + k), a[r]);
    }
  }
  return ae::transpose_sum8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
}
#endif

void small_linear(at::Tensor out, const at::Tensor& x, const at::Tensor& w) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && w.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat,
              "small_linear is float32 only");
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && out.dim() == 2 && x.is_contiguous() && w.is_contiguous() &&
                  out.is_contiguous(), "small_linear needs contiguous 2-D tensors");
  const int64_t m_dim = x.size(0), k_dim = x.size(1), n_dim = w.size(0);
  TORCH_CHECK(w.size(1) == k_dim && out.size(0) == m_dim && out.size(1) == n_dim, "small_linear: bad shapes");
  TORCH_CHECK(k_dim % 8 == 0, "small_linear needs K % 8 == 0");
#ifdef AE_AVX2
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* op = out.data_ptr<float>();
  // Enough weight rows per task that each thread streams a long run of memory.
  const int64_t grain = std::max<int64_t>(16, (1 << 16) / k_dim);
  at::parallel_for(0, n_dim, grain, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* wr = wp + n * k_dim;
      for (int64_t m0 = 0; m0 < m_dim; m0 += 8) {
        const int64_t rows = std::min<int64_t>(8, m_dim - m0);
        alignas(32) float sums[8];
        _mm256_store_ps(sums, dots8(wr, xp + m0 * k_dim, k_dim, rows));
        for (int64_t r = 0; r < rows; ++r) op[(m0 + r) * n_dim + n] = sums[r];
      }
    }
  });
#else
  out.copy_(at::mm(x, w.t()));  // no AVX2 on the build machine: the same result through ATen
#endif
}

}  // namespace

AE_LIBRARY_IMPL(m) { m.impl("small_linear", &small_linear); }
