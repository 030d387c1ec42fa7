// K-quant weight rows (Q4_K, Q6_K) four at a time, their codes unpacked into bytes and interleaved,
// against activations quantized as kquant_dot.h's ``XBlock``: the int8 route's steps of six rows of x
// or more on the 256-bit route (AVX2, where a build has no AVX-512): prefill, and decode of six streams
// or more.
//
// Why: with a row's 32 codes of one sub-block in a vector, each 32 products of a row of x need their
// own ``maddubs`` and their own ``madd`` by the sub-block's scale (two multiplies per 32). Here a
// vector holds 8 consecutive codes of each of four weight rows (the layout llama.cpp's repacked GEMMs
// use), so the 16-bit sums of one scale's vectors add up lane by lane before one ``madd`` by the four
// rows' scales: per 128 products five multiplies instead of eight for Q4_K (a scale per 32 weights),
// six for Q6_K (per 16); and a weight is unpacked once per call (``pack_q4k`` / ``pack_q6k``, into a
// per-thread buffer) instead of once per four rows of x.
//
// Lanes: a code vector's bytes 8r .. 8r + 7 are weight row r's; ``maddubs`` against 8 bytes of x
// broadcast to the four quarters puts row r's pair sums in 16-bit lanes 4r .. 4r + 3, and ``madd``
// by a scale vector whose lanes 4r .. 4r + 3 hold row r's scale leaves row r's sums in 32-bit lanes
// 2r, 2r + 1. Every per-row vector here (d, dmin, the min and offset terms) uses that pair layout, and
// the two lanes of a pair are added at the end.
// Integer ranges: Q4_K four pair sums <= 4 * 2 * 15 * 127 < 2^15, Q6_K two <= 2 * 2 * 63 * 127 < 2^15.
// Results equal kquant_dot.h's up to float32 summation order (the integer sums are the same).
#pragma once

#include <cstdint>
#include <cstring>

#include "kquant_dot.h"

#if defined(__AVX2__) && defined(__FMA__) && !(defined(__AVX512BW__) && defined(__AVX512VL__))
#define AE_KQUANT_GROUPS 1
#include <immintrin.h>

namespace ae::kquant_groups {

using ae::kquant::XBlock;

constexpr int kRows = 4;      // weight rows per group
constexpr int kMaxXRows = 6;  // rows of x per pass over a group's codes (their integer sums in registers)

// One Q4_K block (256 weights) of a group of four rows.
struct Q4KBlock {
  uint8_t codes[8][4][32];  // [sub-block j][vector v]: bytes 8r + i = row r's code at 32j + 8v + i
  int16_t scales[8][16];    // [j]: lanes 4r .. 4r + 3 = row r's scale of sub-block j
  int16_t mins[2][16];      // [p]: lanes 8t + j = row 2p + t's min of sub-block j
  float d[8], dmin[8];      // pair layout
};

// One Q6_K block of a group of four rows.
struct Q6KBlock {
  uint8_t codes[16][2][32];  // [group g of 16][vector v]: bytes 8r + i = row r's code (0 .. 63) at 16g + 8v + i
  int16_t scales[16][16];    // [g]: lanes 4r .. 4r + 3 = row r's scale of group g
  int16_t row_scales[4][16];  // [r]: row r's 16 scales (its -32 offset against the bsums)
  float d[8];
};

// The 4 x 4 64-bit words of a, b, c, d transposed: out[v] = (a[v], b[v], c[v], d[v]).
inline void interleave4(__m256i a, __m256i b, __m256i c, __m256i d, __m256i out[4]) {
  const __m256i ab_lo = _mm256_unpacklo_epi64(a, b), ab_hi = _mm256_unpackhi_epi64(a, b);
  const __m256i cd_lo = _mm256_unpacklo_epi64(c, d), cd_hi = _mm256_unpackhi_epi64(c, d);
  out[0] = _mm256_permute2x128_si256(ab_lo, cd_lo, 0x20);
  out[1] = _mm256_permute2x128_si256(ab_hi, cd_hi, 0x20);
  out[2] = _mm256_permute2x128_si256(ab_lo, cd_lo, 0x31);
  out[3] = _mm256_permute2x128_si256(ab_hi, cd_hi, 0x31);
}

inline void store_pair_layout(float* dst, const float v[4]) {
  for (int r = 0; r < kRows; ++r) dst[2 * r] = dst[2 * r + 1] = v[r];
}

// Byte shuffles of the packs' scales (pshufb works within each 128-bit half), built once.
struct ScaleShuffles {
  // [j]: byte j of each row's 8 Q4_K scales (rows 0 / 1 in the low half, 2 / 3 in the high, 8 bytes
  // apart) into the low bytes of its four 16-bit lanes (4r .. 4r + 3), high bytes zero.
  alignas(32) int8_t q4k[8][32];
  // [g][parity]: scale g of a half's one row (16 bytes a half) into the high bytes of the lanes of
  // rows ``parity`` and ``parity`` + 2, zero elsewhere.
  alignas(32) int8_t q6k[16][2][32];

