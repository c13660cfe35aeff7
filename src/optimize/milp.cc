// optimize/milp.cc — Milp over COIN-OR CBC 2.10 (CbcModel on OsiClpSolverInterface).
//
// Contract: see milp.h. The program lives here as plain arrays (bounds,
// objective, rows in CSR form); every solve builds a fresh CBC model from
// them, so nothing of an earlier solve but the incumbent carries over, and
// programs of a few thousand rows cost milliseconds to load. CBC is used as a
// library, not through its command-line driver (CbcSolver): the driver keeps
// process-wide state, so two Milps could not solve at once.
#include "optimize/milp.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>
#include <cmath>
#include <string>
#include <utility>

#include <CbcBranchDynamic.hpp>
#include <CbcHeuristic.hpp>
#include <CbcHeuristicFPump.hpp>
#include <CbcModel.hpp>
#include <CbcNode.hpp>
#include <CglClique.hpp>
#include <CglFlowCover.hpp>
#include <CglGomory.hpp>
#include <CglKnapsackCover.hpp>
#include <CglMixedIntegerRounding2.hpp>
#include <CglProbing.hpp>
#include <CoinError.hpp>
#include <CoinFinite.hpp>
#include <CoinMpsIO.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>
#include <fmt/format.h>

#include "remat/error.h"

