// tests/cpp/test_milp.cc — optimize::Milp, the MILP wrapper over CBC.
//
// Each test pins one rule of optimize/milp.h: optima equal exhaustive search
// (with objectives as small as seconds of recompute, which CBC's absolute
// tolerances would lose without milp.cc's scaling), proven infeasibility,
// rows and fixes added between solves (an incumbent they cut off is not
// offered again; one they keep is), binaries exactly 0 or 1, continuous
// variables and rows with one, two or equal sides, a time limit's status
// with its bound, MPS that CBC's own reader reads back, silence,
// determinism, and distinct Milps in threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include <CoinMpsIO.hpp>

#include "optimize/milp.h"
#include "remat/error.h"
#include "temp_dir.h"

namespace remat::optimize {
namespace {

using Status = Milp::Status;

// A 0/1 knapsack with `rows` capacity rows: maximize value (minimize its
// negation). Values are scaled by `scale`: remat's objectives are seconds.
struct Knapsack {
  std::vector<double> value;
  std::vector<std::vector<double>> weight;  // [row][item]
  std::vector<double> capacity;
};

Knapsack random_knapsack(std::mt19937& rng, int n, int rows, double scale) {
  std::uniform_real_distribution<double> u(0, 1);
  Knapsack k;
  for (int i = 0; i < n; ++i) k.value.push_back(u(rng) * scale);
  for (int r = 0; r < rows; ++r) {
    std::vector<double> w;
    for (int i = 0; i < n; ++i) w.push_back(std::floor(u(rng) * 100));
    double total = 0;
    for (double x : w) total += x;
    k.weight.push_back(w);
    k.capacity.push_back(std::floor(total * (0.2 + 0.6 * u(rng))));
  }
  return k;
}

Milp build(const Knapsack& k) {
  Milp m;
  std::vector<int> vars;
  for (double v : k.value) vars.push_back(m.add_binary(-v));
  for (size_t r = 0; r < k.weight.size(); ++r) {
    m.add_row(vars, k.weight[r], -Milp::kInfinity, k.capacity[r]);
  }
  return m;
}

bool fits(const Knapsack& k, unsigned mask) {
  for (size_t r = 0; r < k.weight.size(); ++r) {
    double w = 0;
    for (size_t i = 0; i < k.value.size(); ++i) w += (mask >> i & 1) ? k.weight[r][i] : 0;
    if (w > k.capacity[r]) return false;
  }
  return true;
}

double negated_value(const Knapsack& k, unsigned mask) {
  double v = 0;
  for (size_t i = 0; i < k.value.size(); ++i) v -= (mask >> i & 1) ? k.value[i] : 0;
  return v;
}

// The best and second-best objective over every subset that fits.
std::pair<double, double> exhaustive(const Knapsack& k) {
  double best = 0, second = Milp::kInfinity;  // the empty set always fits
  for (unsigned mask = 1; mask < (1u << k.value.size()); ++mask) {
    if (!fits(k, mask)) continue;
    double v = negated_value(k, mask);
    if (v < best) {
      second = best;
      best = v;
    } else if (v < second) {
      second = v;
    }
  }
  return {best, second};
}

unsigned mask_of(const std::vector<double>& values) {
  unsigned mask = 0;
  for (size_t i = 0; i < values.size(); ++i) mask |= values[i] == 1.0 ? 1u << i : 0;
  return mask;
}

Milp::Limits limits() { return {}; }

// Within Limits' default gaps, which is what kOptimal promises.
void expect_within_gaps(double got, double want) {
  EXPECT_NEAR(got, want, 1e-9 + 1e-9 * std::abs(want));
}

// With CBC's default cutoff increment, or probing on the objective, CBC
// proves wrong optima here (milp.cc says which and how often).
TEST(Milp, OptimalKnapsackMatchesExhaustiveSearch) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + trial % 13;
    const double scale = std::array{1e-4, 1.0, 100.0}[trial % 3];  // seconds, and plain numbers
    Knapsack k = random_knapsack(rng, n, 1 + trial % 3, scale);
    Milp m = build(k);
    Milp::Result r = m.solve(limits());
    ASSERT_EQ(r.status, Status::kOptimal) << "trial " << trial;
    ASSERT_EQ(r.values.size(), k.value.size());
    EXPECT_TRUE(fits(k, mask_of(r.values))) << "trial " << trial;
    const double best = exhaustive(k).first;
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    expect_within_gaps(r.objective, best);
    expect_within_gaps(negated_value(k, mask_of(r.values)), best);
    EXPECT_LE(r.bound, r.objective);
    EXPECT_GE(r.bound, best - 1e-9 * std::abs(best) - 1e-9);
  }
}

