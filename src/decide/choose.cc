// decide/choose.cc — choose_saved_values_set: the memory-budget driver of the
// min-cut partitioner, and the Pareto sweep over its budgets.
//
// Budget 0 saves the inputs; budget 1 is the runtime-optimized min-cut. In
// between, torch tries progressively more aggressive min-cuts (runtime
// optimized -> "more aggressive" -> "fully aggressive") and returns the first
// whose activation memory ratio is under the budget. When none is, a knapsack
// over the recomputable banned nodes of the fully aggressive cut picks which
// of them may be recomputed, and one more min-cut with those unbanned decides.
//
// Everything except the last knapsack + min-cut is independent of the budget,
// so BudgetStage prepares it once; the Pareto sweep then pays one knapsack and
// (at most) one min-cut per distinct budget, with min-cuts memoized by the set
// of nodes the knapsack unbanned.
//
// The solver and the runtime estimator may be the caller's own hooks
// (PartitionOptions::custom_knapsack / custom_runtime_estimator, torch's
// CustomKnapsackSolver / CustomRuntimeEstimator), told the items as joint ids.
//
// With ctx.trace set, the story is recorded as torch would tell it: each
// min-cut's log lines (replayed when a memoized cut is reused, since torch
// runs it again), each knapsack call's inputs and choice, the step that
// decided, and, for visualize_memory_budget_pareto, the frontier swept when
// the knapsack is reached.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <unordered_set>

#include <fmt/format.h>

#include "budget/flops.h"
#include "budget/knapsack.h"
#include "budget/pareto.h"
#include "decide/ban_rules.h"
#include "decide/decide.h"
#include "graph/query.h"
#include "ops/memory_budget.h"
#include "remat/error.h"

namespace remat {
namespace {

// sum(map(_size_of, values)) / 1e9 — an exact integer sum, then one
// correctly rounded conversion and a float division, as Python does.
double activations_size(const DecideContext& ctx, const std::vector<NodeId>& values) {
  __int128 total = 0;
  for (NodeId n : values) total += size_of(ctx.graph, n, ctx.options);
  return static_cast<double>(total) / 1e9;
}

// torch._inductor.fx_utils.get_node_storage; kNoStorage for None.
constexpr int64_t kNoStorage = std::numeric_limits<int64_t>::min();
int64_t node_storage(const Graph& g, NodeId n) {
  if (g.node(n).value != ValueKind::kTensor) return kNoStorage;
  auto ts = g.tensors(n);
  if (ts.empty() || ts[0].storage < 0) return kNoStorage;
  return ts[0].storage;
}

// Python's sum() of the runtimes. torch's "flops"/"testing" estimators return
// ints, whose sum is exact; other estimators return floats, summed left to
// right in double (Python 3.11 has no compensated float sum).
double python_sum(const std::vector<double>& xs) {
  bool integral = true;
  for (double x : xs) integral = integral && std::trunc(x) == x && std::abs(x) < 9.2e18;
  if (integral) {
    __int128 total = 0;
    for (double x : xs) total += static_cast<int64_t>(x);
    return static_cast<double>(total);
  }
  double total = 0;
  for (double x : xs) total += x;
  return total;
}

// Whether budget 0 may simply save the inputs. From 2.15 not when one of
// them is overwritten by the runtime epilogue (it cannot be saved): budget 0
// then runs the tiers and the knapsack like any other budget.
bool inputs_saveable(const DecideContext& ctx) {
  if (!ctx.options.torch.epilogue_mutation_unsaveable) return true;
  for (NodeId n : ctx.info.inputs)
    if (ctx.graph.node(n).has(kFlagEpilogueMutation)) return false;
  return true;
}

// A min-cut's log lines, appended to the trace (when there is one).
void replay_log(const DecideContext& ctx, const MinCutResult& cut) {
  if (ctx.trace) ctx.trace->log.insert(ctx.trace->log.end(), cut.log.begin(), cut.log.end());
}

// The bans of the runtime-optimized cut (`base_bans`) that a later tier's
// cut `out` no longer has, because that tier does not apply the rule: its
// tier_lifted. A ban the knapsack lifted is in `out.lifted` instead.
void mark_tier_lifts(const std::vector<std::string_view>& base_bans, MinCutResult& out) {
  if (out.tier.empty() || out.ban_reason.size() != base_bans.size()) return;
  out.tier_lifted.assign(base_bans.size(), std::string_view());
  for (size_t n = 0; n < base_bans.size(); ++n) {
    const bool lifted_by_knapsack = !out.lifted.empty() && !out.lifted[n].empty();
    if (!base_bans[n].empty() && out.ban_reason[n].empty() && !lifted_by_knapsack)
      out.tier_lifted[n] = base_bans[n];
  }
}

MinCutResult traced_min_cut(const DecideContext& ctx, const MinCutOptions& mc) {
  MinCutResult cut = solve_min_cut(ctx, mc);
  replay_log(ctx, cut);
  return cut;
}

// The budget-independent part of choose_saved_values_set.
class BudgetStage {
 public:
  explicit BudgetStage(const DecideContext& ctx) : ctx_(ctx) {
    base_ = min_cut_options_from(ctx.options);
    if (ctx.options.aggressive_recomputation) {
      base_.ban_if_used_far_apart = false;
      base_.ban_if_long_fusible_chains = false;
      base_.ban_if_materialized_backward = false;
      base_.ban_if_not_in_allowlist = false;
    }
    more_ = base_;
    more_.ban_if_used_far_apart = false;
    more_.ban_if_long_fusible_chains = false;
    more_.ban_if_materialized_backward = false;
    aggressive_ = more_;
    aggressive_.ban_if_not_in_allowlist = false;
  }

