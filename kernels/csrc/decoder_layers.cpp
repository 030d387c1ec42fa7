// A step's decoder layers in one call: the sequence of kernels that kernels/layer_stack.py would
// otherwise call one by one from Python (the lean decoder's layer loop), chained here without a
// trip through the interpreter and the dispatcher per kernel. At one decode row a 1.5B model's step
// is about 250 kernel calls, each a few microseconds of Python around a kernel that streams its
// weights from memory; the memory stands idle in between.
//
// decoder_layers(residual, delta, h, qkv, attn, gate_up, act, norms, eps, qkv_bias, weights, qtypes,
//                plan, cos, sin, k_caches, v_caches, slot_mapping, block_tables, query_start_loc,
//                seq_lens, req_indices, scale, hq, hk)
// Per layer l (norms[2l], norms[2l + 1], eps likewise; the plan's matmuls 4l .. 4l + 3):
//   h = rms_norm(residual (+= delta, from the second layer on))        (layer 0: residual as given)
//   qkv = h @ Wqkv^T (+ qkv_bias[l]); rotary on q, k; k, v written to slot_mapping of the caches
//   attn = paged attention of q over the caches for the requests req_indices (all of the step's)
//   delta = attn @ Wo^T;  h = rms_norm(residual += delta)
//   act = silu(h @ Wgate^T) * (h @ Wup^T)      (one panel kernel, or the matmul into gate_up then SiLU)
//   delta = act @ Wdown^T
// On return residual and delta hold the last layer's (the caller adds and norms them).
// plan: two ints per matmul, (route, weights it takes from ``weights``): 0 the int8 route on GGUF
// blocks, 1 / 2 the wide GGUF route in float32 / bfloat16, 3 panels (panel_linear), 4 interleaved
// gate/up panels with the SiLU (the gate/up matmul only: it writes act), 5 the wide GGUF route in
// AMX tiles (gguf_linear_tiles), 6 / 7 bfloat16 pair panels in AMX tiles (panel_linear_tiles; 7 the
// gate/up matmul's interleaved panels with the SiLU, writing act). ``qtypes`` has one GGML type
// per weight (ignored for panels). The plan, the buffers' shapes and the step's per-token tensors are
// checked here, before anything is written; each kernel checks its weights.
// Invariant: the results are bit for bit those of the same kernels called one by one in this order.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "ops_library.h"
#include "step_ops.h"

#include <optional>

namespace {

enum Route : int64_t {
  kInt8 = 0, kWideF32 = 1, kWideBf16 = 2, kPanels = 3, kPanelsSilu = 4, kWideTiles = 5, kPanelTiles = 6,
  kPanelTilesSilu = 7
};

// Whether ``route`` multiplies GGUF blocks (any number of parts) rather than one panel tensor.
constexpr bool on_blocks(int64_t route) { return route < kPanels || route == kWideTiles; }

// Whether ``route`` writes the activation (the gate/up matmul with its SiLU).
constexpr bool writes_act(int64_t route) { return route == kPanelsSilu || route == kPanelTilesSilu; }
constexpr int64_t kMatmulsPerLayer = 4;
constexpr int64_t kGateUp = 2;  // the gate/up matmul's index within a layer

// The plan's matmuls in order: each call runs the next one.
class Matmuls {
 public:
  Matmuls(at::TensorList weights, at::IntArrayRef qtypes, at::IntArrayRef plan)
      : weights_(weights), qtypes_(qtypes), plan_(plan) {}

  // The route of matmul ``i`` (its index in the plan).
  int64_t route(int64_t i) const { return plan_[2 * i]; }

