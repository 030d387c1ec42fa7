// Matmuls straight on a GGUF file's blocks (registered here, declared in cpu_ops.cpp): the weight is
// the file's own bytes (uint8 [N, row_bytes], typically a view of the memory-mapped file), never a
// wider copy.
//
// gguf_linear_int8(out, x, raws, qtypes): out[M, sum N_i] = x[M, K] @ [W_1; W_2; ...]^T, the weights of
//   a fused matmul (Q, K, V or gate, up) side by side, each in its own GGML type (Q4_0, Q4_1, Q5_0,
//   Q5_1, Q8_0, Q4_K, Q6_K). x is quantized to int8 once per block form the parts need (per 256 for the
//   K-quants: llama.cpp's Q8_K; per 32, or per pair of 32-blocks on the 512-bit route, for the others)
//   and each block's dot is an integer dot product (kquant_dot.h, q32_dot.h). A weight row is unpacked
//   once per group of up to eight (AVX-512) or four rows of x; on the 256-bit route the K-quant rows
//   of a step of six rows or more go four at a time through kquant_groups.h instead (unpacked once
//   per call). Every part's rows share one parallel region. Approximate: x is rounded to 8 bits per
//   block.
//   ``out`` may be a column slice of a wider matrix (row stride >= N, unit column stride), here and in
//   gguf_linear_wide.
// gguf_dequantize(out, raw, qtype): the float32 [N, K] weights (gguf-py's, bit for bit but for the sign
//   of a zero), or into a bfloat16 ``out`` those values rounded to nearest even: embedding rows, tests,
//   the oneDNN form of the wide route (kernels/quant_routes.py). ``out`` is contiguous.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "ops_library.h"
#include "step_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gguf_blocks.h"
#include "gguf_dequant.h"
#include "kquant_dot.h"
#include "kquant_groups.h"
#include "panel_bf16.h"
#include "q32_dot.h"

namespace {

// f.template operator()<R>() for a run-time R in [1, Max] (Max 4 or 8).
template <int Max, class F>
void with_rows(int rows, F&& f) {
  switch (rows) {
    case 1: f.template operator()<1>(); break;
    case 2: f.template operator()<2>(); break;
    case 3: f.template operator()<3>(); break;
    case 4: f.template operator()<4>(); break;
    default:
      if constexpr (Max == 8) {
        switch (rows) {
          case 5: f.template operator()<5>(); break;
          case 6: f.template operator()<6>(); break;
          case 7: f.template operator()<7>(); break;
          default: f.template operator()<8>(); break;
        }
      }
      break;
  }
}

using ae::kquant::XBlock;
using ae::q32::X32;
#if defined(__AVX512BW__) && defined(__AVX512VL__)
using ae::q32::X64;
constexpr bool kPairs = true;
#else
struct X64 {};
constexpr bool kPairs = false;
#endif

// How a part's activations are quantized: per 256 (K-quants), per pair of 32-blocks (the 512-bit
// route, K a multiple of 64) or per 32.
enum class Form { k256, pair64, block32 };

Form form_of(int64_t qtype, int64_t k) {
  if (qtype == 12 || qtype == 14) return Form::k256;
  return kPairs && k % 64 == 0 ? Form::pair64 : Form::block32;
}

// One weight of a fused product: its blocks, type and first output column.
struct Part {
  const uint8_t* w;
  int64_t stride, row_bytes, rows, qtype, col;
  Form form;
};

// x quantized once for every form the parts need (rows of k / block blocks each).
struct Activations {
  int64_t m, k;
  std::vector<XBlock> x256;
  std::vector<X32> x32;
  std::vector<X64> x64;

  Activations(const at::Tensor& x, const std::vector<Part>& parts) : m(x.size(0)), k(x.size(1)) {
    auto need = [&](Form f) { return std::any_of(parts.begin(), parts.end(), [&](const Part& p) { return p.form == f; }); };
    const float* xp = x.data_ptr<float>();
    if (need(Form::k256)) fill(x256, k / ae::kquant::kBlock, xp, ae::kquant::quantize_row);
    if (need(Form::block32)) fill(x32, k / 32, xp, ae::q32::quantize_row);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    if (need(Form::pair64)) fill(x64, k / 64, xp, ae::q32::quantize_row64);
#endif
  }