  const MinCutOptions& base() const { return base_; }
  const MinCutOptions& more() const { return more_; }
  const MinCutOptions& aggressive() const { return aggressive_; }

  // Sizes of the two ends: what the inputs and the runtime-optimized cut save.
  void set_range(const std::vector<NodeId>& runtime_optimized) {
    min_act_ = activations_size(ctx_, ctx_.info.inputs);
    max_act_ = activations_size(ctx_, runtime_optimized);
  }
  bool has_range() const { return max_act_ > min_act_; }

  double mem_ratio(const std::vector<NodeId>& v) const {
    return (activations_size(ctx_, v) - min_act_) / (max_act_ - min_act_);
  }

  // The knapsack items: the recomputable banned nodes of the fully
  // aggressive cut, largest first; MUST_SAVE nodes among them set aside.
  void set_items(const MinCutResult& aggressive_cut) {
    const Graph& g = ctx_.graph;
    const PartitionOptions& o = ctx_.options;
    std::unordered_set<int64_t> input_storages;
    for (NodeId n : ctx_.info.inputs) input_storages.insert(node_storage(g, n));
    items_.clear();
    must_save_.clear();
    dp_.reset();
    for (NodeId n : aggressive_cut.banned_nodes) {
      // Only nodes the backward needs, and not aliases of an input (which
      // is saved anyway), unless a non-builtin op produced them.
      if (!(ctx_.dist_from_bw[n] < kFarFromBackward)) continue;
      if (input_storages.count(node_storage(g, n)) && !is_non_builtin_to_include(g, n, o)) continue;
      (g.node(n).recompute == RecomputePolicy::kMustSave ? must_save_ : items_).push_back(n);
    }
    // sorted(..., key=_size_of, reverse=True) is stable.
    std::vector<int64_t> size(items_.size());
    std::vector<size_t> order(items_.size());
    for (size_t i = 0; i < items_.size(); ++i) {
      size[i] = size_of(g, items_[i], o);
      order[i] = i;
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return size[a] > size[b]; });
    std::vector<NodeId> sorted(items_.size());
    memory_.resize(items_.size());
    const double range = max_act_ - min_act_;
    for (size_t i = 0; i < order.size(); ++i) {
      sorted[i] = items_[order[i]];
      // get_normalized_size: (sz / 1e9) / (max - min).
      memory_[i] = (static_cast<double>(size[order[i]]) / 1e9) / range;
    }
    items_ = std::move(sorted);
    item_ids_.clear();
    std::vector<double> profiled;
    if (o.activation_memory_budget_runtime_estimator == "profile" && !o.profiled_runtimes.empty()) {
      // Measured times are keyed by joint node; this graph's nodes know theirs.
      profiled.assign(g.size(), 0.0);
      for (NodeId n = 0; n < g.size(); ++n) {
        const NodeId j = remat::joint_id(g, n);
        const NodeId key = j < o.profiled_runtimes.size() ? j : n;
        if (key < o.profiled_runtimes.size()) profiled[n] = o.profiled_runtimes[key];
      }
    }
    if (o.activation_memory_budget_runtime_estimator == "custom") {
      // torch's CustomRuntimeEstimator: once per item, in item order.
      runtimes_.clear();
      for (NodeId n : items_) runtimes_.push_back(o.custom_runtime_estimator(joint_id(n)));
    } else {
      runtimes_ =
          estimate_runtimes(g, items_, o.activation_memory_budget_runtime_estimator, o.torch, profiled);
    }
    total_runtime_ = python_sum(runtimes_);
  }

