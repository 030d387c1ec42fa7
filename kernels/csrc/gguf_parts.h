// The weights of a fused matmul on GGUF blocks, as the wide-step kernels (gguf_wide.cpp,
// gguf_tiles.cpp) take them: each part's blocks, GGML type, rows and first output column, checked
// against x and out once per call.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "gguf_blocks.h"

namespace ae::gguf {

// One weight of the fused product: its blocks (rows ``stride`` bytes apart), type, rows, first
// output column and weights per quantization block.
struct WidePart {
  const uint8_t* w;
  int64_t stride, rows, qtype, col, block;
};

// ``raws`` (uint8 [N_i, row_bytes], contiguous rows) of ``qtypes`` as parts, after checking x (float32
// [M, K], contiguous) and out (float32 [M, sum N_i], unit column stride): a failed check raises,
// naming ``op``.
inline std::vector<WidePart> wide_parts(const char* op, const at::Tensor& out, const at::Tensor& x,
                                        at::TensorList raws, at::IntArrayRef qtypes) {
  TORCH_CHECK(raws.size() == qtypes.size() && !raws.empty(), op, ": one GGML type per weight");
  TORCH_CHECK(x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat && x.dim() == 2 && out.dim() == 2 &&
                  x.is_contiguous() && out.stride(1) == 1 && out.stride(0) >= out.size(1) && out.size(0) == x.size(0),
              op, ": contiguous float32 x [M, K], float32 out [M, N] with unit column stride");
  const int64_t k = x.size(1);
  std::vector<WidePart> parts;
  int64_t col = 0;
  for (size_t i = 0; i < raws.size(); ++i) {
    const at::Tensor& raw = raws[i];
    TORCH_CHECK(raw.scalar_type() == at::kByte && raw.dim() == 2 && (raw.size(0) == 0 || raw.stride(1) == 1), op,
                ": raw blocks are uint8 [N, row_bytes] with contiguous rows");
    int64_t block = 0, bytes = 0;
    TORCH_CHECK(with_block_type(qtypes[i], [&]<class T>() { block = T::kBlock, bytes = T::kBytes; }), op,
                ": no decoder for GGML type ", qtypes[i]);
    TORCH_CHECK(k % block == 0 && raw.size(1) == k / block * bytes, op, ": rows of ", raw.size(1),
                " bytes do not hold K=", k);
    parts.push_back({raw.data_ptr<uint8_t>(), raw.stride(0), raw.size(0), qtypes[i], col, block});
    col += raw.size(0);
  }
  TORCH_CHECK(col == out.size(1), op, ": the weights have ", col, " rows, out ", out.size(1), " columns");
  return parts;
}

}  // namespace ae::gguf
