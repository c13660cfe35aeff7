// tests/cpp/test_cli_options.cc — where `remat partition`, `pareto` and
// `report` take their options from: --options FILE, --config KEY=VALUE under
// torch's flag names, the dedicated flags, and their precedence.
#include <unistd.h>

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "cli_runner.h"
#include "graph_fixture.h"

namespace remat {
namespace {

using testing::CliRun;
using testing::remat;
using testing::slurp;

using testing::has;

// transformer_block.json: recompute_views and the memory budget both change
// its result, so each test below can tell whether a value arrived.
const std::string kGraph = std::string(REMAT_EXAMPLES_DIR) + "/transformer_block.json";

std::string temp_path(const std::string& name) {
  return "/tmp/remat_cli_options_" + std::to_string(getpid()) + "_" + name;
}

// The result JSON `remat partition GRAPH ARGS -o ...` writes.
std::string result_of(const std::string& args) {
  const std::string out = temp_path("result.json");
  const CliRun r = remat("partition '" + kGraph + "' " + args + " -o '" + out + "'");
  EXPECT_EQ(r.status, 0) << args << "\n" << r.err;
  std::string json = slurp(out);
  std::remove(out.c_str());
  return json;
}

std::string options_file(const std::string& json) {
  const std::string path = temp_path("options.json");
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(json.c_str(), f);
  std::fclose(f);
  return path;
}

TEST(CliOptions, ConfigSetsTheTorchFlagOfTheSameName) {
  const std::string plain = result_of("");
  const std::string views = result_of("--config recompute_views=True");
  EXPECT_NE(views, plain);
  EXPECT_EQ(views, result_of("--options '" + options_file(R"({"recompute_views": true})") + "'"));
  EXPECT_EQ(result_of("--config recompute_views=False"), plain);
  EXPECT_EQ(result_of("--config activation_memory_budget=0.5"),
            result_of("--memory-budget 0.5"));
}

TEST(CliOptions, ConfigIsRepeatableAndTheLastEntryWins) {
  EXPECT_EQ(result_of("--config recompute_views=True --config recompute_views=False"),
            result_of(""));
  EXPECT_EQ(result_of("--config recompute_views=True --config activation_memory_budget=0.5"),
            result_of("--options '" +
                      options_file(R"({"recompute_views": true, "activation_memory_budget": 0.5})") +
                      "'"));
}

TEST(CliOptions, ConfigOverridesTheFileAndDedicatedFlagsOverrideBoth) {
  const std::string file = options_file(R"({"activation_memory_budget": 0.1})");
  const std::string plain = result_of("");
  EXPECT_NE(result_of("--options '" + file + "'"), plain);
  EXPECT_EQ(result_of("--options '" + file + "' --config activation_memory_budget=1.0"), plain);
  EXPECT_EQ(result_of("--config activation_memory_budget=0.1 --memory-budget 1"), plain);
  EXPECT_EQ(result_of("--config cse=False"), result_of("--no-cse"));
}

TEST(CliOptions, SolverAndEstimatorChoiceIsTheConfigFlags) {
  EXPECT_EQ(result_of("--memory-budget 0.5 --solver greedy --runtime-estimator testing"),
            result_of("--memory-budget 0.5 --config activation_memory_budget_solver=greedy "
                      "--config activation_memory_budget_runtime_estimator=testing"));
  const CliRun r = remat("partition '" + kGraph + "' --solver nope");
  EXPECT_EQ(r.status, 2);  // a usage error
  EXPECT_TRUE(has(r.err, "activation_memory_budget_solver: unknown solver \"nope\"")) << r.err;
  EXPECT_TRUE(has(r.err, "\"dp_knapsack_sliding_hirschberg\"")) << r.err;
  const CliRun e = remat("partition '" + kGraph + "' --estimator nope");
  EXPECT_EQ(e.status, 2);
  EXPECT_TRUE(has(e.err, "\"testing\"")) << e.err;
}

TEST(CliOptions, UnknownKeyIsNotATorchFlagRematHonors) {
  const CliRun r = remat("partition '" + kGraph + "' --config recompute_vews=True");
  EXPECT_EQ(r.status, 2);  // a usage error
  EXPECT_TRUE(has(r.err, "'recompute_vews' is not a torch._functorch.config flag remat honors"))
      << r.err;
  EXPECT_TRUE(has(r.err, "recompute_views")) << r.err;  // the list of valid names
  // remat's own options are not torch flags: they go in the file.
  const CliRun own = remat("partition '" + kGraph + "' --config trace=True");
  EXPECT_EQ(own.status, 2);
  EXPECT_TRUE(has(own.err, "--options FILE")) << own.err;
}

TEST(CliOptions, BadValuesNameTheEntryAndTheKey) {
  CliRun r = remat("partition '" + kGraph + "' --config recompute_views=maybe");
  EXPECT_EQ(r.status, 2);  // a usage error
  EXPECT_TRUE(has(r.err, "--config recompute_views=maybe: option 'recompute_views': expected a bool"))
      << r.err;
  r = remat("partition '" + kGraph + "' --config max_dist_from_bw=2.5");
  EXPECT_TRUE(has(r.err, "option 'max_dist_from_bw': expected an integer")) << r.err;
  r = remat("partition '" + kGraph + "' --config activation_memory_budget=3");
  EXPECT_TRUE(has(r.err, "activation_memory_budget: the valid ranges for memory budget are 0 <= m <= 1")) << r.err;
  r = remat("partition '" + kGraph + "' --config recompute_views");
  EXPECT_TRUE(has(r.err, "expected KEY=VALUE")) << r.err;
}

TEST(CliOptions, TorchsPrivateSyncFlagKeepsItsName) {
  // torch spells it _sync_decision_cross_ranks; alone it changes nothing.
  EXPECT_EQ(result_of("--config _sync_decision_cross_ranks=True"), result_of(""));
  const CliRun r = remat("partition '" + kGraph + "' --config sync_decision_cross_ranks=True");
  EXPECT_EQ(r.status, 2);
}

TEST(CliOptions, BadOptionsFilesNameTheFileAndTheKey) {
  CliRun r = remat("partition '" + kGraph + "' --options '" + options_file(R"({"bogus": 1})") + "'");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "options.json: option 'bogus': unknown option")) << r.err;
  r = remat("partition '" + kGraph + "' --options '" + options_file("{not json") + "'");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "--options")) << r.err;
  r = remat("partition '" + kGraph + "' --options /nonexistent/options.json");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "/nonexistent/options.json")) << r.err;
}

