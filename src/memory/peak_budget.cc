// memory/peak_budget.cc — solve_peak_budget (memory/peak_budget.h).
//
// Plans are cut and built one at a time, in the list's order, and the first
// that fits is returned; a plan whose lower bound (inputs plus what its saved
// values allocate) exceeds the limit is set aside unbuilt, since it cannot
// fit. Only the smallest-peak plan so far is kept, for the repair path.
#include "memory/peak_budget.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "graph/query.h"
#include "memory/bytes.h"
#include "remat/error.h"

namespace remat {
namespace {

// How to cut a plan again, and what it is called.
struct Recipe {
  std::string label;
  MinCutOptions options;
  CutOverrides overrides;
};

struct Built {
  Recipe recipe;
  PartitionResult result;
};

// The order in which the list-order search would have built a candidate
// (the candidates that may fit, then those set aside, each in list order):
// among equal peaks the repair path starts from the earliest.
uint64_t build_order(bool set_aside, size_t index) { return (uint64_t{set_aside} << 32) | index; }

class Search {
 public:
  // `start_only`: with `repairs`, stop where the repair path would start.
  Search(const DecideContext& ctx, int64_t limit, const PlanBuilder& build, PeakSearchStats* stats, bool repairs,
         const PeakBound& bound, PeakCandidates& candidates, bool start_only = false)
      : ctx_(ctx), limit_(limit), build_(build), stats_(stats), repairs_(repairs), start_only_(start_only),
        bound_(bound), candidates_(candidates) {
    const Graph& g = ctx.graph;
    for (NodeId p = 0; p < g.size(); ++p) {
      const NodeId j = g.node(p).origin;
      if (j == kNoNode || j == kCreatedNode) continue;
      if (j >= prepared_of_.size()) prepared_of_.resize(j + 1, kNoNode);
      prepared_of_[j] = p;
    }
    for (NodeId n : ctx.info.inputs) inputs_bytes_ += own_bytes(n, /*fresh_only=*/false);
  }

  PartitionResult run() {
    // Cannot fit, built only if nothing fits: the index and the bound
    // (-1 without one).
    std::vector<std::pair<size_t, int64_t>> skipped;
    for (size_t i = 0; const BudgetPlan* plan = candidates_.at(i); ++i) {
      // The bound of a candidate the plain lower bound sets aside orders
      // the repair path's start only.
      const bool below = lower_bound(plan->saved) <= limit_;
      const int64_t bound = bound_ && (below || repairs_) ? bound_(plan->saved) : -1;
      if (!below || bound > limit_) {
        skipped.emplace_back(i, bound);
        continue;
      }
      if (std::optional<Built> fit = evaluate(*plan, i, build_order(false, i))) return finish(std::move(*fit));
    }
    if (!repairs_) {
      if (smallest_peak_ < 0 && skipped.size() > 0)
        throw BudgetUnreachableError(
            fmt::format("peak_memory_budget: no plan fits {} ({} bytes): a lower bound of every "
                        "candidate's peak exceeds it (none was built)",
                        memory::size_text(limit_), limit_),
            -1, -1);
      unreachable();
    }
    // Nothing fits: the repair path starts from the smallest peak of all.
    // A candidate whose bound is above the smallest peak built so far
    // cannot start it (nor its hazard repairs, which are not tried), nor can
    // one whose bound equals it and that comes later in the list. With a
    // bound, the least bounds are built first, so that the first build sets
    // the others aside where the bound is tight: at the tightest limits of
    // the resnet stacks in docs/scale.md, where it equals every candidate's
    // peak, one build instead of three. The start is the same as in list
    // order (the least peak, the earliest on ties) while the bound holds,
    // unless a candidate with hazards was set aside whose repair would have
    // had the least peak.
    if (bound_) {
      std::stable_sort(skipped.begin(), skipped.end(),
                       [](const auto& x, const auto& y) { return x.second < y.second; });
    }
    for (const auto& [i, bound] : skipped) {
      const uint64_t order = build_order(true, i);
      if (bound_ && smallest_ && (bound > smallest_peak_ || (bound == smallest_peak_ && order > smallest_order_)))
        continue;
      evaluate(*candidates_.at(i), i, order);
    }
    if (start_only_) unreachable();
    return repair_path();
  }

