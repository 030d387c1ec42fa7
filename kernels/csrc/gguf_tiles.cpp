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
#include "tile_blocks.h"

namespace {

#if defined(AE_AMX)
using Part = ae::gguf::WidePart;

using ae::tiles::kBlockRows;
using ae::tiles::kGroupRows;
using ae::tiles::kTileK;

constexpr int64_t kMaxKBlock = 1024;          // K per dequantized block, about (whole quantization blocks)
constexpr int64_t kChunkBytes = 512 * 1024;   // bfloat16 x rows of one K block per chunk of rows (L2)

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

// A thread's buffers: a group's rows over one K block (float32, then bfloat16) and its two pair panels.
struct Scratch {
  std::vector<float> w;
  std::vector<uint16_t> w16;
  std::vector<uint16_t> panels;
};

// The group's rows over K block [k0, k0 + k_len) as its two pair panels (columns 0 .. 15, 16 .. 31),
// pair row kp of each holding a column's weights at k0 + 2kp, + 1; columns past the group's rows zero.
ae::tiles::PanelPair pack_group(const Part& part, const Group& g, int64_t k0, int64_t k_len, Scratch& s) {
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
  return {s.panels.data(), s.panels.data() + k_len * 16};
}

// The thread's groups [g0, g1) over every chunk of x rows, on ``Tiles``.
template <class Tiles>
void run_groups(const std::vector<Part>& parts, const std::vector<Group>& groups, int64_t g0, int64_t g1,
                const uint16_t* xb, int64_t m, int64_t k, ae::tiles::Blocking bl, float* out, int64_t ldo) {
  thread_local Scratch scratch;
  ae::tiles::run_blocks<Tiles>(
      g0, g1, xb, m, k, bl,
      [&](int64_t g, int64_t k0, int64_t k_len) { return pack_group(parts[groups[g].part], groups[g], k0, k_len, scratch); },
      [&](int64_t g, int64_t m0, int64_t rows, const float* acc) {
        const int64_t wrows = groups[g].n1 - groups[g].n0;
        float* dst = out + m0 * ldo + parts[groups[g].part].col + groups[g].n0;
        for (int64_t i = 0; i < rows; ++i) std::memcpy(dst + i * ldo, acc + i * kGroupRows, wrows * sizeof(float));
      });
}
#endif

}  // namespace

namespace AE_OPS_NS {

bool tiles_built() {
#if defined(AE_AMX)
  return true;
#else
  return false;
#endif
}

void gguf_linear_tiles(at::Tensor out, const at::Tensor& x, at::TensorList raws, at::IntArrayRef qtypes,
                       bool emulate) {
#if defined(AE_AMX)
  const std::vector<Part> parts = ae::gguf::wide_parts("gguf_linear_tiles", out, x, raws, qtypes);
  TORCH_CHECK(emulate || ae::tiles::granted(), "gguf_linear_tiles: this CPU has no AMX-BF16 tiles granted to this "
              "process (kernels/amx.py asks Linux for them)");
  const int64_t m = x.size(0), k = x.size(1);
  if (m == 0 || out.size(1) == 0) return;
  std::vector<Group> groups;
  for (size_t i = 0; i < parts.size(); ++i)
    for (int64_t n0 = 0; n0 < parts[i].rows; n0 += kGroupRows)
      groups.push_back({static_cast<int32_t>(i), n0, std::min(parts[i].rows, n0 + kGroupRows)});
  // K blocks of whole quantization blocks (32 or 256 weights: a multiple of a tile's 32).
  int64_t quantum = kTileK;
  for (const Part& p : parts) quantum = std::max(quantum, p.block);
  const ae::tiles::Blocking bl = ae::tiles::blocking(m, k, quantum, kMaxKBlock, kChunkBytes);
  const at::Tensor xb = ae::tiles::rounded_rows(x, (m + kBlockRows - 1) / kBlockRows * kBlockRows);
  const auto* xbp = reinterpret_cast<const uint16_t*>(xb.const_data_ptr());
  float* op = out.data_ptr<float>();
  const int64_t ldo = out.stride(0);
  at::parallel_for(0, static_cast<int64_t>(groups.size()), 1, [&](int64_t g0, int64_t g1) {
    if (emulate) run_groups<ae::amx::Emulated>(parts, groups, g0, g1, xbp, m, k, bl, op, ldo);
    else run_groups<ae::amx::Hardware>(parts, groups, g0, g1, xbp, m, k, bl, op, ldo);
  });
#else
  TORCH_CHECK(false, "gguf_linear_tiles: this build has no AMX tiles (they need a build for AVX512_BF16 by a "
              "compiler that knows AMX)");
#endif
}

}  // namespace AE_OPS_NS

AE_LIBRARY_IMPL(m) { m.impl("gguf_linear_tiles", &AE_OPS_NS::gguf_linear_tiles); }
