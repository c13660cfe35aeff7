// tests/cpp/test_knapsack.cc — the memory-budget knapsack solvers.
//
// Property tests on random instances (zero weights, equal ratios, items
// heavier than the budget, empty input): every solver partitions the items
// and stays within budget; dp and Hirschberg reach the brute-force optimum
// of the quantized problem, ilp that of the real-valued one; dp equals a
// literal (n+1) x (Q+1) float32 table as torch builds it, bit for bit.
// Parity with torch's own solvers runs live in tests/python.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "budget/knapsack.h"
#include "budget/pareto.h"
#include "remat/error.h"
#include "remat/pareto.h"

namespace remat {
namespace {

struct Instance {
  std::vector<double> memory, runtimes;
  double budget = 0;
};

int64_t q(double x) { return static_cast<int64_t>(std::nearbyint(x * kKnapsackScale)); }

// Random instances with the awkward cases mixed in. Memories are multiples of
// 1/4096 so real-valued sums are exact and quantization is unambiguous.
Instance random_instance(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int> mem(0, 4096), rt(0, 1000), kind(0, 9);
  Instance in;
  for (size_t i = 0; i < n; ++i) {
    double m = mem(rng) / 4096.0 / 4;
    double r = rt(rng);
    switch (kind(rng)) {
      case 0: m = 0; break;                                   // free item
      case 1: m = 2.0; break;                                 // heavier than any budget
      case 2: if (i > 0) { m = in.memory[0]; r = in.runtimes[0]; } break;  // duplicate
      case 3: if (i > 0) { m = in.memory[0] * 2; r = in.runtimes[0] * 2; } break;  // same ratio
      case 4: r = 0; break;
      default: break;
    }
    in.memory.push_back(m);
    in.runtimes.push_back(r);
  }
  in.budget = std::uniform_int_distribution<int>(0, 4096)(rng) / 4096.0;
  return in;
}

void expect_partition(const KnapsackResult& r, size_t n) {
  std::vector<int> all = r.saved;
  all.insert(all.end(), r.recomputed.begin(), r.recomputed.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(all[i], static_cast<int>(i));
}

double saved_runtime(const Instance& in, const std::vector<int>& saved) {
  double s = 0;
  for (int i : saved) s += in.runtimes[i];
  return s;
}

int64_t saved_qmemory(const Instance& in, const std::vector<int>& saved) {
  int64_t s = 0;
  for (int i : saved) s += q(in.memory[i]);
  return s;
}

double saved_memory(const Instance& in, const std::vector<int>& saved) {
  double s = 0;
  for (int i : saved) s += in.memory[i];
  return s;
}

// Best runtime over all subsets; `quantized` compares round(m * S) sums.
double brute_force(const Instance& in, bool quantized) {
  const size_t n = in.memory.size();
  double best = 0;
  for (uint32_t mask = 0; mask < (1u << n); ++mask) {
    double m = 0, r = 0;
    int64_t qm = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!(mask >> i & 1)) continue;
      m += in.memory[i];
      qm += q(in.memory[i]);
      r += in.runtimes[i];
    }
    const bool fits = quantized ? qm <= q(in.budget) : m <= in.budget;
    if (fits) best = std::max(best, r);
  }
  return best;
}

// torch's dp_knapsack, literally: the full float32 table.
KnapsackResult torch_style_dp(const Instance& in) {
  const size_t n = in.memory.size();
  const int64_t cap = q(in.budget);
  std::vector<std::vector<float>> dp(n + 1, std::vector<float>(cap + 1, 0.0f));
  for (size_t i = 1; i <= n; ++i) {
    const int64_t w = q(in.memory[i - 1]);
    const float r = static_cast<float>(in.runtimes[i - 1]);
    dp[i] = dp[i - 1];
    for (int64_t j = 0; j <= cap; ++j) {
      if (w == 0) {
        dp[i][j] = dp[i - 1][j] + r;
      } else if (j >= w) {
        dp[i][j] = std::max(dp[i - 1][j], dp[i - 1][j - w] + r);
      }
    }
  }
  KnapsackResult res;
  int64_t j = cap;
  for (size_t i = n; i >= 1; --i) {
    if (dp[i][j] != dp[i - 1][j]) {
      res.saved.push_back(static_cast<int>(i - 1));
      j -= q(in.memory[i - 1]);
    } else {
      res.recomputed.push_back(static_cast<int>(i - 1));
    }
  }
  std::reverse(res.saved.begin(), res.saved.end());
  res.expected_runtime = dp[n][cap];
  return res;
}

constexpr double kFloatTol = 1e-5;  // float32 accumulation in the DP solvers

TEST(KnapsackDp, MatchesTorchTableBitForBit) {
  std::mt19937 rng(1);
  for (int t = 0; t < 300; ++t) {
    const Instance in = random_instance(rng, 1 + t % 14);
    const KnapsackResult got = dp_knapsack(in.memory, in.runtimes, in.budget);
    const KnapsackResult want = torch_style_dp(in);
    EXPECT_EQ(got.saved, want.saved) << "instance " << t;
    EXPECT_EQ(got.recomputed, want.recomputed) << "instance " << t;
    EXPECT_EQ(got.expected_runtime, want.expected_runtime) << "instance " << t;
  }
}

TEST(KnapsackDp, OptimalAndWithinBudget) {
  std::mt19937 rng(2);
  for (int t = 0; t < 300; ++t) {
    const Instance in = random_instance(rng, t % 13);
    const KnapsackResult r = dp_knapsack(in.memory, in.runtimes, in.budget);
    expect_partition(r, in.memory.size());
    EXPECT_LE(saved_qmemory(in, r.saved), q(in.budget));
    const double best = brute_force(in, /*quantized=*/true);
    EXPECT_NEAR(saved_runtime(in, r.saved), best, kFloatTol * (1 + best)) << "instance " << t;
    EXPECT_TRUE(std::is_sorted(r.saved.begin(), r.saved.end()));
    EXPECT_TRUE(std::is_sorted(r.recomputed.rbegin(), r.recomputed.rend()));
  }
}

TEST(KnapsackDp, HugeBudgetIsCheapAndExact) {
  // A budget far above the total weight must not allocate a giant table.
  const std::vector<double> m{0.5, 0.25, 0.125}, r{3, 2, 1};
  const KnapsackResult got = dp_knapsack(m, r, 1e9);
  EXPECT_EQ(got.saved, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(got.recomputed.empty());
  EXPECT_EQ(got.expected_runtime, 6.0);
}

TEST(KnapsackDp, EmptyAndZeroBudget) {
  const KnapsackResult e = dp_knapsack({}, {}, 0.5);
  EXPECT_EQ(e.expected_runtime, 0.0);
  EXPECT_TRUE(e.saved.empty() && e.recomputed.empty());
  // Budget 0: only weightless items are saved (torch adds them everywhere).
  const KnapsackResult z = dp_knapsack({0.1, 0.0, 0.2}, {5, 7, 1}, 0.0);
  EXPECT_EQ(z.saved, (std::vector<int>{1}));
  EXPECT_EQ(z.recomputed, (std::vector<int>{2, 0}));
  EXPECT_EQ(z.expected_runtime, 7.0);
}

TEST(KnapsackDp, Float32Accumulation) {
  // 2^24 + 1 is not a float: the table holds 2^24, as torch's float32 table.
  const KnapsackResult r = dp_knapsack({0.1, 0.1}, {16777216.0, 1.0}, 1.0);
  EXPECT_EQ(r.expected_runtime, 16777216.0);
  // Adding 1 leaves the cell unchanged, so the backtrack leaves item 1 out.
  EXPECT_EQ(r.saved, (std::vector<int>{0}));
}

// One table for many budgets (the memory budget's plans ask the same items
// at each): every answer equals a fresh dp_knapsack's, whether the budgets
// come down (the table kept), go up (rebuilt) or repeat, and a bad budget
// raises as dp_knapsack does without spoiling the table.
TEST(KnapsackDp, OneTableAnswersEveryBudgetAsAFreshRunDoes) {
  std::mt19937 rng(11);
  for (int t = 0; t < 100; ++t) {
    const Instance in = random_instance(rng, 1 + t % 14);
    DpKnapsack dp(in.memory, in.runtimes);
    for (double budget : {0.9, 0.5, 0.5, 0.125, 0.0, 1.5, 0.3, 1e9, 0.7}) {
      const KnapsackResult got = dp.solve(budget);
      const KnapsackResult want = dp_knapsack(in.memory, in.runtimes, budget);
      EXPECT_EQ(got.saved, want.saved) << "instance " << t << ", budget " << budget;
      EXPECT_EQ(got.recomputed, want.recomputed) << "instance " << t << ", budget " << budget;
      EXPECT_EQ(got.expected_runtime, want.expected_runtime) << "instance " << t << ", budget " << budget;
    }
    EXPECT_THROW(dp.solve(-1.0), Error);
    EXPECT_EQ(dp.solve(0.25).saved, dp_knapsack(in.memory, in.runtimes, 0.25).saved);
  }
}

TEST(KnapsackHirschberg, OptimalAndNeverOverBudget) {
  std::mt19937 rng(3);
  for (int t = 0; t < 400; ++t) {
    const Instance in = random_instance(rng, t % 13);
    const KnapsackResult r =
        dp_knapsack_sliding_hirschberg(in.memory, in.runtimes, in.budget);
    expect_partition(r, in.memory.size());
    EXPECT_LE(saved_qmemory(in, r.saved), q(in.budget)) << "instance " << t;
    const double best = brute_force(in, /*quantized=*/true);
    EXPECT_NEAR(saved_runtime(in, r.saved), best, kFloatTol * (1 + best)) << "instance " << t;
    EXPECT_EQ(r.expected_runtime, saved_runtime(in, r.saved));
    EXPECT_TRUE(std::is_sorted(r.saved.begin(), r.saved.end()));
    EXPECT_TRUE(std::is_sorted(r.recomputed.rbegin(), r.recomputed.rend()));
  }
}

TEST(KnapsackHirschberg, TightBudgetThatTorchOverflows) {
  // Exact fits: any extra unit of capacity handed to a half would admit
  // an item that does not fit.
  std::mt19937 rng(4);
  for (int t = 0; t < 200; ++t) {
    Instance in;
    const size_t n = 2 + t % 10;
    for (size_t i = 0; i < n; ++i) {
      in.memory.push_back((1 + rng() % 5) / 10000.0);
      in.runtimes.push_back(1 + rng() % 9);
    }
    in.budget = (1 + rng() % 8) / 10000.0;
    const KnapsackResult r =
        dp_knapsack_sliding_hirschberg(in.memory, in.runtimes, in.budget);
    EXPECT_LE(saved_qmemory(in, r.saved), q(in.budget)) << "instance " << t;
    const double best = brute_force(in, true);
    EXPECT_NEAR(saved_runtime(in, r.saved), best, 1e-9) << "instance " << t;
  }
}

TEST(KnapsackGreedy, RatioOrderStableAndFits) {
  // Ratios: 10, 10, 5, inf (free), 1, and 33.3 for item 5, heavier than the
  // budget. Descending, stable: 3, 5, 0, 1, 2, 4.
  const std::vector<double> m{0.1, 0.2, 0.2, 0.0, 0.5, 3.0};
  const std::vector<double> r{1.0, 2.0, 1.0, 4.0, 0.5, 100.0};
  const KnapsackResult g = greedy_knapsack(m, r, 0.35);
  EXPECT_EQ(g.saved, (std::vector<int>{3, 0, 1}));
  EXPECT_EQ(g.recomputed, (std::vector<int>{5, 2, 4}));
  EXPECT_DOUBLE_EQ(g.expected_runtime, 7.0);
}

TEST(KnapsackGreedy, PropertiesOnRandomInstances) {
  std::mt19937 rng(5);
  for (int t = 0; t < 300; ++t) {
    const Instance in = random_instance(rng, t % 20);
    const KnapsackResult g = greedy_knapsack(in.memory, in.runtimes, in.budget);
    expect_partition(g, in.memory.size());
    EXPECT_LE(saved_memory(in, g.saved), in.budget);
    EXPECT_EQ(g.expected_runtime, saved_runtime(in, g.saved));
  }
}

TEST(KnapsackIlp, OptimalOnRealWeights) {
  std::mt19937 rng(6);
  for (int t = 0; t < 300; ++t) {
    const Instance in = random_instance(rng, t % 15);
    const KnapsackResult r = ilp_knapsack(in.memory, in.runtimes, in.budget);
    expect_partition(r, in.memory.size());
    EXPECT_LE(saved_memory(in, r.saved), in.budget);
    EXPECT_EQ(r.expected_runtime, brute_force(in, /*quantized=*/false)) << "instance " << t;
    EXPECT_TRUE(std::is_sorted(r.saved.begin(), r.saved.end()));
    EXPECT_TRUE(std::is_sorted(r.recomputed.begin(), r.recomputed.end()));
  }
}

TEST(KnapsackIlp, ManyIdenticalItemsStayFast) {
  // Identical layers give identical items: the Pareto states collapse.
  std::vector<double> m, r;
  for (int layer = 0; layer < 400; ++layer) {
    m.push_back(0.0123);
    r.push_back(1e9);
    m.push_back(0.0071);
    r.push_back(3e8);
    m.push_back(0.0042);
    r.push_back(2e8);
  }
  const KnapsackResult got = ilp_knapsack(m, r, 0.5);
  const KnapsackResult dp = dp_knapsack(m, r, 0.5);
  double mem = 0;
  for (int i : got.saved) mem += m[i];
  EXPECT_LE(mem, 0.5);
  // The exact optimum is at least the quantized one up to float32 rounding.
  EXPECT_GE(got.expected_runtime, dp.expected_runtime * (1 - 1e-6));
}

TEST(KnapsackIlp, StronglyCorrelatedMediumInstance) {
  std::mt19937 rng(7);
  std::vector<double> m, r;
  for (int i = 0; i < 200; ++i) {
    const double w = (1 + rng() % 1000) / 10000.0;
    m.push_back(w);
    r.push_back(w * 1e6 + 100);  // runtime = weight + constant: hard for bounds
  }
  const KnapsackResult got = ilp_knapsack(m, r, 1.0);
  const KnapsackResult dp = dp_knapsack(m, r, 1.0);
  EXPECT_LE(std::accumulate(got.saved.begin(), got.saved.end(), 0.0,
                            [&](double s, int i) { return s + m[i]; }),
            1.0);
  EXPECT_GE(got.expected_runtime, dp.expected_runtime * (1 - 1e-6));
}

// The knee point from one shared DP table equals running dp_knapsack per
// budget, as torch's KnapsackEvaluator does.
double knee_by_definition(const Instance& in) {
  const int iters = 100;
  const double lo = 0.001, hi = in.budget;
  double tm = 0, tr = 0;
  for (size_t i = 0; i < in.memory.size(); ++i) {
    tm += in.memory[i];
    tr += in.runtimes[i];
  }
  if (tm == 0 || tr == 0) return hi;
  std::vector<double> budgets, rp, mp;
  for (int i = 0; i < iters; ++i) {
    const double b = lo + i * (hi - lo) / (iters - 1);
    const KnapsackResult r = dp_knapsack(in.memory, in.runtimes, b);
    double peak = 0, rec = 0;
    for (int s : r.saved) peak += in.memory[s];
    for (int s : r.recomputed) rec += in.runtimes[s];
    budgets.push_back(b);
    mp.push_back(peak / tm);
    rp.push_back(rec / tr);
  }
  const double rmin = *std::min_element(rp.begin(), rp.end());
  const double rr = *std::max_element(rp.begin(), rp.end()) - rmin;
  const double mmin = *std::min_element(mp.begin(), mp.end());
  const double mr = *std::max_element(mp.begin(), mp.end()) - mmin;
  if (rr == 0 || mr == 0) return hi;
  size_t best = 0;
  double bd = 1e300;
  for (size_t i = 0; i < budgets.size(); ++i) {
    const double d = std::pow(std::pow((rp[i] - rmin) / rr, 2.0) +
                                  std::pow((mp[i] - mmin) / mr, 2.0), 0.5);
    if (d < bd) {
      bd = d;
      best = i;
    }
  }
  return budgets[best];
}

TEST(KnapsackKnee, SharedTableEqualsPerBudgetRuns) {
  std::mt19937 rng(8);
  for (int t = 0; t < 60; ++t) {
    Instance in = random_instance(rng, 1 + t % 12);
    in.budget = 0.05 + (rng() % 1000) / 1000.0;
    EXPECT_EQ(knee_point_memory_budget(in.memory, in.runtimes, in.budget),
              knee_by_definition(in))
        << "instance " << t;
  }
}

TEST(KnapsackKnee, DynamicSolverUsesKneeBudget) {
  const std::vector<double> m{0.4, 0.3, 0.2, 0.1}, r{10, 8, 5, 1};
  const double knee = knee_point_memory_budget(m, r, 0.8);
  const KnapsackResult a = dynamic_memory_budget_dp(m, r, 0.8);
  const KnapsackResult b = dp_knapsack(m, r, knee);
  EXPECT_EQ(a.saved, b.saved);
  EXPECT_EQ(a.recomputed, b.recomputed);
  EXPECT_EQ(a.expected_runtime, b.expected_runtime);
}

TEST(KnapsackRegistry, BuiltinsByNameAndCustomSolvers) {
  const std::vector<double> m{0.3, 0.6}, r{1, 3};
  for (const char* name : {"greedy", "ilp", "dp", "dp_knapsack_sliding_hirschberg",
                           "dynamic_memory_budget_dp"}) {
    EXPECT_TRUE(has_knapsack_solver(name)) << name;
    const KnapsackResult res = solve_knapsack(name, m, r, 0.7);
    expect_partition(res, 2);
  }
  register_knapsack_solver("save_nothing", [](const std::vector<double>& mem,
                                              const std::vector<double>&, double) {
    KnapsackResult res;
    for (size_t i = 0; i < mem.size(); ++i) res.recomputed.push_back(static_cast<int>(i));
    return res;
  });
  EXPECT_EQ(solve_knapsack("save_nothing", m, r, 0.7).recomputed, (std::vector<int>{0, 1}));
  EXPECT_THROW(register_knapsack_solver("dp", greedy_knapsack), Error);
}

TEST(KnapsackRegistry, UnknownSolverNamesIt) {
  try {
    solve_knapsack("simulated_annealing", {0.1}, {1}, 0.5);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidOption);
    EXPECT_NE(std::string(e.what()).find("simulated_annealing"), std::string::npos);
  }
}

TEST(KnapsackValidation, RejectsBadInputs) {
  EXPECT_THROW(dp_knapsack({0.1, 0.2}, {1}, 0.5), Error);
  EXPECT_THROW(dp_knapsack({-0.1}, {1}, 0.5), Error);
  EXPECT_THROW(ilp_knapsack({0.1}, {NAN}, 0.5), Error);
  EXPECT_THROW(dp_knapsack({0.1}, {1}, -0.5), Error);
  EXPECT_THROW(dp_knapsack_sliding_hirschberg({0.1}, {1}, INFINITY), Error);
  EXPECT_THROW(dp_knapsack({1e9}, {1}, 1e9), Error);  // table too large
  // Greedy accepts a negative budget: nothing fits.
  const KnapsackResult g = greedy_knapsack({0.1, 0.0}, {1, 1}, -1.0);
  EXPECT_TRUE(g.saved.empty());
}

// --- the Pareto sweep -----------------------------------------------------------

// A step curve: the recompute runtime drops at budgets 0.3 and 0.7.
std::pair<double, double> steps(double b) {
  if (b < 0.3) return {10.0, 0.0};
  if (b < 0.7) return {4.0, 0.5};
  return {0.0, 1.0};
}

TEST(KnapsackPareto, BisectsEveryStepToResolution) {
  int calls = 0;
  const std::vector<MemoryBudgetPoint> pts = pareto_sweep([&](double b) {
    ++calls;
    return steps(b);
  });
  ASSERT_GE(pts.size(), 4u);
  EXPECT_EQ(pts.front().budget, 0.0);
  EXPECT_EQ(pts.back().budget, 1.0);
  EXPECT_TRUE(std::is_sorted(pts.begin(), pts.end(), [](const MemoryBudgetPoint& a,
                                                         const MemoryBudgetPoint& b) {
    return a.budget < b.budget;
  }));
  for (const MemoryBudgetPoint& p : pts) {
    EXPECT_EQ(steps(p.budget), std::make_pair(p.recompute_runtime, p.memory_ratio));
  }
  // Each step is bracketed by two points less than the resolution apart.
  for (double edge : {0.3, 0.7}) {
    bool bracketed = false;
    for (size_t i = 0; i + 1 < pts.size(); ++i) {
      bracketed |= pts[i].budget < edge && pts[i + 1].budget >= edge &&
                   pts[i + 1].budget - pts[i].budget < 1e-3;
    }
    EXPECT_TRUE(bracketed) << edge;
  }
  EXPECT_LT(calls, 40);  // bisection, not a scan
}

TEST(KnapsackPareto, FlatCurveIsTwoPoints) {
  const auto pts = pareto_sweep([](double) { return std::make_pair(1.0, 0.5); });
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_EQ(pts[0].budget, 0.0);
  EXPECT_EQ(pts[1].budget, 1.0);
  EXPECT_THROW(pareto_sweep(nullptr), Error);
}

TEST(KnapsackPareto, WritersAreDeterministic) {
  const auto pts = pareto_sweep(steps);
  EXPECT_EQ(pareto_csv(pts), pareto_csv(pareto_sweep(steps)));
  EXPECT_EQ(pareto_csv(pts).substr(0, 38), "budget,recompute_runtime,memory_ratio\n");
  const std::string json = pareto_json(pts);
  EXPECT_NE(json.find("\"budget\": 0,"), std::string::npos) << json;
  const std::string svg = pareto_svg(pts, "a <b> & c");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("a &lt;b&gt; &amp; c"), std::string::npos);
  EXPECT_NE(svg.find("Runtime of Recomputed Components"), std::string::npos);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_EQ(svg, pareto_svg(pareto_sweep(steps), "a <b> & c"));
  EXPECT_NE(pareto_svg({}).find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace remat