 private:
  // Builds candidate `index`, then its hazard repairs while it has
  // hazards; returns the first hazard-free one that fits. A candidate an
  // earlier search under this limit built hazard-free and over it
  // (PeakCandidates) is not built again: it cannot fit, and only the one
  // with the record's smallest peak could start the repair path.
  std::optional<Built> evaluate(const BudgetPlan& plan, size_t index, uint64_t order) {
    Recipe recipe{plan.label, plan.options, plan.overrides};
    if (candidates_.missed_peak(limit_, index) >= 0) {
      std::vector<NodeId> key = plan.saved;
      std::sort(key.begin(), key.end());
      tried_.insert(std::move(key));
      if (const PartitionResult* kept = candidates_.kept_miss(limit_, index)) offer(Built{recipe, *kept}, order);
      return std::nullopt;
    }
    Built b = make(recipe, plan.saved, plan.from_cut ? &plan.cut : nullptr);
    for (int round = 0;; ++round) {
      const std::vector<NodeId> readers = hazard_readers(b.result);
      if (readers.empty() && b.result.memory.peak_bytes <= limit_) return b;
      if (round == 0 && readers.empty()) candidates_.record_miss(limit_, index, b.result);
      offer(std::move(b), order);
      if (readers.empty() || !plan.from_cut || round == 3) return std::nullopt;
      std::optional<Built> fixed = without_hazards(recipe, readers);
      if (!fixed) return std::nullopt;
      recipe = fixed->recipe;
      b = std::move(*fixed);
    }
  }

  // The bytes of node n's own storages: all its tensors, or (fresh_only)
  // those the simulator allocates rather than aliases to an input of n.
  int64_t own_bytes(NodeId n, bool fresh_only) const {
    const Graph& g = ctx_.graph;
    const auto tensors = g.tensors(n);
    int64_t total = 0;
    for (size_t k = 0; k < tensors.size(); ++k) {
      const int64_t sid = tensors[k].storage;
      if (sid < 0 && fresh_only) continue;
      bool aliased = false;
      for (size_t j = 0; j < k && sid >= 0; ++j) aliased = aliased || tensors[j].storage == sid;
      if (fresh_only)
        for (NodeId in : g.inputs(n))
          for (const TensorMeta& t : g.tensors(in)) aliased = aliased || t.storage == sid;
      if (!aliased) total += memory::allocation_bytes(g, tensors[k]);
    }
    return total;
  }

  // A lower bound of a saved set's peak, from the prepared graph alone: the
  // forward's inputs and the storages the saved values allocate, all alive
  // when the forward returns. Values that may alias another storage (views,
  // getitems, in-place ops) are left out.
  int64_t lower_bound(const std::vector<NodeId>& saved) const {
    const Graph& g = ctx_.graph;
    int64_t total = inputs_bytes_;
    for (NodeId n : saved) {
      if (g.node(n).kind != NodeKind::kCallFunction) continue;
      const OpInfo* op = g.op(n);
      if (op == nullptr || op->kind != OpKind::kOverload || op->is_view || op->is_mutable) continue;
      total += own_bytes(n, /*fresh_only=*/true);
    }
    return total;
  }

  // Builds and measures a plan.
  Built make(const Recipe& recipe, const std::vector<NodeId>& saved, const MinCutResult* cut) {
    if (stats_) ++stats_->candidates;
    std::vector<NodeId> key = saved;
    std::sort(key.begin(), key.end());
    tried_.insert(std::move(key));
    return {recipe, build_(saved, cut)};
  }

  // Cuts the recipe; nullopt when the cut is infinite or repeats a plan,
  // or when the bound puts its peak at `no_lower_than` or above (>= 0).
  std::optional<Built> cut_and_make(const Recipe& recipe, int64_t no_lower_than = -1) {
    MinCutResult cut;
    try {
      cut = solve_min_cut(ctx_, recipe.options, recipe.overrides);
    } catch (const NoFiniteCutError&) {
      return std::nullopt;
    }
    std::vector<NodeId> key = cut.saved_values;
    std::sort(key.begin(), key.end());
    if (tried_.count(key) != 0) return std::nullopt;
    if (bound_ && no_lower_than >= 0 && bound_(cut.saved_values) >= no_lower_than) {
      if (stats_) ++stats_->moves_set_aside;
      return std::nullopt;
    }
    return make(recipe, cut.saved_values, &cut);
  }

  NodeId prepared(NodeId joint) const {
    return joint < prepared_of_.size() ? prepared_of_[joint] : kNoNode;
  }

  // The prepared ids of the backward nodes reading a hazard's saved value.
  std::vector<NodeId> hazard_readers(const PartitionResult& r) const {
    std::vector<NodeId> out;
    for (const MutationHazard& h : r.hazards)
      for (NodeId reader : h.readers) out.push_back(prepared(r.backward.node(reader).origin));
    return out;
  }

  // The recipe with the backward readers of every hazard banned.
  std::optional<Built> without_hazards(const Recipe& recipe, const std::vector<NodeId>& readers) {
    Recipe fixed = recipe;
    fixed.label += " (hazard repair)";
    std::vector<uint8_t>& ban = fixed.overrides.ban;
    if (ban.empty()) ban.assign(ctx_.graph.size(), 0);
    bool changed = false;
    for (NodeId p : readers) {
      if (p == kNoNode || ban[p]) continue;
      ban[p] = 1;
      changed = true;
    }
    if (!changed) return std::nullopt;
    return cut_and_make(fixed);
  }

