// tests/cpp/test_kernel_order.cc — the kernel orders inductor's
// reorder_for_peak_memory pass may keep (memory/kernel_order.h), and the
// inductor model's profile as the highest peak of them (remat/memory.h).
// A (4, 4) float32 tensor is 64 bytes, a (4, 1) one 16.
// tests/python/test_inductor_memory.py checks the orders against those
// inductor kept on compiled steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "graph_fixture.h"
#include "memory/fusion.h"
#include "memory/kernel_order.h"
#include "remat/memory.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;

Graph trivial_backward() {
  TestGraph g;
  Ref t = g.placeholder("tangents_1", {4});
  g.output({A::tuple({t})});
  return g.build();
}

size_t position(const std::vector<NodeId>& order, Ref r) {
  return static_cast<size_t>(std::find(order.begin(), order.end(), r.id) - order.begin());
}

// m = x @ w (64 bytes) and its row sum r (16); a scatter into (16, 16)
// zeros (1024) and its sum s2 (4); a freeable input `big` (16 KiB: not
// named primals_*), returned, and its sum s3. All sums are returned. The
// estimates (inductor's: big alive throughout, the primals left out):
// the graph's order 17,428 bytes at s2; least-peak-first runs s3 first,
// 17,432; breadth-first runs the scatter (no predecessors) before r, so m
// lives across it, 17,492: both within 1% of the lowest, the graph's. The
// simulation (placeholders alive throughout, 19,584 bytes; what a generated
// kernel reads last released at the next extern kernel): the graph's order
// peaks at the scatter, m, r and sc alive, 20,688; breadth-first at s2,
// with m alive to the end (no extern kernel after r), 20,696.
// `between`: an in-place copy into a placeholder between r and the scatter.
struct NearTies {
  Graph g;
  Ref m, r, sc, s2;
};

NearTies near_ties(bool between) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4, 4});
  Ref w = f.placeholder("primals_2", {4, 4});
  Ref idx = f.placeholder("primals_3", {16, 16});
  f[idx].tensors[0].dtype = "int64";
  f[idx].tensors[0].itemsize = 8;
  Ref src = f.placeholder("primals_4", {16, 16});
  Ref big = f.placeholder("big", {64, 64});
  Ref m = f.call("aten.mm.default", {x, w}, {4, 4});
  Ref r = f.call("aten.sum.dim_IntList", {m, A::list({1}), true}, {4, 1});
  if (between) f.call("aten.copy_.default", {x, w}, {4, 4});
  Ref zeros = f.call("aten.full.default", {A::list({16, 16}), 0}, {16, 16});
  Ref sc = f.call("aten.scatter_add.default", {zeros, 1, idx, src}, {16, 16});
  Ref s2 = f.call("aten.sum.default", {sc}, {});
  Ref s3 = f.call("aten.sum.default", {big}, {});
  f.output({A::tuple({r, s2, s3, big})});
  return {f.build(), m, r, sc, s2};
}

// The graph's own order's estimate, and the orders kept, in order, with
// their names and estimates.
void expect_estimates(const memory::KernelOrders& orders, int64_t graph,
                      const std::vector<std::pair<std::string, int64_t>>& kept) {
  EXPECT_EQ(orders.graph_estimate, graph);
  ASSERT_EQ(orders.orders.size(), kept.size());
  for (size_t k = 0; k < kept.size(); ++k) {
    EXPECT_EQ(orders.orders[k].name, kept[k].first) << k;
    EXPECT_EQ(orders.orders[k].estimate, kept[k].second) << k;
  }
}

TEST(KernelOrder, AnOrderEstimatedCloseToTheLowestIsOneInductorMayKeep) {
  const NearTies t = near_ties(false);
  const auto orders = memory::kernel_orders(t.g, memory::inductor_fusion(t.g));
  expect_estimates(orders, 17428, {{"lpmf", 17432}, {"bfs", 17492}});
  ASSERT_EQ(orders.orders.size(), 2u);
  const auto& nodes = orders.orders[1].nodes;
  EXPECT_EQ(nodes.size(), t.g.size());
  EXPECT_LT(position(nodes, t.sc), position(nodes, t.r));
}

TEST(KernelOrder, AMutationKeepsItsPlaceAmongTheKernels) {
  // The copy between r and the scatter: no order runs the scatter first.
  const NearTies t = near_ties(true);
  for (const auto& o : memory::kernel_orders(t.g, memory::inductor_fusion(t.g)).orders)
    EXPECT_GT(position(o.nodes, t.sc), position(o.nodes, t.r)) << o.name;
}

