// Paged attention on CPU, registered as ``agent_engine::paged_attention`` (declared in cpu_ops.cpp).
//
// Layouts: see cpu_ops.cpp. Query row t of request i sits at position
// seq_lens[i] - (query_start_loc[i+1] - t) and attends to every key position <= its own.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "ops_library.h"
#include "step_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "attend_bf16.h"
#include "attend_f32.h"
#include "attend_tiled.h"
#include "shared_prefix.h"
#include "vec_math.h"

namespace {

using ae::dot;
using ae::load_row;

constexpr int64_t kTileRows = 16;    // query rows of one request handled together (reuse of each key)
constexpr int64_t kMaxHeadDim = 256;
// Work (query vectors x keys x head dim) below which a call stays on the calling thread.
constexpr int64_t kParallelElems = 1 << 15;
// Decode rows sharing at least this many leading keys read them once together (shared_prefix.h).
constexpr int64_t kMinSharedKeys = 64;
// Query vectors of one shared-prefix tile, about: a prefill tile's (kTileRows rows of a GQA group of 3).
constexpr int64_t kSharedTileVecs = 48;

// p[0..n) = exp(p - max); returns the sum.
inline float exp_and_sum(float* p, int64_t n, float mx) {
  float sum = 0.f;
  int64_t t = 0;
#ifdef AE_AVX2
  __m256 acc = _mm256_setzero_ps();
  const __m256 m8 = _mm256_set1_ps(mx);
  for (; t + 8 <= n; t += 8) {
    const __m256 e = ae::exp8(_mm256_sub_ps(_mm256_loadu_ps(p + t), m8));
    _mm256_storeu_ps(p + t, e);
    acc = _mm256_add_ps(acc, e);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  for (float v : lanes) sum += v;
#endif
  for (; t < n; ++t) {
    p[t] = std::exp(p[t] - mx);
    sum += p[t];
  }
  return sum;
}

struct WorkItem {
  int32_t req, kv_head;
  int32_t row_begin, row_end;  // absolute query rows
};

// One work item: rows [row_begin, row_end) of one request, all query heads of one KV head. Three
// passes over the keys: scores (Q K^T), softmax, then P V. Query vector qi sees keys [0, nk[qi]);
// nk is non-decreasing in qi, so the vectors that see key j are a suffix [first(j), nq).
// C is the cache's element type: T, or bfloat16 under a float32 query.
template <typename T, typename C = T>
void attend_tile(const WorkItem& w, T* out, int64_t out_row_stride, const T* query, int64_t q_row_stride,
                 const C* k_cache, const C* v_cache, const int32_t* table, int64_t block_size, int64_t hk,
                 int64_t group, int64_t d, int64_t seq_len, int64_t q_end, float scale) {
  const int64_t nrows = w.row_end - w.row_begin;
  const int64_t nq = nrows * group;
  std::vector<int64_t> nk(nq);
  std::vector<float> q(nq * d), acc(nq * d, 0.f), kbuf(d);
  for (int64_t r = 0; r < nrows; ++r) {
    const int64_t row = w.row_begin + r;
    for (int64_t g = 0; g < group; ++g) {
      const int64_t qi = r * group + g;
      load_row(&q[qi * d], query + row * q_row_stride + (w.kv_head * group + g) * d, d, scale);
      nk[qi] = seq_len - (q_end - row) + 1;
    }
  }
  const int64_t max_keys = nk[nq - 1];
  const int64_t token_stride = hk * d;
  std::vector<float> s(nq * max_keys);
  auto key_row = [&](const C* cache, int64_t j) -> const float* {
    const C* p = cache + (static_cast<int64_t>(table[j / block_size]) * block_size + j % block_size) *
                             token_stride + w.kv_head * d;
    if constexpr (std::is_same_v<C, float>) {
      return p;
    } else {
      load_row(kbuf.data(), p, d);
      return kbuf.data();
    }
  };
  int64_t first = 0;
  for (int64_t j = 0; j < max_keys; ++j) {
    while (nk[first] <= j) ++first;
    const float* kf = key_row(k_cache, j);
    int64_t qi = first;
#ifdef AE_AVX2
    float four[4];
    for (; qi + 4 <= nq; qi += 4) {
      ae::dot4(&q[qi * d], kf, d, four);
      for (int i = 0; i < 4; ++i) s[(qi + i) * max_keys + j] = four[i];
    }
#endif
    for (; qi < nq; ++qi) s[qi * max_keys + j] = dot(&q[qi * d], kf, d);
  }
  std::vector<float> inv_l(nq);
  for (int64_t qi = 0; qi < nq; ++qi) {
    float* sp = &s[qi * max_keys];
    float mx = sp[0];
    for (int64_t j = 1; j < nk[qi]; ++j) mx = std::max(mx, sp[j]);
    inv_l[qi] = 1.f / exp_and_sum(sp, nk[qi], mx);
  }
  first = 0;
  for (int64_t j = 0; j < max_keys; ++j) {
    while (nk[first] <= j) ++first;
    const float* vf = key_row(v_cache, j);
    for (int64_t qi = first; qi < nq; ++qi) {
      const float p = s[qi * max_keys + j];
      float* a = &acc[qi * d];
#pragma omp simd
      for (int64_t x = 0; x < d; ++x) a[x] += p * vf[x];
    }
  }
  for (int64_t r = 0; r < nrows; ++r) {
    for (int64_t g = 0; g < group; ++g) {
      const int64_t qi = r * group + g;
      T* o = out + (w.row_begin + r) * out_row_stride + (w.kv_head * group + g) * d;
      for (int64_t x = 0; x < d; ++x) o[x] = static_cast<T>(acc[qi * d + x] * inv_l[qi]);
    }
  }
}

#ifdef AE_AVX2
// A decode row's GQA group as vectors: over a bfloat16 cache in bfloat16 products where the build has
// them (attend_bf16.h), else widened to float32 (attend_f32.h). attend_group_f32's contract.
template <int D, typename C>
void attend_group(const float* q, int64_t group, const C* const* k, const C* const* v, int64_t n, float* s,
                  float* out, float* lse = nullptr) {
#if defined(AE_ATTN_BF16)
  if constexpr (std::is_same_v<C, uint16_t> && D % 64 == 0) {
    ae::bf16attn::attend_group<D>(q, group, k, v, n, s, out, lse);
    return;
  }
#endif
  ae::attend_group_f32<D, C>(q, group, k, v, n, s, out, lse);
}

// float32 with head dim D (64 or 128), keys and values over row pointers: a decode row's GQA group
// as vectors (attend_group), a tile of several rows as matrix products (attend_tiled.h). Same
// contract as attend_tile.
template <int D, typename C>
void attend_tile_f32(const WorkItem& w, float* out, int64_t out_row_stride, const float* query,
                     int64_t q_row_stride, const C* k_cache, const C* v_cache, const int32_t* table,
                     int64_t block_size, int64_t hk, int64_t group, int64_t seq_len, int64_t q_end, float scale) {
  thread_local std::vector<const C*> krow, vrow;
  thread_local std::vector<float> s, q;
  const int64_t max_keys = seq_len - q_end + w.row_end;  // what the tile's last row sees
  const int64_t token_stride = hk * D;
  krow.resize(max_keys);
  vrow.resize(max_keys);
  for (int64_t b = 0; b * block_size < max_keys; ++b) {
    const int64_t base = static_cast<int64_t>(table[b]) * block_size * token_stride + w.kv_head * D;
    const int64_t n = std::min(block_size, max_keys - b * block_size);
    for (int64_t t = 0; t < n; ++t) {
      krow[b * block_size + t] = k_cache + base + t * token_stride;
      vrow[b * block_size + t] = v_cache + base + t * token_stride;
    }
  }
  const int64_t head0 = w.kv_head * group, rows = w.row_end - w.row_begin;
  if (rows > 1) {  // a chunk's rows: the matrix-shaped kernel over all their vectors at once
    thread_local std::vector<int64_t> nk;
    q.resize(rows * group * D);
    nk.resize(rows * group);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = w.row_begin + r;
      load_row(&q[r * group * D], query + row * q_row_stride + head0 * D, group * D, scale);
      std::fill_n(&nk[r * group], group, seq_len - (q_end - row) + 1);
    }
    ae::attend_tile_matrix<D, C>(q.data(), rows * group, nk.data(), krow.data(), vrow.data(), group,
                                 out + w.row_begin * out_row_stride + head0 * D, out_row_stride);
    return;
  }
  const int64_t nk = seq_len - (q_end - w.row_begin) + 1;  // a decode row: its group as vectors
  s.resize(group * nk);
  q.resize(group * D);
  load_row(q.data(), query + w.row_begin * q_row_stride + head0 * D, group * D, scale);
  attend_group<D, C>(q.data(), group, krow.data(), vrow.data(), nk, s.data(),
                          out + w.row_begin * out_row_stride + head0 * D);
}
#endif

#ifdef AE_AVX2
// Row pointers of keys [first, first + count) of one KV head through a block table.
template <typename C>
void row_pointers(const C* cache, const int32_t* table, int64_t first, int64_t count, int64_t block_size,
                  int64_t token_stride, int64_t head_offset, std::vector<const C*>& rows) {
  rows.resize(count);
  for (int64_t j = 0; j < count; ++j) {
    const int64_t key = first + j;
    rows[j] = cache + (static_cast<int64_t>(table[key / block_size]) * block_size + key % block_size) * token_stride +
              head_offset;
  }
}

// The decode rows of ``shared``'s groups (float32 queries, head dim D, cache rows C): each group's shared
// keys as matrix tiles of up to kSharedTileVecs query vectors per KV head, then each row's own keys as
// a decode row, merged (shared_prefix.h). Writes those rows of out.
template <int D, typename C>
void attend_shared_prefixes(const ae::SharedPrefixes& shared, float* out, const float* query, int64_t q_row_stride,
                            const C* k_cache, const C* v_cache, const int32_t* tables, int64_t max_blocks,
                            const int32_t* seq_lens, const int32_t* query_start_loc, int64_t hq, int64_t hk,
                            int64_t group, int64_t block_size, float scale) {
  struct TileItem {
    int64_t group_index, first, count, kv_head;  // members[first .. first + count) of a group
  };
  const int64_t per_tile = std::max<int64_t>(1, kSharedTileVecs / group);
  std::vector<TileItem> tiles;
  for (int64_t g = 0; g < static_cast<int64_t>(shared.groups.size()); ++g) {
    const ae::PrefixGroup& pg = shared.groups[g];
    const int64_t n_tiles = (pg.count + per_tile - 1) / per_tile;
    for (int64_t t = 0; t < n_tiles; ++t) {  // balanced member ranges
      const int64_t m0 = pg.first + pg.count * t / n_tiles, m1 = pg.first + pg.count * (t + 1) / n_tiles;
      for (int64_t h = 0; h < hk; ++h) tiles.push_back({g, m0, m1 - m0, h});
    }
  }
  const int64_t n_members = static_cast<int64_t>(shared.members.size()), token_stride = hk * D;
  std::vector<float> part_o(n_members * hq * D), part_lse(n_members * hq);
  std::vector<int64_t> shared_keys_of(n_members);  // by member slot: its group's shared keys
  for (const ae::PrefixGroup& pg : shared.groups)
    std::fill_n(shared_keys_of.begin() + pg.first, pg.count, pg.shared_keys);
  at::parallel_for(0, static_cast<int64_t>(tiles.size()), 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<const C*> krow, vrow;
    thread_local std::vector<float> q;
    thread_local std::vector<int64_t> nk;
    for (int64_t t = t0; t < t1; ++t) {
      const TileItem& it = tiles[t];
      const ae::PrefixGroup& pg = shared.groups[it.group_index];
      const int32_t* table = tables + static_cast<int64_t>(shared.members[pg.first]) * max_blocks;
      row_pointers(k_cache, table, 0, pg.shared_keys, block_size, token_stride, it.kv_head * D, krow);
      row_pointers(v_cache, table, 0, pg.shared_keys, block_size, token_stride, it.kv_head * D, vrow);
      q.resize(it.count * group * D);
      nk.assign(it.count * group, pg.shared_keys);
      for (int64_t m = 0; m < it.count; ++m) {
        const int64_t row = query_start_loc[shared.members[it.first + m]];
        load_row(&q[m * group * D], query + row * q_row_stride + it.kv_head * group * D, group * D, scale);
      }
      ae::attend_tile_matrix<D, C>(q.data(), it.count * group, nk.data(), krow.data(), vrow.data(), group,
                                   &part_o[(it.first * hq + it.kv_head * group) * D], hq * D,
                                   &part_lse[it.first * hq + it.kv_head * group], hq);
    }
  });
  at::parallel_for(0, n_members * hk, 1, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<const C*> krow, vrow;
    thread_local std::vector<float> q, s, o, lse;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t slot = i / hk, h = i % hk, req = shared.members[slot], shared_keys = shared_keys_of[slot];
      const int64_t own = seq_lens[req] - shared_keys, row = query_start_loc[req];
      const int32_t* table = tables + req * max_blocks;
      row_pointers(k_cache, table, shared_keys, own, block_size, token_stride, h * D, krow);
      row_pointers(v_cache, table, shared_keys, own, block_size, token_stride, h * D, vrow);
      q.resize(group * D);
      s.resize(group * own);
      o.resize(group * D);
      lse.resize(group);
      load_row(q.data(), query + row * q_row_stride + h * group * D, group * D, scale);
      attend_group<D, C>(q.data(), group, krow.data(), vrow.data(), own, s.data(), o.data(), lse.data());
      for (int64_t g = 0; g < group; ++g) {
        const int64_t head = h * group + g;
        ae::merge_parts<D>(&part_o[(slot * hq + head) * D], part_lse[slot * hq + head], &o[g * D], lse[g],
                           out + row * hq * D + head * D);
      }
    }
  });
}
#endif