  // Keeps a hazard-free plan that did not fit if it has the smallest peak so
  // far (the earliest in build_order on ties): the repair path starts there.
  void offer(Built b, uint64_t order) {
    if (!b.result.hazards.empty()) return;
    const int64_t peak = b.result.memory.peak_bytes;
    if (smallest_ && (peak > smallest_peak_ || (peak == smallest_peak_ && order >= smallest_order_))) return;
    smallest_peak_ = peak;
    smallest_order_ = order;
    smallest_label_ = b.recipe.label;
    smallest_ = std::move(b);
  }

  // Moves from the storages alive at the peak of `from`, largest first.
  std::vector<Recipe> moves(const Built& from) {
    const PartitionResult& r = from.result;
    std::vector<Recipe> out;
    std::set<std::pair<int, NodeId>> seen;
    for (const LiveStorage& s : r.memory.at_peak) {
      if (static_cast<int>(out.size()) == kRepairMoves) break;
      const Graph& g = s.pass == Pass::kForward ? r.forward : r.backward;
      const NodeId joint = g.node(s.node).origin;
      if (joint >= r.decisions.size()) continue;
      const NodeId p = prepared(joint);
      if (p == kNoNode || ctx_.graph.node(p).kind != NodeKind::kCallFunction) continue;
      const NodeDecision::Where where = r.decisions[joint].where;
      Recipe next = from.recipe;
      if (s.pass == Pass::kForward && where == NodeDecision::Where::kSaved) {
        if (!seen.insert({0, p}).second) continue;
        std::vector<uint8_t>& v = next.overrides.recompute;
        if (v.empty()) v.assign(ctx_.graph.size(), 0);
        if (v[p]) continue;
        v[p] = 1;
        if (!next.overrides.ban.empty()) next.overrides.ban[p] = 0;
        next.label += fmt::format(", recompute {}", ctx_.graph.name(p));
      } else if (s.pass == Pass::kBackward && where == NodeDecision::Where::kRecomputed) {
        if (!seen.insert({1, p}).second) continue;
        std::vector<uint8_t>& v = next.overrides.ban;
        if (v.empty()) v.assign(ctx_.graph.size(), 0);
        if (v[p]) continue;
        v[p] = 1;
        if (!next.overrides.recompute.empty()) next.overrides.recompute[p] = 0;
        next.label += fmt::format(", save {}", ctx_.graph.name(p));
      } else {
        continue;
      }
      out.push_back(std::move(next));
    }
    return out;
  }

  PartitionResult repair_path() {
    if (!smallest_) unreachable();
    Built current = std::move(*smallest_);
    for (int step = 0; step < kRepairSteps; ++step) {
      std::optional<Built> best;
      for (const Recipe& m : moves(current)) {
        // A move the bound puts no lower than the step's best so far (or
        // the current state) can neither become the step's best nor
        // continue the path: not built.
        const int64_t to_beat = best ? best->result.memory.peak_bytes : current.result.memory.peak_bytes;
        std::optional<Built> b = cut_and_make(m, to_beat);
        if (!b || !b->result.hazards.empty()) continue;
        if (!best || b->result.memory.peak_bytes < best->result.memory.peak_bytes) best = std::move(b);
      }
      if (!best || best->result.memory.peak_bytes >= current.result.memory.peak_bytes) break;
      current = std::move(*best);
      if (current.result.memory.peak_bytes < smallest_peak_) {
        smallest_peak_ = current.result.memory.peak_bytes;
        smallest_label_ = current.recipe.label;
      }
      if (current.result.memory.peak_bytes <= limit_) return finish(std::move(current));
    }
    unreachable();
  }

  // The smallest peak goes into the error's field too (remat/error.h);
  // this search proves no bound, so the peak is the least found, not the
  // least reachable.
  [[noreturn]] void unreachable() const {
    if (smallest_peak_ < 0)
      throw BudgetUnreachableError(
          fmt::format("peak_memory_budget: no plan fits {} ({} bytes): every plan tried "
                      "saves a value that aliases an input the step mutates",
                      memory::size_text(limit_), limit_),
          -1, -1);
    throw BudgetUnreachableError(
        fmt::format("peak_memory_budget: no plan fits {} ({} bytes); the smallest "
                    "peak found is {} ({} bytes), with the plan '{}'",
                    memory::size_text(limit_), limit_, memory::size_text(smallest_peak_), smallest_peak_,
                    smallest_label_),
        smallest_peak_, -1);
  }

