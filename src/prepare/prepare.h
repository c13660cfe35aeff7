// prepare/prepare.h — stage 1: the graph transformations torch applies to a
// joint graph before it decides anything.
//
// Contract: each pass reproduces the torch pass it names, node for node, as
// the release the options (or the TorchBehavior given) select does it:
//  * eliminate_dead_code: fx.Graph.eliminate_dead_code (reverse walk; a node
//    dies when it has no users and is not impure). Placeholders and output
//    always stay. Impure: graph/impure.h (kFlagImpure, plus random
//    (nondeterministic_seeded) ops as the rule says).
//  * common_subexpression_elimination: compile_utils.fx_graph_cse. Random ops
//    (compile_utils.rand_ops), aten.empty, and nodes whose storage aliases a
//    graph output are never merged; the first of equal nodes survives. What
//    else keys and excludes nodes depends on the release (cse.cc).
//  * cleanup_recompute_tags, force_save_collectives, force_save_effectful_ops,
//    force_save_bw_mutation_src: as in partitioners.py; they only change
//    recompute policies (force_save_effectful_ops raises torch 2.15's error
//    for an effectful op tagged MUST_RECOMPUTE).
// Passes that remove nodes return a new compacted Graph whose nodes keep
// `origin` pointing at the input graph's ids.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "graph/impure.h"
#include "graph/query.h"
#include "remat/graph.h"
#include "remat/options.h"
#include "remat/result.h"

namespace remat {

// A graph after DCE/CSE, with the bookkeeping needed to map back.
struct Prepared {
  Graph graph;  // node.origin = id in the input joint graph
  // Per input node: the input node that replaced it (CSE), itself, or
  // kNoNode when DCE removed it.
  std::vector<NodeId> survivor;
  // Input-graph ids whose policy a pass forced to MUST_SAVE, in the order
  // they were forced.
  std::vector<NodeId> forced_must_save;
  // Whether the graph had recompute tags (and recompute-tagged random ops)
  // before the tag passes ran: torch decides RNG functionalization and
  // reordering on these.
  bool had_recomputable_ops = false;
  bool had_recomputable_rng_ops = false;
};

Graph eliminate_dead_code(const Graph& g, Impurity rule);
// Takes its graph by value (moved in, an unchanged graph is not copied) and
// returns the merged graph; `replaced[i]` receives the survivor of node i
// (in g's ids), or i itself. `torch` selects the release's rules.
// `extra_key` is fx_graph_cse's extra_node_key (2.14 on), one per node of g:
// equal nodes merge only when their keys are equal too; empty: no key.
Graph common_subexpression_elimination(Graph g, std::vector<NodeId>& replaced,
                                       const TorchBehavior& torch,
                                       std::span<const uint8_t> extra_key = {});
// The key min_cut_rematerialization_partition gives fx_graph_cse from 2.14
// on: 1 for the nodes the backward needs (a backward output, or an input of
// one, transitively), 0 for the others.
std::vector<uint8_t> backward_dependencies(const Graph& g, int num_fwd_outputs);

bool has_recomputable_ops(const Graph& g);  // any must_recompute node (graph/query.h)
// A must_recompute node that is a random op (graph/random_op.h's is_rng_op).
bool has_recomputable_rng_ops(const Graph& g, const TorchBehavior& torch);

// The tag passes mutate policies in place and append what they forced.
void cleanup_recompute_tags(Graph& g, bool is_default_partition, std::vector<NodeId>& forced);
void force_save_collectives(Graph& g, const TorchBehavior& torch, std::vector<NodeId>& forced);
void force_save_effectful_ops(Graph& g, const TorchBehavior& torch, std::vector<NodeId>& forced);
void force_save_bw_mutation_src(Graph& g, std::vector<NodeId>& forced);

// The whole prologue of min_cut_rematerialization_partition: DCE, CSE (when
// options.cse), and the tag passes.
Prepared prepare_for_min_cut(const Graph& joint, int num_fwd_outputs,
                             const PartitionOptions& options);
// The prologue of default_partition on an already-prepared graph.
void prepare_for_default(Prepared& p, const PartitionOptions& options);

// aot_autograd's _is_functional_graph: the only mutations are copy_ and set_
// (2.14 on: and shallow_copy_data_) into graph inputs (a destination named
// "set_buffer_donor_..." is exempt, as in torch). default_partition hands a
// graph with recompute tags that is not functional to the min-cut.
bool is_functional_graph(const Graph& g, const TorchBehavior& torch);

}  // namespace remat
