// tests/cpp/test_order.cc — remat's memory-aware backward order
// (memory/order.h, PartitionOptions::backward_order): on forward/backward
// pairs written by hand, where the simulation says what each order costs,
// and in partitions of the shipped examples. Sizes: a [n] float32 tensor is
// 4n bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "graph_fixture.h"
#include "memory/order.h"
#include "random_mlp.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/memory.h"
#include "remat/partition.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;

std::vector<std::string> names(const Graph& g) {
  std::vector<std::string> out;
  for (NodeId n = 0; n < g.size(); ++n) out.emplace_back(g.name(n));
  return out;
}

// forward: x [100] -> s = sin(x) [100] (saved), y = cos(x) [1] (returned).
// backward (autograd's order): a = exp(tangent) [100], a gradient, then
// b = mul(tangent, s) [1], s's last use. Running b first frees s before a
// allocates: 812 bytes at the peak instead of 1212.
struct Pair {
  Graph fw, bw;
};

Pair allocate_then_free(bool barrier_between) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {100});
  Ref s = f.call("aten.sin.default", {x}, {100});
  Ref y = f.call("aten.cos.default", {x}, {1});
  f.output({A::tuple({y, s})});
  TestGraph g;
  Ref ss = g.placeholder("sin", {100});
  Ref t = g.placeholder("tangents_1", {1});
  Ref a = g.call("aten.exp.default", {t}, {100});
  std::vector<A> outs{a};
  if (barrier_between) {
    // An impure op between them: nothing crosses it.
    Ref p = g.call("aten.neg.default", {t}, {1});
    g[p].flags |= kFlagImpure;
    outs.push_back(p);
  }
  Ref b = g.call("aten.mul.Tensor", {t, ss}, {1});
  outs.push_back(b);
  g.output({A::tuple(outs)});
  return {f.build(), g.build()};
}

TEST(MemoryOrder, RunsWhatFreesBeforeWhatAllocates) {
  Pair p = allocate_then_free(false);
  EXPECT_EQ(simulate_memory(p.fw, p.bw, 1).peak_bytes, 1212);
  const OrderedBackward o = memory_ordered_backward(p.fw, p.bw, 1, TorchBehavior{});
  EXPECT_TRUE(o.reordered);
  EXPECT_EQ(names(o.backward), (std::vector<std::string>{"sin", "tangents_1", "mul", "exp", "output"}));
  EXPECT_EQ(simulate_memory(p.fw, o.backward, 1).peak_bytes, 812);
}

TEST(MemoryOrder, NothingCrossesABarrier) {
  Pair p = allocate_then_free(true);
  const OrderedBackward o = memory_ordered_backward(p.fw, p.bw, 1, TorchBehavior{});
  EXPECT_FALSE(o.reordered);
  EXPECT_EQ(names(o.backward), names(p.bw));
}

// An order that does not lower the peak is not taken: here the greedy one
// is the given one, and the graph comes back as it was.
TEST(MemoryOrder, KeepsTheGivenOrderWhenItIsNoWorse) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  Ref s = f.call("aten.sin.default", {x}, {4});
  f.output({A::tuple({s, s})});
  TestGraph g;
  Ref ss = g.placeholder("sin", {4});
  Ref t = g.placeholder("tangents_1", {4});
  Ref m = g.call("aten.mul.Tensor", {t, ss}, {4});
  g.output({A::tuple({m})});
  const Graph fw = f.build(), bw = g.build();
  const OrderedBackward o = memory_ordered_backward(fw, bw, 1, TorchBehavior{});
  EXPECT_FALSE(o.reordered);
  EXPECT_EQ(names(o.backward), names(bw));
}

// Every node's inputs run before it; the same nodes, the same outputs.
void expect_same_nodes_in_a_valid_order(const Graph& given, const Graph& ordered) {
  std::vector<std::string> a = names(given), b = names(ordered);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
  for (NodeId n = 0; n < ordered.size(); ++n)
    for (NodeId in : ordered.inputs(n)) EXPECT_LT(in, n) << ordered.name(n);
}

