// CPU kernels of the engine's decoder step, registered as torch ops ``agent_engine::*`` (the
// elementwise ones here; paged attention in paged_attention.cpp, the second tier's block copies in
// kv_tier_copy.cpp).
//
// Built at first use by kernels/cpp_build.py (the system g++, torch's headers); every op has a torch
// fallback in kernels/cpu_ops.py with the same contract, which the tests compare against.
//
// Layouts (see kernels/kv_cache.py and kernels/attention_metadata.py):
//   k_cache, v_cache: [num_blocks, block_size, Hk, D], contiguous; block 0 is the null block.
//   query: [T, Hq, D] with any row stride (rows may be views into a fused QKV projection); the last
//   two dims must be packed (head stride D, element stride 1).
//   block_tables int32 [B, max_blocks]; query_start_loc int32 [B + 1]; seq_lens int32 [B].
// Query row t of request i sits at position seq_lens[i] - (query_start_loc[i+1] - t) and attends to
// every key position <= its own (causal inside the request). Math is in float32 whatever the dtype.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "ops_library.h"
#include "step_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "vec_math.h"

namespace {

// Elements of elementwise work below which an op stays on the calling thread: waking the pool costs
// more than it saves on small batches (and far more when the cores are oversubscribed).
constexpr int64_t kParallelElems = 1 << 15;

inline int64_t grain_rows(int64_t row_elems) {
  return std::max<int64_t>(1, kParallelElems / std::max<int64_t>(1, row_elems));
}

// residual += delta (when given); out = rms_norm(residual) * weight. Rows in parallel.
template <typename T>
void rms_norm_rows(T* out, T* residual, const T* delta, const T* weight, int64_t rows, int64_t h,
                   float eps) {
  at::parallel_for(0, rows, grain_rows(h), [&](int64_t begin, int64_t end) {
    std::vector<float> x(h);
    for (int64_t r = begin; r < end; ++r) {
      T* res = residual + r * h;
      // The sum of squares in vector lanes (as torch's own reduction), not one add after another: a
      // serial sum waits on each add's latency, which made this op cost as much as a small matmul.
      float ss = 0.f;
      if (delta != nullptr) {
        const T* d = delta + r * h;
#pragma omp simd reduction(+ : ss)
        for (int64_t c = 0; c < h; ++c) {
          const float v = static_cast<float>(static_cast<T>(static_cast<float>(res[c]) + static_cast<float>(d[c])));
          res[c] = static_cast<T>(v);
          x[c] = v;
          ss += v * v;
        }
      } else {
#pragma omp simd reduction(+ : ss)
        for (int64_t c = 0; c < h; ++c) {
          const float v = static_cast<float>(res[c]);
          x[c] = v;
          ss += v * v;
        }
      }
      const float inv = 1.f / std::sqrt(ss / static_cast<float>(h) + eps);
      T* o = out + r * h;
#pragma omp simd
      for (int64_t c = 0; c < h; ++c) o[c] = static_cast<T>(static_cast<float>(weight[c]) *
                                                             static_cast<float>(static_cast<T>(x[c] * inv)));
    }
  });
}

}  // namespace

namespace AE_OPS_NS {  // the ops, callable from this library's other sources (step_ops.h)

void rms_norm(at::Tensor out, at::Tensor residual, const std::optional<at::Tensor>& delta,
              const at::Tensor& weight, double eps) {
  TORCH_CHECK(out.is_contiguous() && residual.is_contiguous() && weight.is_contiguous(),
              "rms_norm needs contiguous tensors");
  TORCH_CHECK(!delta.has_value() || delta->is_contiguous(), "delta must be contiguous");
  const int64_t h = residual.size(-1), rows = residual.numel() / h;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, residual.scalar_type(), "rms_norm", [&] {
    rms_norm_rows<scalar_t>(out.data_ptr<scalar_t>(), residual.data_ptr<scalar_t>(),
                            delta.has_value() ? delta->data_ptr<scalar_t>() : nullptr,
                            weight.data_ptr<scalar_t>(), rows, h, static_cast<float>(eps));
  });
}

}  // namespace AE_OPS_NS

