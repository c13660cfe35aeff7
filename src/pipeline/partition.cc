// pipeline/partition.cc — the two partitioners, as a walk through the stages.
//
// Contract (remat/partition.h): the same saved values and forward/backward
// graphs as torch 2.13's min_cut_rematerialization_partition and
// default_partition. This file only sequences the stages the way torch does;
// each stage's rules live in its own folder:
//   prepare (DCE, CSE, tag passes) -> analyze (classify, distances)
//   -> decide (min-cut or default)            = plan_*: a PartitionPlan
//   [the caller, or sync/, may replace the decision here, as torch's
//    _sync_decision_cross_ranks does]
//   -> extract (with FP8 activation quantization)
//   -> rewrite (RNG, reorder, offloading, getitems, HOP RNG states)
//   -> memory (simulation, hazards)              = emit_partition
// and then maps every id back to the caller's joint graph. Under remat's own
// peak memory budget the search (memory/peak_budget.h) decides by building
// candidate plans through the same emit, so such a plan is built at once.
#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <limits>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "analyze/analyze.h"
#include "decide/cut_memo.h"
#include "decide/decide.h"
#include "extract/extract.h"
#include "graph/query.h"
#include "memory/bytes.h"
#include "memory/order.h"
#include "memory/peak_budget.h"
#include "memory/plan.h"
#include "optimize/optimize.h"
#include "pipeline/why.h"
#include "prepare/prepare.h"
#include "remat/error.h"
#include "remat/partition.h"
#include "remat/sync.h"
#include "rewrite/offload.h"
#include "rewrite/quantize.h"
#include "rewrite/rewrite.h"

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;

// Records how long each stage took since the previous lap; the pipeline's
// answer to "where does the time go" without a profiler. A stage that runs
// twice (the min-cut handing over to the default partitioner) adds up. The
// time a caller holds a plan between its two steps is not the engine's:
// resume() skips it.
class StageClock {
 public:
  StageClock() : last_(Clock::now()) {}
  // The caller's progress hook (PartitionOptions::progress), told as stages
  // finish; a copy, since a plan outlives the options it was made from.
  void report_to(std::function<void(std::string_view, double)> progress) {
    progress_ = std::move(progress);
  }
  void lap(const char* stage) {
    report(stage);
    const Clock::time_point now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    total_ += seconds;
    for (StageTime& t : laps_) {
      if (t.stage == stage) {
        t.seconds += seconds;
        return;
      }
    }
    laps_.push_back({stage, seconds});
  }
  void resume() { last_ = Clock::now(); }
  double total() const { return total_; }
  std::vector<StageTime> take() { return std::move(laps_); }

 private:
  // Tells the caller's progress hook how far the pipeline is: each stage's
  // share is a rough constant (decide and extract dominate on big graphs),
  // and the fraction never goes back when a stage runs twice.
  void report(std::string_view stage) {
    if (!progress_) return;
    static constexpr std::pair<std::string_view, double> kDone[] = {
        {"prepare", 0.2}, {"classify", 0.3}, {"decide", 0.6}, {"extract", 0.8},
        {"rng", 0.85},    {"reorder", 0.9},  {"getitems", 0.95}, {"backward_order", 0.96},
        {"report", 0.97}, {"memory", 1.0},   {"peak_search", 1.0}};
    for (const auto& [name, fraction] : kDone) {
      if (name == stage && fraction > fraction_) {
        fraction_ = fraction;
        progress_("partition", fraction);
      }
    }
  }

  Clock::time_point last_;
  double total_ = 0;
  std::vector<StageTime> laps_;
  std::function<void(std::string_view, double)> progress_;
  double fraction_ = 0;
};

// A copy of the joint graph whose nodes are their own origin, so every graph
// derived from it maps back to the caller's ids whatever the passes copy. Its
// pools are layered over the joint graph's, which stay as they are.
Graph rooted(const JointGraph& joint) {
  Graph g = joint.graph;
  for (NodeId id = 0; id < g.size(); ++id) g.set_origin(id, id);
  g.layer_pools();
  return g;
}

// Fills the report part of the result: where each joint node ended up.
// `story.ban_reason` is per joint node (empty when no cut ran); why each
// fate comes after (why.h).
void record_decisions(size_t n, const Prepared& p, const CutStory& story, PartitionResult& r) {
  const std::vector<std::string_view>& ban_reason = story.ban_reason;
  std::vector<uint8_t> present(n, 0), in_fw(n, 0), in_bw(n, 0), saved(n, 0);
  for (const Node& node : p.graph.nodes()) present[node.origin] = 1;
  for (const Node& node : r.forward.nodes()) {
    if (node.origin < n && node.kind != NodeKind::kOutput) in_fw[node.origin] = 1;
  }
  for (const Node& node : r.backward.nodes()) {
    if (node.origin < n && node.kind != NodeKind::kOutput) in_bw[node.origin] = 1;
  }
  for (const auto* list : {&r.saved_values, &r.saved_opaque_nodes, &r.saved_sym_nodes}) {
    for (NodeId id : *list) saved[id] = 1;
  }
  r.decisions.assign(n, NodeDecision{});
  for (NodeId id = 0; id < n; ++id) {
    NodeDecision& d = r.decisions[id];
    using W = NodeDecision::Where;
    if (!present[id]) {
      d.where = W::kRemoved;
      // DCE leaves no survivor; CSE names the equal node that replaced it.
      const NodeId survivor = p.survivor.empty() ? kNoNode : p.survivor[id];
      d.merged_into = survivor == id ? kNoNode : survivor;
      continue;
    }
    if (saved[id]) d.where = W::kSaved;
    else if (in_fw[id] && in_bw[id]) d.where = W::kRecomputed;
    else if (in_fw[id]) d.where = W::kForwardOnly;
    else if (in_bw[id]) d.where = W::kBackwardOnly;
    else d.where = W::kUnused;
    if (!ban_reason.empty()) d.ban_reason = ban_reason[id];
    if (!story.ban_detail.empty()) d.ban_detail = story.ban_detail[id];
  }
}

}  // namespace

