// tests/cpp/test_options.cc — the options object (remat/io.h's read_options
// and apply_options), the torch flags the command line maps, and the
// validation of solver and estimator names against the budget registries.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "budget/flops.h"
#include "graph_fixture.h"
#include "budget/knapsack.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/options.h"

namespace remat {
namespace {

// The message of the Error(kInvalidOption) `f` throws.
template <typename F>
std::string invalid_option(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidOption) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

using testing::has;

TEST(Options, KeysSetTheirFieldsAndTheRestKeepTorchsDefaults) {
  const PartitionOptions o = read_options(
      R"({"recompute_views": true, "activation_memory_budget": 0.25, "max_dist_from_bw": 7,
          "activation_memory_budget_solver": "greedy", "cut_side": "source_minimal",
          "graphsafe_rng_device_types": ["xpu"], "ops": {"aten.mm": ["recomputable"]}})");
  EXPECT_TRUE(o.recompute_views);
  EXPECT_EQ(o.activation_memory_budget, 0.25);
  EXPECT_EQ(o.max_dist_from_bw, 7);
  EXPECT_EQ(o.activation_memory_budget_solver, "greedy");
  EXPECT_EQ(o.cut_side, CutSide::kSourceMinimal);
  EXPECT_EQ(o.graphsafe_rng_device_types, std::vector<std::string>{"xpu"});
  EXPECT_TRUE(o.cse);
  EXPECT_TRUE(o.ban_recompute_reductions);
  EXPECT_EQ(o.activation_memory_budget_runtime_estimator, "flops");
}

TEST(Options, ApplyLayersOverWhatIsThere) {
  PartitionOptions o;
  apply_options(R"({"activation_memory_budget": 0.5, "cse": false})", o);
  apply_options(R"({"activation_memory_budget": 0.75})", o);
  EXPECT_EQ(o.activation_memory_budget, 0.75);
  EXPECT_FALSE(o.cse);  // not named by the second layer
}

TEST(Options, EveryErrorNamesTheKey) {
  EXPECT_TRUE(has(invalid_option([] { read_options(R"({"bogus": 1})"); }), "option 'bogus'"));
  EXPECT_TRUE(has(invalid_option([] { read_options(R"({"cse": 3})"); }),
                  "option 'cse': expected a bool"));
  EXPECT_TRUE(has(invalid_option([] { read_options(R"({"max_dist_from_bw": 1.5})"); }),
                  "option 'max_dist_from_bw': expected an integer"));
  EXPECT_TRUE(has(invalid_option([] { read_options(R"({"cut_side": "middle"})"); }),
                  "option 'cut_side'"));
  EXPECT_TRUE(has(invalid_option([] { read_options("[1]"); }), "expected a JSON object"));
  EXPECT_TRUE(has(invalid_option([] { read_options(R"({"activation_memory_budget": 2})"); }),
                  "activation_memory_budget: the valid ranges for memory budget are 0 <= m <= 1"));
  EXPECT_THROW(read_options("{not json"), Error);
}

TEST(Options, CategoryListsHaveOneParserForGraphsAndOptions) {
  const std::string msg =
      invalid_option([] { read_options(R"({"ops": {"aten.mm": ["cheap"]}})"); });
  EXPECT_TRUE(has(msg, "option 'ops'")) << msg;
  EXPECT_TRUE(has(msg, "'aten.mm'")) << msg;
  // The same words as a graph's ops[].categories (tests/cpp/test_io.cc).
  EXPECT_TRUE(has(msg, "unknown op category 'cheap' (expected recomputable, view, random, "
                       "compute_intensive or fusible)"))
      << msg;
  EXPECT_TRUE(has(invalid_option([] { read_options(R"({"ops": {"aten.mm": "view"}})"); }),
                  "expected an array of op category names"));
}

TEST(Options, HooksSelectTheCustomSolverAndEstimator) {
  OptionHooks hooks;
  hooks.knapsack_solver = [](const std::vector<double>&, double, const std::vector<NodeId>&) {
    return std::pair<std::vector<int>, std::vector<int>>{};
  };
  hooks.runtime_estimator = [](NodeId) { return 1.0; };
  const PartitionOptions o = read_options(R"({"activation_memory_budget_solver": "greedy"})", hooks);
  EXPECT_EQ(o.activation_memory_budget_solver, "custom");
  EXPECT_EQ(o.activation_memory_budget_runtime_estimator, "custom");
  EXPECT_TRUE(o.custom_knapsack);
  // "custom" named without its hook is an error naming the hook's field.
  EXPECT_TRUE(has(invalid_option([] {
                    read_options(R"({"activation_memory_budget_solver": "custom"})");
                  }),
                  "custom_knapsack"));
}

TEST(Options, EveryTorchFlagTheCommandLineTakesIsAnOptionKey) {
  for (const TorchConfigFlag& f : torch_config_flags()) {
    PartitionOptions o;
    // null has no field's type: the error must be about the value, proving
    // the key itself is known.
    const std::string msg = invalid_option(
        [&] { apply_options("{\"" + std::string(f.option) + "\": {}}", o); });
    EXPECT_FALSE(has(msg, "unknown option")) << f.torch_name << ": " << msg;
  }
}

TEST(Options, RegisteredSolversAndEstimatorsAreValidNames) {
  PartitionOptions o;
  o.activation_memory_budget_solver = "test_options_solver";
  std::string msg = invalid_option([&] { o.validate(); });
  EXPECT_TRUE(has(msg, "activation_memory_budget_solver")) << msg;
  EXPECT_TRUE(has(msg, "\"dynamic_memory_budget_dp\"")) << msg;
  register_knapsack_solver("test_options_solver", greedy_knapsack);
  EXPECT_NO_THROW(o.validate());

  o.activation_memory_budget_runtime_estimator = "test_options_estimator";
  msg = invalid_option([&] { o.validate(); });
  EXPECT_TRUE(has(msg, "activation_memory_budget_runtime_estimator")) << msg;
  EXPECT_TRUE(has(msg, "\"profile\"")) << msg;
  register_runtime_estimator("test_options_estimator", [](const Graph&, NodeId) { return 2.0; });
  EXPECT_NO_THROW(o.validate());
  // An unknown name lists the registered ones too.
  o.activation_memory_budget_solver = "nope";
  EXPECT_TRUE(has(invalid_option([&] { o.validate(); }), "\"test_options_solver\""));
}

// An "ops" key is a registry key: an overload's packet, a function's or a
// higher-order op's name. A key naming no operator of the graph does
// nothing for it; unmatched_op_keys lists them, in the object's order,
// for the front doors to say so.
TEST(Options, UnmatchedOpKeysAreTheOnesNoOperatorOfTheGraphHas) {
  testing::TestGraph t;
  testing::Ref x = t.placeholder("primals_1");
  testing::Ref y = t.call("aten.transpose.int", {x, 0, 1});
  testing::Ref z = t.call("operator.getitem", {y, 0});
  t.output({testing::A::tuple({z})});
  const JointGraph joint = testing::joint_of(t);
  const std::string json =
      R"({"cse": false, "ops": {"aten.transpose.int": ["view"], "aten.transpose": ["view"],
                                "operator.getitem": [], "aten.nosuch": []}})";
  EXPECT_EQ(unmatched_op_keys(joint, json), (std::vector<std::string>{"aten.transpose.int", "aten.nosuch"}));
  EXPECT_TRUE(unmatched_op_keys(joint, R"({"cse": false})").empty());
  EXPECT_TRUE(unmatched_op_keys(joint, "").empty());
  EXPECT_TRUE(unmatched_op_keys(joint, "{not json").empty());  // apply_options' to report
}

}  // namespace
}  // namespace remat