namespace {

template <typename T>
void silu_mul_row(T* out, const T* g, int64_t inter) {
  const T* u = g + inter;
  for (int64_t c = 0; c < inter; ++c) {
    const float gv = static_cast<float>(g[c]);
    const T act = static_cast<T>(gv / (1.f + std::exp(-gv)));
    out[c] = static_cast<T>(static_cast<float>(act) * static_cast<float>(u[c]));
  }
}

template <>
void silu_mul_row<float>(float* out, const float* g, int64_t inter) {
  ae::silu_mul_row(out, g, g + inter, inter);
}

}  // namespace

namespace AE_OPS_NS {  // the ops, callable from this library's other sources (step_ops.h)

// out[T, I] = silu(gate_up[:, :I]) * gate_up[:, I:].
void silu_and_mul(at::Tensor out, const at::Tensor& gate_up) {
  TORCH_CHECK(out.is_contiguous() && gate_up.is_contiguous(), "silu_and_mul needs contiguous tensors");
  const int64_t inter = out.size(-1), rows = out.numel() / inter;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, out.scalar_type(), "silu_and_mul", [&] {
    scalar_t* o = out.data_ptr<scalar_t>();
    const scalar_t* gu = gate_up.data_ptr<scalar_t>();
    at::parallel_for(0, rows, grain_rows(2 * inter), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) silu_mul_row(o + r * inter, gu + r * 2 * inter, inter);
    });
  });
}

}  // namespace AE_OPS_NS

namespace {

// Row ``src`` (n values) into a cache row: the same type, or float32 rounded to bfloat16 (to nearest even).
template <typename T, typename C>
inline void to_cache(const T* src, int64_t n, C* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<C>(static_cast<float>(src[i]));
}

template <typename T>
inline void to_cache(const T* src, int64_t n, T* dst) {
  std::copy(src, src + n, dst);
}

// In place on qkv [T, (Hq + 2 Hk) * D]: rotate q and k (HF rotate_half convention with cos/sin
// [T, D]); then write k and v of token t to slot slot_mapping[t] of the caches (in qkv's dtype, or
// bfloat16 caches under a float32 qkv).
template <typename T, typename C>
void rotate_and_write(at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, at::Tensor& k_cache,
                      at::Tensor& v_cache, const int64_t* slots, int64_t hq, int64_t hk, int64_t d) {
  const int64_t tokens = qkv.size(0), half = d / 2;
  T* base = qkv.data_ptr<T>();
  const T* cs = cos.data_ptr<T>();
  const T* sn = sin.data_ptr<T>();
  C* kc = k_cache.data_ptr<C>();
  C* vc = v_cache.data_ptr<C>();
  at::parallel_for(0, tokens, grain_rows((hq + 2 * hk) * d), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      T* row = base + t * (hq + 2 * hk) * d;
      const T* c = cs + t * d;
      const T* s = sn + t * d;
      for (int64_t h = 0; h < hq + hk; ++h) {
        T* x = row + h * d;
        for (int64_t i = 0; i < half; ++i) {
          const T a = x[i], b = x[i + half];
          // HF: x * cos + rotate_half(x) * sin, each product rounded to the dtype.
          x[i] = static_cast<T>(static_cast<T>(a * c[i]) + static_cast<T>(-b * s[i]));
          x[i + half] = static_cast<T>(static_cast<T>(b * c[i + half]) + static_cast<T>(a * s[i + half]));
        }
      }
      const int64_t dst = slots[t] * hk * d;
      to_cache(row + hq * d, hk * d, kc + dst);
      to_cache(row + (hq + hk) * d, hk * d, vc + dst);
    }
  });
}

}  // namespace

