// extract/extract.h — stage 4: build the forward and backward graphs.
//
// Contract: torch 2.13's _extract_fwd_bwd_modules (with
// omit_aot_autograd_runtime=False): a first backward extraction prunes saved
// values the backward does not use (and dead wait_tensor chains when
// distributed is available), BackwardState inputs are passed directly,
// symbols referenced by backward inputs are bound (bindings first, sorted by
// symbol name), saved tensors are ordered version-counter-checked first,
// opaque script objects after them; then the final forward and backward are
// extracted with select_subgraph (with torch 2.14's control_deps rules when
// options.torch.control_deps_extraction: a forward sync leaves the
// backward, its getitems reading their dependencies, in the pruning too).
// The graphs' node `origin` follows NodeCopier: the source node's own origin
// when it has one, else its id in the graph passed in.
#pragma once

#include <vector>

#include "decide/decide.h"
#include "graph/fx_names.h"
#include "remat/graph.h"
#include "remat/options.h"

namespace remat {

struct Extracted {
  Graph forward;
  Graph backward;
  // Final saved sets (ids of the input graph), in forward-output order.
  std::vector<NodeId> saved_values;        // vc-checked tensors, then no-vc-check
  std::vector<NodeId> saved_script_objects;// FakeScriptObject values among saved_values
  std::vector<NodeId> saved_opaque_nodes;
  std::vector<NodeId> saved_sym_nodes;     // bindings first
  // FX name state of each graph (every name created, DCE'd ones included),
  // so rewrites can name new nodes as FX would.
  FxNamespace forward_names;
  FxNamespace backward_names;
};

Extracted extract_fwd_bwd(const Graph& g, SavedSets saved, int num_fwd_outputs,
                          const PartitionOptions& options);

// DCE where only dead collectives (namespace _c10d_functional) are removed:
// default_partition's `eliminate_dead_code(is_impure_node=is_not_collective)`.
Graph eliminate_dead_collectives(const Graph& g);

}  // namespace remat