// What one call computes, shared by every work item.
struct Step {
  const std::vector<WorkItem>& items;
  const int32_t* tables;
  int64_t max_blocks;
  const int32_t* seq_lens;
  const int32_t* query_start_loc;
  int64_t hq, hk, group, d, block_size;
  float scale;
};

// The items in runs of about equal work (query vectors x keys the tile's last row sees x head dim),
// one run per thread: an even split by count would leave one thread waiting while the other reads
// the longer contexts (or a chunk's later, longer rows). Small steps make one run (the calling
// thread). Returns each run's first item, then the end.
std::vector<int64_t> balanced_runs(const std::vector<WorkItem>& items, const int32_t* seq_lens,
                                   const int32_t* query_start_loc, int64_t elems_per_key) {
  std::vector<int64_t> prefix(items.size() + 1, 0);
  for (size_t k = 0; k < items.size(); ++k) {
    const WorkItem& w = items[k];
    const int64_t keys = seq_lens[w.req] - (query_start_loc[w.req + 1] - w.row_end);
    prefix[k + 1] = prefix[k] + (w.row_end - w.row_begin) * keys * elems_per_key;
  }
  const int64_t total = prefix.back(), n_items = static_cast<int64_t>(items.size());
  const int64_t runs = total < 8 * kParallelElems ? 1 : std::min<int64_t>(at::get_num_threads(), n_items);
  std::vector<int64_t> bounds{0};
  for (int64_t r = 1; r < runs; ++r) {  // the first item whose work starts at or past r / runs of the total
    const int64_t target = total * r / runs;
    bounds.push_back(std::lower_bound(prefix.begin(), prefix.end() - 1, target) - prefix.begin());
  }
  bounds.push_back(n_items);
  return bounds;
}