// --- the plan ------------------------------------------------------------------

// Everything the pipeline holds between deciding and extracting.
struct PartitionPlan::State {
  Prepared prepared;  // its graph's origins are joint ids
  NodeInfo info;
  const char* partitioner = "min_cut";
  // min-cut: the chosen values (prepared ids), split by kind at emit, after
  // any replacement, as torch splits them after its sync.
  // default: `sets` as decided; only sets.saved_values may be replaced.
  std::vector<NodeId> chosen;
  SavedSets sets;
  std::vector<NodeId> saved_joint;  // saved(): chosen or sets.saved_values, as joint ids
  MinCutResult cut;                 // ban reasons (views into it live as long)
  CutStory story;                   // per joint node; empty: no cut ran
  bool dce_collectives = false;  // default: DCE dead collectives after extraction
  bool reorder = false;          // reorder the backward like the autograd engine
  bool thread_bw = true;         // thread HOP RNG states through the backward too
  int num_fwd_outputs = 0;
  size_t joint_size = 0;
  std::vector<NestedGraph> nested;    // the joint module's bodies (HOP RNG threading)
  std::vector<NodeId> mutated_inputs;  // joint ids (mutation hazards)
  // A peak-budget plan: the search built it while deciding.
  std::optional<PartitionResult> built;
  PartitionOptions options;  // without hooks and rank group (progress stays)
  PartitionTrace trace;      // min-cut with options.trace: what deciding recorded
  StageClock clock;
};

class PlanAccess {
 public:
  static PartitionPlan make(std::unique_ptr<PartitionPlan::State> s) {
    return PartitionPlan(std::move(s));
  }
  static PartitionPlan::State& state(PartitionPlan& p) { return *p.state_; }
};

PartitionPlan::PartitionPlan(std::unique_ptr<State> state) : state_(std::move(state)) {}
PartitionPlan::PartitionPlan(PartitionPlan&&) noexcept = default;
PartitionPlan& PartitionPlan::operator=(PartitionPlan&&) noexcept = default;
PartitionPlan::~PartitionPlan() = default;
const std::vector<NodeId>& PartitionPlan::saved() const { return state_->saved_joint; }
const char* PartitionPlan::partitioner() const { return state_->partitioner; }
const Graph& PartitionPlan::prepared() const { return state_->prepared.graph; }
const PartitionOptions& PartitionPlan::options() const { return state_->options; }

