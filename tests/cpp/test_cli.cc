// tests/cpp/test_cli.cc — the `remat` command, run as a separate process:
// exit codes, what goes to stdout and stderr, and the files it writes.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "cli_runner.h"
#include "temp_dir.h"
#include "graph_fixture.h"
#include "remat/graphviz.h"
#include "remat/io.h"
#include "remat/version.h"

namespace remat {
namespace {

using testing::CliRun;
using testing::remat;
using testing::slurp;
using testing::has;

const std::string kTiny = std::string(REMAT_EXAMPLES_DIR) + "/tiny.json";

TEST(Cli, Help) {
  CliRun r = remat("--help");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "info")) << r.out;
  EXPECT_TRUE(has(r.out, "partition")) << r.out;
}

TEST(Cli, PartitionHelpListsOptions) {
  CliRun r = remat("partition --help");
  EXPECT_EQ(r.status, 0) << r.err;
  for (const char* opt : {"--explain", "--cut-side", "--memory-budget", "--no-cse", "--dot",
                          "--partitioner", "--output", "--peak-budget", "--backward-order",
                          "--memory-model", "--no-inductor-reorder"}) {
    EXPECT_TRUE(has(r.out, opt)) << opt << "\n" << r.out;
  }
}

TEST(Cli, VersionIsTheLibrarys) {
  CliRun r = remat("--version");
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(has(r.out, std::string("remat ") + remat::kVersion)) << r.out;
}

TEST(Cli, NoSubcommandIsAUsageError) {
  CliRun r = remat("");
  EXPECT_EQ(r.status, 2);
}

TEST(Cli, UnknownOptionIsAUsageError) {
  CliRun r = remat("partition --frobnicate " + kTiny);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.err, "frobnicate")) << r.err;
}

TEST(Cli, UnknownCommandIsNamedWithTheCommands) {
  CliRun r = remat("partiton " + kTiny);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.err, "unknown command 'partiton'; the commands are info, partition, pareto "
                         "and report")) << r.err;
}

TEST(Cli, MissingOptionValueIsAUsageError) {
  CliRun r = remat("partition " + kTiny + " --memory-budget");
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.err, "--memory-budget")) << r.err;
}

TEST(Cli, InfoCountsNodes) {
  CliRun r = remat("info " + kTiny);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "nodes: 11 (placeholder 3, call_function 7, get_attr 0, output 1)")) << r.out;
  EXPECT_TRUE(has(r.out, "activations:")) << r.out;
  EXPECT_TRUE(has(r.out, "forward")) << r.out;
}

TEST(Cli, InfoUsesTheShippedExampleByDefault) {
  // Point REMAT_EXAMPLES at a folder whose mlp.json is our tiny graph.
  char tmpl[] = "/tmp/remat_cli_examples_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  write_file_atomic(dir + "/mlp.json", read_file(kTiny));
  CliRun r = remat("info", "REMAT_EXAMPLES='" + dir + "'");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, dir + "/mlp.json")) << r.out;
  EXPECT_TRUE(has(r.out, "nodes: 11")) << r.out;
  std::remove((dir + "/mlp.json").c_str());
  rmdir(dir.c_str());
}

TEST(Cli, MissingFileIsAnError) {
  CliRun r = remat("info /nonexistent/graph.json");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "remat: error:")) << r.err;
  EXPECT_TRUE(has(r.err, "/nonexistent/graph.json")) << r.err;
  EXPECT_FALSE(has(r.err, "terminate")) << r.err;
}

TEST(Cli, MalformedGraphIsAnErrorNamingTheNode) {
  char tmpl[] = "/tmp/remat_cli_bad_XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  write_file_atomic(tmpl, R"({"format":"remat.joint_graph","version":1,"num_fwd_outputs":1,"nodes":[
    {"name":"a","op":"call_function","target":"aten.relu.default","args":[{"node":"ghost"}]},
    {"name":"output","op":"output","target":"output","args":[[{"node":"a"}]]}]})");
  CliRun r = remat(std::string("partition ") + tmpl);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "node 'a'")) << r.err;
  EXPECT_TRUE(has(r.err, "'ghost'")) << r.err;
  write_file_atomic(tmpl, "{\"format\": [");
  r = remat(std::string("info ") + tmpl);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "invalid JSON")) << r.err;
  std::remove(tmpl);
}

