// pipeline/partition.cc — the two partitioners, as a walk through the stages.
//
// Contract (remat/partition.h): the same saved values and forward/backward
// graphs as torch 2.13's min_cut_rematerialization_partition and
// default_partition. This file only sequences the stages the way torch does;
// each stage's rules live in its own folder:
//   prepare (DCE, CSE, tag passes) -> analyze (classify, distances)
//   -> decide (min-cut or default) -> extract -> rewrite (RNG, reorder, getitems)
// and then maps every id back to the caller's joint graph.
#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "analyze/analyze.h"
#include "decide/decide.h"
#include "extract/extract.h"
#include "prepare/prepare.h"
#include "remat/error.h"
#include "remat/partition.h"
#include "rewrite/rewrite.h"

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;

// Records how long each stage took since the previous lap; the pipeline's
// answer to "where does the time go" without a profiler. A stage that runs
// twice (the min-cut handing over to the default partitioner) adds up.
class StageClock {
 public:
  StageClock(Clock::time_point start, const PartitionOptions& options)
      : start_(start), last_(start), progress_(options.progress) {}
  void lap(const char* stage) {
    report(stage);
    const Clock::time_point now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    for (StageTime& t : laps_) {
      if (t.stage == stage) {
        t.seconds += seconds;
        return;
      }
    }
    laps_.push_back({stage, seconds});
  }
  double total() const { return std::chrono::duration<double>(last_ - start_).count(); }
  std::vector<StageTime> take() { return std::move(laps_); }

 private:
  // Tells the caller's progress hook how far the pipeline is: each stage's
  // share is a rough constant (decide and extract dominate on big graphs),
  // and the fraction never goes back when a stage runs twice.
  void report(std::string_view stage) {
    if (!progress_) return;
    static constexpr std::pair<std::string_view, double> kDone[] = {
        {"prepare", 0.2}, {"classify", 0.3}, {"decide", 0.6}, {"extract", 0.8},
        {"rng", 0.85},    {"reorder", 0.9},  {"getitems", 0.95}, {"report", 1.0}};
    for (const auto& [name, fraction] : kDone) {
      if (name == stage && fraction > fraction_) {
        fraction_ = fraction;
        progress_("partition", fraction);
      }
    }
  }

  Clock::time_point start_, last_;
  std::vector<StageTime> laps_;
  const std::function<void(std::string_view, double)>& progress_;
  double fraction_ = 0;
};

// aot_autograd's _is_functional_graph: the only mutations allowed are copy_
// and set_ into graph inputs.
bool is_functional_graph(const Graph& g) {
  std::vector<uint8_t> is_placeholder(g.size(), 0);
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (n.kind == NodeKind::kPlaceholder) is_placeholder[id] = 1;
    const OpInfo* op = g.op(id);
    if (op == nullptr || op->kind != OpKind::kOverload) continue;
    std::string_view name = g.str(op->name);
    if (name == "aten.copy_.default" || name == "aten.set_.source_Tensor" ||
        name == "fsdp.copy_.default") {
      // The first argument must be an input (a name containing
      // "set_buffer_donor_" is exempt, as in torch).
      std::vector<ArgId> args = n.args == kNoArg ? std::vector<ArgId>{} : g.children(n.args);
      if (args.empty()) continue;
      const Arg& dst = g.arg(args[0]);
      if (dst.kind != ArgKind::kNode) return false;
      if (g.name(dst.id).find("set_buffer_donor_") != std::string_view::npos) continue;
      if (!is_placeholder[dst.id]) return false;
    } else if (op->is_mutable) {
      return false;
    }
  }
  return true;
}

// A copy of the joint graph whose nodes are their own origin, so every graph
// derived from it maps back to the caller's ids whatever the passes copy. Its
// pools are layered over the joint graph's, which stay as they are.
Graph rooted(const JointGraph& joint) {
  Graph g = joint.graph;
  for (NodeId id = 0; id < g.size(); ++id) g.set_origin(id, id);
  g.layer_pools();
  return g;
}

std::vector<NodeId> to_joint(const Graph& g, const std::vector<NodeId>& ids) {
  std::vector<NodeId> out;
  out.reserve(ids.size());
  for (NodeId id : ids) out.push_back(g.node(id).origin);
  return out;
}