namespace {

using PlanState = PartitionPlan::State;

// The options a plan keeps: deciding is over, so the caller's hooks (which
// may refer to objects that do not outlive the call) are dropped.
PartitionOptions plan_options(const PartitionOptions& options) {
  PartitionOptions o = options;
  o.custom_knapsack = nullptr;
  o.custom_runtime_estimator = nullptr;
  o.rank_group = nullptr;
  return o;
}

std::unique_ptr<PlanState> new_state(const JointGraph& joint, const PartitionOptions& options) {
  auto s = std::make_unique<PlanState>();
  s->num_fwd_outputs = joint.num_fwd_outputs;
  s->joint_size = joint.graph.size();
  s->nested = joint.nested;
  s->mutated_inputs = joint.mutated_inputs;
  s->options = plan_options(options);
  s->clock.report_to(options.progress);
  return s;
}

// default_partition on a graph whose nodes already point at `joint`.
// `from_min_cut`: the min-cut handed this graph over; it must not come back.
std::unique_ptr<PlanState> default_on(const JointGraph& joint, Prepared p,
                                      const PartitionOptions& options,
                                      std::unique_ptr<PlanState> s, bool from_min_cut);

// How the min-cut partitioner builds its plans: the backward reordered as
// the autograd engine runs it, collectives kept, HOP RNG states threaded
// through both graphs.
void as_min_cut(PlanState& s) {
  s.partitioner = "min_cut";
  s.reorder = true;
  s.dce_collectives = false;
  s.thread_bw = true;
}

// The peak-budget search: decides and builds `s` (defined with the builder).
void peak_budget_on(PlanState& s, const DecideContext& ctx);

std::unique_ptr<PlanState> min_cut_on(const JointGraph& joint, const PartitionOptions& options,
                                      std::unique_ptr<PlanState> s) {
  // prepare: its graph's nodes point at the joint graph's ids.
  Prepared p = prepare_for_min_cut(joint.graph, joint.num_fwd_outputs, options);
  const Graph& g = p.graph;
  s->clock.lap("prepare");

  // analyze: what the min-cut reads about each node.
  MinCutInputs in = min_cut_inputs(g, joint, options);
  s->clock.lap("classify");
  // With nothing required by the backward there is nothing to cut; torch
  // hands such graphs to the default partitioner.
  if (!in.has_cut()) {
    return default_on(joint, std::move(p), options, std::move(s), /*from_min_cut=*/true);
  }
  as_min_cut(*s);
  if (options.peak_memory_budget > 0) {
    // torch's story (the trace) is that of one plain decision: the search
    // over many candidates records none.
    s->info = std::move(in.info);
    s->prepared = std::move(p);
    // The search cuts dozens of times over this one context: what each cut
    // reads from the nodes alone is computed once (decide/cut_memo.h).
    CutMemo memo(s->prepared.graph.size());
    const DecideContext untraced{s->prepared.graph, s->info, in.dist_from_bw,
                                 in.op_categories, options, nullptr, false, &memo};
    peak_budget_on(*s, untraced);
    return s;
  }

  // decide: under the budget the graph carries, or the global option.
  const double budget = resolve_memory_budget(g, joint.nested, in.info, options);
  PartitionTrace& trace = s->trace;
  const bool tracing = options.trace || options.visualize_memory_budget_pareto;
  DecideContext ctx = in.context(g, options, tracing ? &trace : nullptr);
  ctx.story = true;  // the reasons the result reports, traced or not (why.h)
  s->chosen = choose_saved_values_set(ctx, budget, &s->cut);
  s->clock.lap("decide");
  s->story = cut_story(g, s->cut, joint.graph.size());
  s->saved_joint = joint_ids(g, s->chosen);
  s->info = std::move(in.info);
  s->prepared = std::move(p);
  return s;
}

std::unique_ptr<PlanState> default_on(const JointGraph& joint, Prepared p,
                                      const PartitionOptions& options,
                                      std::unique_ptr<PlanState> s, bool from_min_cut) {
  const bool recomputable = has_recomputable_ops(p.graph);
  if (recomputable && !is_functional_graph(p.graph, options.torch)) {
    // torch warns and falls back to the min-cut partitioner here. Coming from
    // the min-cut, torch would bounce between the two until Python's
    // recursion limit; say so instead.
    if (from_min_cut) {
      throw Error(ErrorCode::kUnsupported,
                  "graph has recompute tags, mutates non-inputs and needs nothing in "
                  "backward: torch's partitioners recurse forever on it");
    }
    return min_cut_on(joint, options, std::move(s));
  }
  prepare_for_default(p, options);
  s->clock.lap("prepare");

  NodeInfo info = classify_nodes(p.graph, joint.static_lifetime_input_indices,
                                 joint.num_fwd_outputs, options);
  s->clock.lap("classify");
  s->sets = default_saved_values(p.graph, info, options, recomputable);
  s->clock.lap("decide");
  s->saved_joint = joint_ids(p.graph, s->sets.saved_values);
  s->partitioner = "default";
  s->reorder = p.had_recomputable_ops;
  s->dce_collectives = true;
  // torch's default_partition threads the backward only when the backward
  // needs something from the forward.
  s->thread_bw = info.num_required_bw > 0;
  s->info = std::move(info);
  s->prepared = std::move(p);
  return s;
}

// Extraction, rewrites and the memory simulation of one decision, shared by
// both partitioners and by the peak-budget search's candidates. Reads the
// plan's state, never changes it: a search builds many candidates from one.
PartitionResult build_plan(const PlanState& s, SavedSets saved, const CutStory& story,
                           StageClock& clock,
                           PartitionTrace trace) {
  const Prepared& p = s.prepared;
  const Graph& g = p.graph;
  const PartitionOptions& options = s.options;
  Extracted e = extract_fwd_bwd(g, std::move(saved), s.num_fwd_outputs, options);
  // torch quantizes inside its extraction, before any other rewrite.
  std::vector<NodeId> quantized;
  std::vector<GraphSnapshot> snapshots;
  if (options.activation_quantization.enabled) {
    clock.lap("extract");
    quantized = quantize_activations(g, e, s.info.static_lifetime, s.num_fwd_outputs,
                                     options.activation_quantization,
                                     options.keep_snapshots ? &snapshots : nullptr,
                                     options.trace ? &trace.log : nullptr, options.torch);
    clock.lap("quantize");
  }
  if (s.dce_collectives) {
    e.forward = eliminate_dead_collectives(std::move(e.forward));
    e.backward = eliminate_dead_collectives(std::move(e.backward));
  }
  clock.lap("extract");
  int rng_states = 0;
  if (p.had_recomputable_ops && p.had_recomputable_rng_ops) {
    rng_states = functionalize_rng_ops(g, e, options.graphsafe_rng_functionalization,
                                       options.graphsafe_rng_device_types, options.torch);
    clock.lap("rng");
  }
  // Without offloading between them, the backward's reorder and its
  // getitem raise are one rebuild (the same graph: rewrite.h).
  const bool raise_with_reorder = s.reorder && !options.enable_activation_offloading;
  if (raise_with_reorder) {
    e.backward = reorder_and_raise_getitems(std::move(e.backward));
    clock.lap("reorder");
  } else if (s.reorder) {
    e.backward = reorder_to_mimic_autograd_engine(std::move(e.backward));
    clock.lap("reorder");
  }
  if (options.enable_activation_offloading) {
    offload_activations(e, s.num_fwd_outputs, s.reorder, options);
    clock.lap("offload");
  }

  PartitionResult r;
  r.forward = raise_getitems(std::move(e.forward));
  r.backward = raise_with_reorder ? std::move(e.backward) : raise_getitems(std::move(e.backward));
  r.forward = thread_graphsafe_rng_from_hops(std::move(r.forward), s.nested,
                                             /*is_backward=*/false, e.forward_names);
  if (s.thread_bw) {
    r.backward = thread_graphsafe_rng_from_hops(std::move(r.backward), s.nested,
                                                /*is_backward=*/true, e.backward_names);
  }
  clock.lap("getitems");
  // remat's own order of the backward, last of the rewrites: it orders the
  // graph that runs (options.h: not under offloading).
  if (options.backward_order == PartitionOptions::BackwardOrder::kMemory &&
      !options.enable_activation_offloading) {
    OrderedBackward o =
        memory_ordered_backward(r.forward, std::move(r.backward), s.num_fwd_outputs, options.torch,
                                options.memory_model, options.inductor_reorder);
    r.backward = std::move(o.backward);
    r.backward_reordered = o.reordered;
    clock.lap("backward_order");
  }
  r.saved_values = joint_ids(g, e.saved_values);
  r.saved_opaque_nodes = joint_ids(g, e.saved_script_objects);
  for (NodeId id : joint_ids(g, e.saved_opaque_nodes)) r.saved_opaque_nodes.push_back(id);
  r.saved_sym_nodes = joint_ids(g, e.saved_sym_nodes);
  r.num_fwd_outputs = s.num_fwd_outputs;
  r.num_rng_states = rng_states;
  r.quantized_values = std::move(quantized);
  r.snapshots = std::move(snapshots);
  r.forced_must_save = p.forced_must_save;
  r.partitioner = s.partitioner;
  record_decisions(s.joint_size, p, story, r);
  fill_why(g, s.partitioner, story, r.decisions);
  if (options.trace && s.partitioner == std::string_view("min_cut")) {
    // The sizes of what is saved after any replacement (a synced decision).
    for (NodeId id : e.saved_values) trace.saved_bytes.push_back(size_of(g, id, options));
  }
  r.trace = std::move(trace);
  clock.lap("report");
  measure_plan(g, s.mutated_inputs, options, r);
  clock.lap("memory");
  r.seconds = clock.total();
  r.stages = clock.take();
  return r;
}

// The plan's own (or replaced) decision, built.
PartitionResult emit(PlanState& s) {
  SavedSets saved = s.partitioner == std::string_view("min_cut")
                        ? split_saved_values(s.prepared.graph, s.chosen, s.options.torch)
                        : std::move(s.sets);
  return build_plan(s, std::move(saved), s.story, s.clock, std::move(s.trace));
}

// One run of remat's optimizer under the peak limit (optimize/optimize.h):
// each plan it tries is built by build_plan exactly as a plain plan, in the
// backward order s.options names, on a silent clock. `joint_order`: the
// model's backward rows follow the joint graph's order (under remat's
// memory order they cannot: it keeps the forward's and the boundary's).
optimize::Outcome search_plans(PlanState& s, const DecideContext& ctx, bool joint_order) {
  const Graph& g = s.prepared.graph;
  const PartitionOptions& options = s.options;
  const bool model_rows =
      !options.enable_activation_offloading && !options.activation_quantization.enabled;
  optimize::PlanSpace space(ctx, s.num_fwd_outputs, joint_order, model_rows);
  CutStory no_cut;
  no_cut.ban_reason.resize(s.joint_size);
  return optimize::minimize_recompute(
      ctx, space, options.peak_memory_budget, options.peak_search,
      optimize::Effort{options.peak_search_nodes, options.peak_search_seconds},
      [&](const std::vector<NodeId>& saved) {
        StageClock scratch;
        return build_plan(s, split_saved_values(g, saved, options.torch), no_cut, scratch,
                          PartitionTrace{});
      });
}

// Sets s.options.backward_order for a scope, and puts it back.
class OrderScope {
 public:
  OrderScope(PlanState& s, PartitionOptions::BackwardOrder order) : s_(s), was_(s.options.backward_order) {
    s_.options.backward_order = order;
  }
  ~OrderScope() { s_.options.backward_order = was_; }
  OrderScope(const OrderScope&) = delete;
  OrderScope& operator=(const OrderScope&) = delete;

