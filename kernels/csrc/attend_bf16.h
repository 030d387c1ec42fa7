// A decode row's GQA group over a bfloat16 KV cache in AVX512_BF16 products (``vdpbf16ps``): the
// same contract as attend_f32.h's attend_group_f32, for head dims that are a multiple of 64, built
// only where the compiler targets AVX512_BF16 (``AE_ATTN_BF16``).
//
// The cache rows are bfloat16 already, so neither product widens them: the query vectors are rounded
// to bfloat16 once (a pair of head-dim elements per 32-bit lane, the layout of a cache row), and
//   scores: eight keys per pass, D / 32 ``vdpbf16ps`` a key (two dimensions a lane each), then the
//           same folding and transposing reduction as the float32 kernel;
//   softmax: float32, as the float32 kernel's (max, vectorized exp and sum);
//   P V:    keys in pairs: the two value rows interleaved (``vpunpck[lh]wd``: lane i holds both keys'
//           value of one column), the pair's softmax numerators rounded to bfloat16 and broadcast as
//           one lane, one ``vdpbf16ps`` per 16 columns for both keys; the interleave is shared by up
//           to four vectors of the group, 64 columns a pass in their accumulators; the columns come
//           out in the unpack's order and are put back in place once per vector.
// Numerics: the product of the query rounded to bfloat16 with the cached keys, a float32 softmax, its
// numerators rounded to bfloat16 before P V, float32 sums, the division by the float32 sum last; as a
// bfloat16 model's attention in transformers (its probabilities in bfloat16 times bfloat16 values).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attend_f32.h"

#if defined(AE_ATTN_AVX512) && defined(__AVX512BF16__)
#define AE_ATTN_BF16 1

namespace ae::bf16attn {

// 32 float32 values (a, then b) rounded to bfloat16 pairs: lane i = (x[2i], x[2i + 1]).
inline __m512i round32(const float* x) {
  return (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
}

// Rows far ahead go to L2 as in the float32 path (attend_f32.h: kFar, prefetch_far_keys).

// Value rows a and b, 64 columns each, interleaved by key pairs: lane i of pair[x] holds both rows'
// values of one column (x = 0, 1: columns 0-31, in the unpack's order, see unpermute64; 2, 3: 32-63).
inline void interleave_rows64(const uint16_t* a, const uint16_t* b, __m512i* pair) {
  const __m512i a0 = _mm512_loadu_si512(a), a1 = _mm512_loadu_si512(a + 32);
  const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 32);
  pair[0] = _mm512_unpacklo_epi16(a0, b0);
  pair[1] = _mm512_unpackhi_epi16(a0, b0);
  pair[2] = _mm512_unpacklo_epi16(a1, b1);
  pair[3] = _mm512_unpackhi_epi16(a1, b1);
}

// s[j] = dot(q, k[j]) for the eight keys j0 .. j0 + 7; qb holds q's D / 32 registers of pairs.
template <int D>
inline void scores8(const __m512i* qb, const uint16_t* const* k, int64_t j0, float* s) {
  __m512 z[8];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) z[r] = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int c = 0; c < D / 32; ++c)
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r)
      z[r] = _mm512_dpbf16_ps(z[r], (__m512bh)qb[c], (__m512bh)_mm512_loadu_si512(k[j0 + r] + 32 * c));
  _mm256_storeu_ps(s + j0, transpose_sum8(fold16(z[0]), fold16(z[1]), fold16(z[2]), fold16(z[3]), fold16(z[4]),
                                          fold16(z[5]), fold16(z[6]), fold16(z[7])));
}

// s[j] = dot(q, k[j]) for one key j.
template <int D>
inline void score1(const __m512i* qb, const uint16_t* const* k, int64_t j, float* s) {
  __m512 z = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int c = 0; c < D / 32; ++c)
    z = _mm512_dpbf16_ps(z, (__m512bh)qb[c], (__m512bh)_mm512_loadu_si512(k[j] + 32 * c));
  s[j] = _mm512_reduce_add_ps(z);
}

// o[g * D + c0 ..c0 + 64) += sum over key pairs of numerator pairs pb[g] (bfloat16, [n / 2] lanes, a zero
// past an odd n) times the interleaved values, for the R <= 4 vectors g < R; the accumulators hold the
// unpack's column order (see unpermute64).
template <int R>
inline void values_pairs(const uint32_t* const* pb, const uint16_t* const* v, int64_t n, int c0, __m512* acc) {
  constexpr int64_t kAhead = 16;  // keys whose value rows are on their way to L1 (and kFar to L2)
  for (int64_t j = 0; j < n; j += 2) {
    prefetch_rows<64, uint16_t>(v, std::min(n, j + kAhead), std::min(n, j + kAhead + 2), c0);
    prefetch_rows<64, uint16_t, _MM_HINT_T1>(v, std::min(n, j + kFar), std::min(n, j + kFar + 2), c0);
    __m512i pair[4];  // an odd n's last pair reads row j twice: its second numerator is 0
    interleave_rows64(v[j] + c0, v[j + 1 < n ? j + 1 : j] + c0, pair);
#pragma GCC unroll 4
    for (int g = 0; g < R; ++g) {
      const __m512bh p = (__m512bh)_mm512_set1_epi32(static_cast<int>(pb[g][j / 2]));
#pragma GCC unroll 4
      for (int x = 0; x < 4; ++x) acc[g * 4 + x] = _mm512_dpbf16_ps(acc[g * 4 + x], p, (__m512bh)pair[x]);
    }
  }
}

