// bench/cpp/intern_bench.cc — the table behind remat's StringPool, chosen by
// measurement: its own open-addressing table (8-byte slots: the upper half of
// the hash, and the id) against absl::flat_hash_map (when libabsl-dev is
// installed) and std::unordered_map (Google Benchmark).
//
// Why: loading a joint graph interns every string once and resolves every
// node reference through the pool, so the pool's table is most of the load
// time at 10^6 nodes. The workload is the synthetic residual-MLP graph's
// (bench/synthetic.py): per node, its new name, its target, dtype and device
// (hot), and references to the previous node and to one ten nodes back. The
// library maps get the pool's storage (packed chunks) and differ only in the
// table. See docs/dependencies.md for results and how to run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#ifdef REMAT_BENCH_HAVE_ABSL
#include <absl/container/flat_hash_map.h>
#endif

#include "remat/graph.h"

namespace {

// The node names of a graph with `layers` residual layers.
std::vector<std::string> names(int layers) {
  static constexpr const char* kKinds[] = {"mm_",  "relu_", "add_", "threshold_backward_",
                                           "t_x_", "mm_w_", "t_w_", "mm_x_", "add_grad_",
                                           "primals_"};
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(layers) * std::size(kKinds));
  for (int i = 0; i < layers; ++i) {
    for (const char* k : kKinds) out.push_back(k + std::to_string(i));
  }
  return out;
}

// StringPool's storage with a library map as its table.
template <class Map>
class MapPool {
 public:
  uint32_t intern(std::string_view s) {
    if (auto it = ids_.find(s); it != ids_.end()) return it->second;
    if (s.size() > left_) {
      const size_t size = std::max<size_t>(s.size(), 256 * 1024);
      chunks_.push_back(std::make_unique<char[]>(size));
      next_ = chunks_.back().get();
      left_ = size;
    }
    std::memcpy(next_, s.data(), s.size());
    const std::string_view kept(next_, s.size());
    next_ += s.size();
    left_ -= s.size();
    const auto id = static_cast<uint32_t>(ids_.size());
    ids_.emplace(kept, id);
    return id;
  }

 private:
  std::vector<std::unique_ptr<char[]>> chunks_;
  char* next_ = nullptr;
  size_t left_ = 0;
  Map ids_;
};

template <class Pool>
void BM_Load(benchmark::State& state) {
  const std::vector<std::string> all = names(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    Pool pool;
    uint64_t sum = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      sum += pool.intern(all[i]);
      sum += pool.intern("aten.mm.default") + pool.intern("float32") + pool.intern("cpu");
      if (i >= 1) sum += pool.intern(all[i - 1]);
      if (i >= 10) sum += pool.intern(all[i - 10]);
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(all.size()));
}

// 10^4, 10^5 and 10^6 nodes.
BENCHMARK(BM_Load<remat::StringPool>)->Name("remat_pool")->Arg(1000)->Arg(10000)->Arg(100000)
    ->Unit(benchmark::kMillisecond);
#ifdef REMAT_BENCH_HAVE_ABSL
BENCHMARK(BM_Load<MapPool<absl::flat_hash_map<std::string_view, uint32_t>>>)
    ->Name("absl_flat_hash_map")->Arg(1000)->Arg(10000)->Arg(100000)
    ->Unit(benchmark::kMillisecond);
#endif
BENCHMARK(BM_Load<MapPool<std::unordered_map<std::string_view, uint32_t>>>)
    ->Name("std_unordered_map")->Arg(1000)->Arg(10000)->Arg(100000)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