 private:
  PlanState& s_;
  PartitionOptions::BackwardOrder was_;
};

// Under remat's memory order the search's model sees no backward rows, so
// alone it can do far worse than autograd's order (a U-Net at 8084 B
// recomputed 6148 instead of 3). So the search also runs in autograd's
// order, with its whole model, and that plan is built again in memory
// order, which keeps a reordered backward only where it lowers the peak:
// its peak can only drop, so it still fits. The better plan is kept (less
// recompute, then the smaller peak): never worse than autograd's order.
// Proofs: only the memory-order search's bound holds for memory-ordered
// plans; it is kept for whichever plan wins.
optimize::Outcome search_in_memory_order(PlanState& s, const DecideContext& ctx) {
  const int64_t limit = s.options.peak_memory_budget;
  std::optional<optimize::Outcome> own, autograd;
  std::optional<BudgetUnreachableError> own_error, autograd_error;
  try {
    own = search_plans(s, ctx, /*joint_order=*/false);
  } catch (const BudgetUnreachableError& e) {
    own_error = e;
  }
  try {
    OrderScope in_autograd(s, PartitionOptions::BackwardOrder::kAutograd);
    autograd = search_plans(s, ctx, /*joint_order=*/true);
  } catch (const BudgetUnreachableError& e) {
    autograd_error = e;
  }
  if (autograd) {
    StageClock scratch;
    CutStory no_cut;
    no_cut.ban_reason.resize(s.joint_size);
    PartitionResult r = build_plan(s, split_saved_values(s.prepared.graph, autograd->saved, s.options.torch),
                                   no_cut, scratch, PartitionTrace{});
    if (r.hazards.empty() && r.memory.peak_bytes <= limit) {
      r.peak_search = autograd->result.peak_search;
      ++r.peak_search.plans_built;
      autograd->result = std::move(r);
    } else {
      autograd.reset();
    }
  }
  if (!own && !autograd) {
    int64_t smallest = -1;
    for (const auto* e : {&own_error, &autograd_error})
      if (*e && e->value().smallest_peak() >= 0)
        smallest = smallest < 0 ? e->value().smallest_peak() : std::min(smallest, e->value().smallest_peak());
    // autograd's bound is of its own order's peaks: memory order may go lower.
    optimize::throw_unreachable(limit, smallest, own_error ? own_error->proven_bound() : -1);
  }
  auto better = [](const PartitionResult& a, const PartitionResult& b) {
    if (a.recompute_runtime != b.recompute_runtime) return a.recompute_runtime < b.recompute_runtime;
    return a.memory.peak_bytes < b.memory.peak_bytes;
  };
  const bool take_autograd = autograd && (!own || better(autograd->result, own->result));
  optimize::Outcome out = std::move(take_autograd ? *autograd : *own);
  PeakSearchSummary& p = out.result.peak_search;
  if (take_autograd) {
    const double bound = own ? own->result.peak_search.recompute_lower_bound : -1;
    p.recompute_lower_bound = bound;
    p.optimal = bound >= 0 && out.result.recompute_runtime <= bound + 1e-9 * std::max(1.0, bound);
  }
  const optimize::Outcome* other = take_autograd ? (own ? &*own : nullptr) : (autograd ? &*autograd : nullptr);
  if (other) {
    const PeakSearchSummary& q = other->result.peak_search;
    p.plans_built += q.plans_built;
    p.cuts += q.cuts;
    p.solver_rounds += q.solver_rounds;
    p.solver_nodes += q.solver_nodes;
    p.seconds += q.seconds;
    if (p.stopped_by.empty()) p.stopped_by = q.stopped_by;
  }
  return out;
}

// remat's optimizer under the peak limit, reported as one stage,
// "peak_search"; the plan keeps the result and, as its decision, the saved
// values of the plan chosen.
void optimized_on(PlanState& s, const DecideContext& ctx) {
  const Graph& g = s.prepared.graph;
  const bool memory_order = s.options.backward_order == PartitionOptions::BackwardOrder::kMemory &&
                            !s.options.enable_activation_offloading;
  optimize::Outcome out = memory_order ? search_in_memory_order(s, ctx) : search_plans(s, ctx, true);
  s.clock.lap("peak_search");
  PartitionResult& r = out.result;
  r.seconds = s.clock.total();
  r.stages = s.clock.take();
  s.saved_joint = r.saved_values;
  for (const auto* list : {&r.saved_sym_nodes, &r.saved_opaque_nodes})
    s.saved_joint.insert(s.saved_joint.end(), list->begin(), list->end());
  const std::vector<NodeId> node_of = nodes_by_joint_id(g, s.joint_size);
  s.chosen.clear();
  for (NodeId j : s.saved_joint) s.chosen.push_back(node_of[j]);
  s.built = std::move(r);
}

// The min-cut under remat's peak memory limit (memory/peak_budget.h): each
// candidate goes through build_plan exactly as a plain plan does, on a
// silent clock; the stages after classify are reported as one,
// "peak_search". The plan keeps the result and, as its decision, the saved
// values of the plan it chose.
void peak_budget_on(PlanState& s, const DecideContext& ctx) {
  if (s.options.peak_search != PartitionOptions::PeakSearch::kTorchPlans) {
    optimized_on(s, ctx);
    return;
  }
  PeakBudgetPlan plan = plan_peak_budget(
      ctx, s.options.peak_memory_budget, s.joint_size,
      [&](SavedSets saved, const CutStory& story) {
        StageClock scratch;
        return build_plan(s, std::move(saved), story, scratch, PartitionTrace{});
      });
  s.clock.lap("peak_search");
  plan.result.seconds = s.clock.total();
  plan.result.stages = s.clock.take();
  s.saved_joint = std::move(plan.saved_joint);
  s.chosen = std::move(plan.chosen);
  s.built = std::move(plan.result);
}

// Checks a caller's replacement of the decision and turns it into prepared
// ids (see emit_partition in remat/partition.h).
std::vector<NodeId> replacement(const PlanState& s, const std::vector<NodeId>& saved) {
  const Graph& g = s.prepared.graph;
  const std::vector<NodeId> prepared_of = nodes_by_joint_id(g, s.joint_size);
  const std::vector<uint8_t> bw_only = backward_only(g, s.info);
  const bool is_default = s.partitioner == std::string_view("default");
  std::vector<uint8_t> seen(g.size(), 0);
  std::vector<NodeId> out;
  out.reserve(saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    const NodeId j = saved[i];
    if (j >= s.joint_size) {
      throw Error(ErrorCode::kInvalidOption,
                  fmt::format("saved value #{}: {} is not a node id of the joint graph "
                              "(it has {} nodes)", i, j, s.joint_size));
    }
    const NodeId id = prepared_of[j];
    if (id == kNoNode) {
      throw Error(ErrorCode::kInvalidOption,
                  fmt::format("saved value #{}: joint node #{} was removed by DCE or CSE "
                              "before the decision; it cannot be saved", i, j));
    }
    const std::string_view name = g.name(id);
    auto refuse = [&](std::string_view why) {
      throw Error(ErrorCode::kInvalidOption,
                  fmt::format("saved value #{}: node '{}' {}", i, name, why));
    };
    if (g.node(id).kind == NodeKind::kOutput) refuse("is the output node");
    if (bw_only[id]) refuse("depends on the backward's inputs: the forward cannot compute it");
    if (seen[id]) refuse("is listed twice");
    if (is_default && (is_sym_node(g, id) || is_opaque_node(g, id, s.options.torch)))
      refuse("is a sym node or an opaque value: default_partition's decision lists tensors");
    seen[id] = 1;
    out.push_back(id);
  }
  return out;
}

// A forward output that depends on a tangent is a gradient counted among
// the forward outputs (num_fwd_outputs too large): the forward cannot
// compute it. torch fails later, in extraction ("node ... was invalid, but
// is output"), which names neither the field nor the fix.
void check_forward_outputs(const JointGraph& joint) {
  const Graph& g = joint.graph;
  std::vector<uint8_t> needs_tangent(g.size(), 0);
  for (NodeId id = 0; id < g.size(); ++id) {
    needs_tangent[id] = is_tangent(g, id) ? 1 : 0;
    for (NodeId in : g.inputs(id)) needs_tangent[id] |= needs_tangent[in];
  }
  // Extraction may stand an input in for an output that aliases it (a
  // copy_, a view of a higher-order op's result): those are left to it.
  auto may_alias_an_input = [&](NodeId x) {
    return target_is(g, x, "aten.copy_.default") || target_is(g, x, "aten.view.default") ||
           target_is(g, x, "aten.reshape.default") || target_is(g, x, "operator.getitem");
  };
  const std::vector<NodeId> fwd = split_outputs(g, joint.num_fwd_outputs).fwd;
  for (size_t k = 0; k < fwd.size(); ++k) {
    if (fwd[k] == kNoNode || !needs_tangent[fwd[k]] || may_alias_an_input(fwd[k])) continue;
    throw Error(ErrorCode::kInvalidGraph,
                fmt::format("field 'num_fwd_outputs' is {}, but output #{} ('{}') depends on a "
                            "tangent: it is a gradient, so at most {} outputs are forward outputs",
                            joint.num_fwd_outputs, k, g.name(fwd[k]), k));
  }
}

// Graphs derived from the joint graph record their origin; the joint graph
// itself must not carry any, or ids could not be mapped back.
void check_joint(const JointGraph& joint) {
  for (NodeId id = 0; id < joint.graph.size(); ++id) {
    if (joint.graph.node(id).origin != kNoNode) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("node '{}': a joint graph cannot have an 'origin'",
                              joint.graph.name(id)));
    }
  }
  if (joint.num_fwd_outputs < 0) {
    throw Error(ErrorCode::kInvalidGraph,
                fmt::format("field 'num_fwd_outputs' is negative ({})", joint.num_fwd_outputs));
  }
  // More forward outputs than the graph returns would make the backward's
  // gradients forward outputs; torch then fails deep in extraction ("node
  // ... was invalid, but is output") without naming the field.
  if (joint.graph.output() == kNoNode) {
    throw Error(ErrorCode::kInvalidGraph, "the joint graph has no output node");
  }
  // Every leaf of the output, node or not, is one returned value.
  const size_t returned = split_outputs(joint.graph, std::numeric_limits<int>::max()).fwd.size();
  if (static_cast<size_t>(joint.num_fwd_outputs) > returned) {
    throw Error(ErrorCode::kInvalidGraph,
                fmt::format("field 'num_fwd_outputs' is {}, but the output node '{}' returns "
                            "only {} values",
                            joint.num_fwd_outputs, joint.graph.name(joint.graph.output()),
                            returned));
  }
  check_forward_outputs(joint);
}