  const std::vector<NodeId>& items() const { return items_; }
  const std::vector<NodeId>& must_save() const { return must_save_; }
  double min_act() const { return min_act_; }

  // get_saved_values_knapsack(budget): the knapsack's choice, then the
  // fully aggressive min-cut with the chosen items unbanned. Min-cuts are
  // memoized by the unbanned set: budgets that unban the same nodes agree.
  struct Choice {
    const MinCutResult* cut;
    double expected_runtime;
    const std::vector<int>* unbanned;  // the items the knapsack let go, sorted
  };
  Choice solve(double budget) {
    const PartitionOptions& o = ctx_.options;
    KnapsackResult k;
    if (ctx_.trace && o.activation_memory_budget_solver == "dynamic_memory_budget_dp")
      ctx_.trace->log.push_back({LogRecord::Level::kWarning, false,
                                 "dynamic_memory_budget_dp is an experimental solver. It does not "
                                 "guarantee performance improvements. Additionally, it is not "
                                 "guaranteed to be stable.",
                                 {}});
    if (o.activation_memory_budget_solver == "custom") {
      // torch's CustomKnapsackSolver branch: the solver sees the items, not
      // the runtimes, and the expected runtime is reported as 0.
      if (item_ids_.empty())
        for (NodeId n : items_) item_ids_.push_back(joint_id(n));
      auto [saved, recomputed] = o.custom_knapsack(memory_, std::max(budget, 0.0), item_ids_);
      k.saved = std::move(saved);
      k.recomputed = std::move(recomputed);
    } else if (o.activation_memory_budget_solver == "dp") {
      // One table for every budget asked (knapsack.h DpKnapsack): the
      // peak search and the Pareto sweep ask many.
      if (!dp_) dp_.emplace(memory_, runtimes_);
      k = dp_->solve(std::max(budget, 0.0));
    } else {
      k = solve_knapsack(o.activation_memory_budget_solver, memory_, runtimes_,
                         std::max(budget, 0.0));
    }
    std::vector<int> key;
    key.reserve(k.recomputed.size());
    for (int idx : k.recomputed)
      if (idx >= 0 && static_cast<size_t>(idx) < items_.size()) key.push_back(idx);
    std::sort(key.begin(), key.end());
    key.erase(std::unique(key.begin(), key.end()), key.end());
    auto it = cuts_.find(key);
    if (it == cuts_.end()) {
      dont_ban_.assign(ctx_.graph.size(), 0);
      for (int idx : key) dont_ban_[items_[idx]] = 1;
      it = cuts_.emplace(std::move(key), solve_min_cut(ctx_, aggressive_, dont_ban_)).first;
    }
    if (ctx_.trace) {
      replay_log(ctx_, it->second);
      record(budget, k, it->second);
    }
    return {&it->second, k.expected_runtime, &it->first};
  }

