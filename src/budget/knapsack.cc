// budget/knapsack.cc — the knapsack solvers of the memory budget.
//
// See knapsack.h for the contract. The quantized solvers share one DP
// (QuantizedDp): a float32 row updated item by item (from a copy of the
// previous one, so the update vectorizes), plus one "taken" bit per (item,
// capacity) cell for backtracking. That reproduces torch's (n+1) x (Q+1)
// float32 table cell for cell, because a cell of torch's table only depends
// on cells of the previous row at the same or lower capacity.
#include "budget/knapsack.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "remat/error.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace remat {
namespace {

// ---------------------------------------------------------------------------
// Input checks and quantization.

void validate(const char* solver, const std::vector<double>& memory,
              const std::vector<double>& runtimes, double max_memory, bool need_budget) {
  if (memory.size() != runtimes.size()) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("knapsack solver '{}': {} memories but {} runtimes", solver,
                            memory.size(), runtimes.size()));
  }
  for (size_t i = 0; i < memory.size(); ++i) {
    if (!std::isfinite(memory[i]) || memory[i] < 0) {
      throw Error(ErrorCode::kInvalidOption,
                  fmt::format("knapsack solver '{}': memory of item {} is {} (must be finite "
                              "and >= 0)", solver, i, memory[i]));
    }
    if (!std::isfinite(runtimes[i])) {
      throw Error(ErrorCode::kInvalidOption,
                  fmt::format("knapsack solver '{}': runtime of item {} is {} (must be finite)",
                              solver, i, runtimes[i]));
    }
  }
  if (!std::isfinite(max_memory) || (need_budget && max_memory < 0)) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("knapsack solver '{}': max_memory is {} (must be finite{})", solver,
                            max_memory, need_budget ? " and >= 0" : ""));
  }
}

// Python's round(x * 10000): nearest integer, ties to even (the default
// floating-point rounding mode).
int64_t quantize(double x) { return static_cast<int64_t>(std::nearbyint(x * kKnapsackScale)); }

// Refuses tables that could not be allocated (torch would fail there too).
void check_cells(const char* solver, double cells) {
  constexpr double kMaxCells = 8e9;  // bits of the backtracking table: 1 GB
  if (cells > kMaxCells) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("knapsack solver '{}': the quantized problem needs {:.3g} DP cells; "
                            "memories and max_memory are expected to be normalized (<= ~1)",
                            solver, cells));
  }
}

struct Quantized {
  std::vector<int64_t> weight;  // round(memory * S)
  int64_t total = 0;            // sum of weights
};

Quantized quantize_all(const std::vector<double>& memory) {
  Quantized q;
  q.weight.reserve(memory.size());
  for (double m : memory) {
    q.weight.push_back(quantize(m));
    q.total += q.weight.back();
  }
  return q;
}

// ---------------------------------------------------------------------------
// torch's dp_knapsack table.
//
// Row i holds the best float32 runtime of items [0, i) at each capacity.
// Columns above the total weight W all hold the same values (every cell there
// sees the same inputs), so the table is built only up to min(Q, W): that is
// exact, and it keeps huge budgets cheap.
class QuantizedDp {
 public:
  QuantizedDp(const std::vector<int64_t>& weight, const std::vector<double>& runtimes,
              int64_t capacity)
      : n_(weight.size()), cols_(static_cast<size_t>(capacity) + 1),
        words_((cols_ + 63) / 64), weight_(weight) {
    row_.assign(cols_, 0.0f);
    prev_.assign(cols_, 0.0f);
    flags_.assign(words_ * 64, 0);
    taken_.assign(n_ * words_, 0);
    for (size_t i = 0; i < n_; ++i) add_item(i, static_cast<float>(runtimes[i]));
  }

  // dp[n][j] as torch's .item() gives it.
  double value(int64_t j) const { return static_cast<double>(row_[static_cast<size_t>(j)]); }

  // torch's backtracking from capacity j: an item is saved when its row
  // differs from the previous one at the current capacity.
  void backtrack(int64_t j, std::vector<int>& saved, std::vector<int>& recomputed) const {
    saved.clear();
    recomputed.clear();
    for (size_t i = n_; i-- > 0;) {
      if (bit(i, static_cast<size_t>(j))) {
        saved.push_back(static_cast<int>(i));
        j -= weight_[i];
      } else {
        recomputed.push_back(static_cast<int>(i));
      }
    }
    std::reverse(saved.begin(), saved.end());
  }

