// optimize/optimize.cc — minimize_recompute. Contract: optimize/optimize.h.
//
// One Search object owns what every mode shares: the builds (each plan
// built once, keyed by its saved set), the best verified plan, the
// smallest simulated peak and the check that the model bounds each built
// plan's peak. fast and exact are its two strategies.
#include "optimize/optimize.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <fmt/format.h>

#include "decide/maxflow.h"
#include "memory/peak_budget.h"
#include "memory/bytes.h"
#include "optimize/milp.h"
#include "remat/error.h"

namespace remat::optimize {
namespace {

using Clock = std::chrono::steady_clock;

// REMAT_MILP_DUMP_DIR (optimize.h): the programs exact mode solves, as MPS
// files, for comparing solvers on them (bench/bench_memory.py). Read at each
// solve, so a caller can point successive searches at different folders.
void dump_milp(const Milp& milp) {
  const char* dir = std::getenv("REMAT_MILP_DUMP_DIR");
  if (dir == nullptr || *dir == '\0') return;
  static std::atomic<int> counter{0};
  milp.write_mps(fmt::format("{}/{}.mps", dir, counter++));
}

// A saved set's flags as a map key: std::map over vector<uint8_t> trips a
// GCC 12 false -Wstringop-overread in its memcmp.
std::string flags_key(const std::vector<uint8_t>& flags) { return std::string(flags.begin(), flags.end()); }

// What a built plan told us.
struct Verdict {
  bool fits = false;
  bool hazards = false;
  int64_t peak = 0;
  // The vars whose storages are alive at the peak, largest first, and
  // whether each was allocated by the backward (a recomputation).
  std::vector<std::pair<uint32_t, bool>> at_peak;
  // Per model row: the simulated live bytes at that instant (0 where the
  // built graphs have no such node).
  std::vector<int64_t> rows;
  double recompute = 0;  // the build's measured recompute_runtime
};

class Search {
 public:
  Search(const DecideContext& ctx, PlanSpace& space, int64_t limit, const Effort& effort,
         const Builder& build)
      : ctx_(ctx), space_(space), limit_(limit), seconds_(effort.seconds), build_(build),
        start_(Clock::now()),
        effort_(space.vars().size() <= static_cast<size_t>(kLargeSpaceVars) ? kSmallSpaceEffort
                                                                        : kLargeSpaceEffort),
        nodes_(effort.nodes) {}

  Outcome run(PartitionOptions::PeakSearch mode) {
    if (mode == PartitionOptions::PeakSearch::kFast) {
      fast(limit_);
      // Small spaces: when nothing fits yet, exact's smallest-peak search
      // until a plan fits; then a short polish by exact's MILP from the
      // plan. Both are bounded by rounds, not seconds, so the answer does
      // not depend on the machine's speed (the options' time limit still
      // applies). fast's own searches, aimed far below what any plan
      // reaches, price saving so high that their plans overshoot (on
      // mlp_gelu_d6 the smallest peak they built was 1003.3 KiB, the
      // MILP's 908.0 KiB); the smallest-peak search's bound is the proof
      // of the unreachable error when nothing fits.
      int64_t bound = 0;
      if (space_.vars().size() <= static_cast<size_t>(kPolishVars)) {
        if (!best_) {
          max_rounds_ = rounds_ + kPolishRounds;
          node_cap_ = nodes_used_ + kPolishNodes;
          bound = smallest_peak_bound(/*until_fits=*/true, kStallRounds);
        }
        max_rounds_ = rounds_ + kPolishRounds;
        node_cap_ = nodes_used_ + kPolishNodes;
        exact(kPolishStallRounds);
        stopped_by_.clear();  // fast's own counted end, not the caller's budget
      }
      if (!best_) unreachable(std::max(bound, fast_peak_bound()));
      return finish("fast");
    }
    node_cap_ = nodes_;
    fast(limit_);  // an incumbent, and a first cut of hazards
    // Without one, the plans of least peak first, until one fits: the MILP
    // of least recompute can spend the whole time cutting off plans the
    // model lets through (gru_unrolled at 4992 bytes did, and was then
    // reported unreachable with the least peak it had built, 5056, though
    // this search reaches 4992 in a fraction of a second). Its bound is the
    // proof of the unreachable error when nothing fits.
    std::optional<int64_t> peak_bound;
    if (!best_) peak_bound = smallest_peak_bound(/*until_fits=*/true);
    exact();
    if (!best_) unreachable(peak_bound ? *peak_bound : smallest_peak_bound());
    return finish("exact");
  }

 private:
  // --- building ------------------------------------------------------------
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  // The limits of the next solve: what is left of the node budget (each
  // solve counts at least one node, so rounds are bounded too) and of the
  // time safety net; nullopt, with the reason in stopped_by_, when either
  // is spent.
  std::optional<Milp::Limits> solve_limits() {
    if (nodes_used_ >= node_cap_) {
      stopped_by_ = "nodes";
      return std::nullopt;
    }
    Milp::Limits lim;
    lim.nodes = node_cap_ - nodes_used_;
    if (seconds_ > 0) {
      lim.seconds = seconds_ - elapsed();
      if (lim.seconds <= 0) {
        stopped_by_ = "time";
        return std::nullopt;
      }
    }
    return lim;
  }

  // Counts a solve's work; notes which limit stopped it short of a proof.
  void account(const Milp::Result& res) {
    ++rounds_;
    nodes_used_ += std::max<int64_t>(1, res.nodes);
    solver_nodes_ += res.nodes;
    const bool finished = res.status == Milp::Status::kOptimal || res.status == Milp::Status::kInfeasible;
    if (res.timed_out) stopped_by_ = "time";
    else if (!finished && nodes_used_ >= node_cap_) stopped_by_ = "nodes";
  }

  // Builds a saved set once; records the smallest peak, the best fitting
  // plan, hazards (forbidding those saves) and the model check.
  Verdict evaluate(const std::vector<uint8_t>& asked) {
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
    check_screen(saved, v.peak);
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
      smallest_peak_ = smallest_peak_ < 0 ? v.peak : std::min(smallest_peak_, v.peak);
      v.fits = v.peak <= limit_;
      if (v.fits && (!best_ || r.recompute_runtime < best_->result.recompute_runtime)) {
        best_ = Outcome{std::move(r), nodes};
      }
    }
    seen_.emplace(std::move(key), v);
    return v;
  }

  // After torch's plans were screened by the chained model: a build whose
  // simulated peak is below it shows the screen's premise false.
  void check_screen(const std::vector<uint8_t>& saved, int64_t simulated) {
    if (screened_ && space_.chained_peak(saved) > simulated) chained_bounds_ = false;
  }

  // The measured recompute of a saved set already built.
  double measured_cost(const std::vector<uint8_t>& asked) {
    return evaluate(asked).recompute;
  }

