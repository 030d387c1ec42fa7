// The pieces of the AMX tile matmuls (gguf_tiles.cpp on GGUF blocks, panel_tiles.cpp on bfloat16 pair
// panels): whether the tiles may run here, x rounded to bfloat16 as A operands, and a 32 x 32 output
// block as four C tiles. Built only where amx_tiles.h has the tiles (a build for AVX512_BF16).
//
// The operands: x as bfloat16 rows [M rounded up to 32, K] (rows past M zero), its A tiles 16 rows x
// 32 of K read in place; the weights as pair panels of 16 columns, [K / 2][16] bfloat16 pairs each
// (lane 2c + j of pair row kp: column c's weight at k 2kp + j), TDPBF16PS's B operand 16 pair rows
// (32 of K, 1 KB) at a time.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/to.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "amx_tiles.h"

#if defined(AE_AMX)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ae::tiles {

constexpr int64_t kGroupRows = 32;  // weight rows (output columns) per block: two B tiles of 16 columns
constexpr int64_t kBlockRows = 32;  // x rows per output block: two A tiles of 16 rows
constexpr int64_t kTileK = 32;      // K per tile product
constexpr int kArchGetXcompPerm = 0x1022;
constexpr int kXfeatureTileData = 18;

// Whether this CPU has AMX-TILE and AMX-BF16 (CPUID leaf 7: EDX bits 24 and 22) and Linux granted this
// process the tile data state (checked on every call: the grant may come after the first).
inline bool granted() {
  static const bool listed = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 1) && (d >> 22 & 1);
  }();
  if (!listed) return false;
  unsigned long bits = 0;
  return syscall(SYS_arch_prctl, kArchGetXcompPerm, &bits) == 0 && (bits >> kXfeatureTileData & 1);
}

// x [M, K] rounded to bfloat16 (nearest even) into [padded_m, K], rows past M zero.
inline at::Tensor rounded_rows(const at::Tensor& x, int64_t padded_m) {
  return at::constant_pad_nd(x.to(at::kBFloat16), {0, 0, 0, padded_m - x.size(0)}).contiguous();
}

// The two B panels of one block of 32 output columns over one K block: each [K block / 2][16] bfloat16
// pairs (the second: columns 16 .. 31).
struct PanelPair {
  const uint16_t* first;
  const uint16_t* second;
};

// acc[32][32] (+)= x rows [32, K block] (``xb``, rows ``ldx`` bfloat16 apart) times ``b``, over
// ``k_tiles`` tiles of K.
template <class Tiles>
inline void block32(const uint16_t* xb, int64_t ldx, PanelPair b, int64_t k_tiles, float* acc, bool accumulate) {
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
    const int64_t b_off = t * 16 * kTileK;  // 16 pair rows of 16 columns: 512 bfloat16
    Tiles::template load<4>(xb + t * kTileK, x_bytes);
    Tiles::template load<5>(xb + 16 * ldx + t * kTileK, x_bytes);
    Tiles::template load<6>(b.first + b_off, ae::amx::kTileBytes);
    Tiles::template load<7>(b.second + b_off, ae::amx::kTileBytes);
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

// How a call walks x and K: K in blocks of ``k_block`` (whole quantization blocks), x rows in chunks
// of ``chunk`` (whole 32-row blocks) whose bfloat16 rows over one K block take about ``chunk_bytes``.
struct Blocking {
  int64_t k_block, chunk;
};

// Balanced K blocks of about ``max_k_block`` at most, each a multiple of ``quantum`` (a multiple of
// 32); balanced chunks of rows.
inline Blocking blocking(int64_t m, int64_t k, int64_t quantum, int64_t max_k_block, int64_t chunk_bytes) {
  const int64_t k_blocks = (k + max_k_block - 1) / max_k_block;
  const int64_t k_block = ((k + k_blocks - 1) / k_blocks + quantum - 1) / quantum * quantum;
  const int64_t max_chunk = std::max<int64_t>(kBlockRows, chunk_bytes / 2 / k_block);
  const int64_t n_chunks = (m + max_chunk - 1) / max_chunk;
  return {k_block, ((m + n_chunks - 1) / n_chunks + kBlockRows - 1) / kBlockRows * kBlockRows};
}

// The output blocks [g0, g1) of a call (each 32 columns), on this thread: per chunk of x's m rows
// (``xb``: x in bfloat16, [m rounded up to 32, k]), per block, per K block, ``panels_of(g, k0, k_len)``
// gives the block's PanelPair and the C tiles accumulate over K into a [rows rounded up to 32][32]
// float32 buffer, then ``emit(g, m0, rows, acc)`` writes the block's outputs. The tiles are configured
// on entry and released on exit.
template <class Tiles, class PanelsOf, class Emit>
void run_blocks(int64_t g0, int64_t g1, const uint16_t* xb, int64_t m, int64_t k, Blocking bl, PanelsOf&& panels_of,
                Emit&& emit) {
  thread_local std::vector<float> acc;
  Tiles::configure(ae::amx::full_tiles());
  for (int64_t m0 = 0; m0 < m; m0 += bl.chunk) {
    const int64_t rows = std::min(bl.chunk, m - m0);
    const int64_t padded = (rows + kBlockRows - 1) / kBlockRows * kBlockRows;
    acc.resize(padded * kGroupRows);
    for (int64_t g = g0; g < g1; ++g) {
      for (int64_t k0 = 0; k0 < k; k0 += bl.k_block) {
        const int64_t k_len = std::min(bl.k_block, k - k0);
        const PanelPair b = panels_of(g, k0, k_len);
        for (int64_t mb = 0; mb < padded; mb += kBlockRows)
          block32<Tiles>(xb + (m0 + mb) * k + k0, k, b, k_len / kTileK, acc.data() + mb * kGroupRows, k0 > 0);
      }
      emit(g, m0, rows, static_cast<const float*>(acc.data()));
    }
  }
  Tiles::release();
}

}  // namespace ae::tiles
#endif