  ScaleShuffles() {
    for (int b = 0; b < 32; ++b) {
      const int lane = b / 2, row = lane / 4;
      for (int j = 0; j < 8; ++j) q4k[j][b] = b % 2 == 0 ? static_cast<int8_t>(8 * (row % 2) + j) : int8_t{-128};
      for (int g = 0; g < 16; ++g)
        for (int parity = 0; parity < 2; ++parity)
          q6k[g][parity][b] = b % 2 == 1 && row % 2 == parity ? static_cast<int8_t>(g) : int8_t{-128};
    }
  }
  static const ScaleShuffles& get() {
    static const ScaleShuffles shuffles;
    return shuffles;
  }
};

inline __m256i load32(const int8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }

// Rows ``w[0..3]`` (each ``blocks`` Q4_K blocks) into ``out[blocks]``.
inline void pack_q4k(const uint8_t* const w[4], int64_t blocks, Q4KBlock* out) {
  const ScaleShuffles& shuffles = ScaleShuffles::get();
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < blocks; ++b) {
    Q4KBlock& o = out[b];
    const uint8_t* blk[4] = {w[0] + b * 144, w[1] + b * 144, w[2] + b * 144, w[3] + b * 144};
    float d[4], dmin[4];
    alignas(32) uint8_t sc[4][8], m[4][8];  // row r's 6-bit scales and mins
    for (int r = 0; r < kRows; ++r) {
      ae::kquant::q4k_scales(blk[r] + 4, sc[r], m[r]);
      d[r] = ae::kquant::fp16(blk[r]);
      dmin[r] = ae::kquant::fp16(blk[r] + 2);
    }
    // scales[j]: lanes 4r .. 4r + 3 take row r's scale j (ScaleShuffles::q4k).
    const __m256i sc_rows = _mm256_load_si256(reinterpret_cast<const __m256i*>(sc));
    for (int j = 0; j < 8; ++j) {
      const __m256i lanes = _mm256_shuffle_epi8(sc_rows, load32(shuffles.q4k[j]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.scales[j]), lanes);
    }
    for (int half = 0; half < 2; ++half) {  // rows 2 half, 2 half + 1: m is 16 contiguous bytes there
      const __m128i mins = _mm_load_si128(reinterpret_cast<const __m128i*>(m[2 * half]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.mins[half]), _mm256_cvtepu8_epi16(mins));
    }
    store_pair_layout(o.d, d);
    store_pair_layout(o.dmin, dmin);
    for (int c = 0; c < 4; ++c) {  // nibble bytes 32c .. 32c + 31: sub-blocks 2c (low) and 2c + 1 (high)
      __m256i q[4];
      for (int r = 0; r < kRows; ++r) q[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[r] + 16 + 32 * c));
      for (int half = 0; half < 2; ++half) {
        __m256i v[4];
        for (int r = 0; r < kRows; ++r) v[r] = _mm256_and_si256(half == 0 ? q[r] : _mm256_srli_epi16(q[r], 4), low4);
        __m256i t[4];
        interleave4(v[0], v[1], v[2], v[3], t);
        for (int i = 0; i < 4; ++i) _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.codes[2 * c + half][i]), t[i]);
      }
    }
  }
}

