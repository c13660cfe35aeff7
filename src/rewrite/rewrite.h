// rewrite/rewrite.h — stage 5: rewrites of the extracted graphs.
//
// Contract, each as in torch 2.13:
//  * functionalize_rng_ops: random ops the user marked for recompute that
//    survive in both graphs draw the same numbers in both: on a graph-safe
//    device (CUDA), both graphs take a generator input and run the op
//    through graphsafe_run_with_rng_state; otherwise the forward runs it
//    through run_and_save_rng_state and returns the state (before the sym
//    nodes), which the backward takes before the tangents and replays with
//    run_with_rng_state.
//  * reorder_to_mimic_autograd_engine: the backward is rebuilt starting from
//    the first user of a tangent, pulling in each node's inputs just in time.
//  * raise_getitems: each getitem moves right after its parent.
//    reorder_and_raise_getitems: the two above in turn, one rebuild.
//  * thread_graphsafe_rng_from_hops: invoke_subgraph calls whose bodies take
//    graph-safe RNG states get them from new placeholders of the outer
//    graph (find_hop_rng_calls finds them).
// Nodes a rewrite creates get origin kCreatedNode, so later copies keep them
// marked as created.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "extract/extract.h"
#include "remat/graph.h"
#include "remat/result.h"

namespace remat {

// Returns the number of RNG states threaded from forward to backward as
// forward outputs (the CPU-style path's; graph-safe generators are inputs).
// `joint` is the graph the extraction ran on (for the recompute policies).
// Call it only when the graph has recomputable random ops, as torch does: it
// throws, as torch, when the backward has no tangent placeholder.
// `use_graphsafe` is torch's use_rng_graphsafe_rng_functionalization before
// the device check (config.graphsafe_rng_functionalization, and inductor's
// fallback_random off); `graphsafe_device_types` the device types torch's
// supports_graphsafe_rng accepts; `torch` the release's switches (which ops
// are random: graph/random_op.h). The paths, names and placement are in
// rng.cc's contract.
int functionalize_rng_ops(const Graph& joint, Extracted& e, bool use_graphsafe = true,
                          const std::vector<std::string>& graphsafe_device_types = {"cuda"},
                          const TorchBehavior& torch = {});

Graph reorder_to_mimic_autograd_engine(Graph bw);  // already in that order: returned as is
Graph raise_getitems(Graph g);  // by value: unchanged graphs are not copied
// `order` (ids of g, each once, each getitem's input among them) once
// raise_getitems' moves are replayed on it; nullopt when none moves a node.
std::optional<std::vector<NodeId>> raised_getitems_order(const Graph& g, std::span<const NodeId> order);
// raise_getitems(reorder_to_mimic_autograd_engine(bw)), the same graph, in
// one rebuild instead of two (each plan a peak search builds pays it).
Graph reorder_and_raise_getitems(Graph bw);

// An invoke_subgraph call of a forward (backward) graph whose body, a graph
// module of the joint module, has placeholders named like "fwd_rng_state"
// ("bwd_rng_state"): graph-safe RNG states the partition of the body added.
struct HopRngCall {
  NodeId hop = kNoNode;               // the invoke_subgraph node in the graph
  const NestedGraph* body = nullptr;  // its body (from JointGraph::nested)
  std::vector<NodeId> states;         // the body's RNG placeholders, in order
};
// The calls in graph order. Throws Error(kInvalidGraph) naming the node when
// an invoke_subgraph's first argument is no get_attr node.
std::vector<HopRngCall> find_hop_rng_calls(const Graph& g, const std::vector<NestedGraph>& nested,
                                           bool is_backward);

// torch's thread_graphsafe_rng_from_hops on a forward (backward) graph whose
// FX names are `names`: the placement, names and meta are in hop_rng.cc's
// contract. Returns `g` itself when no call takes RNG states.
Graph thread_graphsafe_rng_from_hops(Graph g, const std::vector<NestedGraph>& nested,
                                     bool is_backward, FxNamespace& names);

}  // namespace remat
