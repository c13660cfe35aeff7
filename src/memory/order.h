// memory/order.h — a memory-aware order of the backward: remat's own
// option (PartitionOptions::backward_order = kMemory), not torch's.
//
// Contract: memory_ordered_backward(forward, backward, num_fwd_outputs)
// returns the backward with its nodes in another topological order when
// that order's simulated peak (simulate_memory of the pair, under `model`
// and `kernel_orders`) is lower than the given order's; otherwise the
// backward unchanged. Either way the graphs compute the same values: only
// the order of independent nodes
// changes. What never moves:
//  * placeholders stay first and the output last, in their order;
//  * ordered nodes keep their order and their place between the others:
//    impure ops, ops with effects, random ops, collectives and their waits,
//    control dependencies, mutable (in-place) ops and higher-order ops. Each
//    is a barrier: every node before it in the given order stays before it,
//    every node after stays after. (Random ops replay the same RNG stream
//    only in the same order; a collective must meet the same collective on
//    every rank; a mutation must see the readers it saw.)
// Between barriers, nodes are scheduled greedily: of the nodes whose inputs
// have run, the one that adds the fewest bytes (its fresh storages less the
// storages whose last reader it is), the earliest in the given order on a
// tie. The given order is kept when the greedy one does not lower the peak,
// so the result's peak never exceeds the given one's. Names, origins and
// metadata are kept (GraphBuilder::rearrange). Deterministic; O(n * r)
// time for n nodes and at most r nodes ready at once.
#pragma once

#include "remat/graph.h"
#include "remat/options.h"

namespace remat {

struct OrderedBackward {
  Graph backward;
  bool reordered = false;  // false: the given order, returned unchanged
};

OrderedBackward memory_ordered_backward(const Graph& forward, Graph backward, int num_fwd_outputs,
                                        const TorchBehavior& torch,
                                        MemoryModel model = MemoryModel::kAten,
                                        bool kernel_orders = true);

}  // namespace remat
