// optimize/search.cc — Search. Contract: optimize/search.h.
#include "optimize/search.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include <fmt/format.h>

#include "memory/bytes.h"
#include "remat/error.h"

namespace remat::optimize {
namespace {

// REMAT_MILP_DUMP_DIR (search.h): the programs the searches solve, as MPS
// files, for comparing solvers on them (bench/bench_memory.py). Read at each
// solve, so a caller can point successive searches at different folders.
void dump_milp(const Milp& milp) {
  const char* dir = std::getenv("REMAT_MILP_DUMP_DIR");
  if (dir == nullptr || *dir == '\0') return;
  static std::atomic<int> counter{0};
  milp.write_mps(fmt::format("{}/{}.mps", dir, counter++));
}

}  // namespace

std::string flags_key(const std::vector<uint8_t>& flags) { return std::string(flags.begin(), flags.end()); }

Search::Search(const DecideContext& ctx, PlanSpace& space, int64_t limit, const Effort& effort,
               const Builder& build)
    : ctx_(ctx), space_(space), limit_(limit), seconds_(effort.seconds), build_(build), start_(Clock::now()),
      node_cap_(effort.nodes > 0 ? effort.nodes : -1) {}

int64_t auto_node_budget(int rows, int columns) {
  const int64_t size = std::max<int64_t>(1, int64_t{rows} + columns);
  const double cubed = kAutoNodeWorkCubed / (static_cast<double>(size) * size * size);
  const int64_t budget = cubed < static_cast<double>(kAutoNodeWork / size) ? static_cast<int64_t>(cubed)
                                                                           : kAutoNodeWork / size;
  return std::clamp(budget, kAutoNodesMin, kAutoNodesMax);
}

// Builds a saved set once; records the smallest peak, the best fitting
// plan, hazards (forbidding those saves) and the model check.
Verdict Search::evaluate(const std::vector<uint8_t>& asked) {
  // The plan saves what something reads (the extraction prunes the rest).
  std::optional<Assignment> used = space_.implied_recompute(asked);
  const std::vector<uint8_t>& saved = used ? used->saved : asked;
  std::string key = flags_key(saved);
  auto it = seen_.find(key);
  if (it != seen_.end()) return it->second;
  const std::vector<NodeId> nodes = space_.saved_nodes(saved);
  PartitionResult r = build_(nodes);
  ++built_;
  Verdict v;
  v.peak = r.memory.peak_bytes;
  v.recompute = r.recompute_runtime;
  v.hazards = !r.hazards.empty();
  if (space_.model_peak(saved) > v.peak) model_bounds_ = false;
  v.chained = check_chained(saved, v.peak, !v.hazards);
  for (const MutationHazard& h : r.hazards) {
    const int k = space_.var_of(space_.prepared_of(r.forward.node(h.saved).origin));
    if (k < 0) continue;
    space_.forbid_save(static_cast<uint32_t>(k));
    hazardous_.push_back(static_cast<uint32_t>(k));
  }
  for (const LiveStorage& st : r.memory.at_peak) {
    const Graph& pg = st.pass == Pass::kForward ? r.forward : r.backward;
    const int k = space_.var_of(space_.prepared_of(pg.node(st.node).origin));
    if (k >= 0) v.at_peak.push_back({static_cast<uint32_t>(k), st.pass == Pass::kBackward});
  }
  v.rows = space_.simulated_rows(r);
  if (!v.hazards) {
    record_peak(v.peak);
    v.fits = v.peak <= limit_;
    if (v.fits) offer(std::move(r), nodes);
  }
  seen_.emplace(std::move(key), v);
  return v;
}

PartitionResult Search::build_unkeyed(const std::vector<NodeId>& saved) {
  PartitionResult r = build_(saved);
  ++built_;
  check_chained(space_.saved_flags(saved), r.memory.peak_bytes, r.hazards.empty());
  if (r.hazards.empty()) record_peak(r.memory.peak_bytes);
  return r;
}

bool Search::over_by_chained_model(const std::vector<uint8_t>& asked) {
  if (!chained_bounds_) return false;
  screened_ = true;
  std::optional<Assignment> used = space_.implied_recompute(asked);
  return space_.chained_peak(used ? used->saved : asked) > limit_;
}

void Search::offer(PartitionResult result, std::vector<NodeId> saved) {
  if (!best_ || result.recompute_runtime < best_->result.recompute_runtime)
    best_ = Outcome{std::move(result), std::move(saved)};
}

void Search::record_peak(int64_t peak) {
  smallest_peak_ = smallest_peak_ < 0 ? peak : std::min(smallest_peak_, peak);
}

// The chained model against a build (one model pass): after a screen, a
// simulated peak below it shows the screen's premise false; a hazard-free
// build's peak above it widens chained_gap(). Returns the chained peak.
int64_t Search::check_chained(const std::vector<uint8_t>& saved, int64_t simulated, bool hazard_free) {
  const int64_t chained = space_.chained_peak(saved);
  if (screened_ && chained > simulated) chained_bounds_ = false;
  if (hazard_free) chained_gap_ = std::max(chained_gap_, simulated - chained);
  return chained;
}

// Every row with only what every plan holds there (the values that cannot
// be recomputed saved).
int64_t Search::fast_peak_bound() const {
  if (!space_.model_is_bound() || !model_bounds_) return 0;
  std::vector<uint8_t> forced(space_.vars().size(), 0);
  for (size_t k = 0; k < forced.size(); ++k)
    forced[k] = space_.vars()[k].needed && !space_.vars()[k].can_recompute;
  const std::vector<int64_t> rows = space_.row_values(forced, {});
  return rows.empty() ? 0 : *std::max_element(rows.begin(), rows.end());
}

double Search::elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

double Search::left() const { return std::max(0.0, seconds_ - elapsed()); }

std::optional<Milp::Result> Search::solve(Milp& milp) {
  if (rounds_ >= max_rounds_) return std::nullopt;
  if (node_cap_ < 0) node_cap_ = nodes_used_ + auto_node_budget(milp.num_rows(), milp.num_variables());
  const int64_t size = int64_t{milp.num_rows()} + milp.num_variables();
  if (nodes_used_ >= node_cap_ || (size_cap_ >= 0 && size > size_cap_)) {
    stopped_by_ = "nodes";
    return std::nullopt;
  }
  Milp::Limits lim;
  lim.nodes = node_cap_ - nodes_used_;
  if (seconds_ > 0) {
    lim.seconds = left();
    if (lim.seconds <= 0) {  // Milp reads <= 0 as no limit
      stopped_by_ = "time";
      return std::nullopt;
    }
  }
  dump_milp(milp);
  Milp::Result res = milp.solve(lim);
  if (!size_cap_every_round_) size_cap_ = -1;  // only the first round's program is measured
  ++rounds_;
  nodes_used_ += std::max<int64_t>(1, res.nodes);
  solver_nodes_ += res.nodes;
  const bool finished = res.status == Milp::Status::kOptimal || res.status == Milp::Status::kInfeasible;
  if (res.timed_out) stopped_by_ = "time";
  else if (!finished && nodes_used_ >= node_cap_) stopped_by_ = "nodes";
  return res;
}

// The numbers of the message go into the error's fields as well
// (remat/error.h), so callers need not parse it.
void Search::unreachable(int64_t bound) const { throw_unreachable(limit_, smallest_peak_, bound); }

void throw_unreachable(int64_t limit, int64_t smallest_peak, int64_t bound) {
  if (smallest_peak < 0)
    throw BudgetUnreachableError(
        fmt::format("peak_memory_budget: no plan fits {} ({} bytes): no valid plan was "
                    "found without a mutation hazard",
                    memory::size_text(limit), limit),
        -1, bound);
  // A bound of 0 proves nothing (the model was not a bound of this graph's
  // plans, or nothing had to be saved): no claim then. The smallest peak is
  // called reachable's least only when the bound proves it: fast's builds
  // otherwise name the least they found, which a plan may beat.
  const bool proven = bound >= smallest_peak;
  const std::string proof =
      proven       ? "no valid plan has a smaller peak (proven)"
      : bound <= 0 ? "no lower bound was proven"
                   : fmt::format("no valid plan has a peak below {} ({} bytes) (proven)",
                                 memory::size_text(bound), bound);
  throw BudgetUnreachableError(
      fmt::format("peak_memory_budget: no plan fits {} ({} bytes); the smallest {} is {} ({} bytes); {}",
                  memory::size_text(limit), limit, proven ? "reachable peak" : "peak found",
                  memory::size_text(smallest_peak), smallest_peak, proof),
      smallest_peak, bound <= 0 ? -1 : std::min(bound, smallest_peak));
}

Outcome Search::finish(const char* mode, const Proof& proof) {
  Outcome out = std::move(*best_);
  PeakSearchSummary& s = out.result.peak_search;
  s.search = mode;
  s.plans_built = built_;
  s.cuts = cuts_;
  s.solver_rounds = rounds_;
  s.recompute_lower_bound = proof.bound;
  s.optimal = proof.optimal;
  s.solver_nodes = solver_nodes_;
  s.stopped_by = proof.optimal ? "" : stopped_by_;
  s.seconds = elapsed();
  return out;
}

}  // namespace remat::optimize