  // out = x @ W^T for the next matmul of the plan.
  void next(at::Tensor out, const at::Tensor& x) {
    const int64_t route = plan_[2 * index_], n = plan_[2 * index_ + 1];
    const at::TensorList w = weights_.slice(first_, n);
    switch (route) {
      case kInt8: AE_OPS_NS::gguf_linear_int8(out, x, w, qtypes_.slice(first_, n)); break;
      case kWideF32:
      case kWideBf16: AE_OPS_NS::gguf_linear_wide(out, x, w, qtypes_.slice(first_, n), route == kWideBf16); break;
      case kWideTiles: AE_OPS_NS::gguf_linear_tiles(out, x, w, qtypes_.slice(first_, n), false); break;
      case kPanels: AE_OPS_NS::panel_linear(out, x, w[0]); break;
      case kPanelTiles:
      case kPanelTilesSilu: AE_OPS_NS::panel_linear_tiles(out, x, w[0], route == kPanelTilesSilu, false); break;
      default: AE_OPS_NS::panel_linear_silu(out, x, w[0]); break;
    }
    first_ += n;
    ++index_;
  }

 private:
  at::TensorList weights_;
  at::IntArrayRef qtypes_, plan_;
  int64_t index_ = 0, first_ = 0;
};

void check_plan(int64_t layers, at::TensorList weights, at::IntArrayRef qtypes, at::IntArrayRef plan) {
  TORCH_CHECK(static_cast<int64_t>(plan.size()) == 2 * kMatmulsPerLayer * layers,
              "decoder_layers: the plan needs two ints for each of four matmuls per layer");
  TORCH_CHECK(qtypes.size() == weights.size(), "decoder_layers: one GGML type per weight");
  int64_t total = 0;
  for (int64_t i = 0; i < kMatmulsPerLayer * layers; ++i) {
    const int64_t route = plan[2 * i], n = plan[2 * i + 1];
    TORCH_CHECK(route >= kInt8 && route <= kPanelTilesSilu, "decoder_layers: unknown route ", route);
    TORCH_CHECK(!writes_act(route) || i % kMatmulsPerLayer == kGateUp,
                "decoder_layers: only the gate/up matmul takes interleaved SiLU panels");
    TORCH_CHECK(n >= 1 && n <= static_cast<int64_t>(weights.size()) && (on_blocks(route) || n == 1),
                "decoder_layers: a matmul takes GGUF parts or one panel tensor");
    total += n;
  }
  TORCH_CHECK(total == static_cast<int64_t>(weights.size()), "decoder_layers: the plan takes ", total,
              " weights, ", weights.size(), " given");
}

// Every activation buffer float32, contiguous, [tokens, its width]; the norms as wide as the hidden
// size; the rotary tables and slots one row per token.
void check_buffers(const at::Tensor& residual, const at::Tensor& delta, const at::Tensor& h, const at::Tensor& qkv,
                   const at::Tensor& attn, const at::Tensor& gate_up, const at::Tensor& act, at::TensorList norms,
                   const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& slot_mapping, int64_t hq,
                   int64_t hk, int64_t d) {
  TORCH_CHECK(residual.dim() == 2 && residual.size(0) >= 1 && hq >= 1 && hk >= 1 && hq % hk == 0,
              "decoder_layers: residual must be [T, H] and Hq a multiple of Hk");
  const int64_t tokens = residual.size(0), hidden = residual.size(1);
  auto check = [&](const at::Tensor& t, int64_t width, const char* name) {
    TORCH_CHECK(t.scalar_type() == at::kFloat && t.is_contiguous() && t.dim() == 2 && t.size(0) == tokens &&
                    t.size(1) == width,
                "decoder_layers: ", name, " must be a contiguous float32 [", tokens, ", ", width, "] tensor");
  };
  check(residual, hidden, "residual");
  check(delta, hidden, "delta");
  check(h, hidden, "h");
  check(qkv, (hq + 2 * hk) * d, "qkv");
  check(attn, hq * d, "attn");
  TORCH_CHECK(act.dim() == 2 && act.size(1) >= 1, "decoder_layers: act must be [T, intermediate]");
  check(act, act.size(1), "act");
  if (gate_up.numel() != 0) check(gate_up, 2 * act.size(1), "gate_up");
  for (const at::Tensor& n : norms)
    TORCH_CHECK(n.scalar_type() == at::kFloat && n.is_contiguous() && n.numel() == hidden,
                "decoder_layers: every norm weight is float32 with the hidden size's ", hidden, " values");
  TORCH_CHECK(cos.dim() == 2 && sin.sizes() == cos.sizes() && cos.size(0) == tokens && cos.size(1) == d,
              "decoder_layers: cos and sin must be [T, D]");
  TORCH_CHECK(slot_mapping.dim() == 1 && slot_mapping.size(0) == tokens, "decoder_layers: one slot per token");
}

}  // namespace