// The options with the joint graph's own op-category overrides applied
// where the options do not override that op themselves: the graph's
// categories are part of the defaults, and whatever the caller set on top
// (an --options file, PartitionOptions::ops) wins over them.
PartitionOptions with_overrides(const JointGraph& joint, const PartitionOptions& options) {
  PartitionOptions out = options;
  for (const auto& [key, categories] : joint.op_overrides)
    if (!options.ops.has_override(key)) out.ops.set(key, categories);
  return out;
}

// A peak-limited plan after the ranks agreed: this rank's own build when
// the agreed list is its own; else the picked rank's list rebuilt here,
// with this rank's search summary, no longer optimal (the proven bound
// still holds: it bounds every plan within the limit).
PartitionResult emit_agreed_peak_plan(PartitionPlan plan, std::vector<NodeId> saved) {
  if (saved == plan.saved()) return emit_partition(std::move(plan));
  PeakSearchSummary summary = PlanAccess::state(plan).built->peak_search;
  summary.optimal = false;
  PartitionResult r = emit_partition(std::move(plan), std::move(saved));
  r.peak_search = std::move(summary);
  return r;
}

// The one-call functions: plan, agree when asked to, emit.
PartitionResult plan_sync_emit(PartitionPlan plan, const PartitionOptions& options) {
  // A peak-limited plan is agreed on as torch's decision is: each rank's
  // search is deterministic, but ranks whose graphs name the same nodes
  // with other shapes (shards) search different plans, and the collectives
  // need one.
  if (options.sync_decision_cross_ranks && options.rank_group) {
    SyncOutcome o = sync_decision_cross_ranks(plan, *options.rank_group);
    PlanAccess::state(plan).clock.lap("sync");
    // torch logs the agreement's lines after deciding's, before extracting's.
    if (options.trace) {
      std::vector<LogRecord>& log = PlanAccess::state(plan).trace.log;
      log.insert(log.end(), o.log.begin(), o.log.end());
    }
    if (o.status == SyncOutcome::Status::kAgreed) {
      if (options.peak_memory_budget > 0 && PlanAccess::state(plan).built)
        return emit_agreed_peak_plan(std::move(plan), std::move(o.saved));
      return emit_partition(std::move(plan), std::move(o.saved));
    }
  }
  return emit_partition(std::move(plan));
}

}  // namespace