  template <class XB>
  void fill(std::vector<XB>& dst, int64_t blocks, const float* xp, void (*quantize)(const float*, int64_t, XB*)) {
    dst.resize(m * blocks);
    at::parallel_for(0, m, 16, [&](int64_t m0, int64_t m1) {
      for (int64_t r = m0; r < m1; ++r) quantize(xp + r * k, k, dst.data() + r * blocks);
    });
  }
};

// Weight rows [n0, n1) of ``p`` into out: rows in tiles that stay in L2 while each group of up to
// MaxRows activation rows passes over them; ``fn(rows, weight row, first x block, out)``.
template <int MaxRows, class XB, class Fn>
void tiled(const Part& p, int64_t n0, int64_t n1, const XB* xq, int64_t blocks, int64_t m, float* out, int64_t ldo,
           Fn&& fn) {
  const int64_t tile = std::max<int64_t>(1, (256 * 1024) / p.row_bytes);
  for (int64_t t0 = n0; t0 < n1; t0 += tile) {
    const int64_t t1 = std::min(n1, t0 + tile);
    for (int64_t m0 = 0; m0 < m; m0 += MaxRows) {
      const int rows = static_cast<int>(std::min<int64_t>(MaxRows, m - m0));
      for (int64_t n = t0; n < t1; ++n)
        fn(rows, p.w + n * p.stride, xq + m0 * blocks, out + m0 * ldo + p.col + n, blocks);
    }
  }
}

#if defined(AE_KQUANT_GROUPS)
// Rows of x from which a K-quant part's rows go through grouped_rows: one full pass over each packed
// group. Below, the row kernel (its unpack stays in registers) is as fast (level at four rows). On an
// AMD EPYC Zen 5 with the AVX2 variant forced the groups took 0.51x the time at 256 rows (two layers
// of the 1.5B's shapes), and eight-stream decode of the 1.5B made 66.8 against 57.5 tok/s with the
// groups from 24 rows (docs/performance.md).
constexpr int64_t kGroupsFromRows = ae::kquant_groups::kMaxXRows;

// Rows [n0, n1) of a K-quant part in groups of four (kquant_groups.h), each packed once into this
// thread's buffer and multiplied into every row of x; returns the first row it did not take (the
// rest of a group of four).
int64_t grouped_rows(const Part& p, int64_t n0, int64_t n1, const Activations& a, float* out, int64_t ldo) {
  namespace kg = ae::kquant_groups;
  static_assert(kg::kMaxXRows <= 8, "with_rows<8> covers the passes");
  const int64_t blocks = a.k / ae::kquant::kBlock;
  const bool q4k = p.qtype == 12;
  thread_local std::vector<kg::Q4KBlock> q4;
  thread_local std::vector<kg::Q6KBlock> q6;
  int64_t n = n0;
  for (; n + kg::kRows <= n1; n += kg::kRows) {
    const uint8_t* rows[kg::kRows] = {p.w + n * p.stride, p.w + (n + 1) * p.stride, p.w + (n + 2) * p.stride,
                                      p.w + (n + 3) * p.stride};
    // The next group's rows on their way from memory while this one runs: four rows read a block at a
    // time each are four short streams the hardware prefetcher barely follows (a vocabulary-sized head
    // at eight rows of x took 1.8x the row kernel's time without this, and level with it).
    if (n + 2 * kg::kRows <= n1)
      for (int r = 0; r < kg::kRows; ++r)
        for (int64_t b = 0; b < p.row_bytes; b += 64)
          _mm_prefetch(reinterpret_cast<const char*>(rows[r] + kg::kRows * p.stride + b), _MM_HINT_T1);
    if (q4k) {
      q4.resize(blocks);
      kg::pack_q4k(rows, blocks, q4.data());
    } else {
      q6.resize(blocks);
      kg::pack_q6k(rows, blocks, q6.data());
    }
    for (int64_t m0 = 0; m0 < a.m; m0 += kg::kMaxXRows) {
      const int rows_x = static_cast<int>(std::min<int64_t>(kg::kMaxXRows, a.m - m0));
      const XBlock* xb = a.x256.data() + m0 * blocks;
      float* o = out + m0 * ldo + p.col + n;
      with_rows<8>(rows_x, [&]<int R>() {
        if constexpr (R <= kg::kMaxXRows) {
          if (q4k) kg::q4k_group<R>(q4.data(), xb, blocks, blocks, o, ldo);
          else kg::q6k_group<R>(q6.data(), xb, blocks, blocks, o, ldo);
        }
      });
    }
  }
  return n;
}
#endif

void part_rows(const Part& p, int64_t n0, int64_t n1, const Activations& a, float* out, int64_t ldo) {
  if (p.form == Form::k256) {
    const bool q4k = p.qtype == 12;
#if defined(AE_KQUANT_GROUPS)
    if (a.m >= kGroupsFromRows) n0 = grouped_rows(p, n0, n1, a, out, ldo);
#endif
    tiled<ae::kquant::kMaxRows>(p, n0, n1, a.x256.data(), a.k / ae::kquant::kBlock, a.m, out, ldo,
                                [&](int rows, const uint8_t* w, const XBlock* xb, float* o, int64_t blocks) {
                                  with_rows<ae::kquant::kMaxRows>(rows, [&]<int R>() {
                                    if (q4k) ae::kquant::q4k_rows<R>(w, xb, blocks, blocks, o, ldo);
                                    else ae::kquant::q6k_rows<R>(w, xb, blocks, blocks, o, ldo);
                                  });
                                });
    return;
  }
  ae::q32::with_type(p.qtype, [&]<class T>() {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    if (p.form == Form::pair64) {
      tiled<ae::q32::kMaxRows64>(p, n0, n1, a.x64.data(), a.k / 64, a.m, out, ldo,
                                 [&](int rows, const uint8_t* w, const X64* xb, float* o, int64_t pairs) {
                                   with_rows<ae::q32::kMaxRows64>(
                                       rows, [&]<int R>() { ae::q32::rows64<T, R>(w, xb, pairs, pairs, o, ldo); });
                                 });
      return;
    }
#endif
    tiled<ae::q32::kMaxRows>(p, n0, n1, a.x32.data(), a.k / 32, a.m, out, ldo,
                             [&](int rows, const uint8_t* w, const X32* xb, float* o, int64_t blocks) {
                               with_rows<ae::q32::kMaxRows>(
                                   rows, [&]<int R>() { ae::q32::rows<T, R>(w, xb, blocks, blocks, o, ldo); });
                             });
  });
}

}  // namespace

