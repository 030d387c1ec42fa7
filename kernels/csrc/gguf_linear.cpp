// Matmuls straight on a GGUF file's blocks (registered here, declared in cpu_ops.cpp): the weight is
// the file's own bytes (uint8 [N, row_bytes], typically a view of the memory-mapped file), never a
// wider copy.
//
// gguf_linear_int8(out, x, raw, qtype): out[M, N] = x[M, K] @ W^T for Q4_K (12) and Q6_K (14): x is
//   quantized to int8 per block of 256 (llama.cpp's Q8_K) and each block's dot is an integer dot
//   product (kquant_dot.h). Each weight row is unpacked once per group of up to four rows of x: the
//   route of narrow steps (decode), where reading the weights sets the pace. Approximate: x is rounded
//   to 8 bits per block (relative error ~0.4% of a block's largest value).
// gguf_linear_tiles(out, x, raw, qtype): the same product for every block type in gguf_blocks.h,
//   exact up to summation order: each thread dequantizes a group of 16-row panels (gguf-py's float32
//   values) into a buffer that stays in L2 and runs ``panel_linear``'s micro-kernel over every row of
//   x: the route of wide steps (prefill), where the FMA units set the pace and the dequantization is
//   spread over all the rows.
// gguf_dequantize(out, raw, qtype): the float32 [N, K] weights (gguf-py's, bit for bit but for the sign
//   of a zero): embedding rows, tests.
// ``out`` may be a column slice of a wider matrix (row stride >= N, unit column stride): a fused
// matmul's parts write into their own columns without a copy.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gguf_blocks.h"
#include "kquant_dot.h"
#include "q32_dot.h"
#include "panel_micro.h"

namespace {

[[maybe_unused]] void check_common(const at::Tensor& out, const at::Tensor& x, const at::Tensor& raw) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat && x.dim() == 2 && out.dim() == 2 &&
                  x.is_contiguous() && out.stride(1) == 1 && out.stride(0) >= out.size(1),
              "gguf_linear: contiguous float32 x, float32 out with unit column stride");
  TORCH_CHECK(raw.scalar_type() == at::kByte && raw.dim() == 2 && raw.stride(1) == 1,
              "gguf_linear: raw blocks are uint8 [N, row_bytes] with contiguous rows");
  TORCH_CHECK(out.size(0) == x.size(0) && out.size(1) == raw.size(0), "gguf_linear: bad output shape");
}

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

