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
// Nodes a rewrite creates get origin kCreatedNode, so later copies keep them
// marked as created.
#pragma once

#include "extract/extract.h"
#include "remat/graph.h"

namespace remat {

// Returns the number of RNG states threaded from forward to backward.
// `joint` is the graph the extraction ran on (for the recompute policies).
int functionalize_rng_ops(const Graph& joint, Extracted& e);

Graph reorder_to_mimic_autograd_engine(const Graph& bw);
Graph raise_getitems(const Graph& g);

}  // namespace remat