// remat's objectives mix a matmul's flops (millions) with pointwise ops
// (1) and a tie-break far below 1: a difference of one pointwise op must
// still decide. (Scaled by the largest coefficient, one unit fell below
// CBC's tolerances and exact mode proved optima one unit too high.)
TEST(Milp, WideRangeObjectiveResolvesItsSmallestUnit) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(1, 5), big(1, 3), coin(0, 2);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 4 + trial % 10;
    Knapsack k = random_knapsack(rng, n, 1 + trial % 3, 1.0);
    for (double& v : k.value) {
      v = coin(rng) == 0 ? 4194304.0 * big(rng) : small(rng) + 1e-9 * small(rng);
    }
    Milp m = build(k);
    Milp::Result r = m.solve(limits());
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    ASSERT_EQ(r.status, Status::kOptimal);
    EXPECT_TRUE(fits(k, mask_of(r.values)));
    const double best = exhaustive(k).first;
    // Within a tenth of the smallest unit: the 1e-9 tie-breaks may go
    // either way, a pointwise op may not.
    EXPECT_NEAR(negated_value(k, mask_of(r.values)), best, 0.1);
    EXPECT_GE(r.bound, best - 0.1);
  }
}

TEST(Milp, InfeasibleProgramIsReportedInfeasible) {
  // Infeasible as a linear program: two binaries cannot sum to 3.
  Milp lp;
  int x = lp.add_binary(1), y = lp.add_binary(1);
  lp.add_row(std::vector{x, y}, std::vector{1.0, 1.0}, 3, Milp::kInfinity);
  Milp::Result r = lp.solve(limits());
  EXPECT_EQ(r.status, Status::kInfeasible);
  EXPECT_TRUE(r.values.empty());
  EXPECT_EQ(r.bound, Milp::kInfinity);

  // Feasible as a linear program (x = y = 1/4), infeasible in integers.
  Milp ip;
  x = ip.add_binary(1), y = ip.add_binary(-1);
  ip.add_row(std::vector{x, y}, std::vector{2.0, 2.0}, 1, 1);
  r = ip.solve(limits());
  EXPECT_EQ(r.status, Status::kInfeasible);
  EXPECT_TRUE(r.values.empty());

  // A row with no variables that 0 does not satisfy.
  Milp constant;
  constant.add_binary(1);
  constant.add_row({}, {}, 1, 2);
  EXPECT_EQ(constant.solve(limits()).status, Status::kInfeasible);

  // A row whose sides cross.
  Milp crossed;
  x = crossed.add_binary(1);
  crossed.add_row(std::vector{x}, std::vector{1.0}, 0.75, 0.25);
  EXPECT_EQ(crossed.solve(limits()).status, Status::kInfeasible);

  // No variables at all: the empty rows decide.
  Milp empty;
  EXPECT_EQ(empty.solve(limits()).status, Status::kOptimal);
  empty.add_row({}, {}, -1, -0.5);
  EXPECT_EQ(empty.solve(limits()).status, Status::kInfeasible);
}

// relax() is the linear relaxation: a fractional optimum below the
// integral one, and the same status rules (exact's lazy memory rows read it).
TEST(Milp, RelaxSolvesTheLinearRelaxation) {
  // max x + y with 2x + 2y <= 1: the LP reaches 1/2, integers only 0.
  Milp m;
  const int x = m.add_binary(-1), y = m.add_binary(-1);
  m.add_row(std::vector{x, y}, std::vector{2.0, 2.0}, -Milp::kInfinity, 1);
  const Milp::Result lp = m.relax();
  ASSERT_EQ(lp.status, Status::kOptimal);
  EXPECT_NEAR(lp.objective, -0.5, 1e-9);
  EXPECT_EQ(lp.bound, lp.objective);
  ASSERT_EQ(lp.values.size(), 2u);
  EXPECT_NEAR(lp.values[0] + lp.values[1], 0.5, 1e-9);
  EXPECT_EQ(lp.nodes, 0);
  EXPECT_NEAR(m.solve(limits()).objective, 0, 1e-9);
  // A relaxation is a lower bound of every random knapsack's optimum.
  std::mt19937 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    Milp k = build(random_knapsack(rng, 6 + trial % 6, 1, 1e-3));
    const Milp::Result relaxed = k.relax(), solved = k.solve(limits());
    ASSERT_EQ(relaxed.status, Status::kOptimal);
    EXPECT_LE(relaxed.objective, solved.objective + 1e-9);
  }
  // Infeasible even fractionally; and no variables: the empty rows decide.
  Milp none;
  const int z = none.add_binary(1);
  none.add_row(std::vector{z}, std::vector{1.0}, 2, Milp::kInfinity);
  EXPECT_EQ(none.relax().status, Status::kInfeasible);
  Milp empty;
  EXPECT_EQ(empty.relax().status, Status::kOptimal);
}

