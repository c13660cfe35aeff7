// graph/random_op.h — torch's partitioners.is_rng_op: whether a node draws
// random numbers, as the RNG passes (has_recomputable_rng_ops,
// functionalize_rng_ops) ask it.
//
// Contract: a call_function node is a random op when its target carries the
// nondeterministic_seeded tag. From torch 2.14 on
// (TorchBehavior::sdpa_zero_dropout_not_random) an op whose schema has a
// `dropout_p` argument (the scaled-dot-product-attention family) is random
// only when its dropout is not statically zero. Reads the node's arguments
// and its op's recorded facts, nothing else; never throws.
#pragma once

#include "remat/graph.h"
#include "remat/torch_release.h"

namespace remat {

bool is_rng_op(const Graph& g, NodeId id, const TorchBehavior& torch);

// Whether the node's dropout_p (positional, else keyword, else the schema's
// default) is statically zero: a constant equal to 0.0. False when the op
// has no dropout_p argument, when it is a node (a SymFloat input), or when
// it is absent and the schema gives no default.
bool dropout_statically_zero(const Graph& g, NodeId id);

}  // namespace remat
