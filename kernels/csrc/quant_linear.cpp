// Matmuls on GGUF quantized weights without a float32 copy in memory (registered here, declared in
// cpu_ops.cpp):
//
// quant_repack(raw, qtype, k) -> (q, scales, offsets): a GGUF tensor's blocks (uint8 [N, row_bytes],
//   GGML type ``qtype``: Q4_0 2, Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8, Q4_K 12, Q6_K 14) in the kernel's form
//   (gguf_blocks.h): weight = fma(q, scale, offset) per group of G weights (G = 32; 16 for Q6_K).
//   4-bit types keep their nibbles: q is uint8 [N, K / 2], and byte i of group g holds weight
//   32g + i (low nibble) and 32g + 16 + i (high); the others widen to int8 [N, K]. scales and offsets
//   are float32 [N, K / G]; offsets is empty where every offset is 0 (Q5_0, Q8_0, Q6_K).
// quant_dequantize(out, q, scales, offsets): the float32 [N, K] weights (gguf-py's, bit for bit but
//   for the sign of a zero).
// quant_linear(out, x, q, scales, offsets): out[M, N] = x[M, K] @ W^T.
//
// A decode step is bound by the work per weight: each weight is unpacked once per group of up to
// eight rows of x (widen, an integer add, one fma with its group's scale and offset) in registers and
// multiplied into every row of the group (eight accumulators). Output features are split between the
// threads; a tile of weight rows is read from memory once and from L2 for every further group of rows.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "gguf_blocks.h"
#include "vec_math.h"

namespace {

// Weight j (< G) of group g's row segment, as float: the scalar reference of the kernel's unpacking.
template <int Bits>
inline float q_at(const uint8_t* q, int64_t g, int64_t j, int group) {
  if (Bits == 8) return static_cast<float>(reinterpret_cast<const int8_t*>(q)[g * group + j]);
  return static_cast<float>((q[g * 16 + j % 16] >> (4 * (j / 16))) & 0xF);
}

#ifdef AE_AVX2
constexpr float kMagic = 12582912.f;  // 1.5 * 2^23: the float whose bits plus a small int v are 1.5 * 2^23 + v

// Eight weights (``part`` p of a group: weights 8p .. 8p + 7) as the floats kMagic + q, exactly: an
// integer add instead of a convert; the caller takes kMagic off (see dequant8).
template <int Bits>
inline __m256 magic_q8(const uint8_t* qg, int part) {
  __m256i v;
  if (Bits == 8) {
    v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qg + 8 * part)));
  } else {
    const __m256i z = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qg + 8 * (part % 2))));
    v = part < 2 ? _mm256_and_si256(z, _mm256_set1_epi32(0xF)) : _mm256_srli_epi32(z, 4);
  }
  return _mm256_castsi256_ps(_mm256_add_epi32(v, _mm256_castps_si256(_mm256_set1_ps(kMagic))));
}

// The eight weights fma(q, s, o) from f = kMagic + q. Without offsets one fma: f * s - kMagic * s rounds
// once to q * s, since kMagic * s is exact (s has at most 19 significant bits: an fp16 scale times at
// most an 8-bit integer). With offsets, kMagic comes off first (exact), then fma(q, s, o).
template <bool Off>
inline __m256 dequant8(__m256 f, __m256 s, __m256 o_or_minus_magic_s) {
  if (Off) return _mm256_fmadd_ps(_mm256_sub_ps(f, _mm256_set1_ps(kMagic)), s, o_or_minus_magic_s);
  return _mm256_fmadd_ps(f, s, o_or_minus_magic_s);
}
#endif

// Independent accumulators per row: enough FMA chains in flight to hide their latency, few enough
// to stay in the sixteen registers.
constexpr int chains(int rows, int group) { return std::min(group / 8, rows <= 2 ? 4 : rows <= 4 ? 2 : 1); }