TEST(Milp, RowsAddedBetweenSolvesCutOffTheOldOptimum) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    Knapsack k = random_knapsack(rng, 6 + trial % 6, 1, 1e-3);
    Milp m = build(k);
    Milp::Result first = m.solve(limits());
    ASSERT_EQ(first.status, Status::kOptimal);
    // A row the optimum satisfies keeps it (and is offered as the start).
    std::vector<int> all(k.value.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    m.add_row(all, std::vector<double>(all.size(), 1.0), 0, Milp::kInfinity);
    Milp::Result same = m.solve(limits());
    ASSERT_EQ(same.status, Status::kOptimal);
    expect_within_gaps(same.objective, first.objective);
    // A no-good row excludes exactly the old optimum: the next best wins.
    const unsigned old = mask_of(first.values);
    std::vector<double> coef;
    double chosen = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      coef.push_back((old >> i & 1) ? 1.0 : -1.0);
      chosen += (old >> i & 1) ? 1 : 0;
    }
    m.add_row(all, coef, -Milp::kInfinity, chosen - 1);
    Milp::Result second = m.solve(limits());
    ASSERT_EQ(second.status, Status::kOptimal) << "trial " << trial;
    EXPECT_NE(mask_of(second.values), old);
    expect_within_gaps(second.objective, exhaustive(k).second);
  }
}

TEST(Milp, FixingAVariableCutsOffTheOldOptimum) {
  std::mt19937 rng(13);
  Knapsack k = random_knapsack(rng, 10, 2, 1.0);
  Milp m = build(k);
  Milp::Result first = m.solve(limits());
  ASSERT_EQ(first.status, Status::kOptimal);
  const int flipped = first.values[0] == 1.0 ? 0 : 1;
  m.fix(0, flipped);
  Milp::Result r = m.solve(limits());
  ASSERT_EQ(r.status, Status::kOptimal);
  EXPECT_EQ(r.values[0], flipped);
  double best = Milp::kInfinity;
  for (unsigned mask = 0; mask < (1u << 10); ++mask) {
    if ((mask & 1) == static_cast<unsigned>(flipped) && fits(k, mask)) {
      best = std::min(best, negated_value(k, mask));
    }
  }
  expect_within_gaps(r.objective, best);
}

TEST(Milp, BinariesComeBackExactlyZeroOrOne) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 30; ++trial) {
    // Fractional weights and a continuous variable beside the binaries,
    // so the LP's values are rarely integral on their own.
    Knapsack k = random_knapsack(rng, 12, 2, 1.0);
    for (auto& row : k.weight) {
      for (double& w : row) w += 0.37;
    }
    Milp m = build(k);
    int slack = m.add_continuous(0, 5, 0.01);
    std::vector<int> vars(k.value.size());
    for (size_t i = 0; i < vars.size(); ++i) vars[i] = static_cast<int>(i);
    vars.push_back(slack);
    m.add_row(vars, std::vector<double>(vars.size(), 1.0), 2.5, Milp::kInfinity);
    Milp::Result r = m.solve(limits());
    ASSERT_EQ(r.status, Status::kOptimal);
    for (size_t i = 0; i + 1 < r.values.size(); ++i) {
      EXPECT_TRUE(r.values[i] == 0.0 || r.values[i] == 1.0) << r.values[i];
    }
  }
}