namespace AE_OPS_NS {

void decoder_layers(at::Tensor residual, at::Tensor delta, at::Tensor h, at::Tensor qkv, at::Tensor attn,
                    at::Tensor gate_up, at::Tensor act, at::TensorList norms, at::ArrayRef<double> eps,
                    const c10::List<std::optional<at::Tensor>>& qkv_bias, at::TensorList weights,
                    at::IntArrayRef qtypes, at::IntArrayRef plan, const at::Tensor& cos, const at::Tensor& sin,
                    at::TensorList k_caches, at::TensorList v_caches, const at::Tensor& slot_mapping,
                    const at::Tensor& block_tables, const at::Tensor& query_start_loc, const at::Tensor& seq_lens,
                    const at::Tensor& req_indices, double scale, int64_t hq, int64_t hk) {
  const int64_t layers = static_cast<int64_t>(k_caches.size());
  TORCH_CHECK(layers >= 1 && static_cast<int64_t>(v_caches.size()) == layers &&
                  static_cast<int64_t>(norms.size()) == 2 * layers && static_cast<int64_t>(eps.size()) == 2 * layers &&
                  static_cast<int64_t>(qkv_bias.size()) == layers,
              "decoder_layers: per layer one K and one V cache, two norms, two epsilons and one QKV bias (or None)");
  check_plan(layers, weights, qtypes, plan);
  TORCH_CHECK(k_caches[0].dim() == 4, "decoder_layers: caches are [blocks, block_size, Hk, D]");
  const int64_t d = k_caches[0].size(3);
  check_buffers(residual, delta, h, qkv, attn, gate_up, act, norms, cos, sin, slot_mapping, hq, hk, d);
  const int64_t tokens = residual.size(0);
  const at::Tensor query = qkv.view({tokens, hq + 2 * hk, d}).narrow(1, 0, hq);
  const at::Tensor attn_heads = attn.view({tokens, hq, d});
  Matmuls matmuls(weights, qtypes, plan);
  for (int64_t l = 0; l < layers; ++l) {
    AE_OPS_NS::rms_norm(h, residual, l == 0 ? std::nullopt : std::optional<at::Tensor>(delta), norms[2 * l], eps[2 * l]);
    matmuls.next(qkv, h);
    const std::optional<at::Tensor> bias = qkv_bias.get(l);
    if (bias.has_value()) qkv.add_(*bias);
    AE_OPS_NS::rotary_and_cache(qkv, cos, sin, k_caches[l], v_caches[l], slot_mapping, hq, hk);
    AE_OPS_NS::paged_attention(attn_heads, query, k_caches[l], v_caches[l], block_tables, query_start_loc, seq_lens,
                    req_indices, scale);
    matmuls.next(delta, attn);
    AE_OPS_NS::rms_norm(h, residual, delta, norms[2 * l + 1], eps[2 * l + 1]);
    if (writes_act(matmuls.route(kMatmulsPerLayer * l + kGateUp))) {
      matmuls.next(act, h);
    } else {
      matmuls.next(gate_up, h);
      AE_OPS_NS::silu_and_mul(act, gate_up);
    }
    matmuls.next(delta, act);
  }
}

}  // namespace AE_OPS_NS

AE_LIBRARY_IMPL(m) { m.impl("decoder_layers", &AE_OPS_NS::decoder_layers); }
