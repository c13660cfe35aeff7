// memory/kernel_order.h — the orders inductor's reorder_for_peak_memory pass
// may run one graph's kernels in (src/memory: simulate_memory's
// MemoryModel::kInductor runs each).
//
// Contract: after fusing, inductor's scheduler (torch/_inductor/memory.py,
// on by default since torch 2.6) tries three topological orders of its
// scheduler nodes beside the graph's own — least peak memory first (lpmf),
// breadth first (bfs), depth first by size (dfs) — estimates each one's peak
// from its buffers' sizes and lifetimes, and keeps the lowest (the graph's
// order on a tie, then in that order). The estimate is not the step's
// memory: an order it ranks a few bytes lower may peak kilobytes higher when
// it runs. kernel_orders rebuilds that choice on remat's model of the
// kernels (memory/fusion.h: a fused group, an extern kernel, and the
// MultiOutput node inductor gives each result an extern kernel returns are
// one scheduler node each), with each node's index its place in the graph's
// order and each buffer's size its allocation_bytes:
//  * buffers: what each kernel writes (alloc and free its size; an extern
//    kernel's several results alloc at the kernel, free at their
//    MultiOutput nodes), and the graph's freeable inputs (placeholders not
//    named primals_*, tangents_*, arg*, fwd_rng_state* or bwd_rng_state*,
//    inductor's is_nonfreeable_buffers), which live from the start; a
//    buffer is freed after the last kernel that reads it (a view, an inlined
//    value or an in-place result reads its base's), never when the graph
//    returns it; a result only its own kernel reads is freed there.
//  * dependencies: a kernel follows the kernels whose buffers it reads, a
//    mutating kernel (an in-place op, an impure op, a collective, a
//    higher-order op) follows every kernel before it and precedes every one
//    after it (inductor orders a mutation only against the buffer's other
//    readers and writers: this keeps more in place than inductor does).
//  * the three orders and the estimate follow inductor's code, tie-breaks
//    (node indices) included. They are the same in torch 2.11 to 2.15
//    (2.11 and 2.12's estimate also subtracts the outputs' sizes at the
//    first step: alike for every order, so the same order is kept), so no
//    release switch.
// It returns, as node orders of g for GraphBuilder::rearrange, the orders
// whose estimate is at most that far above the graph's own order's
// (inductor may keep any of them where remat's sizes differ from its own
// by that much; near the graph's, not only near the lowest, because
// remat's ranking of the three sorts among themselves can differ from
// inductor's: kernel_order.cc), other than the graph's own, with their
// names. The graph's order is not listed:
// callers simulate it anyway (it keeps every simulated peak at or above the
// optimizer's bound, optimize/space.h). Placeholders and get_attr nodes come
// first, in their order; the output node last; a node no kernel computes
// (an inlined value, a view, a getitem of a generated kernel) just before
// the first node that reads it; unread ones just before the output.
// Deterministic. Time O(n * r) for n nodes with at most r kernels ready at
// once (lpmf scans the ready kernels at each step, as inductor does), plus
// the inlined values' reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memory/fusion.h"
#include "remat/graph.h"

namespace remat::memory {

// An order whose estimate is above the graph's order's by at most
// kOrderSlack bytes and kOrderTolerance of it is one inductor may keep: remat's
// buffers are inductor's but for small ones (scalars, seeds, a kernel's
// local buffers), and inductor keeps an order its estimate ranks lower by
// as little as 8 bytes. The bytes bound deep graphs, whose orders'
// estimates differ by a layer's buffers (on a 10,000-node transformer
// stack's backward depth-first is 223 KiB, 0.3%, above the graph's order,
// and simulates 27% higher); the fraction bounds small ones (on the
// corpus's BatchNorm conv net, whose backward's estimate is inductor's to
// the byte, depth-first 3.8 KiB, 2%, above simulates 1.4% over the step
// inductor ran in the graph's order).
inline constexpr int64_t kOrderSlack = 4096;
inline constexpr double kOrderTolerance = 0.01;

struct KernelOrder {
  std::string name;           // "lpmf", "bfs" or "dfs"
  int64_t estimate = 0;       // its estimated peak (inductor's estimate_peak_memory)
  std::vector<NodeId> nodes;  // every node of g, in that order
  // Per node of the reordered graph (GraphBuilder::rearrange(g, nodes)):
  // its fused group in g (InductorFusion::group, a node of g), for
  // inductor_fusion's `within`: inductor fuses before it reorders, so
  // the reordered kernels are the groups formed in the graph's order.
  std::vector<NodeId> groups;
};

struct KernelOrders {
  int64_t graph_estimate = 0;       // the graph's own order's estimate
  std::vector<KernelOrder> orders;  // the other orders inductor may keep
};

KernelOrders kernel_orders(const Graph& g, const InductorFusion& fusion);

}  // namespace remat::memory