PartitionPlan plan_min_cut_rematerialization_partition(const JointGraph& joint,
                                                       const PartitionOptions& options) {
  options.validate();
  check_joint(joint);
  const PartitionOptions o = with_overrides(joint, options);
  return PlanAccess::make(min_cut_on(joint, o, new_state(joint, o)));
}

PartitionPlan plan_default_partition(const JointGraph& joint, const PartitionOptions& options) {
  options.validate();
  check_joint(joint);
  // torch's default_partition does no DCE or CSE.
  const PartitionOptions o = with_overrides(joint, options);
  Prepared p;
  p.graph = rooted(joint);
  return PlanAccess::make(default_on(joint, std::move(p), o, new_state(joint, o),
                                     /*from_min_cut=*/false));
}

PartitionResult emit_partition(PartitionPlan plan) {
  PlanState& s = PlanAccess::state(plan);
  if (s.built) return std::move(*s.built);
  s.clock.resume();
  return emit(s);
}

PartitionResult emit_partition(PartitionPlan plan, std::vector<NodeId> saved) {
  PlanState& s = PlanAccess::state(plan);
  s.clock.resume();
  std::vector<NodeId> ids = replacement(s, saved);
  if (s.partitioner == std::string_view("min_cut")) {
    s.chosen = std::move(ids);
  } else {
    s.sets.saved_values = std::move(ids);
  }
  s.saved_joint = std::move(saved);
  s.clock.lap("replace");
  return emit(s);
}