  // --- fast: priced min-cuts ---------------------------------------------
  // The min-cut over the space where recomputing var k costs its estimate
  // and saving it costs save_cost[k] (both in estimator units): the plan
  // minimizing their sum (space.h's validity as infinite edges).
  std::optional<std::vector<uint8_t>> priced_cut(const std::vector<double>& save_cost) const {
    const auto& vars = space_.vars();
    const auto& deps = space_.deps();
    const size_t n = vars.size();
    double total = 0;
    for (size_t k = 0; k < n; ++k) total += vars[k].cost + save_cost[k];
    // Capacities stay far below 2^62 whatever the units; the +1 on each
    // finite edge breaks ties toward fewer recomputations and saves.
    const double unit = total > 0 ? 1e12 / total : 0;
    const uint32_t src = 0, snk = 1;
    auto in = [](size_t k) { return static_cast<uint32_t>(2 + 2 * k); };
    auto out = [](size_t k) { return static_cast<uint32_t>(3 + 2 * k); };
    // The network's edges are the same for every cut of the search (a
    // value no longer saveable or recomputable only turns its edge
    // infinite; the sink edge of a value not needed is there, at 0): built
    // once, in one add_edges call, and given each cut's capacities (on
    // 10^4-node graphs building it cost about a fifth of a cut).
    std::vector<int64_t>& cap = priced_cap_;
    cap.clear();
    for (size_t k = 0; k < n; ++k) {
      const Var& v = vars[k];
      cap.push_back(v.can_recompute ? std::llround(v.cost * unit) + 1 : MaxFlow::kInfinite);
      cap.push_back(v.can_save ? std::llround(save_cost[k] * unit) + 1 : MaxFlow::kInfinite);
      cap.push_back(v.needed ? MaxFlow::kInfinite : 0);
      cap.insert(cap.end(), deps[k].size(), MaxFlow::kInfinite);
    }
    if (!priced_net_) {
      std::vector<uint32_t> tail, head;
      for (size_t k = 0; k < n; ++k) {
        for (uint32_t u : {src, in(k), out(k)}) tail.push_back(u);
        for (uint32_t w : {in(k), out(k), snk}) head.push_back(w);
        for (uint32_t u : deps[k]) {
          tail.push_back(out(u));
          head.push_back(in(k));
        }
      }
      priced_net_.emplace(static_cast<uint32_t>(2 + 2 * n));
      priced_net_->add_edges(tail, head, cap);
    } else {
      priced_net_->set_capacities(cap);
    }
    MaxFlow& flow = *priced_net_;
    if (!flow.run(src, snk)) return std::nullopt;  // nothing valid exists
    const std::vector<uint8_t> side = flow.source_side(CutSide::kSinkMinimal);
    std::vector<uint8_t> saved(n, 0);
    for (size_t k = 0; k < n; ++k) saved[k] = side[in(k)] && !side[out(k)];
    return saved;
  }

  // Estimator units per byte that make all bytes weigh as much as all costs.
  double byte_price() const {
    double cost = 0, bytes = 0;
    for (const Var& v : space_.vars()) {
      cost += v.cost;
      bytes += static_cast<double>(v.bytes);
    }
    return bytes > 0 ? std::max(cost, 1.0) / bytes : 0;
  }

  // Per row, the most its model value may be: the limit less what the
  // simulation showed the model misses there (fast's correction).
  using Targets = std::vector<int64_t>;

  // How far a plan's model rows exceed their targets (<= 0: it fits).
  static int64_t excess(const std::vector<int64_t>& values, const Targets& targets) {
    int64_t worst = std::numeric_limits<int64_t>::min();
    for (size_t r = 0; r < values.size(); ++r) worst = std::max(worst, values[r] - targets[r]);
    return values.empty() ? 0 : worst;
  }

  // What the cuts found: the cheapest plan whose model fits the targets,
  // and the plan exceeding them least.
  struct Found {
    std::optional<std::vector<uint8_t>> fitting;
    double fitting_cost = 0;
    std::optional<std::vector<uint8_t>> closest;
    int64_t closest_excess = 0;
    // The plan's model rows, or nullopt when the plan is invalid.
    bool offer(const PlanSpace& space, const std::vector<uint8_t>& saved, const Targets& targets,
               std::vector<int64_t>* rows = nullptr) {
      std::optional<Assignment> a = space.implied_recompute(saved);
      if (!a) return false;
      std::vector<int64_t> values = space.row_values(a->saved, a->recomputed);
      const int64_t e = excess(values, targets);
      if (!closest || e < closest_excess) {
        closest = saved;
        closest_excess = e;
      }
      if (e <= 0 && (!fitting || a->cost < fitting_cost)) {
        fitting = saved;
        fitting_cost = a->cost;
      }
      if (rows) *rows = std::move(values);
      return e <= 0;
    }
  };

  // One price per byte for every saved value, bisected in log space.
  void uniform_prices(const Targets& targets, Found& found) const {
    const double unit = byte_price();
    auto at = [&](double price) {
      std::vector<double> save_cost(space_.vars().size());
      for (size_t k = 0; k < save_cost.size(); ++k)
        save_cost[k] = price * unit * static_cast<double>(space_.vars()[k].bytes);
      std::optional<std::vector<uint8_t>> s = priced_cut(save_cost);
      return s && found.offer(space_, *s, targets);
    };
    if (at(1e-6) || !at(1e6)) return;
    double lo = std::log(1e-6), hi = std::log(1e6);
    for (int step = 0; step < effort_.bisect_steps; ++step) {
      const double mid = 0.5 * (lo + hi);
      (at(std::exp(mid)) ? hi : lo) = mid;
    }
  }

  // A price per memory row (Lagrange multipliers of the rows), raised where
  // a row exceeds its target and lowered where it has room (a projected
  // subgradient step); a saved value pays the prices of the rows it is
  // alive in. Each step is one cut.
  void row_prices(const Targets& targets, Found& found) const {
    const auto& rows = space_.rows();
    const auto& vars = space_.vars();
    const double unit = byte_price();
    if (rows.empty() || unit == 0 || limit_ <= 0) return;
    std::vector<double> mu(rows.size(), 0), prefix(rows.size() + 1, 0);
    const uint32_t between = space_.between();
    for (int step = 0; step < effort_.price_steps; ++step) {
      for (size_t r = 0; r < rows.size(); ++r) prefix[r + 1] = prefix[r] + mu[r];
      std::vector<double> save_cost(vars.size());
      for (size_t k = 0; k < vars.size(); ++k) {
        const Var& v = vars[k];
        const double fw = prefix[between + 1] - prefix[v.saved_from];
        const double bw = v.saved_to > between + 1 ? prefix[v.saved_to] - prefix[between + 1] : 0;
        save_cost[k] = static_cast<double>(v.bytes) * (fw + bw);
      }
      std::optional<std::vector<uint8_t>> s = priced_cut(save_cost);
      std::vector<int64_t> values;
      if (!s) return;
      found.offer(space_, *s, targets, &values);
      if (values.empty()) return;
      const double size = 2.0 * std::pow(0.93, step);
      for (size_t r = 0; r < rows.size(); ++r) {
        const double e = static_cast<double>(values[r] - targets[r]) / static_cast<double>(limit_);
        mu[r] = std::max(0.0, mu[r] + size * unit * e);
      }
    }
  }

