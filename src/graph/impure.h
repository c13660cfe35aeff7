// graph/impure.h — FX's notion of an impure node, shared by every dead-code
// elimination (prepare's DCE and the subgraph extraction's) and CSE.
#pragma once

#include "remat/graph.h"
#include "remat/torch_release.h"

namespace remat {

// How one call answers fx Node.is_impure.
struct Impurity {
  // is_impure's impure_random: random (nondeterministic_seeded) ops are impure.
  bool random = true;
  // torch 2.13 on (impure_checks_packet_default): an OpOverloadPacket target
  // answers as its .default overload; before, a packet is never random.
  bool packet_default = true;
};

// The rule a partition runs with: `impure_random` from the caller's context
// (PartitionOptions::dce_impure_random, or true), the packet rule from the
// release.
inline Impurity impurity(bool impure_random, const TorchBehavior& torch) {
  return {impure_random, torch.impure_checks_packet_default};
}

// fx Node.is_impure(impure_random): placeholders and output always;
// call_function when the adapter recorded it impure (kFlagImpure, which is
// is_impure(impure_random=False) as the running torch answers it, packets
// included), or when `rule.random` and the target is an OpOverload tagged
// nondeterministic_seeded (only OpOverloads carry `_nondeterministic_seeded`;
// higher-order ops answer before that check), or a packet whose .default is
// (with `rule.packet_default`).
bool is_impure_node(const Graph& g, NodeId id, Impurity rule);

}  // namespace remat
