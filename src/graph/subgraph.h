// graph/subgraph.h — torch's `_extract_graph_with_inputs_outputs`, as a
// selection of nodes.
//
// Contract: walks the graph in order. The given inputs become placeholders
// (in the given order); a node is valid when all its node arguments are
// valid; placeholders not among the inputs are invalid; nodes that must be
// in the other subgraph are invalid unless they are inputs (unless
// `ignore_must_be_in_fw_bw`). Then dead code is eliminated from the outputs
// as fx.Graph.eliminate_dead_code does (impure nodes stay, as `impurity`
// answers: graph/impure.h; placeholders always stay).
//
// With `control_deps_extraction` (torch 2.14 on; before, a control_deps call
// is an ordinary node):
//  * Extracting the backward, a control_deps call that is not tagged
//    is_backward / must_be_in_backward and whose subgraph synchronizes
//    streams (kFlagStreamSync) is a forward sync: it is dropped, and each
//    getitem(cd, k) stands for deps[k - 1] (or is invalid when that is no
//    node, or is invalid itself): no node is made for it, its users read
//    the dependency (`stands_for`).
//  * A control_deps call with an invalid argument but a valid dependency is
//    rebuilt by torch with the valid dependencies only, as a new call to a
//    new subgraph module it installs on the joint module
//    (subgraph_cd_extract...). remat does not reproduce that rebuild: it is
//    an Error(kUnsupported) naming the node.
#pragma once

#include <string>
#include <vector>

#include "graph/impure.h"
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
  // Nodes that stand for another one instead of being copied: per node id
  // the node whose copy takes its uses, kNoNode for the others; empty when
  // there are none (control_deps_extraction's see-through getitems).
  std::vector<NodeId> stands_for;

  // The node whose copy (or placeholder) holds `id`'s value here.
  NodeId value_of(NodeId id) const {
    return id < stands_for.size() && stands_for[id] != kNoNode ? stands_for[id] : id;
  }
};

// Throws Error(kInvalidGraph) naming the output when an output is invalid
// and no aliasing input can stand in for it (as torch's AssertionError).
SubgraphSelection select_subgraph(const Graph& g, const std::vector<NodeId>& inputs,
                                  const std::vector<NodeId>& outputs, Subgraph which,
                                  Impurity impurity, bool ignore_must_be_in_fw_bw = false,
                                  bool control_deps_extraction = false);

}  // namespace remat
