// budget/knapsack.h — stage 3 (decide, memory budget): the 0/1 knapsack
// solvers that pick which banned nodes stay saved under a memory budget.
//
// Contract: every solver takes, per candidate item, a memory (its normalized
// size) and a runtime (what recomputing it costs), and a memory budget. It
// returns the runtime it keeps (sum over saved items), the indices of the
// items to keep saved and the indices of the items that may be recomputed.
// Each index appears in exactly one of the two lists. Orders and values follow
// torch 2.13's torch/_functorch/_activation_checkpointing/knapsack.py:
//
//   solver                          saved order        recomputed order
//   greedy                          ratio order        ratio order
//   dp                              ascending          descending
//   dp_knapsack_sliding_hirschberg  ascending          descending
//   ilp                             ascending          ascending
//   dynamic_memory_budget_dp        as dp (at the knee budget)
//
// Where remat deliberately differs from torch (each is tested):
//  * greedy: an item of zero memory ranks first (torch divides by zero and
//    raises ZeroDivisionError).
//  * dp_knapsack_sliding_hirschberg: never exceeds the budget (torch's gives
//    the second half of every split one unit too many and can); it returns an
//    optimum of the same quantized problem as dp.
//  * ilp: an exact dynamic program over Pareto-optimal (memory, runtime)
//    states, pruned by the LP-relaxation bound, on the unquantized weights,
//    instead of scipy's MILP. It is the proven optimum (scipy stops within
//    HiGHS' default 1e-4 relative gap, so torch's can be slightly worse);
//    the set may differ among equal-runtime optima.
// Inputs are validated: memories must be finite and >= 0, runtimes finite,
// max_memory finite; the exact solvers also need max_memory >= 0 (torch
// raises there too). Violations throw Error(kInvalidOption).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace remat {

struct KnapsackResult {
  double expected_runtime = 0;  // runtime of the saved items, as torch reports it
  std::vector<int> saved;       // item indices to keep saved
  std::vector<int> recomputed;  // item indices that may be recomputed
};

// torch's quantization factor for the DP solvers: weights become
// round(memory * 10000) (round half to even, as Python's round).
inline constexpr double kKnapsackScale = 10000.0;

// Highest runtime/memory ratio first (stable), each item saved if it still
// fits. Accumulates in double exactly as torch does.
KnapsackResult greedy_knapsack(const std::vector<double>& memory,
                               const std::vector<double>& runtimes, double max_memory);

// Quantized pseudo-polynomial DP with float32 values, bit-for-bit torch's
// dp_knapsack (same table values, same backtracking tie rule). Memory:
// two float32 rows and a byte per capacity, plus one bit per (item,
// capacity) cell (each item's bits padded to 64).
KnapsackResult dp_knapsack(const std::vector<double>& memory,
                           const std::vector<double>& runtimes, double max_memory);

// dp_knapsack over one item set at several budgets (the memory budget's
// plans ask the same items at each budget): the table is built for the
// largest capacity asked so far and kept, since a cell depends only on
// cells at the same or lower capacity, so a larger table holds a smaller
// one's cells exactly; a larger capacity rebuilds it. Each solve returns
// exactly what dp_knapsack(memory, runtimes, max_memory) returns, errors
// included.
class DpKnapsack {
 public:
  DpKnapsack(std::vector<double> memory, std::vector<double> runtimes);
  ~DpKnapsack();
  DpKnapsack(DpKnapsack&&) noexcept;
  DpKnapsack& operator=(DpKnapsack&&) noexcept;
  KnapsackResult solve(double max_memory);

 private:
  struct Table;
  std::vector<double> memory_;
  std::vector<double> runtimes_;
  std::unique_ptr<Table> table_;
};

// The same quantized problem as dp_knapsack solved in O(capacity) memory by
// Hirschberg's divide and conquer; never exceeds the quantized budget.
KnapsackResult dp_knapsack_sliding_hirschberg(const std::vector<double>& memory,
                                              const std::vector<double>& runtimes,
                                              double max_memory);

// Exact optimum on the unquantized weights (scipy.optimize.milp in torch).
// Feasible means the saved memories, summed in double, are <= max_memory.
KnapsackResult ilp_knapsack(const std::vector<double>& memory,
                            const std::vector<double>& runtimes, double max_memory);

// KnapsackEvaluator.get_knee_point_memory_budget with dp_knapsack as the
// algorithm and the evaluator's defaults (100 budgets from 0.001 to
// max_mem_budget, no backward-pass simulation, which is how the partitioner
// calls it): the budget whose normalized (recompute runtime, saved memory)
// point is nearest the origin. Returns max_mem_budget when either range is
// zero, or when the items have no memory or no runtime in total (torch
// divides by zero there).
double knee_point_memory_budget(const std::vector<double>& memory,
                                const std::vector<double>& runtimes, double max_mem_budget,
                                double min_mem_budget = 0.001, int iterations = 100);

// The "dynamic_memory_budget_dp" solver: dp_knapsack at the knee budget.
KnapsackResult dynamic_memory_budget_dp(const std::vector<double>& memory,
                                        const std::vector<double>& runtimes,
                                        double max_memory);

// --- solvers by name ---------------------------------------------------------

using KnapsackSolver = std::function<KnapsackResult(
    const std::vector<double>& memory, const std::vector<double>& runtimes, double max_memory)>;

// Registers (or replaces) a solver under a name, next to the built-in
// "greedy", "ilp", "dp", "dp_knapsack_sliding_hirschberg" and
// "dynamic_memory_budget_dp" (torch's activation_memory_budget_solver values).
// Built-in names cannot be replaced, and "custom" is reserved: it names
// PartitionOptions::custom_knapsack (torch's CustomKnapsackSolver calling
// convention, which the partitioner calls itself). Thread-safe.
void register_knapsack_solver(const std::string& name, KnapsackSolver solver);
bool has_knapsack_solver(std::string_view name);
// Every name solve_knapsack accepts: the built-in ones in torch's order, then
// the registered ones by name (what option validation lists when a name is
// unknown).
std::vector<std::string> knapsack_solver_names();

// Runs the solver named `name`; Error(kInvalidOption) naming it when unknown.
KnapsackResult solve_knapsack(std::string_view name, const std::vector<double>& memory,
                              const std::vector<double>& runtimes, double max_memory);

}  // namespace remat