// Fills the report part of the result: where each joint node ended up.
// `ban_reason` is per joint node (empty when no cut ran).
void record_decisions(const JointGraph& joint, const Prepared& p,
                      const std::vector<std::string_view>& ban_reason, PartitionResult& r) {
  const size_t n = joint.graph.size();
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
  }
}

// Rewrites origins of nodes a rewrite created to kNoNode, as the public
// result promises.
void finalize_origins(Graph& g) {
  for (NodeId id = 0; id < g.size(); ++id) {
    if (g.node(id).origin == kCreatedNode) g.set_origin(id, kNoNode);
  }
}

// Extraction and rewrites shared by both partitioners. `reorder` is whether
// the backward is reordered to mimic the autograd engine.
PartitionResult emit(const JointGraph& joint, const Prepared& p, SavedSets saved,
                     const std::vector<std::string_view>& ban_reason, const PartitionOptions& options,
                     bool dce_collectives, bool reorder, const char* partitioner,
                     StageClock& clock) {
  const Graph& g = p.graph;
  Extracted e = extract_fwd_bwd(g, std::move(saved), joint.num_fwd_outputs, options);
  if (dce_collectives) {
    e.forward = eliminate_dead_collectives(std::move(e.forward));
    e.backward = eliminate_dead_collectives(std::move(e.backward));
  }
  clock.lap("extract");
  int rng_states = 0;
  if (p.had_recomputable_ops && p.had_recomputable_rng_ops) {
    rng_states = functionalize_rng_ops(g, e, options.graphsafe_rng_functionalization);
    clock.lap("rng");
  }
  if (reorder) {
    e.backward = reorder_to_mimic_autograd_engine(std::move(e.backward));
    clock.lap("reorder");
  }

  PartitionResult r;
  r.forward = raise_getitems(std::move(e.forward));
  r.backward = raise_getitems(std::move(e.backward));
  finalize_origins(r.forward);
  finalize_origins(r.backward);
  clock.lap("getitems");
  r.saved_values = to_joint(g, e.saved_values);
  r.saved_opaque_nodes = to_joint(g, e.saved_script_objects);
  for (NodeId id : to_joint(g, e.saved_opaque_nodes)) r.saved_opaque_nodes.push_back(id);
  r.saved_sym_nodes = to_joint(g, e.saved_sym_nodes);
  r.num_fwd_outputs = joint.num_fwd_outputs;
  r.num_rng_states = rng_states;
  r.forced_must_save = p.forced_must_save;
  r.partitioner = partitioner;
  record_decisions(joint, p, ban_reason, r);
  clock.lap("report");
  r.seconds = clock.total();
  r.stages = clock.take();
  return r;
}

// default_partition on a graph whose nodes already point at `joint`.
// `from_min_cut`: the min-cut handed this graph over; it must not come back.
PartitionResult default_on(const JointGraph& joint, Prepared p,
                           const PartitionOptions& options, StageClock& clock,
                           bool from_min_cut);

