// GGUF quantized blocks decoded into the matmul kernel's form: per weight a small integer q, per group
// of G consecutive weights a float32 scale s and offset o, such that fma(q, s, o) (one rounding) is
// the weight gguf-py's ``dequantize`` gives, bit for bit (a zero may come out +0 where it has -0).
// That holds because s * q is exact in float32 for every type here (an fp16 scale times at most an
// 8-bit integer, or a 17-bit Q4_K sub-scale times a nibble), so the reference's two roundings and the
// kernel's one agree; Q6_K's s * q may round, and its offset is 0, so both round once. Scalar code: it runs once per weight when a model loads.
//
// decode(block, q, s, o) writes kBlock values of q (int8), kBlock / kGroup of s and of o.
#pragma once

#include <c10/util/Half.h>

#include <cstdint>
#include <cstring>

namespace ae::gguf {

inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return c10::detail::fp16_ieee_to_fp32_value(h);
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1: 32 weights; nibble j of byte i is weight i + 16j; Q5 adds bit i of the
// 32-bit qh as the fifth bit of weight i. Q4_0 / Q5_0: d * (q - 8 or 16); Q4_1 / Q5_1: d * q + m.
template <bool kMin, bool kFifth, int kId>
struct Q32 {
  static constexpr int kType = kId, kBlock = 32, kGroup = 32, kBits = kFifth ? 8 : 4;
  static constexpr int kBytes = 2 + (kMin ? 2 : 0) + (kFifth ? 4 : 0) + 16;
  static void decode(const uint8_t* b, int8_t* q, float* s, float* o) {
    const float d = half_at(b);
    uint32_t qh = 0;
    if (kFifth) std::memcpy(&qh, b + (kMin ? 4 : 2), 4);
    const uint8_t* qs = b + kBytes - 16;
    for (int i = 0; i < 32; ++i) {
      int v = (qs[i % 16] >> (4 * (i / 16))) & 0xF;
      if (kFifth) v |= ((qh >> i) & 1) << 4;
      q[i] = static_cast<int8_t>(kFifth && !kMin ? v - 16 : v);  // Q4_0 keeps 0..15: its -8 is the offset
    }
    s[0] = d;
    o[0] = kMin ? half_at(b + 2) : (kFifth ? 0.f : -8.f * d);
  }
};
using Q4_0 = Q32<false, false, 2>;
using Q4_1 = Q32<true, false, 3>;
using Q5_0 = Q32<false, true, 6>;
using Q5_1 = Q32<true, true, 7>;

struct Q8_0 {
  static constexpr int kType = 8, kBlock = 32, kGroup = 32, kBits = 8, kBytes = 34;
  static void decode(const uint8_t* b, int8_t* q, float* s, float* o) {
    std::memcpy(q, b + 2, 32);
    s[0] = half_at(b);
    o[0] = 0.f;
  }
};

// Q4_K: 256 weights: d, dmin (fp16), twelve bytes of 6-bit scales and mins of eight sub-blocks of 32,
// 128 bytes of nibbles (chunk c of 64 weights: low nibbles of bytes 32c.. are sub-block 2c, high 2c+1).
// Weight = (d * scale) * q - dmin * min.
struct Q4_K {
  static constexpr int kType = 12, kBlock = 256, kGroup = 32, kBits = 4, kBytes = 144;
  static void decode(const uint8_t* b, int8_t* q, float* s, float* o) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t* sc = b + 4;
    for (int i = 0; i < 4; ++i) {
      s[i] = d * static_cast<float>(sc[i] & 63);
      o[i] = -(dmin * static_cast<float>(sc[i + 4] & 63));
      s[i + 4] = d * static_cast<float>((sc[i + 8] & 0xF) | ((sc[i] >> 2) & 0x30));
      o[i + 4] = -(dmin * static_cast<float>((sc[i + 8] >> 4) | ((sc[i + 4] >> 2) & 0x30)));
    }
    const uint8_t* qs = b + 16;
    for (int i = 0; i < 256; ++i) q[i] = static_cast<int8_t>((qs[32 * (i / 64) + i % 32] >> (4 * ((i / 32) % 2))) & 0xF);
  }
};

// Q6_K: 256 weights: ql[128], qh[64], int8 scales[16], d (fp16). Weight 128h + r (r < 128) has low
// bits (ql[64h + r % 64] >> 4 * (r / 64)) & 15 and high bits (qh[32h + r % 32] >> 2 * (r / 32)) & 3;
// weight = (d * scales[i / 16]) * (q - 32).
struct Q6_K {
  static constexpr int kType = 14, kBlock = 256, kGroup = 16, kBits = 8, kBytes = 210;
  static void decode(const uint8_t* b, int8_t* q, float* s, float* o) {
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = half_at(b + 208);
    for (int i = 0; i < 256; ++i) {
      const int h = i / 128, r = i % 128;
      const int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xF;
      const int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
      q[i] = static_cast<int8_t>((lo | (hi << 4)) - 32);
    }
    for (int g = 0; g < 16; ++g) {
      s[g] = d * static_cast<float>(sc[g]);
      o[g] = 0.f;
    }
  }
};

// Calls f.template operator()<T>() for the block type with GGML id ``qtype``; false if none.
template <class F>
bool with_block_type(int64_t qtype, F&& f) {
  switch (qtype) {
    case Q4_0::kType: f.template operator()<Q4_0>(); return true;
    case Q4_1::kType: f.template operator()<Q4_1>(); return true;
    case Q5_0::kType: f.template operator()<Q5_0>(); return true;
    case Q5_1::kType: f.template operator()<Q5_1>(); return true;
    case Q8_0::kType: f.template operator()<Q8_0>(); return true;
    case Q4_K::kType: f.template operator()<Q4_K>(); return true;
    case Q6_K::kType: f.template operator()<Q6_K>(); return true;
    default: return false;
  }
}

}  // namespace ae::gguf