// R rows of x (stride k) times one weight row: out[r * n_dim] = the R dot products.
template <int Bits, int G, bool Off, int R>
void rows_times_row(const float* x, int64_t k, const uint8_t* q, const float* s, const float* o, float* out,
                    int64_t n_dim) {
  constexpr int64_t kGroupBytes = G * Bits / 8;
  const int64_t groups = k / G;
#ifdef AE_AVX2
  constexpr int A = chains(R, G);
  __m256 acc[R * A];
#pragma GCC unroll 16
  for (int i = 0; i < R * A; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    const __m256 sv = _mm256_set1_ps(s[g]);
    const __m256 ov = _mm256_set1_ps(Off ? o[g] : -kMagic * s[g]);
    const uint8_t* qg = q + g * kGroupBytes;
    const float* xg = x + g * G;
#pragma GCC unroll 4
    for (int p = 0; p < G / 8; ++p) {
      const __m256 w = dequant8<Off>(magic_q8<Bits>(qg, p), sv, ov);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        acc[r * A + p % A] = _mm256_fmadd_ps(w, _mm256_loadu_ps(xg + r * k + 8 * p), acc[r * A + p % A]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    __m256 sum = acc[r * A];
#pragma GCC unroll 4
    for (int a = 1; a < A; ++a) sum = _mm256_add_ps(sum, acc[r * A + a]);
    out[r * n_dim] = ae::hsum8(sum);
  }
#else
  float acc[R] = {};
  for (int64_t g = 0; g < groups; ++g) {
    for (int j = 0; j < G; ++j) {
      const float w = Off ? q_at<Bits>(q, g, j, G) * s[g] + o[g] : q_at<Bits>(q, g, j, G) * s[g];
      for (int r = 0; r < R; ++r) acc[r] += w * x[r * k + g * G + j];
    }
  }
  for (int r = 0; r < R; ++r) out[r * n_dim] = acc[r];
#endif
}

constexpr int kMaxRows = 8;  // rows of x per pass over a weight row: eight accumulator registers

template <int Bits, int G, bool Off>
void linear_of(float* out, const float* x, const uint8_t* q, const float* s, const float* o, int64_t m_dim,
               int64_t k_dim, int64_t n_dim) {
  using Fn = void (*)(const float*, int64_t, const uint8_t*, const float*, const float*, float*, int64_t);
  static constexpr Fn kFns[kMaxRows + 1] = {
      nullptr, rows_times_row<Bits, G, Off, 1>, rows_times_row<Bits, G, Off, 2>, rows_times_row<Bits, G, Off, 3>,
      rows_times_row<Bits, G, Off, 4>, rows_times_row<Bits, G, Off, 5>, rows_times_row<Bits, G, Off, 6>,
      rows_times_row<Bits, G, Off, 7>, rows_times_row<Bits, G, Off, 8>};
  const int64_t q_row = k_dim * Bits / 8, s_row = k_dim / G;
  const int64_t row_bytes = q_row + s_row * 4 * (Off ? 2 : 1);
  const int64_t grain = std::max<int64_t>(8, (1 << 15) / row_bytes);
  // Weight rows go in tiles that stay in L2 while each group of x rows passes over them, each row
  // streamed whole (splitting K to keep x in L1 made the tile's rows many short streams, slower).
  const int64_t tile = std::max<int64_t>(1, (256 * 1024) / row_bytes);
  at::parallel_for(0, n_dim, grain, [&](int64_t n0, int64_t n1) {
    for (int64_t t0 = n0; t0 < n1; t0 += tile) {
      const int64_t t1 = std::min(n1, t0 + tile);
      for (int64_t m0 = 0; m0 < m_dim; m0 += kMaxRows) {
        const int64_t rows = std::min<int64_t>(kMaxRows, m_dim - m0);
        for (int64_t n = t0; n < t1; ++n)
          kFns[rows](x + m0 * k_dim, k_dim, q + n * q_row, s + n * s_row, Off ? o + n * s_row : nullptr,
                     out + m0 * n_dim + n, n_dim);
      }
    }
  });
}

// Calls f.template operator()<Bits, G, Off>() for the form of (q, scales, offsets).
template <class F>
void with_form(const at::Tensor& q, const at::Tensor& s, const at::Tensor& o, int64_t k, F&& f) {
  TORCH_CHECK(q.dim() == 2 && s.dim() == 2 && q.is_contiguous() && s.is_contiguous() && o.is_contiguous() &&
                  s.scalar_type() == at::kFloat && o.scalar_type() == at::kFloat && s.size(0) == q.size(0),
              "quant: q [N, *], float32 scales [N, K / G], offsets [N, K / G] or empty");
  const bool eight = q.scalar_type() == at::kChar;
  TORCH_CHECK(eight || q.scalar_type() == at::kByte, "quant: q is int8 (8-bit) or uint8 (nibbles)");
  TORCH_CHECK(q.size(1) == (eight ? k : k / 2) && s.size(1) > 0 && k % s.size(1) == 0, "quant: shapes do not hold K=", k);
  const int64_t group = k / s.size(1);
  const bool off = o.numel() > 0;
  TORCH_CHECK(!off || o.sizes() == s.sizes(), "quant: offsets must match scales");
  if (eight && group == 32 && off) return f.template operator()<8, 32, true>();
  if (eight && group == 32) return f.template operator()<8, 32, false>();
  if (eight && group == 16 && !off) return f.template operator()<8, 16, false>();
  if (!eight && group == 32 && off) return f.template operator()<4, 32, true>();
  TORCH_CHECK(false, "quant: no kernel for ", eight ? 8 : 4, "-bit groups of ", group, off ? " with" : " without", " offsets");
}

void quant_linear(at::Tensor out, const at::Tensor& x, const at::Tensor& q, const at::Tensor& s, const at::Tensor& o) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat && x.dim() == 2 && out.dim() == 2 &&
                  x.is_contiguous() && out.is_contiguous(), "quant_linear: contiguous float32 x and out");
  const int64_t m_dim = x.size(0), k_dim = x.size(1), n_dim = q.size(0);
  TORCH_CHECK(out.size(0) == m_dim && out.size(1) == n_dim, "quant_linear: bad output shape");
  with_form(q, s, o, k_dim, [&]<int Bits, int G, bool Off>() {
    if (m_dim > 0 && n_dim > 0)
      linear_of<Bits, G, Off>(out.data_ptr<float>(), x.data_ptr<float>(), static_cast<const uint8_t*>(q.data_ptr()),
                              s.data_ptr<float>(), Off ? o.data_ptr<float>() : nullptr, m_dim, k_dim, n_dim);
  });
}