PartitionResult min_cut_rematerialization_partition(const JointGraph& joint,
                                                    const PartitionOptions& options) {
  return plan_sync_emit(plan_min_cut_rematerialization_partition(joint, options), options);
}

PartitionResult default_partition(const JointGraph& joint, const PartitionOptions& options) {
  return plan_sync_emit(plan_default_partition(joint, options), options);
}

std::vector<MemoryBudgetPoint> memory_budget_pareto(const JointGraph& joint,
                                                    const PartitionOptions& options,
                                                    double resolution,
                                                    const std::vector<double>& budgets) {
  options.validate();
  check_joint(joint);
  const PartitionOptions o = with_overrides(joint, options);
  const Prepared p = prepare_for_min_cut(joint.graph, joint.num_fwd_outputs, o);
  const MinCutInputs in = min_cut_inputs(p.graph, joint, o);
  if (!in.has_cut()) {
    throw Error(ErrorCode::kUnsupported,
                "memory budget Pareto frontier: the backward needs nothing from the forward "
                "(torch hands this graph to the default partitioner, which has no budget)");
  }
  return memory_budget_pareto(in.context(p.graph, o), resolution, budgets);
}

namespace {

// torch's plans as budget_plans() describes them, the first `most` of them.
// `what` names the caller in the error of a graph with no cut.
std::vector<BudgetPlanPoint> first_budget_plans(const JointGraph& joint,
                                                const PartitionOptions& options,
                                                const std::vector<double>& budgets, size_t most,
                                                const char* what) {
  options.validate();
  check_joint(joint);
  const PartitionOptions o = with_overrides(joint, options);
  std::unique_ptr<PlanState> s = new_state(joint, o);
  Prepared p = prepare_for_min_cut(joint.graph, joint.num_fwd_outputs, o);
  MinCutInputs in = min_cut_inputs(p.graph, joint, o);
  if (!in.has_cut()) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("{}: the backward needs nothing from the forward (torch hands "
                            "this graph to the default partitioner, which has no budget)",
                            what));
  }
  as_min_cut(*s);
  s->info = std::move(in.info);
  s->prepared = std::move(p);
  const Graph& g = s->prepared.graph;
  CutMemo memo(g.size());  // one cut per budget, over one context
  const DecideContext ctx{g, s->info, in.dist_from_bw, in.op_categories, o, nullptr, false, &memo};
  BudgetPlanList list(ctx, budgets);
  std::vector<BudgetPlanPoint> out;
  const double expected = 5.0 + static_cast<double>(budgets.size());  // tiers, budgets, budget 0
  while (out.size() < most) {
    std::optional<BudgetPlan> plan = list.next();
    if (!plan) break;
    CutStory story;
    if (plan->from_cut) story = cut_story(g, plan->cut, s->joint_size);
    else story.ban_reason.resize(s->joint_size);
    StageClock scratch;
    const PartitionResult r =
        build_plan(*s, split_saved_values(g, plan->saved, o.torch), story, scratch, PartitionTrace{});
    out.push_back({plan->label, r.memory.peak_bytes, r.recompute_runtime, r.saved_values.size()});
    if (o.progress) o.progress("plans", std::min(1.0, static_cast<double>(out.size()) / expected));
  }
  return out;
}

// What tells two plans apart: the values they save (joint ids, any order).
std::vector<NodeId> saved_key(const PartitionResult& r) {
  std::vector<NodeId> key = r.saved_values;
  for (const auto* list : {&r.saved_sym_nodes, &r.saved_opaque_nodes})
    key.insert(key.end(), list->begin(), list->end());
  std::sort(key.begin(), key.end());
  return key;
}

}  // namespace

std::vector<BudgetPlanPoint> budget_plans(const JointGraph& joint, const PartitionOptions& options,
                                          const std::vector<double>& budgets) {
  return first_budget_plans(joint, options, budgets, std::numeric_limits<size_t>::max(),
                            "memory budget plans");
}

