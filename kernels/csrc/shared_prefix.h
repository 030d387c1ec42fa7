// Decode rows whose requests share leading KV blocks (agents' common system prompt and tool list,
// forked samples of one prompt): paged_attention.cpp reads those keys once for all of them.
//
// A decode row's softmax over keys [0, n) splits at any key s into one over [0, s) and one over
// [s, n): with each part's normalized output o_a, o_b and log-sum-exp l_a, l_b, the row's output is
// (o_a e^{l_a} + o_b e^{l_b}) / (e^{l_a} + e^{l_b}) (computed from the larger l down, so nothing
// overflows). So rows sharing blocks [0, s / block_size) attend over them as the query vectors of one
// matrix-shaped tile (attend_tiled.h: each key read once for every row), each over its own keys as a
// decode row (attend_f32.h), and the parts merge. Otherwise the shared keys would come from memory
// once per row: at 32 agents over a 2,000-token prompt, most of a decode step's attention.
//
// Invariants: a group's rows all have the same first shared_keys / block_size block ids and each
// sees at least one key past them (a row's own part is never empty); groups are disjoint; only
// decode rows (one query token) take part.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ae {

struct PrefixGroup {
  int64_t first, count;  // members[first .. first + count)
  int64_t shared_keys;   // a multiple of the block size
};

struct SharedPrefixes {
  std::vector<int32_t> members;  // request indices, by group
  std::vector<PrefixGroup> groups;
  std::vector<int64_t> slot_of;  // request index -> its position in members, or -1
};

// The groups among the decode rows of ``reqs`` (request indices) that share at least min_keys keys
// (whole blocks); requests in no group keep slot -1. ``tables`` are [num_reqs, max_blocks] block ids.
inline SharedPrefixes find_shared_prefixes(const int32_t* reqs, int64_t n_reqs, int64_t num_reqs,
                                           const int32_t* query_start_loc, const int32_t* seq_lens,
                                           const int32_t* tables, int64_t max_blocks, int64_t block_size,
                                           int64_t min_keys) {
  SharedPrefixes out;
  out.slot_of.assign(num_reqs, -1);
  std::vector<int32_t> decodes;
  for (int64_t k = 0; k < n_reqs; ++k) {
    const int32_t i = reqs[k];
    if (query_start_loc[i + 1] - query_start_loc[i] == 1 && seq_lens[i] > min_keys) decodes.push_back(i);
  }
  if (decodes.size() < 2) return out;
  // Usable blocks of a row: whole blocks strictly before its last key.
  auto usable = [&](int32_t i) { return std::min<int64_t>(max_blocks, (seq_lens[i] - 1) / block_size); };
  auto table = [&](int32_t i) { return tables + static_cast<int64_t>(i) * max_blocks; };
  auto common = [&](int32_t a, int32_t b) {
    const int64_t limit = std::min(usable(a), usable(b));
    int64_t c = 0;
    while (c < limit && table(a)[c] == table(b)[c]) ++c;
    return c;
  };
  std::sort(decodes.begin(), decodes.end(), [&](int32_t a, int32_t b) {
    return std::lexicographical_compare(table(a), table(a) + usable(a), table(b), table(b) + usable(b));
  });
  const int64_t min_blocks = (min_keys + block_size - 1) / block_size;
  for (size_t a = 0; a < decodes.size();) {
    size_t b = a + 1;
    int64_t shared = usable(decodes[a]);
    while (b < decodes.size()) {  // in sorted order the common prefix with the first only shrinks
      const int64_t c = std::min(shared, common(decodes[a], decodes[b]));
      if (c < min_blocks) break;
      shared = c;
      ++b;
    }
    if (b - a >= 2) {
      const int64_t first = static_cast<int64_t>(out.members.size());
      for (size_t m = a; m < b; ++m) {
        out.slot_of[decodes[m]] = static_cast<int64_t>(out.members.size());
        out.members.push_back(decodes[m]);
      }
      out.groups.push_back({first, static_cast<int64_t>(b - a), shared * block_size});
    }
    a = b;
  }
  return out;
}

// out[0 .. D) = the merge of (o_a, l_a) and (o_b, l_b), two softmax parts of one query vector.
template <int D>
inline void merge_parts(const float* o_a, float l_a, const float* o_b, float l_b, float* out) {
  const float top = std::max(l_a, l_b);
  const float w_a = std::exp(l_a - top), w_b = std::exp(l_b - top);
  const float inv = 1.f / (w_a + w_b);
  const float a = w_a * inv, b = w_b * inv;
  for (int c = 0; c < D; ++c) out[c] = o_a[c] * a + o_b[c] * b;
}

}  // namespace ae