  // Local search from a fitting plan: each of the effort's greedy_saves
  // costliest recomputed values is saved instead if the model still fits;
  // if it does not, with the one saved value recomputed instead (among the
  // swap_candidates largest) that makes it fit at the least cost, when
  // that still costs less.
  std::vector<uint8_t> greedy_saves(std::vector<uint8_t> saved, const Targets& targets) const {
    std::optional<Assignment> a = space_.implied_recompute(saved);
    if (!a) return saved;
    saved = a->saved;
    const auto& vars = space_.vars();
    std::vector<uint32_t> order;
    for (uint32_t k = 0; k < a->recomputed.size(); ++k)
      if (a->recomputed[k] && vars[k].can_save && vars[k].cost > 1) order.push_back(k);
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t x, uint32_t y) { return vars[x].cost > vars[y].cost; });
    if (order.size() > static_cast<size_t>(effort_.greedy_saves)) order.resize(effort_.greedy_saves);
    double cost = a->cost;
    // The plan's cost and whether its model fits (nullopt: invalid).
    auto judge = [&](const std::vector<uint8_t>& s) -> std::optional<std::pair<double, bool>> {
      std::optional<Assignment> b = space_.implied_recompute(s);
      if (!b) return std::nullopt;
      return std::make_pair(b->cost, excess(space_.row_values(b->saved, b->recomputed), targets) <= 0 &&
                                         fits_before(b->saved, b->recomputed));
    };
    for (uint32_t k : order) {
      if (saved[k]) continue;
      std::vector<uint8_t> next = saved;
      next[k] = 1;
      const auto j = judge(next);
      if (!j || j->first >= cost) continue;
      if (j->second) {
        saved = std::move(next);
        cost = j->first;
        continue;
      }
      std::vector<uint32_t> drops;
      for (uint32_t d = 0; d < next.size(); ++d)
        if (next[d] && d != k && vars[d].can_recompute && vars[d].bytes > 0) drops.push_back(d);
      std::stable_sort(drops.begin(), drops.end(),
                       [&](uint32_t x, uint32_t y) { return vars[x].bytes > vars[y].bytes; });
      if (drops.size() > static_cast<size_t>(effort_.swap_candidates)) drops.resize(effort_.swap_candidates);
      std::optional<std::vector<uint8_t>> best;
      double best_cost = cost;
      for (uint32_t d : drops) {
        std::vector<uint8_t> swapped = next;
        swapped[d] = 0;
        const auto js = judge(swapped);
        if (js && js->second && js->first < best_cost) {
          best = std::move(swapped);
          best_cost = js->first;
        }
      }
      if (best) {
        saved = std::move(*best);
        cost = best_cost;
      }
    }
    return saved;
  }

  // Whether the instants just before backward nodes fit the limit too
  // (fast's targets are per row; these get the plain limit).
  bool fits_before(const std::vector<uint8_t>& saved, const std::vector<uint8_t>& recomputed) const {
    const std::vector<int64_t> before = space_.values(saved, recomputed, /*before=*/true);
    for (size_t r = space_.between() + 1; r < before.size(); ++r)
      if (before[r] > limit_) return false;
    return true;
  }

  // fast's search. After a plan that does not fit, two corrections for
  // what the model does not see (recomputations' own intermediates, values
  // alive until a recomputation reads them): each row's target drops by
  // the amount the simulation exceeded the model there, and the largest
  // storages alive at the simulated peak change sides for the rest of the
  // search (a value the backward recomputed is saved, a saved value
  // recomputed). Both narrow fast's search only; exact searches the whole
  // space afterwards.
  //
  // On spaces past kLargeSpaceVars torch's plans run first instead of last:
  // their builds give the targets the corrections a first round's build
  // would, for builds the search makes anyway, and one round of cuts
  // (kLargeSpaceEffort) then tries to beat the plan they found. When none
  // of torch's plans fits, the checkpointed plans (checkpoints(), below)
  // before torch's repair path: on a deep stack only they reach far below
  // torch's plans, and the repair path costs a build per move.
  void fast(int64_t limit) {
    const std::vector<Var> whole = space_.vars();
    Targets targets(space_.rows().size(), limit);
    const bool large = space_.vars().size() > static_cast<size_t>(kLargeSpaceVars);
    bool checkpointed = false;
    if (large) {
      torch_plans(&targets, /*repairs=*/false);
      if (!best_) checkpointed = checkpoints();
      if (!best_) torch_plans(&targets);
    }
    // A checkpointed plan is final: the round's cuts price what plans save,
    // not the long recomputed chains that set these plans' peaks, so what
    // they offer below the checkpointed plan's recompute overshoots.
    for (int round = 0; round < effort_.rounds && !checkpointed; ++round) {
      Found found;
      uniform_prices(targets, found);
      if (!found.fitting || found.fitting_cost > 0) row_prices(targets, found);
      std::optional<std::vector<uint8_t>> plan =
          found.fitting ? greedy_saves(*found.fitting, targets) : found.closest;
      if (!plan || !could_beat_best(*plan)) break;
      const Verdict v = evaluate(*plan);
      if (v.fits) break;
      if (v.hazards) continue;
      correct(*plan, v, limit, targets);
      if (!found.fitting && !repair(*plan, v)) break;
    }
    space_.restore(whole);
    for (uint32_t k : hazardous_) space_.forbid_save(k);
    // The screen assumed the chained model a lower bound; a build that
    // showed otherwise may mean a torch plan that fits went unbuilt: the
    // whole torch_plans search runs (its plan replaces fast's when it
    // recomputes less), so fast stays never worse than torch's plans.
    if (!large || !chained_bounds_) torch_plans(nullptr);
  }

  // --- fast on deep graphs: checkpointed segments --------------------------
  // The cuts' model follows recomputed chains only kEarlyDepth deep, and
  // torch's plans all keep every layer's activations, so on a deep stack
  // neither reaches a peak much below the runtime-optimized one (a 10^4-node
  // residual MLP: 1015.6 of 1016.1 MiB). Chen et al. 2016 reach far lower:
  // save a value every few layers where the graph narrows to one value, and
  // recompute each segment in the backward just before its gradients need
  // it (the extraction keeps the joint order, and the autograd-order
  // rewrite pulls each recomputation to its first reader), so only one
  // segment's activations are alive at a time.
  //
  // Separators: recomputable, saveable vars p with storage such that no
  // recomputable var before p is read by a var after p (values that cannot
  // be recomputed are saved, so they do not chain). Recomputing anything
  // after p then never reaches before it.
  std::vector<uint32_t> separators() const {
    const auto& vars = space_.vars();
    const auto& users = space_.users();
    std::vector<uint32_t> out;
    uint32_t reach = 0;  // the farthest var read by a recomputable var so far
    for (uint32_t p = 0; p < vars.size(); ++p) {
      const Var& v = vars[p];
      if (reach <= p && v.can_save && v.can_recompute && v.bytes > 0) out.push_back(p);
      if (!v.can_recompute) continue;
      for (uint32_t u : users[p])
        if (ctx_.info.required_fw[vars[u].node]) reach = std::max(reach, u);
    }
    return out;
  }

  // The plan that checkpoints the graph up to separator seps[c - 1]: saves
  // every ~sqrt(c)-th separator there (seps[c - 1] always: the boundary)
  // and recomputes the rest of that prefix; after it saves what the
  // backward reads, as `base` does. The backward runs the suffix first, so
  // its saved values are freed before the checkpointed segments run.
  std::vector<uint8_t> checkpointed(const std::vector<uint8_t>& base, const std::vector<uint32_t>& seps,
                                    size_t c) const {
    std::vector<uint8_t> saved = base;
    const auto& vars = space_.vars();
    const auto& deps = space_.deps();
    // The prefix: the vars up to the boundary, and the forward-computable
    // vars only the backward needs (a transpose of an activation for a
    // weight's gradient) that read nothing but the prefix.
    std::vector<uint8_t> prefix(vars.size(), 0);
    for (uint32_t k = 0; k < vars.size(); ++k) {
      prefix[k] = k <= seps[c - 1];
      if (!prefix[k] && !deps[k].empty() && !ctx_.info.required_fw[vars[k].node])
        prefix[k] = std::all_of(deps[k].begin(), deps[k].end(), [&](uint32_t u) { return prefix[u] != 0; });
      if (prefix[k] && vars[k].can_recompute) saved[k] = 0;
    }
    const size_t stride = std::max<size_t>(1, std::llround(std::sqrt(static_cast<double>(c))));
    for (size_t j = c; j >= 1; j = j > stride ? j - stride : 0) saved[seps[j - 1]] = 1;
    return saved;
  }

  // When nothing else fits on a large space: the fully checkpointed plan
  // (the smallest peak of the family); when it fits, the shortest
  // checkpointed prefix that fits, found by regula falsi on the prefix's
  // length (peaks fall about linearly with it: each separator checkpointed
  // frees about one layer's saved values), at most kCheckpointBuilds more
  // builds. Recompute grows with the prefix, so the shortest fitting one
  // is the cheapest of the family. Returns whether a checkpointed plan fits.
  bool checkpoints() {
    const std::vector<uint32_t> seps = separators();
    if (seps.size() < kMinSeparators) return false;
    const auto& vars = space_.vars();
    std::vector<uint8_t> base(vars.size(), 0);
    // What the backward reads, and every value that cannot be recomputed
    // (inputs a recomputation reads; implied_recompute drops the unread).
    for (size_t k = 0; k < vars.size(); ++k)
      base[k] = vars[k].can_save && (vars[k].needed || !vars[k].can_recompute);
    // The simulated peak of a plan; nullopt when invalid or hazardous.
    auto built_peak = [&](const std::vector<uint8_t>& saved) -> std::optional<int64_t> {
      if (!space_.implied_recompute(saved)) return std::nullopt;
      const Verdict v = evaluate(saved);
      if (v.hazards) return std::nullopt;
      return v.peak;
    };
    // The same for the plan checkpointing c separators (c = 0: base).
    auto peak = [&](size_t c) { return built_peak(c == 0 ? base : checkpointed(base, seps, c)); };
    const size_t n = seps.size();
    const std::vector<uint8_t> full = checkpointed(base, seps, n);
    const int64_t smallest_before = smallest_peak_;
    // The fully checkpointed plan: when the chained model (a lower bound)
    // says it may fit, its estimate stands in for it until a build is
    // needed (it equals the simulation where everything is recomputed);
    // else it is built, to name the smallest reachable peak if nothing fits.
    int64_t peak_hi = space_.model_is_bound() ? space_.chained_peak(full) : limit_ + 1;
    bool hi_built = false;
    if (peak_hi > limit_) {
      const std::optional<int64_t> at_hi = built_peak(full);
      if (!at_hi || *at_hi > limit_) return false;
      peak_hi = *at_hi;
      hi_built = true;
    }
    size_t lo = 0, hi = n;
    // lo does not fit (c = 0 is about the runtime-optimized plan, which did
    // not: its peak is taken as the smallest built so far, else built).
    int64_t at_lo = smallest_before > limit_ ? smallest_before : peak(0).value_or(0);
    if (at_lo <= limit_) return true;
    // Close enough: within 1/64 of the separators, or a peak within 1/32
    // of the limit (peaks being about linear in c, the prefix, and so the
    // recompute, is then within a few percent of the shortest: each more
    // build costs most of a plain partition on the graphs this runs on).
    auto close = [&] {
      return hi_built && (hi - lo <= std::max<size_t>(1, n / 64) || limit_ - peak_hi <= limit_ / 32);
    };
    for (int step = 0; step < kCheckpointBuilds && !close() && hi - lo > 1; ++step) {
      // The c where the line through (lo, at_lo) and (hi, peak_hi) meets
      // the limit, rounded up (toward fitting), strictly inside.
      const double t = static_cast<double>(at_lo - limit_) / static_cast<double>(at_lo - peak_hi);
      size_t c = lo + static_cast<size_t>(std::ceil(t * static_cast<double>(hi - lo)));
      c = std::clamp(c, lo + 1, hi - 1);
      const std::optional<int64_t> p = peak(c);
      if (!p) break;
      if (*p <= limit_) {
        hi = c;
        peak_hi = *p;
        hi_built = true;
      } else {
        lo = c;
        at_lo = *p;
      }
    }
    if (hi_built) return true;
    // Nothing built fits yet: the fully checkpointed plan decides.
    const std::optional<int64_t> at_n = built_peak(full);
    return at_n && *at_n <= limit_;
  }

  // Whether building `saved` could give a plan recomputing less than the
  // best so far: the model's cost is a lower bound of the measured one.
  bool could_beat_best(const std::vector<uint8_t>& saved) const {
    if (!best_) return true;
    std::optional<Assignment> a = space_.implied_recompute(saved);
    return a && a->cost < best_->result.recompute_runtime;
  }

  // The torch_plans search (memory/peak_budget.h: torch's own plans as the
  // activation budget goes 1 -> 0, then repairs), its builds counted and
  // its smallest peak remembered; its plan replaces fast's when it
  // recomputes less (or fast found none). The cuts' model misses what long
  // recomputed chains keep alive, so on deep graphs torch's plans can be
  // far cheaper: a 10^4-node residual MLP near its default peak had fast
  // recompute its matmuls (1.7e10) where torch's aggressive tier fits
  // recomputing pointwise ops (about 2e3). `targets`, when given, is
  // corrected by each plan it builds that does not fit (as fast's are).
  void torch_plans(Targets* targets, bool repairs = true) {
    const PlanBuilder build = [&](const std::vector<NodeId>& saved, const MinCutResult*) {
      PartitionResult r = build_(saved);
      ++built_;
      check_screen(space_.saved_flags(saved), r.memory.peak_bytes);
      if (r.hazards.empty())
        smallest_peak_ = smallest_peak_ < 0 ? r.memory.peak_bytes : std::min(smallest_peak_, r.memory.peak_bytes);
      if (targets && r.hazards.empty() && r.memory.peak_bytes > limit_) {
        Verdict v;
        v.rows = space_.simulated_rows(r);
        correct(space_.saved_flags(saved), v, limit_, *targets);
      }
      return r;
    };
    try {
      // Without repairs (fast's first pass on a large space), candidates the
      // model with whole recomputed chains puts over the limit are set aside
      // unbuilt: on a deep stack every torch plan recomputing a layer's
      // values keeps the chain back to a saved one alive (about 40% of
      // fast's time at the middle of its range on the 10^4-node residual
      // MLP went to building them).
      PeakBound screen;
      if (!repairs) {
        screened_ = true;
        screen = [&](const std::vector<NodeId>& saved) { return space_.chained_peak(space_.saved_flags(saved)); };
      }
      PartitionResult r = solve_peak_budget(ctx_, limit_, build, nullptr, repairs, screen);
      std::vector<NodeId> saved;
      for (const auto* list : {&r.saved_values, &r.saved_sym_nodes, &r.saved_opaque_nodes})
        for (NodeId j : *list) saved.push_back(space_.prepared_of(j));
      std::sort(saved.begin(), saved.end());
      if (!best_ || r.recompute_runtime < best_->result.recompute_runtime)
        best_ = Outcome{std::move(r), std::move(saved)};
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kBudgetUnreachable) throw;
    }
  }

  // Lowers each row's target by what the simulation of `saved` showed
  // above the model there.
  void correct(const std::vector<uint8_t>& saved, const Verdict& v, int64_t limit, Targets& targets) const {
    std::optional<Assignment> a = space_.implied_recompute(saved);
    if (!a) return;
    const std::vector<int64_t> model = space_.row_values(a->saved, a->recomputed);
    for (size_t r = 0; r < targets.size(); ++r) {
      const int64_t sim = v.rows[r];
      if (sim > model[r]) targets[r] = std::min(targets[r], limit - (sim - model[r]));
    }
  }

  // Moves the largest storages at the peak to the other side; false when
  // none can move.
  bool repair(const std::vector<uint8_t>& saved, const Verdict& v) {
    std::optional<Assignment> a = space_.implied_recompute(saved);
    if (!a) return false;
    int moved = 0;
    for (const auto& [k, backward] : v.at_peak) {
      if (moved == kFastRepairMoves) break;
      const Var& var = space_.vars()[k];
      if (backward && a->recomputed[k] && var.can_save && var.can_recompute) {
        space_.forbid_recompute(k);
        ++moved;
      } else if (!backward && a->saved[k] && var.can_recompute && var.can_save) {
        space_.forbid_save(k);
        ++moved;
      }
    }
    return moved > 0;
  }

  // A proven lower bound of any valid plan's peak: every row with only what
  // every plan holds there (the values that cannot be recomputed saved).
  int64_t fast_peak_bound() const {
    if (!space_.model_is_bound() || !model_bounds_) return 0;
    std::vector<uint8_t> forced(space_.vars().size(), 0);
    for (size_t k = 0; k < forced.size(); ++k)
      forced[k] = space_.vars()[k].needed && !space_.vars()[k].can_recompute;
    const std::vector<int64_t> rows = space_.row_values(forced, {});
    return rows.empty() ? 0 : *std::max_element(rows.begin(), rows.end());
  }

  // --- exact: the MILP with lazy cuts -------------------------------------
  struct Program {
    Milp milp;
    std::vector<int> s, r;  // per var
    // Columns made once and shared by the rows that need them (-1: none
    // yet): per var its held storage (holds) and early-chain segments
    // (alive), per row its chained terms, per row and var made_late.
    std::vector<int> held;
    std::vector<std::vector<int>> z;
    std::vector<std::vector<int>> chained;
    std::map<uint32_t, std::vector<int>> made_late;
    std::vector<int> finite;  // per var, made_finite
    // The saved sets cut_by_model cut off (flags_key).
    std::set<std::string> lazily_cut;
    // Per backward row, the vars with bytes its node reads first.
    std::vector<std::vector<uint32_t>> first_reads;

    const std::vector<uint32_t>& first_read(const PlanSpace& space, uint32_t row) {
      if (first_reads.empty()) {
        first_reads.resize(space.rows().size());
        for (uint32_t k = 0; k < space.vars().size(); ++k) {
          const Var& v = space.vars()[k];
          if (v.bytes > 0 && v.first_row != Var::kNoRow) first_reads[v.first_row].push_back(k);
        }
      }
      return first_reads[row];
    }
  };

  // The whole tie-break toward fewer saved bytes: kTieBreak of the cheapest
  // recomputation, so it decides only between plans of equal recompute
  // whatever the estimator's unit (flops, or measured milliseconds).
  double tie_break() const {
    double cheapest = 0;
    for (const Var& v : space_.vars()) {
      if (v.cost > 0 && (cheapest == 0 || v.cost < cheapest)) cheapest = v.cost;
    }
    return kTieBreak * (cheapest > 0 ? cheapest : 1);
  }

  // The validity rules (space.h) over s and r.
  Program validity() const {
    Program p;
    const auto& vars = space_.vars();
    p.held.assign(vars.size(), -1);
    p.z.resize(vars.size());
    p.chained.resize(space_.rows().size());
    double total_bytes = 0;
    for (const Var& v : vars) total_bytes += static_cast<double>(v.bytes);
    const double tie = total_bytes > 0 ? tie_break() / total_bytes : 0;
    for (const Var& v : vars) {
      p.s.push_back(p.milp.add_binary(tie * static_cast<double>(v.bytes)));
      p.r.push_back(p.milp.add_binary(v.cost));
      if (!v.can_save) p.milp.fix(p.s.back(), 0);
      if (!v.can_recompute) p.milp.fix(p.r.back(), 0);
    }
    for (size_t k = 0; k < vars.size(); ++k) {
      if (vars[k].needed) {
        const int idx[] = {p.s[k], p.r[k]};
        const double one[] = {1, 1};
        p.milp.add_row(idx, one, 1, Milp::kInfinity);
      }
      for (uint32_t u : space_.deps()[k]) {  // r_k <= s_u + r_u
        const int idx[] = {p.r[k], p.s[u], p.r[u]};
        const double c[] = {1, -1, -1};
        p.milp.add_row(idx, c, -Milp::kInfinity, 0);
      }
    }
    // Only what something reads is saved (the extraction prunes the rest):
    // s_k <= sum(r over k's users) for a var nothing needs directly.
    std::vector<std::vector<int>> readers(vars.size());
    for (size_t k = 0; k < vars.size(); ++k)
      for (uint32_t u : space_.deps()[k]) readers[u].push_back(p.r[k]);
    // Likewise only what something needs is recomputed, and nothing is both
    // saved and recomputed: then r is the least recompute set of s
    // (space.h's implied_recompute), each solution one plan.
    for (size_t k = 0; k < vars.size(); ++k) {
      {
        const int idx[] = {p.s[k], p.r[k]};
        const double c[] = {1, 1};
        p.milp.add_row(idx, c, -Milp::kInfinity, 1);
      }
      if (vars[k].needed) continue;
      for (int col : {p.s[k], p.r[k]}) {
        std::vector<int> idx{col};
        std::vector<double> c{1};
        for (int r : readers[k]) {
          idx.push_back(r);
          c.push_back(-1);
        }
        p.milp.add_row(idx, c, -Milp::kInfinity, 0);
      }
    }
    return p;
  }

  // Rows constant + sum(bytes * alive) <= cap (cap: the limit, or the peak
  // variable when `peak_var` >= 0), where alive is s_k, or for a row after
  // var k's j-th early chain a continuous z_kj >= s_k, and >= each chain
  // 0..j's indicator of being entirely recomputed. A row's chained terms
  // (inductor's model: space.h) count through a continuous c >= that
  // indicator, one per term, shared by the row's two instants.
  void memory_rows(Program& p, int64_t cap, int peak_var) const {
    const uint32_t rows = static_cast<uint32_t>(space_.rows().size());
    for (uint32_t i = 0; i < rows + rows; ++i) {
      const bool before = i >= rows;
      const uint32_t row = before ? i - rows : i;
      if (before && row <= space_.between()) continue;
      memory_row(p, row, before, cap, peak_var, /*extended=*/false);
    }
  }

  // One instant's row (see memory_rows). `extended`: with the lives a
  // saved value's recomputed users extend (lazy rows: extension_terms); the
  // row is added even where it can never exceed `cap`.
  void memory_row(Program& p, uint32_t row, bool before, int64_t cap, int peak_var, bool extended) const {
    const auto& vars = space_.vars();
    const int64_t constant = before ? space_.rows()[row].before : space_.rows()[row].constant;
    std::vector<RowTerm> terms = space_.row_terms(row);
    // The extra terms (last in row_terms) add back bytes the row's node
    // writes: not allocated yet just before it (as row_values counts).
    if (before) {
      terms.resize(terms.size() - space_.rows()[row].extra.size());
      for (uint32_t k : p.first_read(space_, row)) {  // saved (s) or recomputed (segment -2: r)
        terms.push_back({k, vars[k].bytes, -1});
        if (!vars[k].inlined_bw) terms.push_back({k, vars[k].bytes, -2});
      }
    }
    const auto& chained_terms = space_.rows()[row].chained;
    int64_t most = constant;
    for (const RowTerm& t : terms) most += t.segment == -2 ? 0 : t.bytes;  // s + r <= 1 in a plan
    for (const auto& c : chained_terms) most += c.bytes;
    if (!extended && peak_var < 0 && most <= cap) return;  // can never exceed the limit
    std::vector<int> idx;
    std::vector<double> coef;
    for (const RowTerm& t : terms) {
      idx.push_back(alive(p, t));
      coef.push_back(static_cast<double>(t.bytes));
    }
    // A storage counted both by an extension term and by a chained term
    // (inductor) counts once: the extension's column also bounds the chain's.
    std::vector<int> extension(extended ? vars.size() : 0, -1);
    if (extended) extension_terms(p, row, idx, coef, extension);
    for (size_t j = 0; j < chained_terms.size(); ++j) {
      const int chain = chain_col(p, row, j);
      if (extended && extension[chained_terms[j].var] >= 0) {  // e >= chain
        const int i2[] = {extension[chained_terms[j].var], chain};
        const double c2[] = {1, -1};
        p.milp.add_row(i2, c2, 0, Milp::kInfinity);
        continue;
      }
      idx.push_back(chain);
      coef.push_back(static_cast<double>(chained_terms[j].bytes));
    }
    if (peak_var >= 0) {
      idx.push_back(peak_var);
      coef.push_back(-1);
      p.milp.add_row(idx, coef, -Milp::kInfinity, -static_cast<double>(constant));
    } else {
      p.milp.add_row(idx, coef, -Milp::kInfinity, static_cast<double>(cap - constant));
    }
  }

  // A continuous h >= s of var k and of each alias (its storage is held);
  // s_k itself without aliases.
  int holds(Program& p, uint32_t k) const {
    const Var& v = space_.vars()[k];
    if (v.aliases.empty()) return p.s[k];
    if (p.held[k] < 0) {
      p.held[k] = p.milp.add_continuous(0, 1);
      std::vector<int> lower{p.s[k]};
      for (uint32_t a : v.aliases) lower.push_back(p.s[a]);
      for (int col : lower) {
        const int idx[] = {p.held[k], col};
        const double c[] = {1, -1};
        p.milp.add_row(idx, c, 0, Milp::kInfinity);
      }
    }
    return p.held[k];
  }

  // The column that is 1 when term t's bytes count.
  int alive(Program& p, const RowTerm& t) const {
    if (t.segment == -2) return p.r[t.var];
    if (t.segment < 0) return holds(p, t.var);
    std::vector<int>& zs = p.z[t.var];
    while (static_cast<int>(zs.size()) <= t.segment) {
      const size_t j = zs.size();
      const int col = p.milp.add_continuous(0, 1);
      const int prev = j == 0 ? holds(p, t.var) : zs.back();
      {  // z >= the previous segment's
        const int idx[] = {col, prev};
        const double c[] = {1, -1};
        p.milp.add_row(idx, c, 0, Milp::kInfinity);
      }
      // z >= sum(r over the chain) - (length - 1): 1 when all are recomputed.
      add_all_recomputed(p, col, space_.vars()[t.var].early[j].path);
      zs.push_back(col);
    }
    return zs[static_cast<size_t>(t.segment)];
  }

  // col >= sum(r over path) - (|path| - 1).
  static void add_all_recomputed(Program& p, int col, const std::vector<uint32_t>& path) {
    std::vector<int> idx{col};
    std::vector<double> c{1};
    for (uint32_t u : path) {
      idx.push_back(p.r[u]);
      c.push_back(-1);
    }
    p.milp.add_row(idx, c, 1.0 - static_cast<double>(path.size()), Milp::kInfinity);
  }

  int chain_col(Program& p, uint32_t row, size_t j) const {
    std::vector<int>& cols = p.chained[row];
    if (cols.empty()) cols.assign(space_.rows()[row].chained.size(), -1);
    if (cols[j] < 0) {
      cols[j] = p.milp.add_continuous(0, 1);
      add_all_recomputed(p, cols[j], space_.rows()[row].chained[j].path);
    }
    return cols[j];
  }

  // The terms of backward row `row` that space.h's row_values adds and the
  // MILP's rows leave out: var k's storage, its saved range ended before the
  // row, is alive there while a recomputed user u of a saved holder h of it
  // (k itself or a view of it, or a view a recomputed from saved k) is made
  // later (space.cc's made_by[u] > row, and finite). Per (k, row) a
  // continuous e >= s_h + late_u + finite_u - 2 for each such pair
  // (made_late, made_finite; s_k + r_a for the recomputed view). Exact for
  // integral plans.
  // `column`: per var, its e (-1 without one).
  void extension_terms(Program& p, uint32_t row, std::vector<int>& idx, std::vector<double>& coef,
                       std::vector<int>& column) const {
    const auto& vars = space_.vars();
    if (row < space_.between()) return forward_extension_terms(p, row, idx, coef);
    if (row == space_.between()) return;
    std::vector<int>& late = p.made_late[row];
    if (late.empty()) late.assign(vars.size(), kUnset);
    for (uint32_t k = 0; k < vars.size(); ++k) {
      const Var& v = vars[k];
      if (v.bytes == 0 || row < v.read_to) continue;  // read_to >= saved_to: counted already
      // e >= sum(cols) - (|cols| - 1): 1 when all are (finite kAlways: no column).
      std::vector<std::vector<int>> users;
      auto read_late = [&](uint32_t holder, std::vector<int> cols) {
        for (uint32_t u : space_.users()[holder]) {
          const int m = made_late(p, row, u, late);
          const int f = m >= 0 ? made_finite(p, u) : kNever;
          if (m < 0 || f == kNever) continue;
          std::vector<int> all = cols;
          all.push_back(m);
          if (f != kAlways) all.push_back(f);
          users.push_back(std::move(all));
        }
      };
      if (v.can_save) read_late(k, {p.s[k]});
      for (uint32_t a : v.aliases) {
        if (vars[a].can_save) read_late(a, {p.s[a]});
        // a view recomputed from the saved var (space.cc's row_values)
        if (v.can_save && vars[a].can_recompute) read_late(a, {p.s[k], p.r[a]});
      }
      if (users.empty()) continue;
      const int e = p.milp.add_continuous(0, 1);
      for (const std::vector<int>& cols : users) {
        std::vector<int> i{e};
        std::vector<double> c{1};
        for (int col : cols) {
          i.push_back(col);
          c.push_back(-1);
        }
        p.milp.add_row(i, c, 1.0 - static_cast<double>(cols.size()), Milp::kInfinity);
      }
      idx.push_back(e);
      coef.push_back(static_cast<double>(v.bytes));
      column[k] = e;
    }
  }

  // A forward row's terms that row_values adds and the MILP's rows leave
  // out: var k, past its own forward life (row_terms counts it there only
  // when held), is alive while a saved var the forward computes only to
  // save it reads it (or a view of it) later. Per k a continuous
  // e >= s_u - held_k for each such u: held_k + e is 1 exactly when k is
  // alive, for integral plans.
  void forward_extension_terms(Program& p, uint32_t row, std::vector<int>& idx, std::vector<double>& coef) const {
    const auto& vars = space_.vars();
    for (uint32_t k = 0; k < vars.size(); ++k) {
      const Var& v = vars[k];
      if (v.bytes == 0 || row < v.saved_from) continue;
      std::vector<uint32_t> late;
      auto read_in_forward = [&](uint32_t holder) {
        for (uint32_t u : space_.users()[holder])
          if (vars[u].optional_fw && vars[u].can_save && vars[u].saved_from > row) late.push_back(u);
      };
      read_in_forward(k);
      for (uint32_t a : v.aliases) read_in_forward(a);
      if (late.empty()) continue;
      const int e = p.milp.add_continuous(0, 1);
      const int held = holds(p, k);
      for (uint32_t u : late) {  // e >= s_u - held
        const int i3[] = {e, p.s[u], held};
        const double c3[] = {1, -1, 1};
        p.milp.add_row(i3, c3, 0, Milp::kInfinity);
      }
      idx.push_back(e);
      coef.push_back(static_cast<double>(v.bytes));
    }
  }

  static constexpr int kPending = -4;  // being built (build_order)
  static constexpr int kUnset = -3;   // not yet built
  static constexpr int kAlways = -2;  // 1 in every plan
  static constexpr int kNever = -1;   // 0 in every plan

  // The vars whose column `cols` needs before var `start`'s: those reached
  // from it through users that `follow` allows, each once, last var first
  // (a user comes after what it reads in the graph, so building in this
  // order finds every user's column built). Iterative: chains of users
  // are as deep as the graph.
  // Each var returned is marked kPending in `cols` until the caller builds it.
  template <class Follow>
  std::vector<uint32_t> build_order(uint32_t start, std::vector<int>& cols, Follow follow) const {
    std::vector<uint32_t> todo{start}, order;
    cols[start] = kPending;
    while (!todo.empty()) {
      const uint32_t u = todo.back();
      todo.pop_back();
      order.push_back(u);
      if (!follow(u)) continue;
      for (uint32_t x : space_.users()[u])
        if (cols[x] == kUnset && space_.vars()[x].can_recompute) {
          cols[x] = kPending;
          todo.push_back(x);
        }
    }
    std::sort(order.begin(), order.end(), std::greater<>());
    return order;
  }

  // The column late_u that is 1 when var u is recomputed and made after
  // `row` (space.cc's made_by[u] > row, no reader row counting as
  // infinitely late), or kNever: u is first read after the row and no
  // recomputed user of it is made by the row. late_u >= r_u - sum over
  // u's users x of (r_x - late_x).
  int made_late(Program& p, uint32_t row, uint32_t start, std::vector<int>& late) const {
    if (late[start] != kUnset) return late[start];
    auto late_possible = [&](uint32_t u) {
      const Var& v = space_.vars()[u];
      return v.can_recompute && (v.first_row == Var::kNoRow || v.first_row > row) &&
             (v.placed_row == Var::kNoRow || v.placed_row > row);
    };
    for (uint32_t u : build_order(start, late, late_possible)) {
      if (!late_possible(u)) {
        late[u] = kNever;
        continue;
      }
      std::vector<int> idx;
      std::vector<double> coef;
      for (uint32_t x : space_.users()[u]) {
        if (!space_.vars()[x].can_recompute) continue;
        idx.push_back(p.r[x]);
        coef.push_back(1);
        if (late[x] >= 0) {
          idx.push_back(late[x]);
          coef.push_back(-1);
        }
      }
      const int col = p.milp.add_continuous(0, 1);
      idx.push_back(col);
      coef.push_back(1);
      idx.push_back(p.r[u]);
      coef.push_back(-1);
      p.milp.add_row(idx, coef, 0, Milp::kInfinity);  // late_u - r_u + sum(r_x - late_x) >= 0
      late[u] = col;
    }
    return late[start];
  }

  // The column finite_u that is 1 when var u, recomputed, is made at some
  // backward row (space.cc's made_by[u] is not kNoRow): kAlways when a
  // tangent-derived node reads it or it lies in the backward (placed_row),
  // else finite_u >= r_x + finite_x - 1 per
  // user x (kNever when no user can be).
  int made_finite(Program& p, uint32_t start) const {
    if (p.finite.empty()) p.finite.assign(space_.vars().size(), kUnset);
    if (p.finite[start] != kUnset) return p.finite[start];
    auto unread = [&](uint32_t u) {
      return space_.vars()[u].first_row == Var::kNoRow && space_.vars()[u].placed_row == Var::kNoRow;
    };
    for (uint32_t u : build_order(start, p.finite, unread)) {
      if (!unread(u)) {
        p.finite[u] = kAlways;
        continue;
      }
      int col = kNever;
      for (uint32_t x : space_.users()[u]) {
        if (!space_.vars()[x].can_recompute) continue;
        const int f = p.finite[x];
        if (f == kNever) continue;
        if (col < 0) col = p.milp.add_continuous(0, 1);
        if (f == kAlways) {  // finite_u >= r_x
          const int i2[] = {col, p.r[x]};
          const double c2[] = {1, -1};
          p.milp.add_row(i2, c2, 0, Milp::kInfinity);
        } else {  // finite_u >= r_x + finite_x - 1
          const int i3[] = {col, p.r[x], f};
          const double c3[] = {1, -1, -1};
          p.milp.add_row(i3, c3, -1, Milp::kInfinity);
        }
      }
      p.finite[u] = col;
    }
    return p.finite[start];
  }

  // Where the model says a MILP solution does not fit `cap` (space.h's
  // row_values, which the MILP's rows relax): adds its exceeding rows,
  // at most kLazyRows, extended with the terms they left out, so this
  // solution and every plan exceeding there the same way are cut off
  // without a build. Rows bound `cap` itself, or with `peak_var` >= 0 that
  // variable (the smallest-peak search, whose solution's peak is `cap`).
  // False when the model fits (or proves nothing).
  bool cut_by_model(Program& p, const std::vector<uint8_t>& saved, int64_t cap, int peak_var = -1) const {
    if (!space_.model_is_bound() || !model_bounds_) return false;
    std::optional<Assignment> a = space_.implied_recompute(saved);
    if (!a) return false;
    // The rows reproduce the model for integral plans, so the solution does
    // not come back; if it did (a model term they miss), it is built and
    // cut off by its no-good instead of looping.
    if (!p.lazily_cut.insert(flags_key(saved)).second) return false;
    std::vector<std::pair<int64_t, std::pair<uint32_t, bool>>> over;
    for (bool before : {false, true}) {
      const std::vector<int64_t> v = space_.values(a->saved, a->recomputed, before);
      for (uint32_t r = before ? space_.between() + 1 : 0; r < v.size(); ++r)
        if (r != space_.between() && v[r] > cap) over.push_back({v[r], {r, before}});
    }
    if (over.empty()) return false;
    std::stable_sort(over.begin(), over.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    if (over.size() > static_cast<size_t>(kLazyRows)) over.resize(kLazyRows);
    for (const auto& [value, at] : over) memory_row(p, at.first, at.second, cap, peak_var, /*extended=*/true);
    return true;
  }

  // Excludes one saved set: at least one s differs.
  void no_good(Program& p, const std::vector<uint8_t>& saved) const {
    std::vector<int> idx;
    std::vector<double> coef;
    double rhs = 1;
    for (size_t k = 0; k < saved.size(); ++k) {
      if (!space_.vars()[k].can_save) continue;
      idx.push_back(p.s[k]);
      coef.push_back(saved[k] ? -1 : 1);
      if (saved[k]) rhs -= 1;
    }
    p.milp.add_row(idx, coef, rhs, Milp::kInfinity);
  }

  // Keeps the program's fixings in step with forbidden saves.
  void sync_forbidden(Program& p) const {
    for (size_t k = 0; k < space_.vars().size(); ++k)
      if (!space_.vars()[k].can_save) p.milp.fix(p.s[k], 0);
  }

  std::vector<uint8_t> saved_of(const Program& p, const Milp::Result& res) const {
    std::vector<uint8_t> saved(p.s.size(), 0);
    for (size_t k = 0; k < p.s.size(); ++k) saved[k] = res.values[p.s[k]] > 0.5;
    return saved;
  }

  // `stall`: stop after this many builds in a row found no cheaper plan
  // that fits (fast's polish; exact searches until proof, rounds or time).
  void exact(int stall = std::numeric_limits<int>::max()) {
    Program p = validity();
    memory_rows(p, limit_, -1);
    if (best_) {  // only plans at least as good as the incumbent are of interest
      std::vector<int> idx;
      std::vector<double> coef;
      for (size_t k = 0; k < p.r.size(); ++k) {
        idx.push_back(p.r[k]);
        coef.push_back(space_.vars()[k].cost);
      }
      // The model's cost is at most the measured one: a plan whose model
      // cost exceeds the incumbent's measured cost cannot beat it.
      const double best = best_->result.recompute_runtime;
      p.milp.add_row(idx, coef, -Milp::kInfinity, best + 1e-9 * std::max(1.0, best));
    }
    int stalled = 0;
    while (rounds_ < max_rounds_) {
      sync_forbidden(p);
      const std::optional<Milp::Limits> lim = solve_limits();
      if (!lim) break;
      dump_milp(p.milp);
      const Milp::Result res = p.milp.solve(*lim);
      account(res);
      const bool sound = model_bounds_ && space_.model_is_bound();
      if (res.status == Milp::Status::kInfeasible) {
        // No valid plan beats the incumbent (or, without one, fits at all).
        if (sound && best_) {
          bound_ = best_->result.recompute_runtime;
          proven_ = true;
        }
        break;
      }
      // The objective's tie-break adds at most tie_break(): the recompute is
      // at least the solver's bound minus that.
      if (sound) bound_ = std::max(bound_, std::max(0.0, res.bound - tie_break()));
      if (res.values.empty()) break;  // out of time without a solution
      const std::vector<uint8_t> saved = saved_of(p, res);
      if (cut_by_model(p, saved, limit_)) continue;  // no build: the model already exceeds
      const double incumbent = best_ ? best_->result.recompute_runtime : -1;
      const Verdict v = evaluate(saved);
      stalled = best_ && best_->result.recompute_runtime != incumbent ? 0 : stalled + 1;
      // Optimal when its measured recompute is the solver's bound (the
      // model's cost is a lower bound of the measured one; the tie-break
      // adds at most tie_break()); a plan that fits but costs more than the model
      // said stays the incumbent, is cut off, and the search goes on.
      const double measured = measured_cost(saved);
      if (v.fits && res.status == Milp::Status::kOptimal &&
          measured <= res.bound + 1e-6 * std::max(1.0, measured)) {
        proven_ = model_bounds_ && space_.model_is_bound();
        if (!proven_) bound_ = -1;
        break;
      }
      if (!v.hazards) no_good(p, saved);  // hazards: the forbidden save cuts it off
      if (stalled >= stall) break;
    }
    if (!(model_bounds_ && space_.model_is_bound())) {
      bound_ = -1;  // a built plan broke the model's bound: nothing is proven
      proven_ = false;
    }
  }

  // The smallest peak any valid plan reaches, bounded from below by the
  // MILP over the model's peak (verified the same way, within the time).
  // `until_fits`: stop at the first plan that fits the limit (it is best_).
  // `stall`: stop after this many builds in a row found no smaller peak.
  int64_t smallest_peak_bound(bool until_fits = false, int stall = kStallRounds) {
    if (!space_.model_is_bound() || !model_bounds_) return fast_peak_bound();
    Program p = validity();
    for (size_t k = 0; k < p.r.size(); ++k) p.milp.set_objective_coefficient(p.r[k], 0);
    for (size_t k = 0; k < p.s.size(); ++k) p.milp.set_objective_coefficient(p.s[k], 0);
    const int peak = p.milp.add_continuous(0, Milp::kInfinity, 1);
    memory_rows(p, 0, peak);
    int64_t bound = fast_peak_bound();
    int stalled = 0;
    while (rounds_ < max_rounds_) {
      sync_forbidden(p);
      const std::optional<Milp::Limits> lim = solve_limits();
      if (!lim) break;
      dump_milp(p.milp);
      const Milp::Result res = p.milp.solve(*lim);
      account(res);
      if (res.status == Milp::Status::kInfeasible || res.values.empty()) {
        if (res.status != Milp::Status::kInfeasible)
          bound = std::max<int64_t>(bound, static_cast<int64_t>(std::ceil(res.bound - 0.5)));
        break;
      }
      if (res.status == Milp::Status::kOptimal)
        bound = std::max<int64_t>(bound, static_cast<int64_t>(std::ceil(res.bound - 0.5)));
      if (smallest_peak_ >= 0 && bound >= smallest_peak_) break;  // proven smallest
      const std::vector<uint8_t> saved = saved_of(p, res);
      // The model's peak of this plan is above the MILP's: no build, the
      // rows it exceeds come back with the terms they relaxed.
      if (cut_by_model(p, saved, static_cast<int64_t>(std::floor(res.values[peak] + 0.5)), peak)) continue;
      const int64_t before = smallest_peak_;
      const Verdict v = evaluate(saved);
      if (until_fits && best_) break;
      stalled = smallest_peak_ == before ? stalled + 1 : 0;
      if (stalled == stall) break;  // the rest of the time would likely buy nothing
      if (!model_bounds_) return fast_peak_bound();
      if (!v.hazards) no_good(p, saved);
    }
    return smallest_peak_ >= 0 ? std::min(bound, smallest_peak_) : bound;
  }

  // The numbers of the message go into the error's fields as well
  // (remat/error.h), so callers need not parse it.
  [[noreturn]] void unreachable(int64_t bound) const { throw_unreachable(limit_, smallest_peak_, bound); }

  Outcome finish(const char* mode) {
    Outcome out = std::move(*best_);
    PeakSearchSummary& s = out.result.peak_search;
    s.search = mode;
    s.plans_built = built_;
    s.solver_rounds = rounds_;
    s.recompute_lower_bound = bound_;
    s.optimal = proven_;
    s.solver_nodes = solver_nodes_;
    s.stopped_by = proven_ ? "" : stopped_by_;
    s.seconds = elapsed();
    return out;
  }

  const DecideContext& ctx_;
  PlanSpace& space_;
  const int64_t limit_;
  const double seconds_;
  const Builder& build_;
  const Clock::time_point start_;
  const FastEffort effort_;
  std::map<std::string, Verdict> seen_;
  std::vector<uint32_t> hazardous_;  // vars whose saving made a hazard
  // priced_cut's network, built by its first cut, and its capacities.
  mutable std::optional<MaxFlow> priced_net_;
  mutable std::vector<int64_t> priced_cap_;
  std::optional<Outcome> best_;
  int64_t smallest_peak_ = -1;
  bool model_bounds_ = true;  // every built plan's peak >= its model peak
  bool screened_ = false;       // torch's plans were screened by chained_peak
  bool chained_bounds_ = true;  // every plan built since: peak >= chained_peak
  double bound_ = -1;         // proven lower bound of the recompute (exact)
  bool proven_ = false;       // the plan found is optimal
  int built_ = 0;
  int rounds_ = 0;
  int max_rounds_ = std::numeric_limits<int>::max();  // fast's polish bounds it
  const int64_t nodes_;          // exact's node budget (the caller's)
  int64_t node_cap_ = 0;         // solves stop when nodes_used_ reaches it
  int64_t nodes_used_ = 0;       // nodes spent, each solve counting at least one
  int64_t solver_nodes_ = 0;     // branch-and-bound nodes reported by the solver
  std::string stopped_by_;       // PeakSearchSummary::stopped_by
};

}  // namespace