  PartitionResult finish(Built b) {
    if (stats_) stats_->chosen = b.recipe.label;
    return std::move(b.result);
  }

  const DecideContext& ctx_;
  const int64_t limit_;
  const PlanBuilder& build_;
  PeakSearchStats* stats_;
  const bool repairs_;
  const bool start_only_;
  const PeakBound& bound_;
  PeakCandidates& candidates_;
  std::vector<NodeId> prepared_of_;  // joint id -> prepared id
  std::set<std::vector<NodeId>> tried_;  // sorted saved sets built so far
  int64_t inputs_bytes_ = 0;             // the forward's inputs (lower_bound)
  std::optional<Built> smallest_;
  int64_t smallest_peak_ = -1;
  uint64_t smallest_order_ = 0;  // build_order of smallest_
  std::string smallest_label_;
};

}  // namespace

PeakCandidates::PeakCandidates(const DecideContext& ctx) : list_(ctx, kPeakSearchBudgets) {}
PeakCandidates::~PeakCandidates() = default;

void PeakCandidates::record_miss(int64_t limit, size_t i, const PartitionResult& result) {
  if (limit != miss_limit_) {
    miss_limit_ = limit;
    miss_peaks_.clear();
    smallest_miss_result_.reset();
  }
  if (miss_peaks_.size() <= i) miss_peaks_.resize(i + 1, -1);
  const int64_t peak = result.memory.peak_bytes;
  miss_peaks_[i] = peak;
  const bool smaller = !smallest_miss_result_ || peak < smallest_miss_result_->memory.peak_bytes ||
                       (peak == smallest_miss_result_->memory.peak_bytes && i < smallest_miss_);
  if (!smaller) return;
  smallest_miss_ = i;
  smallest_miss_result_ = result;
}

int64_t PeakCandidates::missed_peak(int64_t limit, size_t i) const {
  return limit == miss_limit_ && i < miss_peaks_.size() ? miss_peaks_[i] : -1;
}

const PartitionResult* PeakCandidates::kept_miss(int64_t limit, size_t i) const {
  return limit == miss_limit_ && smallest_miss_result_ && i == smallest_miss_ ? &*smallest_miss_result_ : nullptr;
}

const BudgetPlan* PeakCandidates::at(size_t i) {
  while (kept_.size() <= i && !listed_) {
    std::optional<BudgetPlan> plan = list_.next();
    if (!plan) listed_ = true;
    else kept_.push_back(std::move(*plan));
  }
  return i < kept_.size() ? &kept_[i] : nullptr;
}

std::optional<PartitionResult> build_repair_start(const DecideContext& ctx, int64_t limit, const PlanBuilder& build,
                                                  const PeakBound& bound, PeakCandidates& candidates) {
  try {
    return Search(ctx, limit, build, nullptr, /*repairs=*/true, bound, candidates, /*start_only=*/true).run();
  } catch (const BudgetUnreachableError&) {
    return std::nullopt;  // nothing fits: the start, if any, was built
  }
}

PartitionResult solve_peak_budget(const DecideContext& ctx, int64_t limit, const PlanBuilder& build,
                                  PeakSearchStats* stats, bool repairs, const PeakBound& bound,
                                  PeakCandidates* candidates) {
  if (candidates) return Search(ctx, limit, build, stats, repairs, bound, *candidates).run();
  PeakCandidates own(ctx);
  return Search(ctx, limit, build, stats, repairs, bound, own).run();
}

PeakBudgetPlan plan_peak_budget(const DecideContext& ctx, int64_t limit, size_t joint_size,
                                const SavedSetsBuilder& build) {
  const Graph& g = ctx.graph;
  auto build_candidate = [&](const std::vector<NodeId>& chosen, const MinCutResult* cut) {
    CutStory story;
    if (cut != nullptr) story = cut_story(g, *cut, joint_size);
    else story.ban_reason.resize(joint_size);
    return build(split_saved_values(g, chosen, ctx.options.torch), story);
  };
  PeakBudgetPlan plan;
  PeakSearchStats stats;
  const auto start = std::chrono::steady_clock::now();
  plan.result = solve_peak_budget(ctx, limit, build_candidate, &stats);
  plan.result.peak_search.search = "torch_plans";
  plan.result.peak_search.plans_built = stats.candidates;
  plan.result.peak_search.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const PartitionResult& r = plan.result;
  plan.saved_joint = r.saved_values;
  for (const auto* list : {&r.saved_sym_nodes, &r.saved_opaque_nodes})
    plan.saved_joint.insert(plan.saved_joint.end(), list->begin(), list->end());
  const std::vector<NodeId> node_of = nodes_by_joint_id(g, joint_size);
  for (NodeId j : plan.saved_joint) plan.chosen.push_back(node_of[j]);
  return plan;
}

}  // namespace remat