 private:
  // One row of torch's table from the previous one, cell for cell:
  // new[j] = max(old[j], old[j - w] + r), the bit set where the second
  // wins (torch.maximum; equal values leave the cell unchanged). Written
  // as two branch-free passes over separate arrays (the old row copied),
  // which compilers vectorize; the bits are packed from a byte per cell.
  void add_item(size_t i, float r) {
    const int64_t w = weight_[i];
    float* __restrict row = row_.data();
    uint8_t* __restrict flags = flags_.data();
    if (w == 0) {
      // torch adds a weightless item everywhere, whatever its sign.
      for (size_t j = 0; j < cols_; ++j) {
        const float next = row[j] + r;
        flags[j] = next != row[j];
        row[j] = next;
      }
      pack(i);
      return;
    }
    if (static_cast<uint64_t>(w) >= cols_) return;  // never fits: row unchanged, no bits
    const size_t ws = static_cast<size_t>(w);
    const float* __restrict prev = prev_.data();
    std::copy(row_.begin(), row_.begin() + static_cast<std::ptrdiff_t>(cols_ - ws), prev_.begin());
    std::fill(flags, flags + ws, uint8_t{0});
    for (size_t j = ws; j < cols_; ++j) {
      const float with = prev[j - ws] + r;
      const bool take = with > row[j];
      flags[j] = take;
      row[j] = take ? with : row[j];
    }
    pack(i);
  }

  // Item i's bits from flags_ (one byte, 0 or 1, per cell; zero past cols_).
  void pack(size_t i) {
    std::fill(flags_.begin() + static_cast<std::ptrdiff_t>(cols_), flags_.end(), uint8_t{0});
    uint64_t* out = taken_.data() + i * words_;
    const uint8_t* f = flags_.data();
    for (size_t t = 0; t < words_; ++t, f += 64) {
      uint64_t bits = 0;
#if defined(__SSE2__)
      for (int q = 0; q < 4; ++q) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(f + 16 * q));
        const __m128i set = _mm_cmpgt_epi8(bytes, _mm_setzero_si128());
        bits |= static_cast<uint64_t>(static_cast<uint16_t>(_mm_movemask_epi8(set))) << (16 * q);
      }
#else
      for (int b = 0; b < 64; ++b) bits |= static_cast<uint64_t>(f[b]) << b;
#endif
      out[t] = bits;
    }
  }

  bool bit(size_t i, size_t j) const { return (taken_[i * words_ + (j >> 6)] >> (j & 63)) & 1u; }

  size_t n_;
  size_t cols_;
  size_t words_;  // 64-bit words per item's bits
  const std::vector<int64_t>& weight_;
  std::vector<float> row_;
  std::vector<float> prev_;      // the previous row, while an item is added
  std::vector<uint8_t> flags_;   // per cell of the item being added: taken
  std::vector<uint64_t> taken_;  // n_ x words_: item i's bit j
};

int64_t table_capacity(const char* solver, const Quantized& q, int64_t budget, size_t n) {
  const int64_t cap = std::min(budget, q.total);
  check_cells(solver, static_cast<double>(n) * (static_cast<double>(cap) + 1));
  return cap;
}

// ---------------------------------------------------------------------------
// Hirschberg: the best float32 profile of a range of items, in O(capacity).