// Python's repr of a float, for messages that quote torch's.
std::string py_float(double x) {
  std::string s = fmt::format("{}", x);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// The memory budget of one joint graph, in torch's increasing precedence:
// the global option; the first node whose meta["memory_budget"] is a float;
// the region_activation_memory_budget annotation, which every annotated node
// must agree on and which must cover every forward call_function. The graph
// modules nested in the joint module (HOP bodies) count too: their
// annotations join the agreement check, and any call_function of theirs
// without one is uncovered. A per-graph budget outside [0, 1] is an Error
// naming the node it came from.
double resolve_memory_budget(const Graph& g, const std::vector<NestedGraph>& nested,
                             const NodeInfo& info, const PartitionOptions& options) {
  double budget = options.activation_memory_budget;
  std::string from;  // the node a per-graph budget came from, for the range error
  for (NodeId id = 0; id < g.size(); ++id) {
    if (g.node(id).has(kFlagMemoryBudget)) {
      budget = g.extra(id).memory_budget;
      from = fmt::format("node '{}': meta memory_budget", g.name(id));
      break;
    }
  }
  std::vector<double> region;  // distinct, in first-seen order (an OrderedSet)
  std::string region_from;
  std::vector<std::string_view> unannotated;  // names
  auto add_region = [&](double b) {
    if (std::find(region.begin(), region.end(), b) == region.end())
      region.push_back(b);  // at most a few distinct values
  };
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& node = g.node(id);
    if (node.has(kFlagRegionBudget)) {
      if (region_from.empty())
        region_from = fmt::format("node '{}': meta region_memory_budget", g.name(id));
      add_region(g.extra(id).region_memory_budget);
    } else if (node.kind == NodeKind::kCallFunction && info.is_required_fw(id)) {
      unannotated.push_back(g.name(id));
    }
  }
  // A body is not split into forward and backward: every op counts.
  for (const NestedGraph& body : nested) {
    const Graph& b = body.graph;
    for (NodeId id = 0; id < b.size(); ++id) {
      if (b.node(id).has(kFlagRegionBudget)) {
        if (region_from.empty()) {
          region_from = fmt::format("subgraph '{}': node '{}': meta region_memory_budget",
                                    body.name, b.name(id));
        }
        add_region(b.extra(id).region_memory_budget);
      } else if (b.node(id).kind == NodeKind::kCallFunction) unannotated.push_back(b.name(id));
    }
  }
  if (region.size() > 1) {
    std::vector<double> sorted = region;
    std::sort(sorted.begin(), sorted.end());
    std::string list;
    for (double b : sorted) list += (list.empty() ? "" : ", ") + py_float(b);
    throw Error(ErrorCode::kInvalidGraph,
                fmt::format("torch.autograd.graph.region_activation_memory_budget: conflicting "
                            "budgets within a single joint graph (including nested subgraphs): "
                            "[{}]. Use a graph break to separate regions that need different "
                            "budgets.",
                            list));
  }
  if (!region.empty()) {
    if (!unannotated.empty()) {
      std::string names;
      for (std::string_view name : unannotated)
        names += fmt::format("{}'{}'", names.empty() ? "" : ", ", name);
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("torch.autograd.graph.region_activation_memory_budget: must cover "
                              "the entire forward of a graph (including HOP bodies), but {} "
                              "forward op(s) are unannotated. Wrap the whole forward in a single "
                              "region; use a graph break to scope different budgets to different "
                              "graphs. Note that a graph break inside the annotated region can "
                              "also cause unannotated ops here. Unannotated ops: [{}].",
                              unannotated.size(), names));
    }
    budget = region[0];
    from = region_from;
  }
  if (!from.empty() && !(budget >= 0 && budget <= 1)) {
    throw Error(ErrorCode::kInvalidGraph,
                fmt::format("{}: the valid ranges for memory budget are 0 <= m <= 1. The "
                            "provided value is {}",
                            from, py_float(budget)));
  }
  return budget;
}

PartitionResult min_cut_on(const JointGraph& joint, const PartitionOptions& options,
                           StageClock& clock) {
  const size_t n = joint.graph.size();

  // prepare: its graph's nodes point at the joint graph's ids.
  Prepared p = prepare_for_min_cut(joint.graph, options);
  const Graph& g = p.graph;
  clock.lap("prepare");

  // analyze
  NodeInfo info = classify_nodes(g, joint.static_lifetime_input_indices,
                                 joint.num_fwd_outputs, options);
  // With nothing required by the backward there is nothing to cut; torch
  // hands such graphs to the default partitioner.
  if (info.num_required_bw == 0) {
    clock.lap("classify");
    return default_on(joint, std::move(p), options, clock, /*from_min_cut=*/true);
  }
  std::vector<int64_t> dist = dist_from_bw(g, info);
  clock.lap("classify");

  // The budget: the global option, unless the graph carries its own.
  const double budget = resolve_memory_budget(g, joint.nested, info, options);

  // decide
  std::vector<uint8_t> categories = options.ops.classify(g);
  PartitionTrace trace;
  const bool tracing = options.trace || options.visualize_memory_budget_pareto;
  DecideContext ctx{g, info, dist, categories, options, tracing ? &trace : nullptr};
  MinCutResult cut;
  std::vector<NodeId> chosen = choose_saved_values_set(ctx, budget, &cut);
  clock.lap("decide");
  std::vector<std::string_view> ban_reason(n);
  for (NodeId id = 0; id < cut.ban_reason.size(); ++id) {
    ban_reason[g.node(id).origin] = cut.ban_reason[id];
  }

  SavedSets saved;
  for (NodeId id : chosen) {
    if (is_sym_node(g, id)) {
      if (!is_assert_only_symbool(g, id)) saved.saved_sym_nodes.push_back(id);
    } else if (is_opaque_node(g, id)) {
      saved.saved_opaque_nodes.push_back(id);
    } else {
      saved.saved_values.push_back(id);
    }
  }
  PartitionResult r = emit(joint, p, std::move(saved), ban_reason, options,
                           /*dce_collectives=*/false, /*reorder=*/true, "min_cut", clock);
  if (options.trace) {
    for (NodeId id : r.saved_values) trace.saved_bytes.push_back(size_of(joint.graph, id, options));
  }
  r.trace = std::move(trace);
  return r;
}

