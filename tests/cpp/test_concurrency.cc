// tests/cpp/test_concurrency.cc — partitions of one JointGraph from several
// threads at once (remat/partition.h's contract): each gives the result a
// partition alone gives, and the joint graph's pools are left as they were.
// Built with ThreadSanitizer (tools/test.sh), these tests also prove the
// absence of data races; the plain build checks the results.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/partition.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;

// x -> rand_like (MUST_RECOMPUTE) -> mul -> sin: the RNG rewrite replays the
// random op in the backward, creating nodes, names and tensors that the
// joint graph does not have.
JointGraph rng_joint() {
  TestGraph t;
  Ref x = t.placeholder("primals_1");
  Ref tangent = t.placeholder("tangents_1");
  Ref rand = t.call("aten.rand_like.default", {x});
  t[rand].recompute = RecomputePolicy::kMustRecompute;
  t.op("aten.rand_like.default").tags = kTagNondeterministicSeeded;
  Ref mul = t.call("aten.mul.Tensor", {x, rand});
  Ref sin = t.call("aten.sin.default", {mul});
  Ref cos = t.call("aten.cos.default", {mul});
  Ref grad = t.call("aten.mul.Tensor", {tangent, cos});
  Ref grad_x = t.call("aten.mul.Tensor", {grad, rand});
  t.output({A::tuple({sin, grad_x})});
  JointGraph j;
  j.graph = t.build();
  j.num_fwd_outputs = 1;
  return j;
}

std::vector<JointGraph> joints() {
  std::vector<JointGraph> out;
  for (const char* name : {"transformer_block", "checkpointed", "cnn_batchnorm", "mlp_dynamic"}) {
    out.push_back(read_joint_graph_file(std::string(REMAT_EXAMPLES_DIR) + "/" + name + ".json"));
  }
  out.push_back(rng_joint());
  return out;
}

// One way of partitioning a joint graph, its output as bytes.
using PartitionRun = std::string (*)(const JointGraph&);

std::string min_cut(const JointGraph& j) {
  return write_result(j, min_cut_rematerialization_partition(j, {}));
}
std::string default_part(const JointGraph& j) { return write_result(j, default_partition(j, {})); }
std::string budget(const JointGraph& j) {
  PartitionOptions o;
  o.activation_memory_budget = 0.3;
  o.trace = true;  // the log lines and knapsack calls it records, too
  return write_result(j, min_cut_rematerialization_partition(j, o));
}
std::string pareto(const JointGraph& j) {
  std::string out;
  try {
    for (const MemoryBudgetPoint& p : memory_budget_pareto(j, {}, 1e-2)) {
      out += std::to_string(p.budget) + " " + std::to_string(p.recompute_runtime) + " " +
             std::to_string(p.memory_ratio) + "\n";
    }
  } catch (const Error& e) {
    out = e.what();  // graphs with no trade-off fail the same way every time
  }
  return out;
}

constexpr PartitionRun kRuns[] = {min_cut, default_part, budget, pareto};

TEST(Concurrency, PartitionsOfOneJointGraphFromManyThreadsMatchASequentialOne) {
  const std::vector<JointGraph> js = joints();
  std::vector<std::vector<std::string>> expected(js.size());
  for (size_t g = 0; g < js.size(); ++g) {
    for (PartitionRun run : kRuns) expected[g].push_back(run(js[g]));
  }
  constexpr int kThreads = 8, kRounds = 3;
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Every thread walks the same graphs in a different order of runs, so
      // different partitions of one graph overlap.
      for (int round = 0; round < kRounds; ++round) {
        for (size_t g = 0; g < js.size(); ++g) {
          for (size_t k = 0; k < std::size(kRuns); ++k) {
            const size_t r = (k + t + round) % std::size(kRuns);
            if (kRuns[r](js[g]) != expected[g][r]) ++mismatches;
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// What made concurrent partitions unsafe: the graphs a partition derives
// appended names and value metadata to the joint graph's own pools.
TEST(Concurrency, PartitionsLeaveTheJointGraphsPoolsAsTheyWere) {
  for (const JointGraph& j : joints()) {
    const size_t strings = j.graph.strings().size();
    const ValuePool::Sizes values = j.graph.values().sizes();
    for (PartitionRun run : kRuns) run(j);
    EXPECT_EQ(j.graph.strings().size(), strings);
    EXPECT_EQ(j.graph.values().sizes(), values);
  }
}

// Results outlive nothing they need: the pools a result's graphs use stay
// alive with the result, after the joint graph is gone.
TEST(Concurrency, ResultsKeepTheirPoolsAfterTheJointGraphIsGone) {
  PartitionResult r;
  std::string expected_names;
  {
    JointGraph j = rng_joint();
    r = min_cut_rematerialization_partition(j, {});
    for (NodeId id = 0; id < r.backward.size(); ++id) expected_names += std::string(r.backward.name(id)) + " ";
  }
  std::string names;
  for (NodeId id = 0; id < r.backward.size(); ++id) names += std::string(r.backward.name(id)) + " ";
  EXPECT_EQ(names, expected_names);
  EXPECT_NE(names.find("run_with_rng_state"), std::string::npos) << names;
}

}  // namespace
}  // namespace remat