  // The ratios of the two intermediate tiers, for the knapsack records.
  void set_tier_ratios(double more_aggressive, double aggressive) {
    more_ratio_ = more_aggressive;
    aggressive_ratio_ = aggressive;
  }

  // One get_saved_values_knapsack call, as torch's min_cut_information
  // artifact reports it.
  void record(double budget, const KnapsackResult& k, const MinCutResult& cut) {
    const Graph& g = ctx_.graph;
    KnapsackRecord r;
    r.memory_budget = budget;
    r.expected_runtime = k.expected_runtime;
    r.saved_items = k.saved;
    r.recomputed_items = k.recomputed;
    for (NodeId n : items_) {
      r.items.push_back(remat::joint_id(g, n));
      r.item_bytes.push_back(size_of(g, n, ctx_.options));
    }
    r.item_memory = memory_;
    r.item_runtime = runtimes_;
    for (NodeId n : cut.saved_values) r.saved_values.push_back(remat::joint_id(g, n));
    r.min_act_size = min_act_;
    r.max_act_size = max_act_;
    r.saved_act_size = activations_size(ctx_, cut.saved_values);
    r.more_aggressive_ratio = more_ratio_;
    r.aggressive_ratio = aggressive_ratio_;
    ctx_.trace->knapsack.push_back(std::move(r));
  }

  // torch's estimate_for_budget: (recomputed runtime, memory ratio).
  std::pair<double, double> evaluate(double budget) {
    Choice c = solve(budget);
    return {total_runtime_ - c.expected_runtime, mem_ratio(c.cut->saved_values)};
  }

 private:
  // The caller's joint-graph id of a node of the (prepared) graph: what the
  // custom hooks are told.
  NodeId joint_id(NodeId n) const { return remat::joint_id(ctx_.graph, n); }

  const DecideContext& ctx_;
  MinCutOptions base_, more_, aggressive_;
  double min_act_ = 0, max_act_ = 0;
  std::vector<NodeId> items_, must_save_;
  std::vector<NodeId> item_ids_;  // items_ as joint ids, for the custom solver
  std::vector<double> memory_, runtimes_;
  double total_runtime_ = 0;
  std::optional<DpKnapsack> dp_;  // the "dp" solver's table, kept across budgets
  double more_ratio_ = 0, aggressive_ratio_ = 0;
  std::vector<uint8_t> dont_ban_;
  std::map<std::vector<int>, MinCutResult> cuts_;
};

}  // namespace

