// graph/impure.h — FX's notion of an impure node, shared by every dead-code
// elimination (prepare's DCE and the subgraph extraction's).
#pragma once

#include "remat/graph.h"

namespace remat {

// fx Node.is_impure(impure_random): placeholders and output always;
// call_function when the adapter recorded it impure (kFlagImpure, which is
// is_impure(impure_random=False)), or when `impure_random` and the target is
// an OpOverload tagged nondeterministic_seeded (only OpOverloads carry
// `_nondeterministic_seeded`; higher-order ops answer before that check).
bool is_impure_node(const Graph& g, NodeId id, bool impure_random);

}  // namespace remat