// Rows ``w[0..3]`` (each ``blocks`` Q6_K blocks) into ``out[blocks]``.
inline void pack_q6k(const uint8_t* const w[4], int64_t blocks, Q6KBlock* out) {
  const ScaleShuffles& shuffles = ScaleShuffles::get();
  const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(3);
  for (int64_t b = 0; b < blocks; ++b) {
    Q6KBlock& o = out[b];
    const uint8_t* blk[4] = {w[0] + b * 210, w[1] + b * 210, w[2] + b * 210, w[3] + b * 210};
    float d[4];
    __m128i s[4];  // row r's 16 int8 scales
    for (int r = 0; r < kRows; ++r) {
      s[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[r] + 192));
      d[r] = ae::kquant::fp16(blk[r] + 208);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.row_scales[r]), _mm256_cvtepi8_epi16(s[r]));
    }
    // scales[g]: lanes 4r .. 4r + 3 = row r's scale g, sign-extended: rows 0 and 2 from the halves of
    // ``even``, 1 and 3 from ``odd``, each byte shuffled into a lane's high byte (ScaleShuffles::q6k)
    // and shifted down.
    const __m256i even = _mm256_setr_m128i(s[0], s[2]), odd = _mm256_setr_m128i(s[1], s[3]);
    for (int g = 0; g < 16; ++g) {
      const __m256i both = _mm256_or_si256(_mm256_shuffle_epi8(even, load32(shuffles.q6k[g][0])),
                                           _mm256_shuffle_epi8(odd, load32(shuffles.q6k[g][1])));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.scales[g]), _mm256_srai_epi16(both, 8));
    }
    store_pair_layout(o.d, d);
    // Weights 128h + 32t + i (t < 4): low nibble of ql[64h + 32 (t % 2) + i] >> 4 (t / 2), high bits of
    // qh[32h + i] >> 2t (as kquant_dot.h's 256-bit q6k_rows): groups 8h + 2t and 8h + 2t + 1.
    for (int h = 0; h < 2; ++h) {
      for (int t = 0; t < 4; ++t) {
        __m256i v[4];
        for (int r = 0; r < kRows; ++r) {
          const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[r] + 64 * h + 32 * (t % 2)));
          const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[r] + 128 + 32 * h));
          const __m256i lo = _mm256_and_si256(t < 2 ? ql : _mm256_srli_epi16(ql, 4), low4);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * t), two);
          v[r] = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
        }
        __m256i q[4];
        interleave4(v[0], v[1], v[2], v[3], q);  // q[0], q[1]: group g's two vectors; q[2], q[3]: g + 1's
        const int g = 8 * h + 2 * t;
        for (int i = 0; i < 4; ++i) _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.codes[g + i / 2][i % 2]), q[i]);
      }
    }
  }
}

using ae::kquant::scaled_add;

// 8 bytes of x at p in each quarter of a vector.
inline __m256i broadcast8(const int8_t* p) {
  int64_t v;
  std::memcpy(&v, p, 8);
  return _mm256_set1_epi64x(v);
}

