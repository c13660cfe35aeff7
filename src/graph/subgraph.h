// graph/subgraph.h — torch's `_extract_graph_with_inputs_outputs`, as a
// selection of nodes.
//
// Contract: walks the graph in order. The given inputs become placeholders
// (in the given order); a node is valid when all its node arguments are
// valid; placeholders not among the inputs are invalid; nodes that must be
// in the other subgraph are invalid unless they are inputs (unless
// `ignore_must_be_in_fw_bw`). Then dead code is eliminated from the outputs
// as fx.Graph.eliminate_dead_code does (impure nodes stay: kFlagImpure, and
// random ops when `impure_random`; placeholders always stay).
#pragma once

#include <string>
#include <vector>

#include "remat/graph.h"

namespace remat {

enum class Subgraph : uint8_t { kForward, kBackward, kNeither };

struct SubgraphSelection {
  std::vector<NodeId> inputs;      // placeholders, in order
  std::vector<NodeId> body;        // surviving call_function/get_attr nodes, graph order
  std::vector<NodeId> outputs;     // resolved outputs (kNoNode for None leaves)
  // Every node created before DCE, in creation order (placeholders first):
  // FX keeps their names reserved even after DCE removes them.
  std::vector<NodeId> created;
};

// Throws Error(kInvalidGraph) naming the output when an output is invalid
// and no aliasing input can stand in for it (as torch's AssertionError).
SubgraphSelection select_subgraph(const Graph& g, const std::vector<NodeId>& inputs,
                                  const std::vector<NodeId>& outputs, Subgraph which,
                                  bool impure_random, bool ignore_must_be_in_fw_bw = false);

}  // namespace remat