TEST(CliOptions, ParetoTakesOptionsTheSameWay) {
  const std::string svg = temp_path("pareto.svg");
  const CliRun r = remat("pareto '" + kGraph + "' -o '" + svg +
                         "' --config activation_memory_budget_solver=greedy");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "solver: greedy, runtime estimator: flops")) << r.out;
  const CliRun flag = remat("pareto '" + kGraph + "' -o '" + svg +
                            "' --config activation_memory_budget_solver=greedy --solver ilp");
  EXPECT_TRUE(has(flag.out, "solver: ilp,")) << flag.out;
  std::remove(svg.c_str());
}

TEST(CliOptions, HelpStatesThePrecedenceAndTheFlags) {
  for (const char* cmd : {"partition", "pareto", "report"}) {
    const CliRun r = remat(std::string(cmd) + " --help");
    EXPECT_EQ(r.status, 0);
    EXPECT_TRUE(has(r.out, "--options FILE, each --config KEY=VALUE in the order given, then the "
                           "dedicated flags"))
        << cmd << "\n" << r.out;
    EXPECT_TRUE(has(r.out, "ban_recompute_reductions")) << cmd;
    EXPECT_TRUE(has(r.out, "_sync_decision_cross_ranks")) << cmd;
  }
}

// cli/options.h's order: the graph's own op categories are part of the
// defaults, and an --options file's "ops" wins over them. The graph here
// makes addmm recomputable, which changes the plan; the file restores the
// default list's categories for it.
TEST(CliOptions, AnOptionsFileOverridesTheGraphsOwnOpCategories) {
  std::string text = slurp(kGraph);
  const std::string entry = "\"name\": \"aten.addmm.default\",";
  const size_t at = text.find(entry);
  ASSERT_NE(at, std::string::npos);
  text.insert(at + entry.size(), " \"categories\": [\"recomputable\", \"fusible\"],");
  const std::string graph = temp_path("categories.json");
  std::FILE* f = std::fopen(graph.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  auto saved_of = [&](const std::string& g, const std::string& args) {
    const std::string out = temp_path("saved.json");
    const CliRun r = remat("partition '" + g + "' " + args + " -o '" + out + "'");
    EXPECT_EQ(r.status, 0) << r.err;
    const std::string json = slurp(out);
    std::remove(out.c_str());
    return json.substr(json.find("\"saved_values\""), 2000);
  };
  const std::string plain = saved_of(kGraph, "");
  ASSERT_NE(saved_of(graph, ""), plain) << "the graph's categories must matter here";
  const std::string file = options_file(R"({"ops": {"aten.addmm": ["compute_intensive"]}})");
  EXPECT_EQ(saved_of(graph, "--options '" + file + "'"), plain);
  std::remove(graph.c_str());
}

// --- usage errors ----------------------------------------------------------------

// Every bad option value is a usage error, exit 2, whether the parser or a
// check after it finds it, with a message that names the flag, says what
// is accepted and points at the command's --help; nothing is written.
TEST(CliUsage, EveryBadOptionValueIsAUsageErrorSayingWhatIsAccepted) {
  const std::string out = temp_path("usage.out");
  const struct {
    std::string args, says;
  } cases[] = {
      {"partition G --memory-budget 2", "--memory-budget: '2' is not a fraction in [0, 1]"},
      {"partition G --solver nope", "--solver nope: activation_memory_budget_solver: unknown solver "
                                    "\"nope\" (one of \"greedy\""},
      {"partition G --runtime-estimator nope", "unknown estimator \"nope\" (one of \"flops\""},
      {"partition G --peak-budget 12XB", "--peak-budget: '12XB' has an unknown unit 'xb' (expected "
                                         "bytes, or a number with a unit"},
      {"partition G --config nope=1", "--config nope=1: 'nope' is not a torch._functorch.config "
                                      "flag remat honors (those are: cse,"},
      {"partition G --config activation_memory_budget=3", "the valid ranges for memory budget are"},
      {"partition G --torch 2.9", "--torch 2.9: option 'torch_release': torch 2.9 is not a "
                                  "supported release (remat reproduces torch 2.11 to"},
      {"partition G --activation-quantization '{\"use_scalling\": 1}'",
       "--activation-quantization: activation_quantization.use_scalling: unknown key (torch reads"},
      {"partition G --activation-quantization '{'", "--activation-quantization: "},
      {"partition G --peak-search-seconds 0", "--peak-search-seconds: '0' is not a number greater than 0"},
      {"partition G --peak-search-nodes 0", "--peak-search-nodes: '0' is not a whole number greater than 0"},
      {"partition G --peak-search-nodes 2.5", "'2.5' is not a whole number greater than 0"},
      {"pareto G --peak --peak-search-nodes -3", "'-3' is not a whole number greater than 0"},
      {"partition G --explain ''", "--explain: the node name is empty"},
      {"partition G --explain nosuchnode", "--explain: node 'nosuchnode' is not in the joint graph"},
      {"pareto G --solver nope", "--solver nope: activation_memory_budget_solver: unknown solver"},
      {"pareto G --peak --peak-search-seconds -1", "'-1' is not a number greater than 0"},
      {"pareto G --torch 2.9", "torch 2.9 is not a supported release"},
      {"report G --memory-budget 2", "--memory-budget: '2' is not a fraction in [0, 1]"},
      {"report G --config nope=1", "'nope' is not a torch._functorch.config flag"},
  };
  for (const auto& c : cases) {
    std::string args = c.args;
    args.replace(args.find(" G"), 2, " '" + kGraph + "'");
    const std::string cmd = args.substr(0, args.find(' '));
    const CliRun r = remat(args + " -o '" + out + "'");
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_TRUE(has(r.err, "remat: error: ")) << c.args << "\n" << r.err;
    EXPECT_TRUE(has(r.err, c.says)) << c.args << "\n" << r.err;
    EXPECT_TRUE(has(r.err, "Run with " + cmd + " --help for more information.")) << r.err;
    EXPECT_LT(r.err.size(), 1200u) << c.args;  // a sentence, not a 309-digit bound
    EXPECT_EQ(slurp(out), "") << c.args << ": wrote its output";
  }
}

// Errors in what the files say are not usage errors: exit 1.
TEST(CliUsage, ErrorsInTheInputFilesExitOne) {
  CliRun r = remat("partition '" + kGraph + "' --options '" +
                   options_file(R"({"activation_memory_budget": 2})") + "'");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "activation_memory_budget")) << r.err;
  r = remat("partition /nonexistent/graph.json");
  EXPECT_EQ(r.status, 1) << r.err;
  const std::string bad = options_file("{");  // any file: not a graph
  r = remat("partition '" + bad + "'");
  EXPECT_EQ(r.status, 1) << r.err;
}

