// rewrite/rewrite.h — stage 5: rewrites of the extracted graphs.
//
// Contract, each as in torch 2.13:
//  * functionalize_rng_ops: for random ops the user marked for recompute that
//    survive in both graphs, the forward runs them through
//    run_and_save_rng_state and returns the states (before the sym nodes);
//    the backward takes them as placeholders before the tangents and replays
//    with run_with_rng_state. (CPU path; the CUDA graph-safe variant is not
//    reproduced.)
//  * reorder_to_mimic_autograd_engine: the backward is rebuilt starting from
//    the first user of a tangent, pulling in each node's inputs just in time.
//  * raise_getitems: each getitem moves right after its parent.
//  * find_hop_rng_calls: the invoke_subgraph calls whose bodies take
//    graph-safe RNG states, which thread_graphsafe_rng_from_hops threads.
// Nodes a rewrite creates get origin kCreatedNode, so later copies keep them
// marked as created.
#pragma once

#include "extract/extract.h"
#include "remat/graph.h"
#include "remat/partition.h"

namespace remat {

// Returns the number of RNG states threaded from forward to backward.
// `joint` is the graph the extraction ran on (for the recompute policies).
// Call it only when the graph has recomputable random ops, as torch does: it
// throws, as torch, when the backward has no tangent placeholder.
// `use_graphsafe` is torch's use_rng_graphsafe_rng_functionalization before
// the device check (config.graphsafe_rng_functionalization, and inductor's
// fallback_random off); with it, a CUDA random op throws Error(kUnsupported).
int functionalize_rng_ops(const Graph& joint, Extracted& e, bool use_graphsafe = true);

Graph reorder_to_mimic_autograd_engine(Graph bw);  // already in that order: returned as is
Graph raise_getitems(Graph g);  // by value: unchanged graphs are not copied

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

}  // namespace remat