// out[c] = best runtime of items idx[begin, end) within capacity c, c <= cap.
// Items that cannot raise the runtime (runtime <= 0) are never chosen.
void best_profile(const std::vector<int64_t>& weight, const std::vector<float>& runtime,
                  size_t begin, size_t end, int64_t cap, std::vector<float>& out) {
  const size_t cols = static_cast<size_t>(cap) + 1;
  std::fill(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(cols), 0.0f);
  for (size_t i = begin; i < end; ++i) {
    const int64_t w = weight[i];
    const float r = runtime[i];
    if (!(r > 0.0f) || w > cap) continue;
    if (w == 0) {
      for (size_t j = 0; j < cols; ++j) out[j] += r;
      continue;
    }
    for (size_t j = cols - 1; j >= static_cast<size_t>(w); --j) {
      const float with = out[j - static_cast<size_t>(w)] + r;
      if (with > out[j]) out[j] = with;
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------

KnapsackResult greedy_knapsack(const std::vector<double>& memory,
                               const std::vector<double>& runtimes, double max_memory) {
  validate("greedy", memory, runtimes, max_memory, /*need_budget=*/false);
  const size_t n = memory.size();
  // Ratio runtime/memory; a weightless item ranks first (+inf) unless its
  // runtime is negative, where torch's division would have raised.
  std::vector<double> key(n);
  for (size_t i = 0; i < n; ++i) {
    if (memory[i] == 0) {
      key[i] = runtimes[i] < 0 ? -std::numeric_limits<double>::infinity()
                               : std::numeric_limits<double>::infinity();
    } else {
      key[i] = runtimes[i] / memory[i];
    }
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Python's sorted(reverse=True) is stable: equal keys keep index order.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key[a] > key[b]; });

  KnapsackResult res;
  double total_memory = 0.0;
  for (int i : order) {
    if (total_memory + memory[i] <= max_memory) {
      total_memory += memory[i];
      res.expected_runtime += runtimes[i];
      res.saved.push_back(i);
    } else {
      res.recomputed.push_back(i);
    }
  }
  return res;
}

struct DpKnapsack::Table {
  Quantized q;
  int64_t cap = -1;  // the capacity dp was built for (-1: not yet)
  std::optional<QuantizedDp> dp;
};

DpKnapsack::DpKnapsack(std::vector<double> memory, std::vector<double> runtimes)
    : memory_(std::move(memory)), runtimes_(std::move(runtimes)), table_(std::make_unique<Table>()) {}
DpKnapsack::~DpKnapsack() = default;
DpKnapsack::DpKnapsack(DpKnapsack&&) noexcept = default;
DpKnapsack& DpKnapsack::operator=(DpKnapsack&&) noexcept = default;

KnapsackResult DpKnapsack::solve(double max_memory) {
  validate("dp", memory_, runtimes_, max_memory, /*need_budget=*/true);
  Table& t = *table_;
  if (t.cap < 0) t.q = quantize_all(memory_);
  const int64_t cap = table_capacity("dp", t.q, quantize(max_memory), memory_.size());
  if (cap > t.cap) {
    t.dp.reset();
    t.dp.emplace(t.q.weight, runtimes_, cap);
    t.cap = cap;
  }
  KnapsackResult res;
  t.dp->backtrack(cap, res.saved, res.recomputed);
  res.expected_runtime = t.dp->value(cap);
  return res;
}

KnapsackResult dp_knapsack(const std::vector<double>& memory,
                           const std::vector<double>& runtimes, double max_memory) {
  return DpKnapsack(memory, runtimes).solve(max_memory);
}

KnapsackResult dp_knapsack_sliding_hirschberg(const std::vector<double>& memory,
                                              const std::vector<double>& runtimes,
                                              double max_memory) {
  const char* name = "dp_knapsack_sliding_hirschberg";
  validate(name, memory, runtimes, max_memory, /*need_budget=*/true);
  const size_t n = memory.size();
  KnapsackResult res;
  if (n == 0) return res;
  const Quantized q = quantize_all(memory);
  std::vector<float> rt(n);
  for (size_t i = 0; i < n; ++i) rt[i] = static_cast<float>(runtimes[i]);
  // prefix[i] = total weight of items [0, i): caps each segment's capacity.
  std::vector<int64_t> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + q.weight[i];

  const int64_t top = std::min(quantize(max_memory), q.total);
  check_cells(name, static_cast<double>(top) + 1);
  std::vector<float> first(static_cast<size_t>(top) + 1), second(first.size());

  struct Segment {
    size_t begin, end;
    int64_t cap;
  };
  // An explicit stack: deep item lists cannot exhaust the call stack.
  std::vector<Segment> stack{{0, n, top}};
  while (!stack.empty()) {
    const Segment s = stack.back();
    stack.pop_back();
    if (s.end - s.begin == 1) {
      const size_t i = s.begin;
      const bool keep = q.weight[i] <= s.cap && rt[i] > 0.0f;
      (keep ? res.saved : res.recomputed).push_back(static_cast<int>(i));
      continue;
    }
    // More capacity than the segment weighs changes nothing.
    const int64_t cap = std::min(s.cap, prefix[s.end] - prefix[s.begin]);
    const size_t mid = s.begin + (s.end - s.begin) / 2;
    // As torch: the upper half gets capacity c and the lower half cap - c,
    // with c the first maximizer of upper[c] + lower[cap - c]. Giving the
    // lower half exactly cap - c (not one more) keeps the total in budget.
    best_profile(q.weight, rt, mid, s.end, cap, first);
    best_profile(q.weight, rt, s.begin, mid, cap, second);
    int64_t split = 0;
    float best = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c <= cap; ++c) {
      const float v = first[static_cast<size_t>(c)] + second[static_cast<size_t>(cap - c)];
      if (v > best) {
        best = v;
        split = c;
      }
    }
    stack.push_back({s.begin, mid, cap - split});
    stack.push_back({mid, s.end, split});
  }
  std::sort(res.saved.begin(), res.saved.end());
  std::sort(res.recomputed.begin(), res.recomputed.end(), std::greater<int>());
  for (int i : res.saved) res.expected_runtime += runtimes[static_cast<size_t>(i)];
  return res;
}

// ---------------------------------------------------------------------------
// Exact knapsack on real weights: Nemhauser-Ullmann Pareto states, items in
// ratio order, states dropped when even the LP relaxation of the remaining
// items cannot reach the best runtime found so far.

namespace {

struct State {
  double w, p;
  int32_t parent;  // index into the state pool; -1 for the empty state
  int32_t item;    // item taken to reach this state; -1 for the empty state
};

class ParetoKnapsack {
 public:
  // Items must have w > 0 and p > 0, sorted by p / w descending.
  ParetoKnapsack(std::vector<double> w, std::vector<double> p, double cap)
      : w_(std::move(w)), p_(std::move(p)), cap_(cap) {
    const size_t m = w_.size();
    pw_.assign(m + 1, 0.0);
    pp_.assign(m + 1, 0.0);
    for (size_t i = 0; i < m; ++i) {
      pw_[i + 1] = pw_[i] + w_[i];
      pp_[i + 1] = pp_[i] + p_[i];
    }
    // Rounding slack for pruning: prefix sums are approximate, so a state is
    // dropped only when it is clearly worse.
    slack_ = 1e-7 * (pp_[m] + 1.0);
  }

  // Returns the positions (in the sorted order) of the items taken.
  std::vector<size_t> solve() {
    pool_.push_back({0.0, 0.0, -1, -1});
    std::vector<int32_t> cur{0}, next;
    best_ = greedy_bound();
    for (size_t k = 0; k < w_.size(); ++k) {
      merge(k, cur, next);
      cur.swap(next);
    }
    int32_t arg = cur.front();
    for (int32_t s : cur) {
      if (pool_[s].p > pool_[arg].p) arg = s;
    }
    std::vector<size_t> taken;
    for (int32_t s = arg; pool_[s].item >= 0; s = pool_[s].parent) {
      taken.push_back(static_cast<size_t>(pool_[s].item));
    }
    return taken;
  }

 private:
  // Runtime of taking items in order while they fit: a feasible lower bound.
  double greedy_bound() const {
    double w = 0, p = 0;
    for (size_t i = 0; i < w_.size(); ++i) {
      if (w + w_[i] <= cap_) {
        w += w_[i];
        p += p_[i];
      }
    }
    return p;
  }

  // LP relaxation of items [k, m) within capacity c (Dantzig's bound).
  double upper_bound(size_t k, double c) const {
    if (c < 0) return -std::numeric_limits<double>::infinity();
    const double limit = pw_[k] + c;
    // s: first position whose prefix exceeds the limit, so [k, s-1) fit whole.
    const size_t s = static_cast<size_t>(
        std::upper_bound(pw_.begin() + static_cast<std::ptrdiff_t>(k), pw_.end(), limit) -
        pw_.begin());
    const size_t whole = s - 1;  // items [k, whole) fit entirely
    double bound = pp_[whole] - pp_[k];
    if (whole < w_.size()) bound += (limit - pw_[whole]) * (p_[whole] / w_[whole]);
    return bound;
  }

  bool promising(size_t next_item, const State& s) const {
    return s.p + upper_bound(next_item, cap_ - s.w) + slack_ >= best_;
  }

  // next = Pareto front of cur and cur + item k, sorted by weight, runtime
  // strictly increasing; on equal weight and runtime the state without the
  // item wins.
  void merge(size_t k, const std::vector<int32_t>& cur, std::vector<int32_t>& next) {
    next.clear();
    double best_p = -1;
    auto keep = [&](const State& s, int32_t existing) {
      if (s.p <= best_p) return;  // dominated: lighter or equal state runs more
      if (!promising(k + 1, s)) return;
      best_p = s.p;
      best_ = std::max(best_, s.p);
      int32_t id = existing;
      if (id < 0) {
        pool_.push_back(s);
        id = static_cast<int32_t>(pool_.size() - 1);
      }
      next.push_back(id);
    };
    size_t a = 0, b = 0;
    const size_t n = cur.size();
    while (a < n || b < n) {
      // Candidate with item k, skipping those over capacity.
      if (b < n && pool_[cur[b]].w + w_[k] > cap_) b = n;  // the rest are heavier
      const bool have_b = b < n;
      State with{};
      if (have_b) {
        const State& base = pool_[cur[b]];
        with = {base.w + w_[k], base.p + p_[k], cur[b], static_cast<int32_t>(k)};
      }
      const bool take_a =
          a < n && (!have_b || pool_[cur[a]].w < with.w ||
                    (pool_[cur[a]].w == with.w && pool_[cur[a]].p >= with.p));
      if (take_a) {
        const State s = pool_[cur[a]];
        keep(s, cur[a]);
        ++a;
      } else if (have_b) {
        keep(with, -1);
        ++b;
      } else {
        break;
      }
    }
  }

  std::vector<double> w_, p_;
  double cap_;
  std::vector<double> pw_, pp_;
  double slack_ = 0;
  double best_ = 0;
  std::vector<State> pool_;
};

}  // namespace

KnapsackResult ilp_knapsack(const std::vector<double>& memory,
                            const std::vector<double>& runtimes, double max_memory) {
  validate("ilp", memory, runtimes, max_memory, /*need_budget=*/true);
  const size_t n = memory.size();
  std::vector<uint8_t> save(n, 0);
  // Free items with positive runtime are always saved; items that cannot help
  // (runtime <= 0) or cannot fit are never saved.
  std::vector<int> cand;
  for (size_t i = 0; i < n; ++i) {
    if (!(runtimes[i] > 0)) continue;
    if (memory[i] == 0) {
      save[i] = 1;
    } else if (memory[i] <= max_memory) {
      cand.push_back(static_cast<int>(i));
    }
  }
  std::stable_sort(cand.begin(), cand.end(), [&](int a, int b) {
    return runtimes[a] / memory[a] > runtimes[b] / memory[b];
  });
  std::vector<double> w, p;
  w.reserve(cand.size());
  p.reserve(cand.size());
  for (int i : cand) {
    w.push_back(memory[i]);
    p.push_back(runtimes[i]);
  }
  for (size_t pos : ParetoKnapsack(std::move(w), std::move(p), max_memory).solve()) {
    save[static_cast<size_t>(cand[pos])] = 1;
  }
  KnapsackResult res;
  for (size_t i = 0; i < n; ++i) {
    if (save[i]) {
      res.saved.push_back(static_cast<int>(i));
      res.expected_runtime += runtimes[i];
    } else {
      res.recomputed.push_back(static_cast<int>(i));
    }
  }
  return res;
}

// ---------------------------------------------------------------------------

double knee_point_memory_budget(const std::vector<double>& memory,
                                const std::vector<double>& runtimes, double max_mem_budget,
                                double min_mem_budget, int iterations) {
  validate("dynamic_memory_budget_dp", memory, runtimes, max_mem_budget, true);
  if (iterations < 2) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("knee point: iterations is {} (must be >= 2)", iterations));
  }
  const size_t n = memory.size();
  // The evaluator's totals (torch sums over a set of names; list order here).
  double total_memory = 0, total_runtime = 0;
  for (size_t i = 0; i < n; ++i) {
    total_memory += memory[i];
    total_runtime += runtimes[i];
  }
  if (total_memory == 0 || total_runtime == 0) return max_mem_budget;

  std::vector<double> budgets(static_cast<size_t>(iterations));
  int64_t widest = 0;
  for (int i = 0; i < iterations; ++i) {
    budgets[static_cast<size_t>(i)] =
        min_mem_budget + i * (max_mem_budget - min_mem_budget) / (iterations - 1);
    if (budgets[static_cast<size_t>(i)] < 0) {
      throw Error(ErrorCode::kInvalidOption,
                  fmt::format("knee point: budget {} is negative", budgets[static_cast<size_t>(i)]));
    }
    widest = std::max(widest, quantize(budgets[static_cast<size_t>(i)]));
  }
  // One table at the widest budget answers every budget: a narrower table is
  // its prefix.
  const Quantized q = quantize_all(memory);
  const int64_t cap = table_capacity("dynamic_memory_budget_dp", q, widest, n);
  QuantizedDp dp(q.weight, runtimes, cap);

  std::vector<double> rt_pct(budgets.size()), mem_pct(budgets.size());
  std::vector<int> saved, recomputed;
  for (size_t b = 0; b < budgets.size(); ++b) {
    dp.backtrack(std::min(quantize(budgets[b]), q.total), saved, recomputed);
    double peak = 0, recompute = 0;
    for (int i : saved) peak += memory[static_cast<size_t>(i)];
    for (int i : recomputed) recompute += runtimes[static_cast<size_t>(i)];
    mem_pct[b] = peak / total_memory;
    rt_pct[b] = recompute / total_runtime;
  }
  const auto [rt_lo, rt_hi] = std::minmax_element(rt_pct.begin(), rt_pct.end());
  const auto [mem_lo, mem_hi] = std::minmax_element(mem_pct.begin(), mem_pct.end());
  const double rt_range = *rt_hi - *rt_lo, mem_range = *mem_hi - *mem_lo;
  if (rt_range == 0 || mem_range == 0) return max_mem_budget;
  // Nearest point to the origin after normalizing both axes; first on ties.
  // pow, as Python's `**`, so distances round exactly as torch's.
  size_t knee = 0;
  double nearest = std::numeric_limits<double>::infinity();
  for (size_t b = 0; b < budgets.size(); ++b) {
    const double r = (rt_pct[b] - *rt_lo) / rt_range;
    const double m = (mem_pct[b] - *mem_lo) / mem_range;
    const double d = std::pow(std::pow(r, 2.0) + std::pow(m, 2.0), 0.5);
    if (d < nearest) {
      nearest = d;
      knee = b;
    }
  }
  return budgets[knee];
}

KnapsackResult dynamic_memory_budget_dp(const std::vector<double>& memory,
                                        const std::vector<double>& runtimes,
                                        double max_memory) {
  return dp_knapsack(memory, runtimes,
                     knee_point_memory_budget(memory, runtimes, max_memory));
}

// ---------------------------------------------------------------------------

namespace {

const KnapsackSolver* builtin_solver(std::string_view name) {
  static const std::map<std::string, KnapsackSolver, std::less<>> builtins = {
      {"greedy", greedy_knapsack},
      {"ilp", ilp_knapsack},
      {"dp", dp_knapsack},
      {"dp_knapsack_sliding_hirschberg", dp_knapsack_sliding_hirschberg},
      {"dynamic_memory_budget_dp", dynamic_memory_budget_dp},
  };
  auto it = builtins.find(name);
  return it == builtins.end() ? nullptr : &it->second;
}

struct CustomSolvers {
  std::mutex mu;
  std::map<std::string, KnapsackSolver, std::less<>> by_name;
};

CustomSolvers& custom_solvers() {
  static CustomSolvers registry;
  return registry;
}

}  // namespace

void register_knapsack_solver(const std::string& name, KnapsackSolver solver) {
  // "custom" names PartitionOptions::custom_knapsack, which choose.cc calls.
  if (builtin_solver(name) != nullptr || name == "custom") {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("knapsack solver '{}' is built in or reserved and cannot be replaced", name));
  }
  if (!solver) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("knapsack solver '{}': empty function", name));
  }
  CustomSolvers& r = custom_solvers();
  std::lock_guard<std::mutex> lock(r.mu);
  r.by_name[name] = std::move(solver);
}