inline __m256i load_vector(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The 16-bit pair sums of two code vectors against x's 16 bytes at ``xq`` (8 to each, broadcast).
inline __m256i pair_sums(__m256i w0, __m256i w1, const int8_t* xq) {
  return _mm256_add_epi16(_mm256_maddubs_epi16(w0, broadcast8(xq)), _mm256_maddubs_epi16(w1, broadcast8(xq + 8)));
}

// The pair-layout sums (lanes 2r, 2r + 1) of one row of x into out[0..3], the group's four adjacent
// output columns.
inline void store_rows(__m256 acc, float* out) {
  const __m256 h = _mm256_hadd_ps(acc, acc);  // lanes 0, 1: rows 0, 1; lanes 4, 5: rows 2, 3
  out[0] = _mm256_cvtss_f32(h);
  out[1] = _mm_cvtss_f32(_mm_shuffle_ps(_mm256_castps256_ps128(h), _mm256_castps256_ps128(h), 1));
  const __m128 hi = _mm256_extractf128_ps(h, 1);
  out[2] = _mm_cvtss_f32(hi);
  out[3] = _mm_cvtss_f32(_mm_shuffle_ps(hi, hi, 1));
}

// out[r * ldo + 0 .. 3] = the group's four rows (``g``, ``blocks`` Q4_K blocks) dot R rows of x.
template <int R>
void q4k_group(const Q4KBlock* g, const XBlock* x, int64_t x_row, int64_t blocks, float* out, int64_t ldo) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  for (int64_t b = 0; b < blocks; ++b) {
    const Q4KBlock& p = g[b];
    __m256i sum[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const __m256i w0 = load_vector(p.codes[j][0]), w1 = load_vector(p.codes[j][1]);
      const __m256i w2 = load_vector(p.codes[j][2]), w3 = load_vector(p.codes[j][3]);
      const __m256i sc = load_vector(p.scales[j]);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int8_t* xq = x[r * x_row + b].q + 32 * j;
        sum[r] = scaled_add(sum[r], _mm256_add_epi16(pair_sums(w0, w1, xq), pair_sums(w2, w3, xq + 16)), sc);
      }
    }
    const __m256 d = _mm256_loadu_ps(p.d), dmin = _mm256_loadu_ps(p.dmin);
    const __m256i m01 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.mins[0]));
    const __m256i m23 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.mins[1]));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const XBlock& xb = x[r * x_row + b];
      const __m256i bs = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums32)));
      // rows 0, 2 | 1, 3 after the in-lane hadd; reordered to the pair layout
      const __m256i mins = _mm256_permutevar8x32_epi32(
          _mm256_hadd_epi32(_mm256_madd_epi16(m01, bs), _mm256_madd_epi16(m23, bs)), order);
      const __m256 dx = _mm256_set1_ps(xb.d);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[r]), _mm256_mul_ps(d, dx), acc[r]);
      acc[r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(dmin, dx), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) store_rows(acc[r], out + r * ldo);
}

// The same for a group of Q6_K rows.
template <int R>
void q6k_group(const Q6KBlock* g, const XBlock* x, int64_t x_row, int64_t blocks, float* out, int64_t ldo) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < blocks; ++b) {
    const Q6KBlock& p = g[b];
    __m256i sum[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
    for (int j = 0; j < 16; j += 2) {  // two groups of 16 a pass: four code vectors in registers
      const __m256i w0 = load_vector(p.codes[j][0]), w1 = load_vector(p.codes[j][1]);
      const __m256i w2 = load_vector(p.codes[j + 1][0]), w3 = load_vector(p.codes[j + 1][1]);
      const __m256i sc0 = load_vector(p.scales[j]), sc1 = load_vector(p.scales[j + 1]);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int8_t* xq = x[r * x_row + b].q + 16 * j;
        sum[r] = scaled_add(scaled_add(sum[r], pair_sums(w0, w1, xq), sc0), pair_sums(w2, w3, xq + 16), sc1);
      }
    }
    const __m256 d = _mm256_loadu_ps(p.d);
    const __m256i rs0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.row_scales[0]));
    const __m256i rs1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.row_scales[1]));
    const __m256i rs2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.row_scales[2]));
    const __m256i rs3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.row_scales[3]));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const XBlock& xb = x[r * x_row + b];
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
      // sum_g sc[g] * bsums[g] per row: [r0a, r1a, r2a, r3a | r0b, r1b, r2b, r3b] -> pair layout
      const __m256i h01 = _mm256_hadd_epi32(_mm256_madd_epi16(rs0, bs), _mm256_madd_epi16(rs1, bs));
      const __m256i h23 = _mm256_hadd_epi32(_mm256_madd_epi16(rs2, bs), _mm256_madd_epi16(rs3, bs));
      const __m256i offs = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(h01, h23), order);
      const __m256i total = _mm256_sub_epi32(sum[r], _mm256_slli_epi32(offs, 5));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, _mm256_set1_ps(xb.d)), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) store_rows(acc[r], out + r * ldo);
}

}  // namespace ae::kquant_groups
#endif