namespace remat::optimize {

namespace {

// The program as plain arrays. (Milp::Data is this; the helpers below take
// it under this name, since Milp::Data is private to Milp.)
struct Program {
  // Per variable.
  std::vector<double> lo, hi, cost;
  std::vector<char> binary;  // CoinMpsIO's integrality array: 1 for a binary
  // Rows: row r's terms are [row_start[r], row_start[r + 1]).
  std::vector<CoinBigIndex> row_start{0};
  std::vector<int> row_var;
  std::vector<double> row_coef;
  std::vector<double> row_lo, row_hi;
  // The last solve's solution (empty when it had none): the next solve's start.
  std::vector<double> incumbent;
};

// A violated precondition of milp.h is a bug in the model that built the
// program, not bad user input.
[[noreturn]] void misuse(const std::string& what) {
  throw Error(ErrorCode::kInternal, "Milp: " + what);
}

// CBC spells infinity COIN_DBL_MAX and reports "no value" as +-1e50 or more.
double to_coin(double x) {
  if (x == Milp::kInfinity) return COIN_DBL_MAX;
  if (x == -Milp::kInfinity) return -COIN_DBL_MAX;
  return x;
}
double from_coin(double x) {
  if (x >= 1e30) return Milp::kInfinity;
  if (x <= -1e30) return -Milp::kInfinity;
  return x;
}
std::vector<double> to_coin(const std::vector<double>& xs) {
  std::vector<double> out(xs.size());
  std::transform(xs.begin(), xs.end(), out.begin(), [](double x) { return to_coin(x); });
  return out;
}

CoinPackedMatrix row_matrix(const Program& d) {
  const int rows = static_cast<int>(d.row_lo.size());
  std::vector<int> lengths(rows);
  for (int r = 0; r < rows; ++r) lengths[r] = static_cast<int>(d.row_start[r + 1] - d.row_start[r]);
  // Row-ordered: the major dimension is the rows, the minor the variables.
  return CoinPackedMatrix(false, static_cast<int>(d.cost.size()), rows, d.row_start.back(),
                          d.row_coef.data(), d.row_var.data(), d.row_start.data(),
                          lengths.data());
}

// CBC and Clp each have a message handler; level 0 silences both. (The cut
// generators and heuristics print through the model's.)
void silence(OsiClpSolverInterface& lp) {
  lp.messageHandler()->setLogLevel(0);
  lp.getModelPtr()->setLogLevel(0);
  lp.setHintParam(OsiDoReducePrint, true, OsiHintTry);
}

// CBC sees the objective scaled so that its smallest nonzero coefficient
// is 1, unless that puts the largest above kLargestScaled (then the largest
// is kLargestScaled). CBC's tolerances (the LP's 1e-7 on reduced costs,
// 1e-6 on integrality, the cutoff increment below) are absolute amounts of
// objective; they must stay far below the smallest difference that counts.
// remat's objectives mix a matmul's flops (millions) with pointwise ops (1)
// and seconds of measured runtime (1e-4): divided by the largest
// coefficient, one pointwise op fell to 2.4e-7, within tolerance, and CBC
// proved optima one op too expensive (5 of 39 of exact mode's programs on
// the corpus; WideRangeObjectiveResolvesItsSmallestUnit in
// tests/cpp/test_milp.cc). The cap keeps the LP's numbers within what its
// double arithmetic resolves: coefficients spanning more than 1e8 lose the
// smallest, which are tie-breaks in remat's programs.
constexpr double kLargestScaled = 1e8;

double objective_scale(const Program& d) {
  double largest = 0, smallest = COIN_DBL_MAX;
  for (double c : d.cost) {
    if (c == 0) continue;
    largest = std::max(largest, std::abs(c));
    smallest = std::min(smallest, std::abs(c));
  }
  if (largest == 0) return 1;
  return std::min(1 / smallest, kLargestScaled / largest);
}

void load(const Program& d, double scale, OsiClpSolverInterface& lp) {
  silence(lp);
  std::vector<double> cost = d.cost;
  for (double& c : cost) c *= scale;
  lp.loadProblem(row_matrix(d), to_coin(d.lo).data(), to_coin(d.hi).data(), cost.data(),
                 to_coin(d.row_lo).data(), to_coin(d.row_hi).data());
  for (int v = 0; v < static_cast<int>(d.binary.size()); ++v) {
    if (d.binary[v]) lp.setInteger(v);
  }
}

// Bare CbcModel is plain branch and bound. These are the cut generators and
// heuristics of CBC's own samples (a subset of its driver's defaults): on
// random knapsacks of up to 14 items they take a tenth of the nodes.
// Probing does not use the objective: with it, and a cutoff increment below
// CBC's default 1e-5, CBC 2.10 proved suboptimal knapsacks optimal (10 of
// 2000 random ones; none without it). CbcModel clones each, so locals do.
void add_cuts_and_heuristics(CbcModel& model) {
  CglProbing probing;
  probing.setUsingObjective(false);
  probing.setMaxPass(1);
  probing.setMaxPassRoot(5);
  probing.setMaxProbe(10);
  probing.setMaxProbeRoot(1000);
  probing.setMaxLook(50);
  probing.setMaxLookRoot(500);
  probing.setMaxElements(200);
  probing.setRowCuts(3);
  CglGomory gomory;
  gomory.setLimit(300);
  CglKnapsackCover knapsack;
  CglClique clique;
  clique.setStarCliqueReport(false);  // these two report with printf, not the handler
  clique.setRowCliqueReport(false);
  CglMixedIntegerRounding2 mir;
  CglFlowCover flow;
  // -1: at the root, and in the tree while they keep finding cuts.
  model.addCutGenerator(&probing, -1, "Probing");
  model.addCutGenerator(&gomory, -1, "Gomory");
  model.addCutGenerator(&knapsack, -1, "Knapsack");
  model.addCutGenerator(&clique, -1, "Clique");
  model.addCutGenerator(&mir, -1, "MixedIntegerRounding2");
  model.addCutGenerator(&flow, -1, "FlowCover");
  CbcRounding rounding(model);
  model.addHeuristic(&rounding);
  CbcHeuristicFPump pump(model);
  model.addHeuristic(&pump);
}

// CBC's own branching decision (the one CbcNode uses when none is set),
// less its abort. CBC 2.10's CbcBranchDynamicDecision::betterBranch asserts
// that the node's objective is at most the cutoff (`assert(distance >=
// 0.0)`, CbcBranchDynamic.cpp), which a node within tolerance above it
// breaks, more readily with the small cutoff increment below: Debian's
// build keeps the assert and the whole process aborts (exact peak searches
// on the corpus's cnn_bn_avgpool_inductor and lstm_unrolled_inductor did).
// CBC since fixed it by taking that distance as 0 (coin-or/Cbc#713); so
// does this, by showing the decision the node's objective as the cutoff
// for the call. Everything else is the base class's.
class ClampedDynamicDecision : public CbcBranchDynamicDecision {
 public:
  ClampedDynamicDecision() = default;
  ClampedDynamicDecision(const ClampedDynamicDecision&) = default;
  CbcBranchDecision* clone() const override { return new ClampedDynamicDecision(*this); }
  int betterBranch(CbcBranchingObject* one, CbcBranchingObject* best, double change_up,
                   int infeasible_up, double change_down, int infeasible_down) override {
    CbcModel* model = one->model();
    const CbcNode* node = model->currentNode();
    const double cutoff = model->getCutoff();
    // The assert's branch: after a solution (stateOfSearch > 2), with a node.
    const bool clamp = model->stateOfSearch() % 10 > 2 && node != nullptr &&
                       node->objectiveValue() > cutoff;
    if (clamp) model->setDblParam(CbcModel::CbcCurrentCutoff, node->objectiveValue());
    const int way = CbcBranchDynamicDecision::betterBranch(one, best, change_up, infeasible_up,
                                                           change_down, infeasible_down);
    if (clamp) model->setDblParam(CbcModel::CbcCurrentCutoff, cutoff);
    return way;
  }
};

void configure(CbcModel& model, const Milp::Limits& limits, double scale) {
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  silence(*dynamic_cast<OsiClpSolverInterface*>(model.solver()));  // CbcModel cloned it
  model.setNumberThreads(0);  // no worker threads: deterministic, and one core per Milp
  // Wall time, as milp.h promises; CBC's default, CPU time, is the whole
  // process's and so counts every thread solving beside this one.
  model.setUseElapsedTime(true);
  if (limits.seconds > 0) model.setMaximumSeconds(limits.seconds);
  if (limits.nodes >= 0)
    model.setMaximumNodes(static_cast<int>(std::min<int64_t>(limits.nodes, std::numeric_limits<int>::max())));
  model.setAllowableFractionGap(limits.relative_gap);
  model.setAllowableGap(limits.absolute_gap * scale);
  // CBC prunes every node that cannot beat the incumbent by this much
  // (default 1e-5 of the scaled objective), so a better solution closer
  // than that would be lost: it follows the absolute gap instead. (Unscaled
  // and at its default, it lost the optimum of 26 in 200 random knapsacks
  // valued in seconds. CBC still raises it itself when every cost is
  // integral.)
  model.setCutoffIncrement(limits.absolute_gap * scale);
  add_cuts_and_heuristics(model);
  ClampedDynamicDecision decision;
  model.setBranchingMethod(decision);  // CbcModel clones it
}

// ---------------------------------------------------------------------------
// The incumbent as a start.

double objective_of(const Program& d, const std::vector<double>& x) {
  double sum = 0;
  for (size_t v = 0; v < x.size(); ++v) sum += d.cost[v] * x[v];
  return sum;
}

bool within(double x, double lo, double hi) {
  const double tol = 1e-7;
  return x >= lo - tol * std::max(1.0, std::abs(lo)) && x <= hi + tol * std::max(1.0, std::abs(hi));
}

// The last solution, extended to variables added since (each at the value
// in its bounds nearest 0), when it satisfies the bounds and rows of now;
// else empty.
std::vector<double> feasible_start(const Program& d) {
  if (d.incumbent.empty()) return {};
  std::vector<double> x = d.incumbent;
  for (size_t v = x.size(); v < d.cost.size(); ++v) x.push_back(std::clamp(0.0, d.lo[v], d.hi[v]));
  for (size_t v = 0; v < x.size(); ++v) {
    if (!within(x[v], d.lo[v], d.hi[v])) return {};
  }
  for (size_t r = 0; r < d.row_lo.size(); ++r) {
    double activity = 0;
    for (CoinBigIndex k = d.row_start[r]; k < d.row_start[r + 1]; ++k) {
      activity += d.row_coef[k] * x[d.row_var[k]];
    }
    if (!within(activity, d.row_lo[r], d.row_hi[r])) return {};
  }
  return x;
}

// ---------------------------------------------------------------------------
// Reading the answer.

// CBC's solution, binaries snapped to exactly 0 or 1 (CBC accepts them
// within its integrality tolerance, 1e-6).
std::vector<double> solution(const CbcModel& model, const Program& d) {
  const double* x = model.bestSolution();
  std::vector<double> out(x, x + d.cost.size());
  for (size_t v = 0; v < out.size(); ++v) {
    if (d.binary[v]) out[v] = out[v] > 0.5 ? 1.0 : 0.0;
  }
  return out;
}

Milp::Status status_of(const CbcModel& model, bool has_solution) {
  if (model.isProvenOptimal()) return Milp::Status::kOptimal;  // includes "stopped on gap"
  if (model.isProvenInfeasible()) return Milp::Status::kInfeasible;
  // Stopped early (the time limit, or numerical trouble), or an unbounded
  // relaxation: a solution found so far is all there is.
  return has_solution ? Milp::Status::kFeasible : Milp::Status::kUnknown;
}

Milp::Result read_result(const CbcModel& model, const Program& d, double scale) {
  Milp::Result r;
  const bool has_solution = model.bestSolution() != nullptr;
  r.status = status_of(model, has_solution);
  r.nodes = model.getNodeCount();
  r.timed_out = model.isSecondsLimitReached();
  if (r.status == Milp::Status::kInfeasible) {
    r.bound = Milp::kInfinity;  // no assignment: every value is a lower bound
    return r;
  }
  r.bound = model.isContinuousUnbounded() ? -Milp::kInfinity
                                          : from_coin(model.getBestPossibleObjValue()) / scale;
  if (!has_solution) return r;
  r.values = solution(model, d);
  // The value of the values returned (after snapping), so the two agree.
  r.objective = objective_of(d, r.values);
  // A lower bound above the incumbent is tolerance noise: the incumbent's
  // value is then the best bound there is.
  r.bound = std::min(r.bound, r.objective);
  return r;
}

// A program with no variables: its rows are constants.
Milp::Result solve_empty(const Program& d) {
  Milp::Result r;
  for (size_t i = 0; i < d.row_lo.size(); ++i) {
    if (!within(0.0, d.row_lo[i], d.row_hi[i])) {
      r.status = Milp::Status::kInfeasible;
      r.bound = Milp::kInfinity;
      return r;
    }
  }
  r.status = Milp::Status::kOptimal;
  r.objective = r.bound = 0;
  return r;
}

Milp::Result run_cbc(const Program& d, const Milp::Limits& limits) {
  const double scale = objective_scale(d);
  OsiClpSolverInterface lp;
  load(d, scale, lp);
  CbcModel model(lp);
  configure(model, limits, scale);
  std::vector<double> start = feasible_start(d);
  if (!start.empty()) {
    model.setBestSolution(start.data(), static_cast<int>(start.size()),
                          objective_of(d, start) * scale);
  }
  model.initialSolve();
  model.branchAndBound();
  return read_result(model, d, scale);
}

}  // namespace

struct Milp::Data : Program {};

// ---------------------------------------------------------------------------

Milp::Milp() : d_(std::make_unique<Data>()) {}
Milp::~Milp() = default;
Milp::Milp(Milp&&) noexcept = default;
Milp& Milp::operator=(Milp&&) noexcept = default;

int Milp::add_binary(double objective) {
  int v = add_continuous(0, 1, objective);
  d_->binary[v] = 1;
  return v;
}

int Milp::add_continuous(double lo, double hi, double objective) {
  if (std::isnan(lo) || std::isnan(hi) || lo > hi || lo == kInfinity || hi == -kInfinity) {
    misuse(fmt::format("variable bounds [{}, {}]", lo, hi));
  }
  if (!std::isfinite(objective)) misuse(fmt::format("objective coefficient {}", objective));
  d_->lo.push_back(lo);
  d_->hi.push_back(hi);
  d_->cost.push_back(objective);
  d_->binary.push_back(0);
  return num_variables() - 1;
}

void Milp::set_objective_coefficient(int var, double c) {
  if (var < 0 || var >= num_variables()) misuse(fmt::format("no variable {}", var));
  if (!std::isfinite(c)) misuse(fmt::format("objective coefficient {}", c));
  d_->cost[var] = c;
}

void Milp::fix(int var, double value) {
  if (var < 0 || var >= num_variables()) misuse(fmt::format("no variable {}", var));
  if (!std::isfinite(value) || (d_->binary[var] && value != 0 && value != 1)) {
    misuse(fmt::format("variable {} fixed to {}", var, value));
  }
  d_->lo[var] = d_->hi[var] = value;
}

void Milp::add_row(std::span<const int> vars, std::span<const double> coefs, double lo,
                   double hi) {
  if (vars.size() != coefs.size()) {
    misuse(fmt::format("a row with {} variables and {} coefficients", vars.size(), coefs.size()));
  }
  if (std::isnan(lo) || std::isnan(hi) || lo == kInfinity || hi == -kInfinity) {
    misuse(fmt::format("row bounds [{}, {}]", lo, hi));
  }
  // Terms in variable order, repeated variables summed, zeros dropped: CBC
  // wants at most one entry per variable and row.
  std::vector<std::pair<int, double>> terms;
  for (size_t k = 0; k < vars.size(); ++k) {
    if (vars[k] < 0 || vars[k] >= num_variables()) misuse(fmt::format("no variable {}", vars[k]));
    if (!std::isfinite(coefs[k])) misuse(fmt::format("row coefficient {}", coefs[k]));
    terms.emplace_back(vars[k], coefs[k]);
  }
  std::sort(terms.begin(), terms.end(), [](auto& a, auto& b) { return a.first < b.first; });
  for (size_t k = 0; k < terms.size(); ++k) {
    double c = terms[k].second;
    while (k + 1 < terms.size() && terms[k + 1].first == terms[k].first) c += terms[++k].second;
    if (c == 0) continue;
    d_->row_var.push_back(terms[k].first);
    d_->row_coef.push_back(c);
  }
  d_->row_start.push_back(static_cast<CoinBigIndex>(d_->row_var.size()));
  d_->row_lo.push_back(lo);
  d_->row_hi.push_back(hi);
}

int Milp::num_variables() const { return static_cast<int>(d_->cost.size()); }
int Milp::num_rows() const { return static_cast<int>(d_->row_lo.size()); }

namespace {
// CBC's random state is process-wide (milp.h): one solve at a time.
std::mutex& cbc_lock() {
  static std::mutex cbc;
  return cbc;
}

// The linear relaxation by Clp (milp.h relax).
Milp::Result run_clp(const Program& d) {
  const double scale = objective_scale(d);
  OsiClpSolverInterface lp;
  load(d, scale, lp);
  for (int v = 0; v < static_cast<int>(d.binary.size()); ++v) lp.setContinuous(v);
  lp.initialSolve();
  Milp::Result r;
  if (lp.isProvenPrimalInfeasible()) {
    r.status = Milp::Status::kInfeasible;
    r.bound = Milp::kInfinity;
    return r;
  }
  if (!lp.isProvenOptimal()) return r;  // unbounded, or Clp gave up: kUnknown
  const double* x = lp.getColSolution();
  r.values.assign(x, x + d.cost.size());
  r.status = Milp::Status::kOptimal;
  r.objective = r.bound = lp.getObjValue() / scale;
  return r;
}
}  // namespace

Milp::Result Milp::relax() {
  const auto t0 = std::chrono::steady_clock::now();
  Result r;
  std::lock_guard<std::mutex> lock(cbc_lock());
  try {
    r = num_variables() == 0 ? solve_empty(*d_) : run_clp(*d_);
  } catch (const CoinError& e) {
    throw Error(ErrorCode::kInternal, fmt::format("Clp failed in {}::{}: {}", e.className(),
                                                  e.methodName(), e.message()));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

Milp::Result Milp::solve(const Limits& limits) {
  const auto t0 = std::chrono::steady_clock::now();
  Result r;
  std::lock_guard<std::mutex> lock(cbc_lock());
  try {
    r = num_variables() == 0 ? solve_empty(*d_) : run_cbc(*d_, limits);
  } catch (const CoinError& e) {
    throw Error(ErrorCode::kInternal, fmt::format("CBC failed in {}::{}: {}", e.className(),
                                                  e.methodName(), e.message()));
  }
  d_->incumbent = r.values;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

void Milp::write_mps(const std::string& path) const {
  const Data& d = *d_;
  std::vector<std::string> columns, rows;
  for (int v = 0; v < num_variables(); ++v) columns.push_back(fmt::format("x{}", v));
  for (int r = 0; r < num_rows(); ++r) rows.push_back(fmt::format("r{}", r));
  // Names as C strings: CoinMpsIO's std::string overload leaks a copy of
  // each name (CoinUtils 2.11, found by LeakSanitizer).
  std::vector<const char*> column_names, row_names;
  for (const std::string& n : columns) column_names.push_back(n.c_str());
  for (const std::string& n : rows) row_names.push_back(n.c_str());
  CoinMpsIO mps;
  mps.messageHandler()->setLogLevel(0);
  mps.setMpsData(row_matrix(d), COIN_DBL_MAX, to_coin(d.lo).data(), to_coin(d.hi).data(),
                 d.cost.data(), d.binary.data(), to_coin(d.row_lo).data(),
                 to_coin(d.row_hi).data(), column_names.data(), row_names.data());
  int rc = 0;
  try {
    // formatType 1: values with full precision, so the file is the program.
    rc = mps.writeMps(path.c_str(), 0, 1);
  } catch (const CoinError& e) {
    throw Error(ErrorCode::kIo, fmt::format("cannot write {}: {}", path, e.message()));
  }
  if (rc != 0) throw Error(ErrorCode::kIo, fmt::format("cannot write {}", path));
}

const char* status_name(Milp::Status s) {
  switch (s) {
    case Milp::Status::kOptimal: return "optimal";
    case Milp::Status::kFeasible: return "feasible";
    case Milp::Status::kInfeasible: return "infeasible";
    case Milp::Status::kUnknown: return "unknown";
  }
  return "unknown";
}

}  // namespace remat::optimize