TEST(KernelOrder, TheProfileIsTheHighestPeakOfTheOrdersInductorMayKeep) {
  const NearTies t = near_ties(false);
  const Graph bw = trivial_backward();
  const MemoryProfile graph_only = simulate_memory(t.g, bw, 4, MemoryModel::kInductor, false);
  const MemoryProfile m = simulate_memory(t.g, bw, 4, MemoryModel::kInductor);
  EXPECT_EQ(graph_only.peak_bytes, 20688);
  EXPECT_EQ(m.peak_bytes, 20696);
  EXPECT_EQ(m.forward_orders, (std::vector<std::string>{"graph", "lpmf", "bfs"}));
  EXPECT_EQ(m.forward_order, "bfs");
  EXPECT_EQ(m.backward_order, "graph");
  // Told in the graph's own node ids: the peak at s2, m alive there; one
  // timeline entry per node, s2's the peak.
  EXPECT_EQ(m.peak_node, t.s2.id);
  EXPECT_TRUE(std::any_of(m.at_peak.begin(), m.at_peak.end(),
                          [&](const LiveStorage& s) { return s.pass == Pass::kForward && s.node == t.m.id; }));
  ASSERT_EQ(m.forward_timeline.size(), t.g.size());
  EXPECT_EQ(m.forward_timeline[t.s2.id], 20696);
  EXPECT_TRUE(graph_only.forward_orders.empty());
}

// Two independent chains: a big value and its small sum each. Breadth- and
// depth-first both start the second chain before finishing the first, two
// big values at once: estimated far above the graph's order, never kept by
// inductor, not simulated.
TEST(KernelOrder, AnOrderEstimatedAboveTheGraphsIsNotSimulated) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {64, 64});
  Ref w = f.placeholder("primals_2", {64, 64});
  Ref a = f.call("aten.mm.default", {x, w}, {64, 64});
  Ref sa = f.call("aten.sum.dim_IntList", {a, A::list({1}), true}, {64, 1});
  Ref b = f.call("aten.mm.default", {w, x}, {64, 64});
  Ref sb = f.call("aten.sum.dim_IntList", {b, A::list({1}), true}, {64, 1});
  f.output({A::tuple({sa, sb})});
  const Graph g = f.build();
  EXPECT_TRUE(memory::kernel_orders(g, memory::inductor_fusion(g)).orders.empty());
  const MemoryProfile m = simulate_memory(g, trivial_backward(), 2, MemoryModel::kInductor);
  EXPECT_EQ(m.forward_orders, (std::vector<std::string>{"graph"}));
  EXPECT_EQ(m.forward_order, "graph");
}

// Two big products, a small one, and each one's sum, the big ones first:
// the graph's order holds both big ones and then the small one at once.
// Least-peak-first finishes each big one's chain before the next, far
// below; depth-first runs the small chain first, a few bytes below the
// graph's order. remat's ranking of the sorts can differ from inductor's
// (inductor kept depth-first on a checkpointed MLP's backward where remat's
// least-peak-first was 13% lower), so depth-first, close to the graph's
// own estimate, is simulated too.
TEST(KernelOrder, AnOrderEstimatedCloseToTheGraphsIsSimulatedThoughAnotherIsFarLower) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {64, 64});
  Ref w = f.placeholder("primals_2", {64, 64});
  Ref y = f.placeholder("primals_3", {4, 4});
  Ref a = f.call("aten.mm.default", {x, w}, {64, 64});
  Ref b = f.call("aten.mm.default", {w, x}, {64, 64});
  Ref e = f.call("aten.mm.default", {y, y}, {4, 4});
  Ref sa = f.call("aten.sum.dim_IntList", {a, A::list({1}), true}, {64, 1});
  Ref sb = f.call("aten.sum.dim_IntList", {b, A::list({1}), true}, {64, 1});
  Ref se = f.call("aten.sum.dim_IntList", {e, A::list({1}), true}, {4, 1});
  f.output({A::tuple({sa, sb, se})});
  const Graph g = f.build();
  const auto orders = memory::kernel_orders(g, memory::inductor_fusion(g));
  // Estimates: the graph's order 33,088 (a, b and e alive at e); lpmf
  // 16,912 (one big product at a time); dfs 33,040 (e and its sum first).
  expect_estimates(orders, 33088, {{"lpmf", 16912}, {"dfs", 33040}});
  ASSERT_EQ(orders.orders.size(), 2u);
  EXPECT_LT(position(orders.orders[1].nodes, se), position(orders.orders[1].nodes, a));
  const MemoryProfile m = simulate_memory(g, trivial_backward(), 3, MemoryModel::kInductor);
  EXPECT_EQ(m.forward_orders, (std::vector<std::string>{"graph", "lpmf", "dfs"}));
}

}  // namespace
}  // namespace remat
