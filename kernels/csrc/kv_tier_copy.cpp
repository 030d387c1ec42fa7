// ``agent_engine::kv_tier_copy``: whole KV blocks between the pool and the second tier's host store,
// every layer's K and V in one call (registered here, declared in cpu_ops.cpp).
//
// pool:   2L tensors [num_blocks, block_size, Hk, D] (K0, V0, K1, V1, ...), float32 or bfloat16.
// store:  2L tensors [num_slots, block_size, Hk, D]: the pool's dtype (a byte copy), bfloat16 (from a
//         float32 pool: round to nearest even, as torch's cast) or int8 (from a float32 or bfloat16 pool:
//         symmetric, one float32 scale per (slot, head) in ``scales`` [num_slots, Hk]: scale =
//         max(absmax, 1e-8) / 127 over the values as float32, q = round_half_even(x / scale) clamped to
//         [-127, 127]; back: q * scale in float32, then the pool's dtype, rounded to nearest even). These
//         are the torch fallback's formulas in kernels/kv_offload.py, so both give bit-identical stores.
// save:   block src[i] -> slot dst[i]; else slot src[i] -> block dst[i]. Destinations are distinct (the
//         caller keeps the last of repeated ones), so the (tensor, pair) items run in parallel.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <torch/library.h>

#include "ops_library.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

constexpr float kRoundMagic = 12582912.f;  // 1.5 * 2^23

// P: the pool's element, float or c10::BFloat16 (widened exactly to float32 before anything else).
template <typename P>
void quantize_block(const P* x, int8_t* q, float* scales, int64_t bs, int64_t heads, int64_t dim) {
  for (int64_t h = 0; h < heads; ++h) {
    float absmax = 0.f;
    for (int64_t t = 0; t < bs; ++t) {
      const P* row = x + (t * heads + h) * dim;
      for (int64_t d = 0; d < dim; ++d) absmax = std::max(absmax, std::fabs(static_cast<float>(row[d])));
    }
    const float scale = std::max(absmax, 1e-8f) / 127.f;
    scales[h] = scale;
    for (int64_t t = 0; t < bs; ++t) {
      const P* row = x + (t * heads + h) * dim;
      int8_t* out = q + (t * heads + h) * dim;
      for (int64_t d = 0; d < dim; ++d) {
        // Round half to even without a libm call (vectorizes): exact for |v| < 2^22, and |v| <= 127 here.
        const float r = (static_cast<float>(row[d]) / scale + kRoundMagic) - kRoundMagic;
        out[d] = static_cast<int8_t>(std::min(127.f, std::max(-127.f, r)));
      }
    }
  }
}

template <typename P>
void dequantize_block(const int8_t* q, const float* scales, P* x, int64_t bs, int64_t heads, int64_t dim) {
  for (int64_t t = 0; t < bs; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const int8_t* row = q + (t * heads + h) * dim;
      P* out = x + (t * heads + h) * dim;
      for (int64_t d = 0; d < dim; ++d) out[d] = P(static_cast<float>(row[d]) * scales[h]);
    }
}

// An int8 store's block: quantized from (save) or dequantized into (load) the pool's block ``p``.
template <typename P>
void int8_block(P* p, int8_t* s, float* sc, int64_t bs, int64_t heads, int64_t dim, bool save) {
  if (save)
    quantize_block(p, s, sc, bs, heads, dim);
  else
    dequantize_block(s, sc, p, bs, heads, dim);
}

