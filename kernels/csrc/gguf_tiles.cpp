// ``agent_engine::gguf_linear_tiles(out, x, raws, qtypes, emulate)``: out[M, sum N_i] = x[M, K] @ [W_1;
// W_2; ...]^T for the GGUF weights of a fused matmul (the arguments and output of gguf_linear_wide),
// multiplied in AMX tiles: the wide route's tile form, for prefill steps on a CPU whose OS grants the
// tile state.
//
// Each weight's rows go in groups of 32 (never across two weights), split between the threads. A
// group's rows are dequantized a block of K at a time (gguf_dequant.h: gguf-py's values), rounded to
// bfloat16 (nearest even) and laid out as two pair panels of 16 columns, [K / 2][16] bfloat16 pairs
// each: exactly TDPBF16PS's B operand, 16 pair rows (32 of K) a tile. x is rounded to bfloat16 once
// per call, [M rounded up to 32, K] row-major with zero rows past M: its A tiles are 16 rows x 32 of
// K read in place. Every 32 x 32 block of the output is four float32 C tiles (two A tiles times two
// B tiles) accumulated over the K block, kept between K blocks in a per-thread buffer, and written
// to out's columns when the group's K is done. So a weight element is dequantized once per chunk of
// x rows and used for all of them, and the result is the product of the two rounded operands up to
// float32 summation order: that of gguf_linear_wide's bfloat16 form.
//
// ``emulate``: the same program on amx_tiles.h's scalar model of the instructions (tests on CPUs
// without AMX; slow). Without it the call checks that the CPU has AMX-BF16 and that Linux granted this
// process the tile data state (kernels/amx.py asks), and raises instead of faulting otherwise. Only a
// build for AVX512_BF16 has the op; others raise.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "ops_library.h"
#include "step_ops.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "amx_tiles.h"
#include "gguf_dequant.h"
#include "gguf_parts.h"
#include "panel_bf16.h"

#if defined(AE_AMX)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace {

#if defined(AE_AMX)
using Part = ae::gguf::WidePart;

constexpr int64_t kGroupRows = 32;            // weight rows per group: two B tiles of 16 columns
constexpr int64_t kBlockRows = 32;            // x rows per output block: two A tiles of 16 rows
constexpr int64_t kTileK = 32;                // K per tile product
constexpr int64_t kMaxKBlock = 1024;          // K per dequantized block, about (whole quantization blocks)
constexpr int64_t kChunkBytes = 512 * 1024;   // bfloat16 x rows of one K block per chunk of rows (L2)
constexpr int kArchGetXcompPerm = 0x1022;
constexpr int kXfeatureTileData = 18;

// Whether this CPU has AMX-TILE and AMX-BF16 (CPUID leaf 7: EDX bits 24 and 22) and Linux granted this
// process the tile data state (checked on every call: the grant may come after the first).
bool tiles_granted() {
  static const bool listed = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 1) && (d >> 22 & 1);
  }();
  if (!listed) return false;
  unsigned long bits = 0;
  return syscall(SYS_arch_prctl, kArchGetXcompPerm, &bits) == 0 && (bits >> kXfeatureTileData & 1);
}

// The 16 x 16 32-bit words at src (rows ``ss`` words apart) transposed into dst (rows ``ds`` apart).
inline void transpose16(const uint32_t* src, int64_t ss, uint32_t* dst, int64_t ds) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(src + i * ss);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int h = 0; h < 16; h += 8) {
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_i32x4(r[h + i], r[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_i32x4(r[h + i], r[h + i + 4], 0xdd);
    }
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
  }
  for (int i = 0; i < 16; ++i) _mm512_storeu_si512(dst + i * ds, r[i]);
}

// A group of weight rows: part, rows [n0, n1).
struct Group {
  int32_t part;
  int64_t n0, n1;
};

// A thread's buffers: a group's rows over one K block (float32, then bfloat16), its two pair panels,
// and its outputs over a chunk of x rows (32 columns a row).
struct Scratch {
  std::vector<float> w;
  std::vector<uint16_t> w16;
  std::vector<uint16_t> panels;
  std::vector<float> acc;
};