// The ops, callable from this library's other sources (step_ops.h).
namespace AE_OPS_NS {

// out[:, sum of earlier parts' rows + n] = x @ part^T for every part: activations quantized once per
// form, one parallel region over all the parts' weight rows.
void gguf_linear_int8(at::Tensor out, const at::Tensor& x, at::TensorList raws, at::IntArrayRef qtypes) {
  static_assert(ae::kquant::kMaxRows % 4 == 0 && ae::kquant::kMaxRows <= 8 && ae::q32::kMaxRows == 4,
                "with_rows covers 4 or 8 rows");
  TORCH_CHECK(raws.size() == qtypes.size() && !raws.empty(), "gguf_linear_int8: one GGML type per weight");
  TORCH_CHECK(x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat && x.dim() == 2 && out.dim() == 2 &&
                  x.is_contiguous() && out.stride(1) == 1 && out.stride(0) >= out.size(1) && out.size(0) == x.size(0),
              "gguf_linear_int8: contiguous float32 x [M, K], float32 out [M, N] with unit column stride");
  const int64_t k = x.size(1);
  std::vector<Part> parts;
  int64_t col = 0;
  for (size_t i = 0; i < raws.size(); ++i) {
    const at::Tensor& raw = raws[i];
    TORCH_CHECK(raw.scalar_type() == at::kByte && raw.dim() == 2 && (raw.size(0) == 0 || raw.stride(1) == 1),
                "gguf_linear_int8: raw blocks are uint8 [N, row_bytes] with contiguous rows");
    const int64_t qtype = qtypes[i];
    const bool k_quant = qtype == 12 || qtype == 14;
    TORCH_CHECK(k_quant || ae::q32::with_type(qtype, []<class T>() {}), "gguf_linear_int8: no int8 kernel for GGML type ",
                qtype);
    const int64_t block = k_quant ? ae::kquant::kBlock : 32;
    int64_t block_bytes = qtype == 12 ? 144 : 210;
    if (!k_quant) ae::q32::with_type(qtype, [&]<class T>() { block_bytes = T::kBytes; });
    TORCH_CHECK(k % block == 0 && raw.size(1) == k / block * block_bytes, "gguf_linear_int8: rows of ", raw.size(1),
                " bytes do not hold K=", k);
    parts.push_back({raw.data_ptr<uint8_t>(), raw.stride(0), raw.size(1), raw.size(0), qtype, col, form_of(qtype, k)});
    col += raw.size(0);
  }
  TORCH_CHECK(col == out.size(1), "gguf_linear_int8: the weights have ", col, " rows, out ", out.size(1), " columns");
  if (x.size(0) == 0 || col == 0) return;
  const Activations acts(x, parts);
  float* op = out.data_ptr<float>();
  const int64_t ldo = out.stride(0);
  int64_t widest = 1;
  for (const Part& p : parts) widest = std::max(widest, p.row_bytes);
  const int64_t grain = std::max<int64_t>(8, (1 << 15) / widest);
  at::parallel_for(0, col, grain, [&](int64_t g0, int64_t g1) {
    for (const Part& p : parts) {
      const int64_t n0 = std::max(g0, p.col) - p.col, n1 = std::min(g1, p.col + p.rows) - p.col;
      if (n0 < n1) part_rows(p, n0, n1, acts, op, ldo);
    }
  });
}

// n float32 values rounded to bfloat16 (nearest even; AVX512_BF16's instruction where the build has it).
static void round_to_bf16(const float* src, int64_t n, uint16_t* dst) {
  int64_t i = 0;
#if defined(__AVX512BF16__) && defined(__AVX512F__)
  ae::panel_bf16::round_row(src, n / 16 * 16, dst);
  i = n / 16 * 16;
#endif
  for (; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + i, 4);
    dst[i] = static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
  }
}