TEST(Cli, PartitionSummarizesAndWritesResult) {
  char tmpl[] = "/tmp/remat_cli_out_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string out = std::string(tmpl) + "/result.json";
  CliRun r = remat("partition " + kTiny + " -o " + out);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "saved:")) << r.out;
  EXPECT_TRUE(has(r.out, "recomputed in the backward:")) << r.out;
  EXPECT_TRUE(has(r.out, "banned from recomputation:")) << r.out;
  EXPECT_TRUE(has(r.out, "time:")) << r.out;
  const std::string result = read_file(out);
  EXPECT_TRUE(has(result, R"("format":"remat.partition_result")")) << result;
  EXPECT_TRUE(has(result, R"("decisions")")) << result;
  std::remove(out.c_str());
  rmdir(tmpl);
}

TEST(Cli, PartitionOptionsAreAccepted) {
  CliRun r = remat("partition " + kTiny + " --cut-side source --memory-budget 1.0 --no-cse --verbose");
  EXPECT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.err, "loaded")) << r.err;
  EXPECT_TRUE(has(r.err, "ms per stage, prepare ")) << r.err;
  r = remat("partition " + kTiny + " --partitioner default");
  EXPECT_EQ(r.status, 0) << r.err << r.out;
  r = remat("partition " + kTiny + " --memory-budget 7");
  EXPECT_EQ(r.status, 2) << r.out;  // a usage error
  EXPECT_TRUE(has(r.err, "--memory-budget: '7' is not a fraction in [0, 1]")) << r.err;
  r = remat("partition " + kTiny + " --cut-side middle");
  EXPECT_NE(r.status, 0);
}

TEST(Cli, ActivationQuantizationTakesTorchsDictAndNamesBadKeys) {
  const std::string mlp = std::string(REMAT_EXAMPLES_DIR) + "/mlp.json";
  CliRun r = remat("partition " + mlp +
                   R"( --activation-quantization '{"size_in_mb": 0, "allowed_dtypes": "torch.float32"}')");
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "quantized to FP8")) << r.out;
  // torch's default allowed dtype is bfloat16: nothing in this graph.
  r = remat("partition " + mlp + R"( --activation-quantization '{"size_in_mb": 0}')");
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_FALSE(has(r.out, "quantized to FP8")) << r.out;
  r = remat("partition " + mlp + R"( --activation-quantization '{"use_scalling": true}')");
  EXPECT_EQ(r.status, 2) << r.out;  // a usage error
  EXPECT_TRUE(has(r.err, "remat: error:") && has(r.err, "activation_quantization.use_scalling"))
      << r.err;
}

TEST(Cli, Explain) {
  CliRun r = remat("partition " + kTiny + " --explain relu");
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "node 'relu'")) << r.out;
  r = remat("partition " + kTiny + " --explain nosuchnode");
  EXPECT_EQ(r.status, 2);  // a usage error the graph reveals
  EXPECT_TRUE(has(r.err, "'nosuchnode'")) << r.err;
}

// The decisions block of a result document.
std::string decisions_of(const std::string& doc) {
  const size_t from = doc.find("\"decisions\":{");
  return from == std::string::npos ? "" : doc.substr(from, doc.find("\n  }", from) - from);
}

// One reason per node, whichever command prints it: `partition -o`, the
// report's --json (a traced partition) and --explain say the same. At
// budget 0.3 on the transformer block the knapsack lifted addmm_2's ban and
// the aggressive tier dropped gelu's; -o once said only recomputed_cheaper.
TEST(Cli, PartitionReportAndExplainGiveTheSameReasons) {
  const std::string graph = std::string(REMAT_EXAMPLES_DIR) + "/transformer_block.json";
  const std::string base = "/tmp/remat_cli_why_" + std::to_string(getpid());
  ASSERT_EQ(remat("partition '" + graph + "' --memory-budget 0.3 -o " + base + ".json").status, 0);
  ASSERT_EQ(remat("report '" + graph + "' --memory-budget 0.3 --no-pareto -o " + base +
                  ".html --json " + base + "_report.json")
                .status,
            0);
  const std::string plain = decisions_of(slurp(base + ".json"));
  EXPECT_TRUE(has(plain, "\"addmm_2\":{\"where\":\"recomputed\",\"why\":\"recomputed_lifted\"")) << plain;
  EXPECT_TRUE(has(plain, "\"gelu\":{\"where\":\"recomputed\",\"why\":\"recomputed_tier\"")) << plain;
  EXPECT_EQ(plain, decisions_of(slurp(base + "_report.json")));
  CliRun r = remat("partition '" + graph + "' --memory-budget 0.3 --explain addmm_2");
  EXPECT_TRUE(has(r.out, "why: the memory budget's knapsack lifted its ban (compute intensive op)"))
      << r.out;
  r = remat("partition '" + graph + "' --memory-budget 0.3 --explain gelu");
  EXPECT_TRUE(has(r.out, "why: the memory budget's aggressive tier drops the rule that banned it "
                         "(materialized in backward)"))
      << r.out;
  for (const char* ext : {".json", ".html", "_report.json"}) std::remove((base + ext).c_str());
}