std::vector<NodeId> choose_saved_values_set(const DecideContext& ctx, double memory_budget,
                                            MinCutResult* last) {
  check_memory_budget(memory_budget, "activation_memory_budget");
  MinCutResult local;
  MinCutResult& out = last ? *last : local;
  out = MinCutResult();
  const bool story = ctx.story || ctx.trace != nullptr;
  // The runtime-optimized tier's bans: a later tier's cut tells which of
  // them its rules dropped.
  std::vector<std::string_view> base_bans;
  auto decided = [&](const char* step) {
    if (ctx.trace) {
      ctx.trace->memory_budget = memory_budget;
      ctx.trace->budget_step = step;
    }
    out.budget_step = step;
    if (story && !base_bans.empty()) mark_tier_lifts(base_bans, out);
  };
  if (memory_budget == 0 && inputs_saveable(ctx)) {
    decided("inputs");
    return ctx.info.inputs;
  }

  BudgetStage stage(ctx);
  out = traced_min_cut(ctx, stage.base());
  decided("runtime_optimized");
  if (memory_budget == 1) return out.saved_values;
  stage.set_range(out.saved_values);
  // The runtime-optimized cut saves no more than the inputs anyway.
  if (!stage.has_range()) return out.saved_values;
  if (story) base_bans = out.ban_reason;

  out = traced_min_cut(ctx, stage.more());
  out.tier = "more_aggressive";
  const double more_ratio = stage.mem_ratio(out.saved_values);
  decided("more_aggressive");
  if (more_ratio < memory_budget) return out.saved_values;
  out = traced_min_cut(ctx, stage.aggressive());
  out.tier = "aggressive";
  const double aggressive_ratio = stage.mem_ratio(out.saved_values);
  decided("aggressive");
  if (aggressive_ratio < memory_budget) return out.saved_values;

  stage.set_items(out);
  // Nothing left for the knapsack to trade: 2.14 on, the aggressive tier's
  // cut stands (what the knapsack would give unbanning nothing); before,
  // the inputs and the MUST_SAVE banned nodes.
  if (stage.items().empty() && ctx.options.torch.knapsack_empty_returns_aggressive) {
    return out.saved_values;
  }
  if (stage.items().empty()) {
    decided("inputs_and_must_save");
    std::vector<NodeId> result = ctx.info.inputs;
    result.insert(result.end(), stage.must_save().begin(), stage.must_save().end());
    return result;
  }
  stage.set_tier_ratios(more_ratio, aggressive_ratio);
  if (ctx.options.visualize_memory_budget_pareto && ctx.trace) {
    // torch sweeps (and plots) here, before its final knapsack call.
    const std::vector<MemoryBudgetPoint> swept =
        pareto_sweep([&](double b) { return stage.evaluate(b); }, 1e-3, ctx.options.progress);
    ctx.trace->pareto.insert(ctx.trace->pareto.end(), swept.begin(), swept.end());
  }
  const BudgetStage::Choice choice = stage.solve(memory_budget);
  out = *choice.cut;
  // The knapsack's cut is the aggressive tier's rules with its items'
  // bans lifted: the tier's lifts as above, the knapsack's in `lifted`.
  out.tier = "aggressive";
  if (story) {
    out.knapsack_kept.assign(ctx.graph.size(), 0);
    for (NodeId n : stage.items()) out.knapsack_kept[n] = 1;
    for (int idx : *choice.unbanned) out.knapsack_kept[stage.items()[idx]] = 0;
  }
  decided("knapsack");
  return out.saved_values;
}

std::vector<MemoryBudgetPoint> memory_budget_pareto(const DecideContext& ctx, double resolution,
                                                    std::span<const double> budgets) {
  for (size_t i = 0; i < budgets.size(); ++i)
    check_memory_budget(budgets[i], fmt::format("budgets[{}]", i));
  BudgetStage stage(ctx);
  stage.set_range(solve_min_cut(ctx, stage.base()).saved_values);
  if (!stage.has_range())
    throw Error(ErrorCode::kUnsupported,
                "memory budget Pareto frontier: the runtime-optimized min-cut saves no more "
                "activation memory than the inputs, so every budget gives the same partition");
  stage.set_items(solve_min_cut(ctx, stage.aggressive()));
  if (budgets.empty())
    return pareto_sweep([&](double b) { return stage.evaluate(b); }, resolution,
                        ctx.options.progress);
  std::vector<MemoryBudgetPoint> points;
  for (double b : budgets) {
    const auto [runtime, ratio] = stage.evaluate(b);
    points.push_back({b, runtime, ratio});
  }
  return points;
}

}  // namespace remat