// Every work item, in ``bounds.size() - 1`` runs of items (one per thread, ``bounds`` their first
// items and the end): query and out in T, the caches in C.
template <typename T, typename C>
void run_items(const Step& st, at::Tensor& out, const at::Tensor& query, const at::Tensor& k_cache,
               const at::Tensor& v_cache, const std::vector<int64_t>& bounds) {
  T* o = out.data_ptr<T>();
  const T* q = query.data_ptr<T>();
  const C* kc = k_cache.data_ptr<C>();
  const C* vc = v_cache.data_ptr<C>();
  const int64_t q_stride = query.stride(0), o_stride = st.hq * st.d;
  const int64_t runs = static_cast<int64_t>(bounds.size()) - 1;
  at::parallel_for(0, runs, 1, [&](int64_t run0, int64_t run1) {
    for (int64_t k = bounds[run0]; k < bounds[run1]; ++k) {
      const WorkItem& w = st.items[k];
      const int32_t* table = st.tables + w.req * st.max_blocks;
      const int64_t seq_len = st.seq_lens[w.req], q_end = st.query_start_loc[w.req + 1];
#ifdef AE_AVX2
      if constexpr (std::is_same_v<T, float>) {
        if (st.d == 64 || st.d == 128) {
          // bfloat16 cache rows go to the kernel as their raw 16-bit patterns (attend_group and
          // attend_tiled.h multiply them in bfloat16 products where built, else widen them).
          using Bits = std::conditional_t<std::is_same_v<C, float>, float, uint16_t>;
          auto tile = st.d == 64 ? &attend_tile_f32<64, Bits> : &attend_tile_f32<128, Bits>;
          tile(w, o, o_stride, q, q_stride, reinterpret_cast<const Bits*>(kc), reinterpret_cast<const Bits*>(vc),
               table, st.block_size, st.hk, st.group, seq_len, q_end, st.scale);
          continue;
        }
      }
#endif
      attend_tile<T, C>(w, o, o_stride, q, q_stride, kc, vc, table, st.block_size, st.hk, st.group, st.d, seq_len,
                        q_end, st.scale);
    }
  });
}

}  // namespace