TEST(Cli, PartitionPrintsTheSimulatedPeakMemory) {
  CliRun r = remat("partition " + kTiny);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "peak memory: ")) << r.out;
  EXPECT_TRUE(has(r.out, " bytes) at ")) << r.out;
  EXPECT_TRUE(has(r.out, "estimated recompute runtime: ")) << r.out;
}

TEST(Cli, PeakBudgetTakesSizesWithUnits) {
  CliRun r = remat("partition " + kTiny + " --peak-budget 1GiB");
  EXPECT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "peak memory: ")) << r.out;
  r = remat("partition " + kTiny + " --peak-budget '1.5 gb'");
  EXPECT_EQ(r.status, 0) << r.err << r.out;
  r = remat("partition " + kTiny + " --peak-budget 2e9");  // exponents are numbers
  EXPECT_EQ(r.status, 0) << r.err << r.out;
  for (const char* bad : {"12XB", "0", "-3", "abc", "1..5MB", "0x10", "inf", "1e"}) {
    r = remat("partition " + kTiny + " --peak-budget '" + bad + "'");
    EXPECT_EQ(r.status, 2) << bad;  // a usage error
    EXPECT_TRUE(has(r.err, "remat: error: --peak-budget")) << bad << ": " << r.err;
  }
  r = remat("partition " + kTiny + " --peak-budget 1e30");
  EXPECT_TRUE(has(r.err, "'1e30' is too large (at most 8 EiB")) << r.err;
  r = remat("partition " + kTiny + " --peak-budget 12XB");
  EXPECT_TRUE(has(r.err, "'12XB' has an unknown unit 'xb'")) << r.err;
}

// mlp.json's backward runs lower in remat's order (tests/cpp/test_order.cc);
// the result says so, and a wrong name is refused.
TEST(Cli, BackwardOrderMemoryReordersAndSaysSo) {
  remat::testing::TempDir dir("remat_cli_order");
  const std::string mlp = std::string(REMAT_EXAMPLES_DIR) + "/mlp.json";
  CliRun r = remat("partition " + mlp + " --backward-order memory -o " + (dir / "r.json"));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(read_file(dir / "r.json"), R"("backward_reordered":true)"));
  r = remat("partition " + mlp + " -o " + (dir / "plain.json"));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_FALSE(has(read_file(dir / "plain.json"), "backward_reordered"));
  r = remat("partition " + mlp + " --backward-order fifo");
  EXPECT_EQ(r.status, 2);  // a usage error
  EXPECT_TRUE(has(r.err, "--backward-order")) << r.err;
}

// cnn_batchnorm.json's convolutions read channels-last copies of their
// inputs under inductor (memory/fusion.h): another peak, and the result and
// the summary say which model counted it; a wrong name is refused.
TEST(Cli, MemoryModelInductorCountsWhatInductorAllocates) {
  remat::testing::TempDir dir("remat_cli_model");
  const std::string cnn = std::string(REMAT_EXAMPLES_DIR) + "/cnn_batchnorm.json";
  CliRun r = remat("partition " + cnn + " --memory-model inductor -o " + (dir / "r.json"));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "under inductor's memory model")) << r.out;
  const std::string ind = read_file(dir / "r.json");
  EXPECT_TRUE(has(ind, R"("model":"inductor")")) << ind;
  r = remat("partition " + cnn + " -o " + (dir / "plain.json"));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const std::string aten = read_file(dir / "plain.json");
  EXPECT_FALSE(has(aten, R"("model")"));
  auto peak = [](const std::string& doc) {
    const size_t at = doc.find(R"("peak_bytes":)");
    return at == std::string::npos ? -1 : std::stoll(doc.substr(at + 13));
  };
  EXPECT_NE(peak(ind), peak(aten));
  r = remat("partition " + cnn + " --memory-model triton");
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.err, "--memory-model")) << r.err;
}

