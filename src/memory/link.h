// memory/link.h — how a backward's inputs come from its forward (internal to
// src/memory).
//
// Contract: the forward returns its `num_fwd_outputs` outputs, then what it
// saves for the backward; the backward takes the saved values as
// placeholders, in another order (sym nodes first) and under the forward
// node's name, except RNG states (`rng_state_output_k`), which follow the
// saved values positionally. link_backward_inputs answers, per backward
// node, the forward node it receives (kNoNode for tangents, seeds and every
// non-placeholder).
#pragma once

#include <vector>

#include "remat/graph.h"

namespace remat::memory {

struct ForwardOutputs {
  std::vector<NodeId> outputs;  // the caller's outputs (kNoNode for None)
  std::vector<NodeId> saved;    // the values handed to the backward (kNoNode for None)
};

// Splits the forward's returned leaves; Error(kInvalidGraph) when
// `num_fwd_outputs` is negative or exceeds them.
ForwardOutputs forward_outputs(const Graph& forward, int num_fwd_outputs);

// Per backward node: the forward node it is linked to, or kNoNode. Each
// saved value links at most one placeholder: by name first, then the
// remaining placeholders that are neither tangents, seeds nor BackwardState,
// in order, to the remaining saved values, in order.
std::vector<NodeId> link_backward_inputs(const Graph& forward, const Graph& backward,
                                         const ForwardOutputs& fw_outputs);

}  // namespace remat::memory