std::vector<BudgetPlanPoint> peak_frontier(const JointGraph& joint, const PartitionOptions& options,
                                           int points) {
  options.validate();
  const PartitionOptions::PeakSearch search = options.peak_search;
  if (search == PartitionOptions::PeakSearch::kTorchPlans) {
    throw Error(ErrorCode::kInvalidOption,
                "peak frontier: peak_search is torch_plans, which searches torch's own plans "
                "(budget_plans lists them); the frontier is remat's optimizer's: set it to "
                "fast or exact");
  }
  if (points < 2) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("peak frontier: {} points; at least 2 (its two ends)", points));
  }
  // Each point is a whole partition: the caller hears one task, "frontier",
  // not each partition's stages.
  PartitionOptions quiet = options;
  quiet.progress = nullptr;
  quiet.peak_memory_budget = 0;
  const double steps = static_cast<double>(points) + 2;
  double done = 0;
  auto tick = [&] {
    if (options.progress) options.progress("frontier", std::min(1.0, ++done / steps));
  };
  // The top: torch's runtime-optimized plan; asking for it also refuses a
  // graph with nothing to cut.
  const int64_t top =
      first_budget_plans(joint, quiet, {}, 1, "peak frontier").front().peak_bytes;
  tick();
  // The bottom: the smallest peak the optimizer reaches, which it reports
  // when asked for what no step fits.
  int64_t bottom = 1;
  quiet.peak_memory_budget = 1;
  try {
    min_cut_rematerialization_partition(joint, quiet);
  } catch (const BudgetUnreachableError& e) {
    if (e.smallest_peak() < 0) throw;  // no valid plan at all
    bottom = e.smallest_peak();
  }
  tick();
  // A runtime-optimized plan with a mutation hazard may peak below every
  // valid plan: then the frontier is its bottom alone.
  const int64_t high = std::max(top, bottom);

  struct Found {
    BudgetPlanPoint point;
    std::vector<NodeId> key;
  };
  std::vector<Found> found;
  int64_t previous = -1;
  // From the top down, so a plan met again is kept at the smaller limit.
  for (int i = points - 1; i >= 0; --i) {
    const int64_t limit =
        bottom + static_cast<int64_t>(static_cast<__int128>(high - bottom) * i / (points - 1));
    if (limit == previous) {  // fewer bytes between the ends than points
      tick();
      continue;
    }
    previous = limit;
    quiet.peak_memory_budget = limit;
    PartitionResult r;
    try {
      r = min_cut_rematerialization_partition(joint, quiet);
    } catch (const BudgetUnreachableError&) {
      tick();  // fast's heuristic, or exact's time, fell short here
      continue;
    }
    BudgetPlanPoint point{fmt::format("{} <= {}", peak_search_name(search), memory::size_text(limit)),
                          r.memory.peak_bytes, r.recompute_runtime, r.saved_values.size(), limit};
    std::vector<NodeId> key = saved_key(r);
    auto same = std::find_if(found.begin(), found.end(), [&](const Found& f) {
      return f.key == key || (f.point.peak_bytes == point.peak_bytes &&
                              f.point.recompute_runtime == point.recompute_runtime);
    });
    if (same != found.end()) {
      // The plan at the smaller limit stands for both, so every point is
      // what its own limit gives.
      *same = Found{std::move(point), std::move(key)};
    } else {
      found.push_back({std::move(point), std::move(key)});
    }
    tick();
  }
  std::vector<BudgetPlanPoint> out;
  for (Found& f : found) out.push_back(std::move(f.point));
  std::sort(out.begin(), out.end(), [](const BudgetPlanPoint& a, const BudgetPlanPoint& b) {
    return std::tie(a.peak_bytes, a.recompute_runtime, a.limit_bytes) <
           std::tie(b.peak_bytes, b.recompute_runtime, b.limit_bytes);
  });
  return out;
}

const char* where_name(NodeDecision::Where w) {
  switch (w) {
    case NodeDecision::Where::kRemoved: return "removed";
    case NodeDecision::Where::kForwardOnly: return "forward_only";
    case NodeDecision::Where::kSaved: return "saved";
    case NodeDecision::Where::kRecomputed: return "recomputed";
    case NodeDecision::Where::kBackwardOnly: return "backward_only";
    case NodeDecision::Where::kUnused: return "unused";
  }
  return "?";
}

const char* why_name(NodeDecision::Why w) {
  using Why = NodeDecision::Why;
  switch (w) {
    case Why::kUnknown: return "";
    case Why::kDead: return "dead";
    case Why::kMerged: return "merged";
    case Why::kInput: return "input";
    case Why::kTangent: return "tangent";
    case Why::kBackwardOnly: return "backward_only";
    case Why::kNotNeeded: return "not_needed";
    case Why::kSavedBanned: return "saved_banned";
    case Why::kSavedCheaper: return "saved_cheaper";
    case Why::kSavedKnapsack: return "saved_knapsack";
    case Why::kSavedDefault: return "saved_default";
    case Why::kTied: return "tied";
    case Why::kRecomputedLifted: return "recomputed_lifted";
    case Why::kRecomputedTier: return "recomputed_tier";
    case Why::kRecomputedCheaper: return "recomputed_cheaper";
    case Why::kRecomputedDefault: return "recomputed_default";
    case Why::kBudgetInputs: return "budget_inputs";
    case Why::kUnused: return "unused";
  }
  return "?";
}

}  // namespace remat
