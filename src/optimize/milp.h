// optimize/milp.h — a small mixed-integer linear program, solved by COIN-OR
// CBC (Debian's coinor-libcbc-dev; docs/dependencies.md says why CBC).
//
// Contract:
//  * Build: add_binary / add_continuous return dense variable ids (0, 1, ...);
//    set_objective_coefficient sets c[v] (default 0); add_row adds
//    lo <= sum(coef[k] * x[var[k]]) <= hi (kInfinity / -kInfinity for a
//    missing side; a variable repeated in a row counts with the sum of its
//    coefficients). Objective: minimize. Rows and variables may be added
//    between solves; earlier ones keep their ids (fix and
//    set_objective_coefficient change a variable in place). A call that
//    breaks these rules (an unknown id, vars and coefs of different
//    lengths, lo > hi for a variable, a NaN or infinite coefficient, a
//    binary fixed to other than 0 or 1) is a bug of the caller's:
//    Error(kInternal), and the program is left as it was. (A row with
//    lo > hi is allowed: it makes the program infeasible.)
//  * solve(limits) runs branch and cut from scratch on the whole program
//    (the previous solve's solution, when it still satisfies every bound
//    and row, variables added since at their value nearest 0, is offered as
//    a start). It never prints (CBC's log level 0) and never calls back.
//      kOptimal     `objective` is the optimum within limits.relative_gap
//                   and absolute_gap; `bound` is the proven lower bound.
//      kFeasible    stopped by a limit (nodes, or the time safety net) with
//                   a solution: `objective` is its value, `bound` the best
//                   lower bound proven.
//      kInfeasible  proven: no assignment satisfies the rows (`objective`
//                   and `bound` are kInfinity).
//      kUnknown     no solution and no proof: stopped by a limit, or the
//                   relaxation is unbounded; `bound` is the best
//                   proven lower bound (-kInfinity when none).
//    bound <= objective always. `values` holds one value per variable when
//    a solution exists (binaries exactly 0.0 or 1.0), else is empty;
//    `objective` is the objective at `values`. `nodes` counts the branch and
//    bound nodes, `seconds` the wall time of this call; `timed_out` says the
//    time safety net (limits.seconds) stopped it. CBC sees the
//    objective scaled so its smallest nonzero coefficient is 1 (or, where
//    the coefficients span more than 1e8, its largest is 1e8): a difference
//    of the smallest coefficient decides, whatever the objective's unit
//    (seconds, or flops beside pointwise ops); differences below 1e-8 of the
//    largest coefficient may not.
//  * Limits: `nodes` bounds the branch-and-bound nodes of one solve
//    (counted work: the root's LP, cuts and heuristics run a fixed number
//    of passes whatever the machine); `seconds` is a wall-time safety net,
//    off by default.
//  * Deterministic: the same program and limits give the same answer on any
//    machine at any load (CBC runs single-threaded, and nothing it is
//    configured with reads the clock) unless the `seconds` net stops it,
//    which `timed_out` reports.
//    CBC 2.10 keeps one process-wide random state (CoinDrand48, reseeded by
//    every solve): solves that overlapped in time could take different
//    paths and return another of several equally good solutions, so solves
//    take a process-wide lock and run one at a time.
//  * write_mps writes the program in free MPS with full-precision numbers,
//    variables named x<id> and rows r<index> (for comparing solvers in
//    bench/, and for bug reports); Error(kIo) when the file cannot be written.
// Thread-safety: one Milp per thread; distinct Milps may be used from
// several threads (their solves queue on the lock).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace remat::optimize {

class Milp {
 public:
  static constexpr double kInfinity = std::numeric_limits<double>::infinity();

  enum class Status : uint8_t { kOptimal, kFeasible, kInfeasible, kUnknown };

  struct Limits {
    int64_t nodes = -1;           // branch-and-bound nodes for one solve; < 0: none
    double seconds = 0;           // wall-time safety net for one solve; <= 0: none
    double relative_gap = 1e-9;   // stop when (obj - bound) <= gap * max(|obj|, |bound|)
    double absolute_gap = 1e-9;   // or when obj - bound <= this
  };

  struct Result {
    Status status = Status::kUnknown;
    double objective = kInfinity;
    double bound = -kInfinity;
    std::vector<double> values;
    int64_t nodes = 0;
    double seconds = 0;
    bool timed_out = false;
  };

  Milp();
  ~Milp();
  Milp(Milp&&) noexcept;
  Milp& operator=(Milp&&) noexcept;

  int add_binary(double objective = 0);
  // lo may be -kInfinity and hi kInfinity.
  int add_continuous(double lo, double hi, double objective = 0);
  void set_objective_coefficient(int var, double c);
  // Fixes a variable to `value` (its bounds become [value, value]).
  void fix(int var, double value);
  void add_row(std::span<const int> vars, std::span<const double> coefs, double lo, double hi);

  int num_variables() const;
  int num_rows() const;

  Result solve(const Limits& limits);
  // The linear relaxation (every binary in [0, 1]) solved by Clp's simplex
  // to optimality, with no limit (an LP always ends): kOptimal with
  // `objective` = `bound` and the fractional `values`, kInfeasible, or
  // kUnknown (unbounded, or Clp's numerical failure; no values). `nodes`
  // is 0. Deterministic as solve(); it takes the same lock.
  Result relax();

  void write_mps(const std::string& path) const;

 private:
  struct Data;
  std::unique_ptr<Data> d_;
};

const char* status_name(Milp::Status s);  // "optimal", "feasible", "infeasible", "unknown"

}  // namespace remat::optimize
