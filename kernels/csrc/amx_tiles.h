// AMX tile programs on the hardware, or on a scalar model of the same instructions.
//
// A kernel written against ``Tiles`` (template parameter) runs the tile instructions it names:
// ``Hardware`` issues them (LDTILECFG, TILEZERO, TILELOADD, TILESTORED, TDPBF16PS, TILERELEASE) and
// may run only on a CPU with AMX-TILE and AMX-BF16 whose OS granted this process the tile data
// state (kernels/amx.py asks; the Python side never dispatches here otherwise); ``Emulated`` holds
// eight tile registers per thread in memory and follows the instructions' documented semantics, so
// that a kernel's data layout, blocking and edges are tested on every CPU (slowly), and the hardware
// path differs from it only in the instructions themselves.
//
// Semantics kept by ``Emulated`` (Intel SDM, AMX): a tile has the configured rows (at most 16) of the
// configured bytes (at most 64); a load reads ``rows`` rows of ``colsb`` bytes ``stride`` bytes apart
// and zeroes the rest; a store writes them back; TDPBF16PS C += A . B with A rows x (2 K) bfloat16,
// B K rows x (N pairs of bfloat16), C rows x N float32: for each k in order, C[m][n] += a0 * b0 then
// += a1 * b1 in float32, products exact (bfloat16 x bfloat16 fits float32), each sum rounded to
// nearest even. The hardware also flushes denormal inputs and outputs to zero; the model does not.
#pragma once

#include <cstdint>
#include <cstring>

// The tiles are built where the compiler targets AVX512_BF16 and knows AMX (its AMX header: a
// toolchain whose assembler takes the mnemonics below); ``tiles_built()`` (gguf_tiles.cpp) says so.
#if defined(__x86_64__) && defined(__AVX512BF16__) && defined(__GNUC__) && __has_include(<amxbf16intrin.h>)
#define AE_AMX 1
#endif

namespace ae::amx {

constexpr int kTileRows = 16;   // rows of every tile here
constexpr int kTileBytes = 64;  // bytes of each row: 16 float32, 32 bfloat16 or 16 bfloat16 pairs

// A tile configuration as LDTILECFG reads it (palette 1, 64 bytes).
struct alignas(64) Config {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Eight full tiles (16 rows of 64 bytes): the one shape the kernels here use.
inline Config full_tiles() {
  Config c;
  for (int t = 0; t < 8; ++t) {
    c.rows[t] = kTileRows;
    c.colsb[t] = kTileBytes;
  }
  return c;
}

#if defined(AE_AMX)
// The instructions with their tile numbers as template arguments: inline assembly (GCC's intrinsic
// macros paste the number's spelling into the mnemonic, which a template parameter cannot give; its
// _tile_loadconfig also tells the compiler it reads 8 bytes of the 64: here the whole Config is the
// operand).
struct Hardware {
  static constexpr bool kEmulated = false;
  static inline void configure(const Config& c) { asm volatile("ldtilecfg %0" ::"m"(c)); }
  static inline void release() { asm volatile("tilerelease" ::); }
  template <int T>
  static inline void zero() {
    asm volatile("tilezero %%tmm%c0" ::"i"(T));
  }
  template <int T>
  static inline void load(const void* p, int64_t stride) {
    asm volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(p), "r"(stride), "i"(T) : "memory");
  }
  template <int T>
  static inline void store(void* p, int64_t stride) {
    asm volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(p), "r"(stride), "i"(T) : "memory");
  }
  template <int C, int A, int B>
  static inline void dot_bf16() {
    asm volatile("tdpbf16ps %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(C), "i"(A), "i"(B));
  }
};
#endif

struct Emulated {
  static constexpr bool kEmulated = true;

  struct State {
    Config config;
    alignas(64) uint8_t reg[8][kTileRows * kTileBytes];
  };
  static State& state() {
    thread_local State s;
    return s;
  }

  static void configure(const Config& c) {
    state().config = c;
    std::memset(state().reg, 0, sizeof(state().reg));
  }
  static void release() { configure(Config{}); }
  template <int T>
  static void zero() {
    std::memset(state().reg[T], 0, sizeof(state().reg[T]));
  }
  template <int T>
  static void load(const void* p, int64_t stride) {
    State& s = state();
    zero<T>();
    for (int r = 0; r < s.config.rows[T]; ++r)
      std::memcpy(s.reg[T] + r * kTileBytes, static_cast<const uint8_t*>(p) + r * stride, s.config.colsb[T]);
  }
  template <int T>
  static void store(void* p, int64_t stride) {
    State& s = state();
    for (int r = 0; r < s.config.rows[T]; ++r)
      std::memcpy(static_cast<uint8_t*>(p) + r * stride, s.reg[T] + r * kTileBytes, s.config.colsb[T]);
  }
  template <int C, int A, int B>
  static void dot_bf16() {
    State& s = state();
    const int rows = s.config.rows[C], n_count = s.config.colsb[C] / 4, k_count = s.config.colsb[A] / 4;
    for (int m = 0; m < rows; ++m) {
      float* c = reinterpret_cast<float*>(s.reg[C] + m * kTileBytes);
      const uint16_t* a = reinterpret_cast<const uint16_t*>(s.reg[A] + m * kTileBytes);
      for (int k = 0; k < k_count; ++k) {
        const uint16_t* b = reinterpret_cast<const uint16_t*>(s.reg[B] + k * kTileBytes);
        for (int n = 0; n < n_count; ++n) {
          c[n] += widen(a[2 * k]) * widen(b[2 * n]);
          c[n] += widen(a[2 * k + 1]) * widen(b[2 * n + 1]);
        }
      }
    }
  }

 private:
  static float widen(uint16_t bf16) {
    const uint32_t bits = static_cast<uint32_t>(bf16) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

}  // namespace ae::amx