namespace remat {

struct BudgetPlanList::State {
  State(const DecideContext& c, std::span<const double> b) : ctx(c), budgets(b.begin(), b.end()), stage(c) {}
  const DecideContext& ctx;
  std::vector<double> budgets;
  BudgetStage stage;
  int step = 0;          // the next plan to produce (see next())
  size_t budget_index = 0;
  bool knapsack = false; // items and a range exist
  MinCutResult aggressive;
  std::set<std::vector<NodeId>> seen;  // sorted saved sets produced so far
};

BudgetPlanList::BudgetPlanList(const DecideContext& ctx, std::span<const double> budgets)
    : s_(std::make_unique<State>(ctx, budgets)) {
  for (size_t i = 0; i < budgets.size(); ++i)
    check_memory_budget(budgets[i], fmt::format("budgets[{}]", i));
}

BudgetPlanList::~BudgetPlanList() = default;

std::optional<BudgetPlan> BudgetPlanList::next() {
  State& s = *s_;
  const DecideContext& ctx = s.ctx;
  for (;;) {
    BudgetPlan p;
    p.options = s.stage.aggressive();
    switch (s.step) {
      case 0:  // activation budget 1
        p.label = "runtime-optimized";
        p.options = s.stage.base();
        p.cut = solve_min_cut(ctx, p.options);
        s.stage.set_range(p.cut.saved_values);
        ++s.step;
        break;
      case 1:
        p.label = "more aggressive";
        p.options = s.stage.more();
        p.cut = solve_min_cut(ctx, p.options);
        ++s.step;
        break;
      case 2:
        p.label = "fully aggressive";
        p.cut = solve_min_cut(ctx, p.options);
        s.aggressive = p.cut;
        ++s.step;
        if (s.stage.has_range()) {
          s.stage.set_items(s.aggressive);
          s.knapsack = !s.stage.items().empty();
          // Without items torch's answer under every budget is this cut
          // (2.14 on) or the inputs and MUST_SAVE nodes, next.
          if (!s.knapsack) s.step = ctx.options.torch.knapsack_empty_returns_aggressive ? 5 : 4;
        } else {
          s.step = 5;
        }
        break;
      case 3: {  // the knapsack's plans
        if (s.budget_index == s.budgets.size()) {
          s.step = 5;
          continue;
        }
        const double b = s.budgets[s.budget_index++];
        if (b <= 0 || b >= 1) continue;
        const BudgetStage::Choice c = s.stage.solve(b);
        p.label = fmt::format("knapsack {}", b);
        p.cut = *c.cut;
        p.overrides.dont_ban.assign(ctx.graph.size(), 0);
        for (int idx : *c.unbanned) p.overrides.dont_ban[s.stage.items()[idx]] = 1;
        break;
      }
      case 4:  // the knapsack has no items: its answer for every budget
        p.label = "inputs and MUST_SAVE";
        p.saved = ctx.info.inputs;
        p.saved.insert(p.saved.end(), s.stage.must_save().begin(), s.stage.must_save().end());
        p.from_cut = false;
        s.step = 5;
        break;
      case 5:  // activation budget 0
        s.step = 6;
        if (!inputs_saveable(ctx)) {
          // Budget 0 is the knapsack at 0 then, or a tier already listed.
          if (!s.knapsack) continue;
          const BudgetStage::Choice c = s.stage.solve(0.0);
          p.label = "knapsack 0";
          p.cut = *c.cut;
          p.overrides.dont_ban.assign(ctx.graph.size(), 0);
          for (int idx : *c.unbanned) p.overrides.dont_ban[s.stage.items()[idx]] = 1;
          break;
        }
        p.label = "inputs only";
        p.saved = ctx.info.inputs;
        p.from_cut = false;
        break;
      default:
        return std::nullopt;
    }
    if (p.from_cut) p.saved = p.cut.saved_values;
    std::vector<NodeId> key = p.saved;
    std::sort(key.begin(), key.end());
    if (!s.seen.insert(std::move(key)).second) continue;
    return p;
  }
}

}  // namespace remat