// The group's rows over K block [k0, k0 + k_len) into ``s.panels``: pair panel h (columns 16h ..
// 16h + 15) at h * k_len * 16, pair row kp of it holding each column's weights at k0 + 2kp, + 1;
// columns past the group's rows zero.
void pack_group(const Part& part, const Group& g, int64_t k0, int64_t k_len, Scratch& s) {
  const int64_t wrows = g.n1 - g.n0;
  s.w.resize(kGroupRows * k_len);
  s.w16.resize(kGroupRows * k_len);
  s.panels.resize(kGroupRows * k_len);
  for (int64_t r = 0; r < wrows; ++r)
    ae::dequant::row_span(part.qtype, part.w + (g.n0 + r) * part.stride, k0 / part.block, (k0 + k_len) / part.block,
                          s.w.data() + r * k_len);
  std::fill(s.w.begin() + wrows * k_len, s.w.end(), 0.f);
  ae::panel_bf16::round_row(s.w.data(), kGroupRows * k_len, s.w16.data());
  const auto* words = reinterpret_cast<const uint32_t*>(s.w16.data());  // [32][k_len / 2] pairs
  auto* panels = reinterpret_cast<uint32_t*>(s.panels.data());          // [2][k_len / 2][16] pairs
  const int64_t pairs = k_len / 2;
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t kp = 0; kp < pairs; kp += 16)
      transpose16(words + 16 * h * pairs + kp, pairs, panels + (h * pairs + kp) * 16, 16);
}

// acc[32][32] (+)= x rows [32, K block] (``xb``, rows ``ldx`` bfloat16 apart) times the group's two
// panels (``panels``, the second ``half`` bfloat16 after the first), over ``k_tiles`` tiles of K.
template <class Tiles>
void block32(const uint16_t* xb, int64_t ldx, const uint16_t* panels, int64_t half, int64_t k_tiles,
                           float* acc, bool accumulate) {
  constexpr int64_t kAccBytes = kGroupRows * sizeof(float);  // acc row stride
  float* c[4] = {acc, acc + 16, acc + 16 * kGroupRows, acc + 16 * kGroupRows + 16};
  if (accumulate) {
    Tiles::template load<0>(c[0], kAccBytes);
    Tiles::template load<1>(c[1], kAccBytes);
    Tiles::template load<2>(c[2], kAccBytes);
    Tiles::template load<3>(c[3], kAccBytes);
  } else {
    Tiles::template zero<0>();
    Tiles::template zero<1>();
    Tiles::template zero<2>();
    Tiles::template zero<3>();
  }
  const int64_t x_bytes = ldx * 2;
  for (int64_t t = 0; t < k_tiles; ++t) {
    const uint16_t* b = panels + t * 16 * kTileK;  // 16 pair rows of 16 columns: 512 bfloat16
    Tiles::template load<4>(xb + t * kTileK, x_bytes);
    Tiles::template load<5>(xb + 16 * ldx + t * kTileK, x_bytes);
    Tiles::template load<6>(b, ae::amx::kTileBytes);
    Tiles::template load<7>(b + half, ae::amx::kTileBytes);
    Tiles::template dot_bf16<0, 4, 6>();
    Tiles::template dot_bf16<1, 4, 7>();
    Tiles::template dot_bf16<2, 5, 6>();
    Tiles::template dot_bf16<3, 5, 7>();
  }
  Tiles::template store<0>(c[0], kAccBytes);
  Tiles::template store<1>(c[1], kAccBytes);
  Tiles::template store<2>(c[2], kAccBytes);
  Tiles::template store<3>(c[3], kAccBytes);
}

// The groups [g0, g1) for x rows [m0, m0 + rows) (``padded``: rows rounded up to 32; ``xb``: all of x
// in bfloat16, [M rounded up to 32, K]): every K block's panels times the chunk into ``s.acc``, then
// acc into out's columns.
template <class Tiles>
void groups_over_chunk(const std::vector<Part>& parts, const std::vector<Group>& groups, int64_t g0, int64_t g1,
                       const uint16_t* xb, int64_t k, int64_t k_block, int64_t m0, int64_t rows, int64_t padded,
                       float* out, int64_t ldo, Scratch& s) {
  s.acc.resize(padded * kGroupRows);
  for (int64_t g = g0; g < g1; ++g) {
    const Part& part = parts[groups[g].part];
    for (int64_t k0 = 0; k0 < k; k0 += k_block) {
      const int64_t k_len = std::min(k_block, k - k0);
      pack_group(part, groups[g], k0, k_len, s);
      for (int64_t mb = 0; mb < padded; mb += kBlockRows)
        block32<Tiles>(xb + (m0 + mb) * k + k0, k, s.panels.data(), k_len * 16, k_len / kTileK,
                       s.acc.data() + mb * kGroupRows, k0 > 0);
    }
    const int64_t wrows = groups[g].n1 - groups[g].n0;
    float* dst = out + m0 * ldo + part.col + groups[g].n0;
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(dst + i * ldo, s.acc.data() + i * kGroupRows, wrows * sizeof(float));
  }
}

