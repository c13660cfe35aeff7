// prepare/mutation.h — which nodes mutate, as inductor's CSE sees it
// (internal to the prepare stage; FX's impurity is graph/impure.h).
//
// Contract: is_mutation_op answers inductor's pattern_matcher.is_mutation_op
// for one node: an OpOverload by its schema, anything else by the name
// regex below or an `out=` keyword argument that is not None.
#pragma once

#include <string_view>

#include "remat/graph.h"

namespace remat {

// inductor pattern_matcher.is_mutation_op: the boundary of a CSE mutation
// region.
bool is_mutation_op(const Graph& g, NodeId id);
// Its answer for every node calling `op` when the op alone decides it (1 or
// 0: an OpOverload answers with its schema), or -1 when it depends on the node.
int op_mutation(const Graph& g, const OpInfo& op);

// The regex `(?<!_)(_$|_[.]|(\b|_)(set|enter|exit|seed)(\b|_))(?!_)` that
// is_mutation_op searches in a callable's __name__, written out by hand.
bool mutation_name_match(std::string_view name);

}  // namespace remat