// An options file's "ops" key that names no operator of the graph does
// nothing: remat warns (a warning, not an error: one file may serve several
// graphs), and for an overload of an op the graph has it names the packet
// categories are keyed by. A key that matches says nothing.
TEST(CliOptions, AnOpsKeyThatMatchesNoOperatorSaysSo) {
  const std::string typo =
      options_file(R"({"ops": {"aten.transpose.int": ["recomputable"], "aten.nosuch": []}})");
  CliRun r = remat("partition '" + kGraph + "' --options '" + typo + "'");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.err, "remat: warning: --options " + typo + ": \"ops\" key 'aten.transpose.int' "
                         "matches no operator of the graph, so it does nothing (categories are "
                         "keyed by packet: did you mean 'aten.transpose'?)"))
      << r.err;
  EXPECT_TRUE(has(r.err, "\"ops\" key 'aten.nosuch' matches no operator of the graph, so it does "
                         "nothing\n"))
      << r.err;
  // report and pareto read options the same way.
  r = remat("report '" + kGraph + "' --no-pareto -o '" + temp_path("ops.html") + "' --options '" +
            typo + "'");
  EXPECT_TRUE(has(r.err, "'aten.transpose.int' matches no operator")) << r.err;
  std::remove(temp_path("ops.html").c_str());
  const std::string right = options_file(R"({"ops": {"aten.transpose": ["recomputable"]}})");
  r = remat("partition '" + kGraph + "' --options '" + right + "'");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(has(r.err, "warning")) << r.err;
}

}  // namespace
}  // namespace remat
