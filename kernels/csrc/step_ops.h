// The step's kernels as plain C++ functions, for sources of this library that chain them
// (decoder_layers.cpp) without a trip through Python and the dispatcher per call. Each is also a
// torch op (cpu_ops.cpp defines the schemas); they live in the variant's namespace so that variants
// loaded side by side keep their own.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "ops_library.h"

namespace AE_OPS_NS {

void rms_norm(at::Tensor out, at::Tensor residual, const std::optional<at::Tensor>& delta,
              const at::Tensor& weight, double eps);
void silu_and_mul(at::Tensor out, const at::Tensor& gate_up);
void rotary_and_cache(at::Tensor qkv, const at::Tensor& cos, const at::Tensor& sin, at::Tensor k_cache,
                      at::Tensor v_cache, const at::Tensor& slot_mapping, int64_t hq, int64_t hk);
void paged_attention(at::Tensor out, const at::Tensor& query, const at::Tensor& k_cache,
                     const at::Tensor& v_cache, const at::Tensor& block_tables,
                     const at::Tensor& query_start_loc, const at::Tensor& seq_lens,
                     const at::Tensor& req_indices, double scale);
void panel_linear(at::Tensor out, const at::Tensor& x, const at::Tensor& panels);
void panel_linear_silu(at::Tensor out, const at::Tensor& x, const at::Tensor& panels);
void gguf_linear_int8(at::Tensor out, const at::Tensor& x, at::TensorList raws, at::IntArrayRef qtypes);
void gguf_linear_wide(at::Tensor out, const at::Tensor& x, at::TensorList raws, at::IntArrayRef qtypes, bool bf16);
bool tiles_built();
void panel_linear_tiles(at::Tensor out, const at::Tensor& x, const at::Tensor& panels, bool silu, bool emulate);
void gguf_linear_tiles(at::Tensor out, const at::Tensor& x, at::TensorList raws, at::IntArrayRef qtypes,
                       bool emulate);

}  // namespace AE_OPS_NS