// The ops, callable from this library's other sources (step_ops.h).
namespace AE_OPS_NS {

// out[T, Hq, D] (only the rows of the listed requests are written).
void paged_attention(at::Tensor out, const at::Tensor& query, const at::Tensor& k_cache,
                     const at::Tensor& v_cache, const at::Tensor& block_tables,
                     const at::Tensor& query_start_loc, const at::Tensor& seq_lens,
                     const at::Tensor& req_indices, double scale) {
  TORCH_CHECK(query.dim() == 3 && query.stride(2) == 1 && query.stride(1) == query.size(2),
              "query must be [T, Hq, D] with packed heads");
  TORCH_CHECK(out.is_contiguous() && k_cache.is_contiguous() && v_cache.is_contiguous(),
              "out and the caches must be contiguous");
  TORCH_CHECK(block_tables.scalar_type() == at::kInt && query_start_loc.scalar_type() == at::kInt &&
                  seq_lens.scalar_type() == at::kInt && req_indices.scalar_type() == at::kInt,
              "metadata tensors must be int32");
  const bool bf16_cache = query.scalar_type() == at::kFloat && k_cache.scalar_type() == at::kBFloat16;
  TORCH_CHECK((query.scalar_type() == k_cache.scalar_type() || bf16_cache) &&
                  v_cache.scalar_type() == k_cache.scalar_type() && out.scalar_type() == query.scalar_type(),
              "query and out share a dtype; the caches share it too, or are bfloat16 under a float32 query");
  const int64_t hq = query.size(1), d = query.size(2);
  const int64_t block_size = k_cache.size(1), hk = k_cache.size(2);
  TORCH_CHECK(hq % hk == 0 && d <= kMaxHeadDim && k_cache.size(3) == d, "bad head shapes");
  const int64_t group = hq / hk;
  auto bt = block_tables.contiguous();
  const int32_t* tables = bt.data_ptr<int32_t>();
  const int64_t max_blocks = bt.size(1);
  const int32_t* qsl = query_start_loc.contiguous().data_ptr<int32_t>();
  const int32_t* sl = seq_lens.contiguous().data_ptr<int32_t>();
  auto reqs = req_indices.contiguous();
  const int32_t* ri = reqs.data_ptr<int32_t>();
  // float32 queries with head dim 64 or 128 take the vector kernels; their decode rows over shared
  // leading blocks go together (shared_prefix.h), the rest as work items.
  ae::SharedPrefixes shared;
#ifdef AE_AVX2
  const bool vector_path = query.scalar_type() == at::kFloat && (d == 64 || d == 128);
  if (vector_path)
    shared = ae::find_shared_prefixes(ri, reqs.numel(), seq_lens.size(0), qsl, sl, tables, max_blocks, block_size,
                                      kMinSharedKeys);
#endif
  std::vector<WorkItem> items;
  for (int64_t k = 0; k < reqs.numel(); ++k) {
    const int32_t i = ri[k];
    if (!shared.groups.empty() && shared.slot_of[i] >= 0) continue;
    for (int32_t r0 = qsl[i]; r0 < qsl[i + 1]; r0 += kTileRows) {
      const int32_t r1 = std::min<int32_t>(qsl[i + 1], r0 + kTileRows);
      for (int32_t h = 0; h < hk; ++h) items.push_back({i, h, r0, r1});
    }
  }
#ifdef AE_AVX2
  if (!shared.groups.empty()) {
    float* o = out.data_ptr<float>();
    const float* q = query.data_ptr<float>();
    auto run = [&]<typename C>(const C* kc, const C* vc) {
      auto fn = d == 64 ? &attend_shared_prefixes<64, C> : &attend_shared_prefixes<128, C>;
      fn(shared, o, q, query.stride(0), kc, vc, tables, max_blocks, sl, qsl, hq, hk, group, block_size,
         static_cast<float>(scale));
    };
    if (bf16_cache) {  // bfloat16 rows as their 16-bit patterns (see run_items)
      run(reinterpret_cast<const uint16_t*>(k_cache.data_ptr<at::BFloat16>()),
          reinterpret_cast<const uint16_t*>(v_cache.data_ptr<at::BFloat16>()));
    } else {
      run(k_cache.data_ptr<float>(), v_cache.data_ptr<float>());
    }
  }
#endif
  const std::vector<int64_t> bounds = balanced_runs(items, sl, qsl, group * d);
  const Step step{items, tables, max_blocks, sl, qsl, hq, hk, group, d, block_size, static_cast<float>(scale)};
  if (bf16_cache) {
    run_items<float, at::BFloat16>(step, out, query, k_cache, v_cache, bounds);
    return;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, query.scalar_type(), "paged_attention", [&] {
    run_items<scalar_t, scalar_t>(step, out, query, k_cache, v_cache, bounds);
  });
}

}  // namespace AE_OPS_NS

AE_LIBRARY_IMPL(m) { m.impl("paged_attention", &AE_OPS_NS::paged_attention); }