PartitionResult default_on(const JointGraph& joint, Prepared p,
                           const PartitionOptions& options, StageClock& clock,
                           bool from_min_cut) {
  const bool recomputable = has_recomputable_ops(p.graph);
  if (recomputable && !is_functional_graph(p.graph)) {
    // torch warns and falls back to the min-cut partitioner here. Coming from
    // the min-cut, torch would bounce between the two until Python's
    // recursion limit; say so instead.
    if (from_min_cut) {
      throw Error(ErrorCode::kUnsupported,
                  "graph has recompute tags, mutates non-inputs and needs nothing in "
                  "backward: torch's partitioners recurse forever on it");
    }
    return min_cut_on(joint, options, clock);
  }
  prepare_for_default(p, options);
  clock.lap("prepare");

  NodeInfo info = classify_nodes(p.graph, joint.static_lifetime_input_indices,
                                 joint.num_fwd_outputs, options);
  clock.lap("classify");
  SavedSets saved = default_saved_values(p.graph, info, options, recomputable ? 1 : 0);
  clock.lap("decide");
  return emit(joint, p, std::move(saved), {}, options, /*dce_collectives=*/true,
              /*reorder=*/p.had_recomputable_ops, "default", clock);
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
}

// The options with the joint graph's own op-category overrides applied.
PartitionOptions with_overrides(const JointGraph& joint, const PartitionOptions& options) {
  PartitionOptions out = options;
  for (const auto& [key, categories] : joint.op_overrides) out.ops.set(key, categories);
  return out;
}

}  // namespace

PartitionResult min_cut_rematerialization_partition(const JointGraph& joint,
                                                    const PartitionOptions& options) {
  options.validate();
  check_joint(joint);
  StageClock clock(Clock::now(), options);
  return min_cut_on(joint, with_overrides(joint, options), clock);
}

PartitionResult default_partition(const JointGraph& joint, const PartitionOptions& options) {
  options.validate();
  check_joint(joint);
  // torch's default_partition does no DCE or CSE.
  StageClock clock(Clock::now(), options);
  Prepared p;
  p.graph = rooted(joint);
  return default_on(joint, std::move(p), with_overrides(joint, options), clock,
                    /*from_min_cut=*/false);
}

std::vector<MemoryBudgetPoint> memory_budget_pareto(const JointGraph& joint,
                                                    const PartitionOptions& options,
                                                    double resolution,
                                                    const std::vector<double>& budgets) {
  options.validate();
  check_joint(joint);
  const PartitionOptions o = with_overrides(joint, options);
  const Prepared p = prepare_for_min_cut(joint.graph, o);
  const Graph& g = p.graph;
  NodeInfo info = classify_nodes(g, joint.static_lifetime_input_indices, joint.num_fwd_outputs, o);
  if (info.num_required_bw == 0) {
    throw Error(ErrorCode::kUnsupported,
                "memory budget Pareto frontier: the backward needs nothing from the forward "
                "(torch hands this graph to the default partitioner, which has no budget)");
  }
  std::vector<int64_t> dist = dist_from_bw(g, info);
  std::vector<uint8_t> categories = o.ops.classify(g);
  DecideContext ctx{g, info, dist, categories, o};
  std::vector<MemoryBudgetPoint> out;
  for (const ParetoPoint& p : memory_budget_pareto(ctx, resolution, budgets))
    out.push_back({p.budget, p.recompute_runtime, p.memory_ratio});
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

}  // namespace remat