// x [M, K] rounded to bfloat16 into [padded_m, K], rows past M zero.
at::Tensor rounded_rows(const at::Tensor& x, int64_t padded_m) {
  const int64_t m = x.size(0), k = x.size(1);
  at::Tensor xb = at::empty({padded_m, k}, x.options().dtype(at::kBFloat16));
  auto* dst = reinterpret_cast<uint16_t*>(xb.data_ptr());
  const float* src = x.data_ptr<float>();
  at::parallel_for(0, padded_m, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (r < m) ae::panel_bf16::round_row(src + r * k, k, dst + r * k);
      else std::memset(dst + r * k, 0, k * sizeof(uint16_t));
    }
  });
  return xb;
}

// Every chunk of x rows over the thread's groups [g0, g1), with the tiles configured for ``Tiles``.
template <class Tiles>
void run_groups(const std::vector<Part>& parts, const std::vector<Group>& groups, int64_t g0, int64_t g1,
                const uint16_t* xb, int64_t m, int64_t k, int64_t k_block, int64_t chunk, float* out, int64_t ldo) {
  thread_local Scratch scratch;
  const ae::amx::Config config = ae::amx::full_tiles();
  Tiles::configure(config);
  for (int64_t m0 = 0; m0 < m; m0 += chunk) {
    const int64_t rows = std::min(chunk, m - m0);
    const int64_t padded = (rows + kBlockRows - 1) / kBlockRows * kBlockRows;
    groups_over_chunk<Tiles>(parts, groups, g0, g1, xb, k, k_block, m0, rows, padded, out, ldo, scratch);
  }
  Tiles::release();
}
#endif

}  // namespace

namespace AE_OPS_NS {

void gguf_linear_tiles(at::Tensor out, const at::Tensor& x, at::TensorList raws, at::IntArrayRef qtypes,
                       bool emulate) {
#if defined(AE_AMX)
  const std::vector<Part> parts = ae::gguf::wide_parts("gguf_linear_tiles", out, x, raws, qtypes);
  TORCH_CHECK(emulate || tiles_granted(), "gguf_linear_tiles: this CPU has no AMX-BF16 tiles granted to this "
              "process (kernels/amx.py asks Linux for them)");
  const int64_t m = x.size(0), k = x.size(1);
  if (m == 0 || out.size(1) == 0) return;
  std::vector<Group> groups;
  for (size_t i = 0; i < parts.size(); ++i)
    for (int64_t n0 = 0; n0 < parts[i].rows; n0 += kGroupRows)
      groups.push_back({static_cast<int32_t>(i), n0, std::min(parts[i].rows, n0 + kGroupRows)});
  // K blocks: balanced, about kMaxKBlock at most, of whole quantization blocks (32 or 256 weights, so
  // a multiple of a tile's 32). Rows: balanced chunks of whole 32-row blocks whose bfloat16 rows over
  // one K block take about kChunkBytes.
  int64_t quantum = kTileK;
  for (const Part& p : parts) quantum = std::max(quantum, p.block);
  const int64_t k_blocks = (k + kMaxKBlock - 1) / kMaxKBlock;
  const int64_t k_block = ((k + k_blocks - 1) / k_blocks + quantum - 1) / quantum * quantum;
  const int64_t max_chunk = std::max<int64_t>(kBlockRows, kChunkBytes / 2 / k_block);
  const int64_t n_chunks = (m + max_chunk - 1) / max_chunk;
  const int64_t chunk = ((m + n_chunks - 1) / n_chunks + kBlockRows - 1) / kBlockRows * kBlockRows;
  const at::Tensor xb = rounded_rows(x, (m + kBlockRows - 1) / kBlockRows * kBlockRows);
  const auto* xbp = reinterpret_cast<const uint16_t*>(xb.const_data_ptr());
  float* op = out.data_ptr<float>();
  const int64_t ldo = out.stride(0);
  at::parallel_for(0, static_cast<int64_t>(groups.size()), 1, [&](int64_t g0, int64_t g1) {
    if (emulate) run_groups<ae::amx::Emulated>(parts, groups, g0, g1, xbp, m, k, k_block, chunk, op, ldo);
    else run_groups<ae::amx::Hardware>(parts, groups, g0, g1, xbp, m, k, k_block, chunk, op, ldo);
  });
#else
  TORCH_CHECK(false, "gguf_linear_tiles: AMX tiles need a build for AVX512_BF16 (this one is not)");
#endif
}

}  // namespace AE_OPS_NS

AE_LIBRARY_IMPL(m) { m.impl("gguf_linear_tiles", &AE_OPS_NS::gguf_linear_tiles); }