// In the pipeline: the option's plan never has a higher peak than
// autograd's order, decides the same saved values, and says whether it
// reordered; on mlp.json it lowers the peak (20288 -> 20096 bytes when
// this was written).
TEST(MemoryOrder, ThePlanNeverPeaksHigherAndDecidesTheSame) {
  int lowered = 0;
  for (const char* name : {"mlp", "tiny", "checkpointed", "cnn_batchnorm", "transformer_block"}) {
    SCOPED_TRACE(name);
    const JointGraph j = read_joint_graph_file(std::string(REMAT_EXAMPLES_DIR) + "/" + name + ".json");
    PartitionOptions plain, ordered;
    ordered.backward_order = PartitionOptions::BackwardOrder::kMemory;
    const PartitionResult a = min_cut_rematerialization_partition(j, plain);
    const PartitionResult b = min_cut_rematerialization_partition(j, ordered);
    EXPECT_FALSE(a.backward_reordered.has_value());
    ASSERT_TRUE(b.backward_reordered.has_value());
    EXPECT_EQ(a.saved_values, b.saved_values);
    EXPECT_EQ(names(a.forward), names(b.forward));
    expect_same_nodes_in_a_valid_order(a.backward, b.backward);
    EXPECT_LE(b.memory.peak_bytes, a.memory.peak_bytes);
    if (*b.backward_reordered) {
      EXPECT_LT(b.memory.peak_bytes, a.memory.peak_bytes);
      ++lowered;
    } else {
      EXPECT_EQ(names(a.backward), names(b.backward));
    }
    if (std::string(name) == "mlp") {
      EXPECT_TRUE(*b.backward_reordered);
    }
  }
  EXPECT_GE(lowered, 1);
}

// Under a peak limit the search plans against the order the plan runs in:
// whatever it returns fits, in that order.
TEST(MemoryOrder, PeakSearchesPlanAgainstTheOrderThatRuns) {
  const JointGraph j = testing::random_mlp(3);
  PartitionOptions o;
  o.backward_order = PartitionOptions::BackwardOrder::kMemory;
  const int64_t top = min_cut_rematerialization_partition(j, o).memory.peak_bytes;
  for (auto search : {PartitionOptions::PeakSearch::kTorchPlans, PartitionOptions::PeakSearch::kFast,
                      PartitionOptions::PeakSearch::kExact}) {
    o.peak_search = search;
    o.peak_memory_budget = top - top / 10;
    o.peak_search_nodes = 200;
    try {
      const PartitionResult r = min_cut_rematerialization_partition(j, o);
      EXPECT_LE(r.memory.peak_bytes, o.peak_memory_budget) << peak_search_name(search);
      EXPECT_EQ(simulate_memory(r.forward, r.backward, r.num_fwd_outputs).peak_bytes, r.memory.peak_bytes);
    } catch (const BudgetUnreachableError& e) {
      EXPECT_GT(e.smallest_peak(), o.peak_memory_budget) << e.what();
    }
  }
}

// The least recompute at `limit` under `order` (nullopt: unreachable); at
// a limit of 1 byte, the smallest reachable peak (as a negative number).
std::optional<double> searched(const JointGraph& j, PartitionOptions::BackwardOrder order,
                               PartitionOptions::PeakSearch search, int64_t limit, int64_t* smallest = nullptr) {
  PartitionOptions o;
  o.backward_order = order;
  o.peak_search = search;
  o.peak_search_nodes = 200;  // the rule holds whatever the budget; this keeps the test short
  o.peak_memory_budget = limit;
  try {
    return min_cut_rematerialization_partition(j, o).recompute_runtime;
  } catch (const BudgetUnreachableError& e) {
    if (smallest) *smallest = e.smallest_peak();
    return std::nullopt;
  }
}

// remat's memory order never makes a limited plan worse than autograd's:
// at every limit across the range it recomputes no more, and its smallest
// reachable peak is no higher (its model alone sees no backward rows, so it
// also searches in autograd's order and keeps the better plan).
TEST(MemoryOrder, APeakLimitedPlanIsNeverWorseThanInAutogradsOrder) {
  using Order = PartitionOptions::BackwardOrder;
  using Search = PartitionOptions::PeakSearch;
  int compared = 0;
  for (uint32_t seed : {0u, 2u, 3u}) {
    const JointGraph j = testing::random_mlp(seed);
    const int64_t top = min_cut_rematerialization_partition(j, PartitionOptions{}).memory.peak_bytes;
    for (Search search : {Search::kFast, Search::kExact}) {
      if (search == Search::kExact && seed != 0) continue;  // time: one is enough
      int64_t bottom = 0, bottom_memory = 0;
      searched(j, Order::kAutograd, search, 1, &bottom);
      searched(j, Order::kMemory, search, 1, &bottom_memory);
      EXPECT_LE(bottom_memory, bottom) << "seed " << seed << " " << peak_search_name(search);
      for (int step = 0; step <= 2; ++step) {
        const int64_t limit = bottom + (top - bottom) * step / 2;
        const std::optional<double> a = searched(j, Order::kAutograd, search, limit);
        if (!a) continue;
        const std::optional<double> m = searched(j, Order::kMemory, search, limit);
        ASSERT_TRUE(m.has_value()) << "seed " << seed << " at " << limit;
        EXPECT_LE(*m, *a * (1 + 1e-12)) << "seed " << seed << " at " << limit << " " << peak_search_name(search);
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, 8);
}

}  // namespace
}  // namespace remat