void gguf_dequantize(at::Tensor out, const at::Tensor& raw, int64_t qtype) {
  const bool bf16 = out.scalar_type() == at::kBFloat16;
  TORCH_CHECK((out.scalar_type() == at::kFloat || bf16) && out.dim() == 2 && out.is_contiguous() &&
                  raw.dim() == 2 && raw.scalar_type() == at::kByte && raw.stride(1) == 1 && out.size(0) == raw.size(0),
              "gguf_dequantize: float32 or bfloat16 [N, K] out, uint8 [N, row_bytes] raw");
  const int64_t k = out.size(1);
  const bool known = ae::gguf::with_block_type(qtype, [&]<class T>() {
    TORCH_CHECK(k % T::kBlock == 0 && raw.size(1) == k / T::kBlock * T::kBytes, "gguf_dequantize: rows of ",
                raw.size(1), " bytes do not hold K=", k);
    const uint8_t* wp = raw.data_ptr<uint8_t>();
    at::parallel_for(0, raw.size(0), 16, [&](int64_t n0, int64_t n1) {
      std::vector<float> row_f32(bf16 ? k : 0);  // a bfloat16 row's float32 values before rounding
      for (int64_t n = n0; n < n1; ++n) {
        float* row = bf16 ? row_f32.data() : out.data_ptr<float>() + n * k;
        ae::dequant::row_span(qtype, wp + n * raw.stride(0), 0, k / T::kBlock, row);  // every type here
        if (bf16) round_to_bf16(row, k, reinterpret_cast<uint16_t*>(out.data_ptr<c10::BFloat16>()) + n * k);
      }
    });
  });
  TORCH_CHECK(known, "gguf_dequantize: unsupported GGML type ", qtype);
}

}  // namespace AE_OPS_NS

AE_LIBRARY_IMPL(m) {
  m.impl("gguf_linear_int8", &AE_OPS_NS::gguf_linear_int8);
  m.impl("gguf_dequantize", &AE_OPS_NS::gguf_dequantize);
}