namespace AE_OPS_NS {  // the ops, callable from this library's other sources (step_ops.h)

void rotary_and_cache(at::Tensor qkv, const at::Tensor& cos, const at::Tensor& sin, at::Tensor k_cache,
                      at::Tensor v_cache, const at::Tensor& slot_mapping, int64_t hq, int64_t hk) {
  TORCH_CHECK(qkv.is_contiguous() && cos.is_contiguous() && sin.is_contiguous(), "contiguous inputs");
  TORCH_CHECK(slot_mapping.scalar_type() == at::kLong, "slot_mapping must be int64");
  const int64_t d = k_cache.size(3);
  TORCH_CHECK(qkv.size(1) == (hq + 2 * hk) * d && cos.size(-1) == d, "bad qkv / rotary shapes");
  const bool bf16_cache = qkv.scalar_type() == at::kFloat && k_cache.scalar_type() == at::kBFloat16;
  TORCH_CHECK((k_cache.scalar_type() == qkv.scalar_type() || bf16_cache) &&
                  v_cache.scalar_type() == k_cache.scalar_type(),
              "rotary_and_cache: the caches share qkv's dtype, or are bfloat16 under a float32 qkv");
  const auto slots_t = slot_mapping.contiguous();
  const int64_t* slots = slots_t.data_ptr<int64_t>();
  if (bf16_cache) {
    rotate_and_write<float, at::BFloat16>(qkv, cos, sin, k_cache, v_cache, slots, hq, hk, d);
    return;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, qkv.scalar_type(), "rotary_and_cache", [&] {
    rotate_and_write<scalar_t, scalar_t>(qkv, cos, sin, k_cache, v_cache, slots, hq, hk, d);
  });
}

}  // namespace AE_OPS_NS

AE_LIBRARY(m) {
  m.def("paged_attention(Tensor(a!) out, Tensor query, Tensor k_cache, Tensor v_cache, Tensor block_tables, "
        "Tensor query_start_loc, Tensor seq_lens, Tensor req_indices, float scale) -> ()");
  m.def("rms_norm(Tensor(a!) out, Tensor(b!) residual, Tensor? delta, Tensor weight, float eps) -> ()");
  m.def("silu_and_mul(Tensor(a!) out, Tensor gate_up) -> ()");
  m.def("small_linear(Tensor(a!) out, Tensor x, Tensor w) -> ()");
  m.def("panel_linear(Tensor(a!) out, Tensor x, Tensor panels) -> ()");
  m.def("panel_linear_silu(Tensor(a!) out, Tensor x, Tensor panels) -> ()");
  m.def("gguf_linear_int8(Tensor(a!) out, Tensor x, Tensor[] raws, int[] qtypes) -> ()");
  m.def("gguf_linear_wide(Tensor(a!) out, Tensor x, Tensor[] raws, int[] qtypes, bool bf16=False) -> ()");
  m.def("tiles_built() -> bool", &AE_OPS_NS::tiles_built);  // no tensor to dispatch on: one kernel for all
  m.def("panel_linear_tiles(Tensor(a!) out, Tensor x, Tensor panels, bool silu=False, bool emulate=False) -> ()");
  m.def("gguf_linear_tiles(Tensor(a!) out, Tensor x, Tensor[] raws, int[] qtypes, bool emulate=False) -> ()");
  m.def("gguf_dequantize(Tensor(a!) out, Tensor raw, int qtype) -> ()");
  m.def("rotary_and_cache(Tensor(a!) qkv, Tensor cos, Tensor sin, Tensor(b!) k_cache, Tensor(c!) v_cache, "
        "Tensor slot_mapping, int hq, int hk) -> ()");
  m.def("decoder_layers(Tensor(a!) residual, Tensor(b!) delta, Tensor(c!) h, Tensor(d!) qkv, Tensor(e!) attn, "
        "Tensor(f!) gate_up, Tensor(g!) act, Tensor[] norms, float[] eps, Tensor?[] qkv_bias, Tensor[] weights, "
        "int[] qtypes, int[] plan, Tensor cos, Tensor sin, Tensor(h!)[] k_caches, Tensor(i!)[] v_caches, "
        "Tensor slot_mapping, Tensor block_tables, Tensor query_start_loc, Tensor seq_lens, Tensor req_indices, "
        "float scale, int hq, int hk) -> ()");
  m.def("kv_tier_copy(Tensor(a!)[] pool, Tensor(b!)[] store, Tensor(c!)[] scales, int[] src, int[] dst, "
        "bool save) -> ()");
}

AE_LIBRARY_IMPL(m) {
  m.impl("rms_norm", &AE_OPS_NS::rms_norm);
  m.impl("silu_and_mul", &AE_OPS_NS::silu_and_mul);
  m.impl("rotary_and_cache", &AE_OPS_NS::rotary_and_cache);
}