bool has_knapsack_solver(std::string_view name) {
  if (builtin_solver(name) != nullptr) return true;
  CustomSolvers& r = custom_solvers();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.by_name.find(name) != r.by_name.end();
}

std::vector<std::string> knapsack_solver_names() {
  std::vector<std::string> names = {"greedy", "ilp", "dp", "dp_knapsack_sliding_hirschberg",
                                    "dynamic_memory_budget_dp"};
  CustomSolvers& r = custom_solvers();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& [name, solver] : r.by_name) names.push_back(name);
  return names;
}

KnapsackResult solve_knapsack(std::string_view name, const std::vector<double>& memory,
                              const std::vector<double>& runtimes, double max_memory) {
  if (const KnapsackSolver* s = builtin_solver(name)) return (*s)(memory, runtimes, max_memory);
  KnapsackSolver custom;
  {
    CustomSolvers& r = custom_solvers();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.by_name.find(name);
    if (it != r.by_name.end()) custom = it->second;
  }
  if (!custom) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("activation_memory_budget_solver: unknown knapsack solver '{}' "
                            "(known: greedy, ilp, dp, dp_knapsack_sliding_hirschberg, "
                            "dynamic_memory_budget_dp, or a registered custom solver)",
                            name));
  }
  return custom(memory, runtimes, max_memory);
}

}  // namespace remat