TEST(Milp, ContinuousVariablesAndTwoSidedRows) {
  Milp m;
  int x = m.add_continuous(0, 10, 2);                                // 2x
  int y = m.add_binary(2);                                           // + 2y
  int z = m.add_continuous(-Milp::kInfinity, Milp::kInfinity, 1);    // + z, free
  m.add_row(std::vector{x, y}, std::vector{1.0, 4.0}, 3, 5);         // 3 <= x + 4y <= 5
  m.add_row(std::vector{x, z}, std::vector{1.0, 1.0}, 1, Milp::kInfinity);  // z >= 1 - x
  m.add_row(std::vector{z}, std::vector{1.0}, -Milp::kInfinity, 2);  // z <= 2
  // 2x + 2y + z >= x + 1 + 2y: y = 1 allows x = 0 (3), y = 0 needs x >= 3 (4).
  Milp::Result r = m.solve(limits());
  ASSERT_EQ(r.status, Status::kOptimal);
  expect_within_gaps(r.objective, 3);
  EXPECT_EQ(r.values[y], 1.0);
  EXPECT_NEAR(r.values[x], 0, 1e-9);
  EXPECT_NEAR(r.values[z], 1, 1e-9);

  // The upper side binds when x is maximized: x + 4y <= 5 with y = 0.
  m.set_objective_coefficient(x, -1);
  m.set_objective_coefficient(y, 0);
  m.set_objective_coefficient(z, 0);
  r = m.solve(limits());
  ASSERT_EQ(r.status, Status::kOptimal);
  expect_within_gaps(r.objective, -5);
  EXPECT_EQ(r.values[y], 0.0);

  // An equality row: x + z = 7 with z <= 2 forces x >= 5, within x <= 5.
  m.add_row(std::vector{x, z}, std::vector{1.0, 1.0}, 7, 7);
  m.set_objective_coefficient(x, 1);
  r = m.solve(limits());
  ASSERT_EQ(r.status, Status::kOptimal);
  expect_within_gaps(r.objective, 5);
  EXPECT_NEAR(r.values[z], 2, 1e-9);
}

// A market split instance (Cornuejols and Dawande): equality rows over
// binaries with random coefficients and a slack per side; minimizing the
// slacks is notoriously hard for branch and bound, so no solver proves it
// in a few milliseconds.
Milp market_split(int rows, int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> coef(0, 99);
  Milp m;
  std::vector<int> x;
  for (int j = 0; j < n; ++j) x.push_back(m.add_binary());
  for (int i = 0; i < rows; ++i) {
    std::vector<double> a;
    double total = 0;
    for (int j = 0; j < n; ++j) total += a.emplace_back(coef(rng));
    std::vector<int> vars = x;
    vars.push_back(m.add_continuous(0, Milp::kInfinity, 1));
    vars.push_back(m.add_continuous(0, Milp::kInfinity, 1));
    a.push_back(1);
    a.push_back(-1);
    double d = std::floor(total / 2);
    m.add_row(vars, a, d, d);
  }
  return m;
}

TEST(Milp, TimeLimitReportsBoundAndGap) {
  Milp m = market_split(6, 60, 3);
  Milp::Limits tiny;
  tiny.seconds = 0.05;
  Milp::Result r = m.solve(tiny);
  ASSERT_TRUE(r.status == Status::kFeasible || r.status == Status::kUnknown)
      << status_name(r.status);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LE(r.bound, r.objective);
  if (r.status == Status::kFeasible) {
    ASSERT_EQ(r.values.size(), static_cast<size_t>(m.num_variables()));
    EXPECT_GT(r.objective, r.bound);  // a gap is left, or it would be optimal
    EXPECT_TRUE(std::isfinite(r.bound));
  } else {
    EXPECT_TRUE(r.values.empty());
    EXPECT_EQ(r.objective, Milp::kInfinity);
  }
}

// The node limit is counted work: a solve it stops is the same solve on
// every run (the same solution, bound and node count), and says it was
// not the time that stopped it.
TEST(Milp, NodeLimitStopsTheSameWayEveryTime) {
  Milp::Limits few;
  few.nodes = 20;
  Milp::Result first;
  for (int run = 0; run < 3; ++run) {
    Milp m = market_split(6, 60, 3);
    const Milp::Result r = m.solve(few);
    ASSERT_TRUE(r.status == Status::kFeasible || r.status == Status::kUnknown) << status_name(r.status);
    EXPECT_FALSE(r.timed_out);
    EXPECT_LE(r.nodes, few.nodes + 1);
    EXPECT_LE(r.bound, r.objective);
    if (run == 0) {
      first = r;
      continue;
    }
    EXPECT_EQ(r.status, first.status);
    EXPECT_EQ(r.nodes, first.nodes);
    EXPECT_EQ(r.values, first.values);
    EXPECT_EQ(r.bound, first.bound);
  }
}