void throw_unreachable(int64_t limit, int64_t smallest_peak, int64_t bound) {
  if (smallest_peak < 0)
    throw BudgetUnreachableError(
        fmt::format("peak_memory_budget: no plan fits {} ({} bytes): no valid plan was "
                    "found without a mutation hazard",
                    memory::size_text(limit), limit),
        -1, bound);
  // A bound of 0 proves nothing (the model was not a bound of this graph's
  // plans, or nothing had to be saved): no claim then.
  const std::string proof =
      bound >= smallest_peak ? "no valid plan has a smaller peak (proven)"
      : bound <= 0           ? "no lower bound was proven"
                             : fmt::format("no valid plan has a peak below {} ({} bytes) (proven)",
                                           memory::size_text(bound), bound);
  throw BudgetUnreachableError(
      fmt::format("peak_memory_budget: no plan fits {} ({} bytes); the smallest "
                  "reachable peak is {} ({} bytes); {}",
                  memory::size_text(limit), limit, memory::size_text(smallest_peak), smallest_peak, proof),
      smallest_peak, bound <= 0 ? -1 : std::min(bound, smallest_peak));
}

Outcome minimize_recompute(const DecideContext& ctx, PlanSpace& space, int64_t limit,
                           PartitionOptions::PeakSearch mode, const Effort& effort, const Builder& build) {
  return Search(ctx, space, limit, effort, build).run(mode);
}

}  // namespace remat::optimize