// Under inductor's model the result names the kernel orders simulated
// (inductor's reorder pass, memory/kernel_order.h); --no-inductor-reorder
// runs the graphs' own order only, and says nothing of orders.
TEST(Cli, NoInductorReorderSimulatesTheGraphsOwnOrder) {
  remat::testing::TempDir dir("remat_cli_reorder");
  const std::string cnn = std::string(REMAT_EXAMPLES_DIR) + "/cnn_batchnorm.json";
  CliRun r = remat("partition " + cnn + " --memory-model inductor -o " + (dir / "r.json"));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const std::string reordered = read_file(dir / "r.json");
  EXPECT_TRUE(has(reordered, R"("kernel_orders":{"forward":{"simulated":["graph")")) << reordered;
  r = remat("partition " + cnn + " --memory-model inductor --no-inductor-reorder -o " + (dir / "g.json"));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_FALSE(has(read_file(dir / "g.json"), "kernel_orders"));
}

TEST(Cli, AnUnreachablePeakBudgetNamesTheSmallestPeak) {
  CliRun r = remat("partition " + kTiny + " --peak-budget 1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_TRUE(has(r.err, "remat: error: peak_memory_budget: no plan fits 1 B (1 bytes); the "
                         "smallest reachable peak is ")) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

// A saved input the caller mutates after the forward: the CLI keeps torch's
// plan and warns, naming the nodes; under a peak budget it repairs the plan.
TEST(Cli, MutationHazardsAreWarnedAboutAndAvoidedUnderAPeakBudget) {
  testing::TestGraph t;
  testing::Ref x = t.placeholder("primals_1", {64});
  testing::Ref stat = t.placeholder("primals_2", {1});
  testing::Ref r = t.call("aten.mul.Tensor", {x, stat}, {64});
  testing::Ref y = t.call("aten.sin.default", {r}, {64});
  testing::Ref tangent = t.placeholder("tangents_1", {64});
  testing::Ref c = t.call("aten.cos.default", {r}, {64});
  testing::Ref g = t.call("aten.mul.Tensor", {tangent, c}, {64});
  testing::Ref gx = t.call("aten.mul.Tensor", {g, x}, {64});
  t.output({testing::A::tuple({y, gx, nullptr})});
  JointGraph j;
  j.graph = t.build();
  j.num_fwd_outputs = 1;
  j.mutated_inputs = {stat.id};
  const std::string path = "/tmp/remat_cli_hazard_" + std::to_string(getpid()) + ".json";
  write_file_atomic(path, write_joint_graph(j));
  CliRun plain = remat("partition " + path);
  EXPECT_EQ(plain.status, 0) << plain.err;
  EXPECT_TRUE(has(plain.err, "remat: warning: the forward saves its input 'primals_2' for the "
                             "backward, but 'primals_2' is mutated after the forward returns"))
      << plain.err;
  CliRun peak = remat("partition " + path + " --peak-budget 1GiB");
  EXPECT_EQ(peak.status, 0) << peak.err;
  EXPECT_FALSE(has(peak.err, "warning")) << peak.err;
  std::remove(path.c_str());
}

// --dot on a graph with no finite cut: the DOT file always, and beside it the
// SVG Graphviz draws from the same text when `dot` is installed.
TEST(Cli, DotWritesTheCapacityGraphAndItsDrawing) {
  remat::testing::TempDir dir("remat_cli_dot");
  const std::string graph = std::string(REMAT_EXAMPLES_DIR) + "/../tests/data/no_finite_cut.json";
  CliRun r = remat("partition " + graph + " --dot " + (dir / "cut.dot"));
  EXPECT_EQ(r.status, 1) << r.err;
  const std::string dot = slurp(dir / "cut.dot");
  EXPECT_TRUE(has(dot, "digraph")) << dot;
  if (!remat::report::dot_available()) GTEST_SKIP() << "Graphviz's dot is not installed";
  EXPECT_TRUE(has(r.err, "rendered " + (dir / "cut.svg"))) << r.err;
  const std::optional<std::string> expected = remat::report::render_svg(dot);
  ASSERT_TRUE(expected.has_value());
  EXPECT_EQ(slurp(dir / "cut.svg"), *expected);
}

}  // namespace
}  // namespace remat