// A solve that stops early still hands its solution to the next, when the
// rows added since keep it feasible: the next solve, however short, cannot
// come back with nothing or with worse. (A fresh Milp stopped as early
// usually has no solution at all.)
TEST(Milp, StillFeasibleIncumbentIsTheNextStart) {
  Milp m = market_split(6, 60, 3);
  Milp::Limits some;
  some.seconds = 0.5;
  Milp::Result first = m.solve(some);
  ASSERT_EQ(first.status, Status::kFeasible) << status_name(first.status);
  std::vector<int> binaries(60);
  for (int j = 0; j < 60; ++j) binaries[j] = j;
  m.add_row(binaries, std::vector<double>(60, 1.0), 0, 60);  // holds for every solution
  m.add_continuous(-1, 1, 1);  // unused: joins the start at 0
  Milp::Limits tiny;
  tiny.seconds = 1e-4;
  Milp::Result next = m.solve(tiny);
  ASSERT_EQ(next.status, Status::kFeasible) << status_name(next.status);
  EXPECT_LE(next.objective, first.objective + 1e-9);
}

TEST(Milp, WriteMpsWritesAReadableFile) {
  Milp m;
  int a = m.add_binary(-1.5);
  int b = m.add_continuous(-2, 3.25, 0.1);
  int c = m.add_continuous(-Milp::kInfinity, Milp::kInfinity);
  m.add_row(std::vector{a, b}, std::vector{1.0, 2.0}, 1, 4);
  m.add_row(std::vector{b, c}, std::vector{1.0, -1.0 / 3}, -Milp::kInfinity, 0);
  m.add_row(std::vector{a, c}, std::vector{1.0, 1.0}, 2, 2);
  remat::testing::TempDir dir("remat_milp");
  const std::string path = dir / "program.mps";
  m.write_mps(path);

  CoinMpsIO in;
  in.messageHandler()->setLogLevel(0);
  ASSERT_EQ(in.readMps(path.c_str(), ""), 0);
  EXPECT_EQ(in.getNumCols(), 3);
  EXPECT_EQ(in.getNumRows(), 3);
  EXPECT_EQ(in.getNumElements(), 6);
  EXPECT_TRUE(in.isInteger(a));
  EXPECT_FALSE(in.isInteger(b));
  EXPECT_EQ(in.getColLower()[a], 0);
  EXPECT_EQ(in.getColUpper()[a], 1);
  EXPECT_EQ(in.getColLower()[b], -2);
  EXPECT_EQ(in.getColUpper()[b], 3.25);
  EXPECT_LE(in.getColLower()[c], -in.getInfinity());
  EXPECT_GE(in.getColUpper()[c], in.getInfinity());
  EXPECT_EQ(in.getObjCoefficients()[a], -1.5);
  EXPECT_EQ(in.getObjCoefficients()[b], 0.1);  // full precision
  EXPECT_EQ(in.getRowLower()[0], 1);
  EXPECT_EQ(in.getRowUpper()[0], 4);
  EXPECT_LE(in.getRowLower()[1], -in.getInfinity());
  EXPECT_EQ(in.getRowLower()[2], 2);
  EXPECT_EQ(in.getRowUpper()[2], 2);

  try {
    m.write_mps(dir / "no-such-folder/program.mps");
    FAIL() << "wrote into a folder that does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
  }
}

TEST(Milp, SolveNeverPrints) {
  Milp m = market_split(3, 20, 5);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  Milp::Limits l;
  l.seconds = 0.2;
  m.solve(l);
  Milp infeasible;
  int x = infeasible.add_binary();
  infeasible.add_row(std::vector{x}, std::vector{1.0}, 2, 3);
  infeasible.solve(l);
  std::string out = ::testing::internal::GetCapturedStdout();
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out, "");
  EXPECT_EQ(err, "");
}

TEST(Milp, SameProgramSameAnswer) {
  std::mt19937 rng(19);
  Knapsack k = random_knapsack(rng, 25, 3, 1e-3);
  Milp::Result a = build(k).solve(limits());
  Milp::Result b = build(k).solve(limits());
  ASSERT_EQ(a.status, Status::kOptimal);
  EXPECT_EQ(a.values, b.values);
  EXPECT_EQ(a.objective, b.objective);
  EXPECT_EQ(a.nodes, b.nodes);
}