// The 64 columns of four accumulators in the unpack's order (per 128-bit lane L of a 32-column half:
// columns 8L .. 8L + 3 in the low unpack, 8L + 4 .. 8L + 7 in the high one), times ``scale``, into
// out[0 .. 64) in place.
inline void unpermute64(const __m512* acc, float scale, float* out) {
  const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  const __m512 m = _mm512_set1_ps(scale);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m512 lo = acc[2 * h], hi = acc[2 * h + 1];
    _mm512_storeu_ps(out + 32 * h, _mm512_mul_ps(_mm512_permutex2var_ps(lo, first, hi), m));
    _mm512_storeu_ps(out + 32 * h + 16, _mm512_mul_ps(_mm512_permutex2var_ps(lo, second, hi), m));
  }
}

template <int R>
inline void values_block(const uint32_t* const* pb, const uint16_t* const* v, int64_t n, int c0, const float* inv_sum,
                         float* const* out) {
  __m512 acc[4 * R];
#pragma GCC unroll 16
  for (int x = 0; x < 4 * R; ++x) acc[x] = _mm512_setzero_ps();
  values_pairs<R>(pb, v, n, c0, acc);
#pragma GCC unroll 4
  for (int g = 0; g < R; ++g) unpermute64(acc + 4 * g, inv_sum[g], out[g] + c0);
}

// attend_group_f32's contract (q: G x D floats, pre-scaled; out + g * D = softmax(q_g K^T) V; with
// ``lse``, lse[g] = log(sum_j exp(q_g k_j))) over bfloat16 rows, in bfloat16 products (above). ``s``
// is scratch of at least G * n floats.
template <int D>
inline void attend_group(const float* q, int64_t group, const uint16_t* const* k, const uint16_t* const* v, int64_t n,
                         float* s, float* out, float* lse = nullptr) {
  static_assert(D % 64 == 0, "the values pass takes 64 columns at a time");
  constexpr int64_t kBlock = 16;  // keys per block: 16 rows of K stay in L1 for the whole group
  thread_local std::vector<__m512i> qb;
  qb.resize(group * (D / 32));
  for (int64_t g = 0; g < group; ++g)
    for (int c = 0; c < D / 32; ++c) qb[g * (D / 32) + c] = round32(q + g * D + 32 * c);
  for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
    const int64_t j1 = std::min(n, j0 + kBlock);
    prefetch_rows<D, uint16_t>(k, j1, std::min(n, j1 + kBlock));
    prefetch_far_keys<D, uint16_t>(k, v, j0, kBlock, n);
    for (int64_t g = 0; g < group; ++g) {
      int64_t j = j0;
      for (; j + 8 <= j1; j += 8) scores8<D>(&qb[g * (D / 32)], k, j, s + g * n);
      for (; j < j1; ++j) score1<D>(&qb[g * (D / 32)], k, j, s + g * n);
    }
  }
  // The numerators in bfloat16 pairs, a zero past an odd n.
  const int64_t pairs = (n + 1) / 2, padded = (2 * pairs + 31) / 32 * 32;
  thread_local std::vector<float> inv_sum, tail;
  thread_local std::vector<uint32_t> pb_all;
  inv_sum.resize(group);
  pb_all.resize(group * padded / 2);
  tail.resize(32);
  for (int64_t g = 0; g < group; ++g) {
    float mx;
    float* p = s + g * n;
    const float sum = softmax_numerators(p, n, &mx);
    inv_sum[g] = 1.f / sum;
    if (lse != nullptr) lse[g] = mx + std::log(sum);
    uint32_t* dst = &pb_all[g * padded / 2];
    int64_t t = 0;
    for (; t + 32 <= n; t += 32) _mm512_storeu_si512(dst + t / 2, round32(p + t));
    if (t < n) {
      std::fill(tail.begin(), tail.end(), 0.f);
      std::copy(p + t, p + n, tail.begin());
      _mm512_storeu_si512(dst + t / 2, round32(tail.data()));
    }
  }
  for (int c0 = 0; c0 < D; c0 += 64) {
    for (int64_t g0 = 0; g0 < group; g0 += 4) {
      const int64_t rows = std::min<int64_t>(4, group - g0);
      const uint32_t* pb[4];
      float* outs[4];
      for (int64_t g = 0; g < rows; ++g) {
        pb[g] = &pb_all[(g0 + g) * padded / 2];
        outs[g] = out + (g0 + g) * D;
      }
      switch (rows) {
        case 1: values_block<1>(pb, v, n, c0, &inv_sum[g0], outs); break;
        case 2: values_block<2>(pb, v, n, c0, &inv_sum[g0], outs); break;
        case 3: values_block<3>(pb, v, n, c0, &inv_sum[g0], outs); break;
        default: values_block<4>(pb, v, n, c0, &inv_sum[g0], outs); break;
      }
    }
  }
}

}  // namespace ae::bf16attn
#endif