void part_rows(const Part& p, int64_t n0, int64_t n1, const Activations& a, float* out, int64_t ldo) {
  if (p.form == Form::k256) {
    const bool q4k = p.qtype == 12;
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

// Rows [n0, n0 + 16) (zero past n_dim) of the weight, k in [k0, k0 + k_len), as a float32 panel [k_len, 16].
template <class T>
void dequantize_panel(const uint8_t* wp, int64_t w_stride, int64_t n0, int64_t n_dim, int64_t k0, int64_t k_len,
                      float* panel) {
  constexpr int64_t P = ae::panel::kPanel;
  int8_t q[T::kBlock];
  float s[T::kBlock / T::kGroup], o[T::kBlock / T::kGroup];
  for (int64_t c = 0; c < P; ++c) {
    if (n0 + c >= n_dim) {
      for (int64_t k = 0; k < k_len; ++k) panel[k * P + c] = 0.f;
      continue;
    }
    const uint8_t* row = wp + (n0 + c) * w_stride;
    for (int64_t b = k0 / T::kBlock; b < (k0 + k_len) / T::kBlock; ++b) {
      T::decode(row + b * T::kBytes, q, s, o);
      float* dst = panel + (b * T::kBlock - k0) * P + c;
      for (int j = 0; j < T::kBlock; ++j) dst[j * P] = std::fma(static_cast<float>(q[j]), s[j / T::kGroup], o[j / T::kGroup]);
    }
  }
}

void gguf_linear_tiles(at::Tensor out, const at::Tensor& x, const at::Tensor& raw, int64_t qtype) {
  check_common(out, x, raw);
  const int64_t m_dim = x.size(0), k_dim = x.size(1), n_dim = raw.size(0), ldo = out.stride(0);
  const bool known = ae::gguf::with_block_type(qtype, [&]<class T>() {
    TORCH_CHECK(k_dim % T::kBlock == 0 && raw.size(1) == k_dim / T::kBlock * T::kBytes,
                "gguf_linear_tiles: rows of ", raw.size(1), " bytes do not hold K=", k_dim);
    if (m_dim == 0 || n_dim == 0) return;
    constexpr int64_t P = ae::panel::kPanel;
    // K in blocks of whole GGUF blocks, at most ~1024 (a block of x rows and a group of panels in L2).
    const int64_t gguf_blocks = k_dim / T::kBlock;
    const int64_t per_k = std::max<int64_t>(1, 1024 / T::kBlock);
    const int64_t k_parts = (gguf_blocks + per_k - 1) / per_k;
    const int64_t k_block = (gguf_blocks + k_parts - 1) / k_parts * T::kBlock;
    const int64_t n_panels = (n_dim + P - 1) / P;
    const int64_t group = std::max<int64_t>(1, 256 * 1024 / 4 / (k_block * P));  // panels per ~256 KiB buffer
    const uint8_t* wp = raw.data_ptr<uint8_t>();
    const float* xp = x.data_ptr<float>();
    float* op = out.data_ptr<float>();
    at::parallel_for(0, n_panels, 1, [&](int64_t p0, int64_t p1) {
      std::vector<float> buf(group * k_block * P);
      for (int64_t k0 = 0; k0 < k_dim; k0 += k_block) {
        const int64_t k_len = std::min(k_block, k_dim - k0);
        for (int64_t g = p0; g < p1; g += group) {
          const int64_t g1 = std::min(p1, g + group);
          for (int64_t p = g; p < g1; ++p)
            dequantize_panel<T>(wp, raw.stride(0), p * P, n_dim, k0, k_len, buf.data() + (p - g) * k_block * P);
#ifdef AE_AVX2
          for (int64_t m = 0; m < m_dim; m += ae::panel::kRows) {
            const int64_t rows = std::min<int64_t>(ae::panel::kRows, m_dim - m);
            for (int64_t p = g; p < g1; ++p)
              ae::panel::kMicro<float>[rows](xp + m * k_dim + k0, k_dim, k_len, buf.data() + (p - g) * k_block * P,
                                             op + m * ldo + p * P, ldo, std::min(P, n_dim - p * P), {}, k0 > 0);
          }
#else
          for (int64_t m = 0; m < m_dim; ++m)
            for (int64_t p = g; p < g1; ++p)
              for (int64_t c = 0; c < std::min(P, n_dim - p * P); ++c) {
                const float* panel = buf.data() + (p - g) * k_block * P;
                float acc = k0 > 0 ? op[m * ldo + p * P + c] : 0.f;
                for (int64_t k = 0; k < k_len; ++k) acc += xp[m * k_dim + k0 + k] * panel[k * P + c];
                op[m * ldo + p * P + c] = acc;
              }
#endif
        }
      }
    });
  });
  TORCH_CHECK(known, "gguf_linear_tiles: unsupported GGML type ", qtype);
}

void gguf_dequantize(at::Tensor out, const at::Tensor& raw, int64_t qtype) {
  TORCH_CHECK(out.scalar_type() == at::kFloat && out.dim() == 2 && out.is_contiguous() && raw.dim() == 2 &&
                  raw.scalar_type() == at::kByte && raw.stride(1) == 1 && out.size(0) == raw.size(0),
              "gguf_dequantize: float32 [N, K] out, uint8 [N, row_bytes] raw");
  const int64_t k = out.size(1);
  const bool known = ae::gguf::with_block_type(qtype, [&]<class T>() {
    TORCH_CHECK(k % T::kBlock == 0 && raw.size(1) == k / T::kBlock * T::kBytes, "gguf_dequantize: rows of ",
                raw.size(1), " bytes do not hold K=", k);
    const uint8_t* wp = raw.data_ptr<uint8_t>();
    float* dst = out.data_ptr<float>();
    at::parallel_for(0, raw.size(0), 16, [&](int64_t n0, int64_t n1) {
      int8_t q[T::kBlock];
      float s[T::kBlock / T::kGroup], o[T::kBlock / T::kGroup];
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t b = 0; b < k / T::kBlock; ++b) {
          T::decode(wp + n * raw.stride(0) + b * T::kBytes, q, s, o);
          float* row = dst + n * k + b * T::kBlock;
          for (int j = 0; j < T::kBlock; ++j) row[j] = std::fma(static_cast<float>(q[j]), s[j / T::kGroup], o[j / T::kGroup]);
        }
    });
  });
  TORCH_CHECK(known, "gguf_dequantize: unsupported GGML type ", qtype);
}

}  // namespace

TORCH_LIBRARY_IMPL(agent_engine, CPU, m) {
  m.impl("gguf_linear_int8", &gguf_linear_int8);
  m.impl("gguf_linear_tiles", &gguf_linear_tiles);
  m.impl("gguf_dequantize", &gguf_dequantize);
}