// One block of one tensor: pool block ``block`` <-> store slot ``slot``.
void copy_block(const at::Tensor& pool, const at::Tensor& store, const at::Tensor* scales, int64_t block,
                int64_t slot, bool save) {
  const int64_t bs = pool.size(1), heads = pool.size(2), dim = pool.size(3), n = bs * heads * dim;
  if (pool.scalar_type() == store.scalar_type()) {
    const int64_t bytes = n * pool.element_size();
    char* p = static_cast<char*>(pool.data_ptr()) + block * bytes;
    char* s = static_cast<char*>(store.data_ptr()) + slot * bytes;
    std::memcpy(save ? s : p, save ? p : s, bytes);
    return;
  }
  if (store.scalar_type() == at::kBFloat16) {  // of a float32 pool
    float* p = pool.data_ptr<float>() + block * n;
    c10::BFloat16* s = store.data_ptr<c10::BFloat16>() + slot * n;
    if (save)
      for (int64_t i = 0; i < n; ++i) s[i] = c10::BFloat16(p[i]);
    else
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(s[i]);
    return;
  }
  int8_t* s = store.data_ptr<int8_t>() + slot * n;
  float* sc = scales->data_ptr<float>() + slot * heads;
  if (pool.scalar_type() == at::kBFloat16)
    int8_block(pool.data_ptr<c10::BFloat16>() + block * n, s, sc, bs, heads, dim, save);
  else
    int8_block(pool.data_ptr<float>() + block * n, s, sc, bs, heads, dim, save);
}

void check_pair(const at::Tensor& pool, const at::Tensor& store, const at::Tensor* scales) {
  TORCH_CHECK(pool.dim() == 4 && store.dim() == 4 && pool.is_contiguous() && store.is_contiguous() &&
                  pool.size(1) == store.size(1) && pool.size(2) == store.size(2) && pool.size(3) == store.size(3),
              "kv_tier_copy: pool and store need contiguous [n, block_size, heads, dim] of one block shape");
  const auto pt = pool.scalar_type(), st = store.scalar_type();
  TORCH_CHECK(pt == st || (pt == at::kFloat && st == at::kBFloat16) ||
                  ((pt == at::kFloat || pt == at::kBFloat16) && st == at::kChar),
              "kv_tier_copy: the store is the pool's dtype, bfloat16 of a float32 pool, or int8 of a float32 or "
              "bfloat16 pool");
  TORCH_CHECK(st != at::kChar || (scales != nullptr && scales->scalar_type() == at::kFloat &&
                                  scales->is_contiguous() && scales->size(0) == store.size(0) &&
                                  scales->size(1) == store.size(2)),
              "kv_tier_copy: an int8 store needs float32 scales [num_slots, heads]");
}

void kv_tier_copy(at::TensorList pool, at::TensorList store, at::TensorList scales, at::IntArrayRef src,
                  at::IntArrayRef dst, bool save) {
  TORCH_CHECK(pool.size() == store.size() && (scales.empty() || scales.size() == store.size()),
              "kv_tier_copy: one store (and scale) tensor per pool tensor");
  TORCH_CHECK(src.size() == dst.size(), "kv_tier_copy: src and dst differ in length");
  for (size_t t = 0; t < pool.size(); ++t) check_pair(pool[t], store[t], scales.empty() ? nullptr : &scales[t]);
  const int64_t pairs = static_cast<int64_t>(src.size()), items = pairs * static_cast<int64_t>(pool.size());
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t blocks = pool[0].size(0), slots = store[0].size(0);
    const int64_t b = save ? src[i] : dst[i], s = save ? dst[i] : src[i];
    TORCH_CHECK(b >= 0 && b < blocks && s >= 0 && s < slots, "kv_tier_copy: block or slot out of range");
  }
  at::parallel_for(0, items, 1, [&](int64_t begin, int64_t end) {
    for (int64_t it = begin; it < end; ++it) {
      const int64_t t = it / pairs, i = it % pairs;
      const int64_t b = save ? src[i] : dst[i], s = save ? dst[i] : src[i];
      copy_block(pool[t], store[t], scales.empty() ? nullptr : &scales[t], b, s, save);
    }
  });
}

}  // namespace

AE_LIBRARY_IMPL(m) { m.impl("kv_tier_copy", &kv_tier_copy); }