TEST(Milp, DistinctProgramsSolveConcurrently) {
  std::mt19937 rng(23);
  std::vector<Knapsack> ks;
  for (int i = 0; i < 8; ++i) ks.push_back(random_knapsack(rng, 20, 2, 1e-3));
  std::vector<Milp::Result> alone(ks.size()), together(ks.size());
  for (size_t i = 0; i < ks.size(); ++i) alone[i] = build(ks[i]).solve(limits());
  auto worker = [&](size_t first) {
    for (size_t i = first; i < ks.size(); i += 2) together[i] = build(ks[i]).solve(limits());
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  // The same optima; not necessarily the same solutions (milp.h: CBC's
  // random state is shared between overlapping solves).
  for (size_t i = 0; i < ks.size(); ++i) {
    ASSERT_EQ(together[i].status, Status::kOptimal) << "program " << i;
    expect_within_gaps(together[i].objective, alone[i].objective);
  }
}

TEST(Milp, MisuseIsAnInternalError) {
  Milp m;
  int x = m.add_binary();
  auto code = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kParse;  // anything but kInternal: nothing was thrown
  };
  EXPECT_EQ(code([&] { m.add_row(std::vector{x + 1}, std::vector{1.0}, 0, 1); }),
            ErrorCode::kInternal);
  EXPECT_EQ(code([&] { m.add_row(std::vector{x}, std::vector{1.0, 2.0}, 0, 1); }),
            ErrorCode::kInternal);
  EXPECT_EQ(code([&] { m.fix(x, 0.5); }), ErrorCode::kInternal);
  EXPECT_EQ(code([&] { m.add_continuous(1, 0); }), ErrorCode::kInternal);
  EXPECT_EQ(code([&] { m.set_objective_coefficient(x, std::nan("")); }), ErrorCode::kInternal);
  EXPECT_EQ(m.num_rows(), 0);
  EXPECT_EQ(m.num_variables(), 1);
}

TEST(Milp, RepeatedTermsAreSummed) {
  Milp m;
  int x = m.add_binary(-1);
  int y = m.add_binary(-1);
  // x + x + y <= 2 is 2x + y <= 2: x = y = 1 does not fit, one of them does.
  m.add_row(std::vector{x, y, x}, std::vector{1.0, 1.0, 1.0}, -Milp::kInfinity, 2);
  Milp::Result r = m.solve(limits());
  ASSERT_EQ(r.status, Status::kOptimal);
  expect_within_gaps(r.objective, -1);
  EXPECT_EQ(r.values[x] + r.values[y], 1.0);
}

TEST(Milp, ProgramWithoutRows) {
  Milp m;
  int x = m.add_binary(-1);
  int y = m.add_binary(1);
  int z = m.add_continuous(-2, 3, 0.5);
  Milp::Result r = m.solve(limits());
  ASSERT_EQ(r.status, Status::kOptimal);
  EXPECT_EQ(r.values[x], 1.0);
  EXPECT_EQ(r.values[y], 0.0);
  EXPECT_NEAR(r.values[z], -2, 1e-9);
  expect_within_gaps(r.objective, -2);
}

// An unbounded relaxation proves nothing and gives no solution: kUnknown,
// with no finite bound.
TEST(Milp, UnboundedProgramIsUnknown) {
  Milp m;
  int x = m.add_binary(1);
  int z = m.add_continuous(-Milp::kInfinity, Milp::kInfinity, -1);
  m.add_row(std::vector{x, z}, std::vector{1.0, -1.0}, -Milp::kInfinity, 0);  // z >= x
  Milp::Result r = m.solve(limits());
  EXPECT_EQ(r.status, Status::kUnknown) << status_name(r.status);
  EXPECT_EQ(r.bound, -Milp::kInfinity);
}

TEST(Milp, StatusNames) {
  EXPECT_STREQ(status_name(Status::kOptimal), "optimal");
  EXPECT_STREQ(status_name(Status::kFeasible), "feasible");
  EXPECT_STREQ(status_name(Status::kInfeasible), "infeasible");
  EXPECT_STREQ(status_name(Status::kUnknown), "unknown");
}

}  // namespace
}  // namespace remat::optimize