void quant_dequantize(at::Tensor out, const at::Tensor& q, const at::Tensor& s, const at::Tensor& o) {
  TORCH_CHECK(out.scalar_type() == at::kFloat && out.dim() == 2 && out.is_contiguous() && out.size(0) == q.size(0),
              "quant_dequantize: float32 [N, K] out");
  const int64_t k = out.size(1);
  with_form(q, s, o, k, [&]<int Bits, int G, bool Off>() {
    const uint8_t* qp = static_cast<const uint8_t*>(q.data_ptr());
    const float* sp = s.data_ptr<float>();
    const float* op = Off ? o.data_ptr<float>() : nullptr;
    float* dst = out.data_ptr<float>();
    at::parallel_for(0, q.size(0), 16, [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        const uint8_t* row = qp + n * (k * Bits / 8);
        for (int64_t g = 0; g < k / G; ++g) {
          const float sc = sp[n * (k / G) + g], of = Off ? op[n * (k / G) + g] : 0.f;
          float* out_g = dst + n * k + g * G;
#ifdef AE_AVX2
          const __m256 sv = _mm256_set1_ps(sc), ov = _mm256_set1_ps(Off ? of : -kMagic * sc);
          for (int p = 0; p < G / 8; ++p)
            _mm256_storeu_ps(out_g + 8 * p, dequant8<Off>(magic_q8<Bits>(row + g * (G * Bits / 8), p), sv, ov));
#else
          for (int j = 0; j < G; ++j)
            out_g[j] = Off ? std::fma(q_at<Bits>(row, g, j, G), sc, of) : q_at<Bits>(row, g, j, G) * sc;
#endif
        }
      }
    });
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> quant_repack(const at::Tensor& raw, int64_t qtype, int64_t k) {
  TORCH_CHECK(raw.scalar_type() == at::kByte && raw.dim() == 2 && raw.is_contiguous(), "quant_repack: uint8 [N, row_bytes]");
  std::tuple<at::Tensor, at::Tensor, at::Tensor> result;
  const bool known = ae::gguf::with_block_type(qtype, [&]<class T>() {
    TORCH_CHECK(k > 0 && k % T::kBlock == 0 && raw.size(1) == k / T::kBlock * T::kBytes,
                "quant_repack: rows of ", raw.size(1), " bytes do not hold K=", k);
    const int64_t n = raw.size(0), groups = k / T::kGroup;
    const auto fopts = at::TensorOptions().dtype(at::kFloat);
    at::Tensor q = at::empty({n, T::kBits == 8 ? k : k / 2}, at::TensorOptions().dtype(T::kBits == 8 ? at::kChar : at::kByte));
    at::Tensor s = at::empty({n, groups}, fopts), o = at::empty({n, groups}, fopts);
    const uint8_t* src = raw.data_ptr<uint8_t>();
    at::parallel_for(0, n, 64, [&](int64_t n0, int64_t n1) {
      std::vector<int8_t> v(T::kBlock);
      for (int64_t r = n0; r < n1; ++r) {
        for (int64_t b = 0; b < k / T::kBlock; ++b) {
          const int64_t g0 = r * groups + b * (T::kBlock / T::kGroup);
          T::decode(src + r * raw.size(1) + b * T::kBytes, v.data(), s.data_ptr<float>() + g0, o.data_ptr<float>() + g0);
          if (T::kBits == 8) {
            std::copy(v.begin(), v.end(), q.data_ptr<int8_t>() + r * k + b * T::kBlock);
            continue;
          }
          uint8_t* dst = q.data_ptr<uint8_t>() + r * (k / 2) + b * (T::kBlock / 2);
          for (int g = 0; g < T::kBlock / 32; ++g)
            for (int i = 0; i < 16; ++i) dst[16 * g + i] = static_cast<uint8_t>(v[32 * g + i] | (v[32 * g + 16 + i] << 4));
        }
      }
    });
    const float* ov = o.data_ptr<float>();
    const bool no_offsets = T::kBits == 8 && std::all_of(ov, ov + o.numel(), [](float v) { return v == 0.f; });
    result = {q, s, no_offsets ? at::empty({0}, fopts) : o};
  });
  TORCH_CHECK(known, "quant_repack: unsupported GGML type ", qtype);
  return result;
}

}  // namespace

TORCH_LIBRARY_IMPL(agent_engine, CPU, m) {
  m.impl("quant_repack", &quant_repack);
  m.impl("quant_linear", &quant_linear);
  m.impl("quant_dequantize", &quant_dequantize);
}
