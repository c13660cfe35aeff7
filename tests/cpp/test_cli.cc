// tests/cpp/test_cli.cc — the `remat` command, run as a separate process:
// exit codes, what goes to stdout and stderr, and the files it writes.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "cli_runner.h"
#include "graph_fixture.h"
#include "remat/io.h"

namespace remat {
namespace {

using testing::CliRun;
using testing::remat;
using testing::slurp;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

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
                          "--partitioner", "--output"}) {
    EXPECT_TRUE(has(r.out, opt)) << opt << "\n" << r.out;
  }
}

TEST(Cli, Version) {
  CliRun r = remat("--version");
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(has(r.out, "remat 0.1.0")) << r.out;
}

TEST(Cli, NoSubcommandIsAnError) {
  CliRun r = remat("");
  EXPECT_NE(r.status, 0);
}

TEST(Cli, UnknownOptionIsAnError) {
  CliRun r = remat("partition --frobnicate " + kTiny);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.err, "frobnicate")) << r.err;
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
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_TRUE(has(r.err, "memory_budget")) << r.err;
  r = remat("partition " + kTiny + " --cut-side middle");
  EXPECT_NE(r.status, 0);
}

TEST(Cli, Explain) {
  CliRun r = remat("partition " + kTiny + " --explain relu");
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "node 'relu'")) << r.out;
  r = remat("partition " + kTiny + " --explain nosuchnode");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "'nosuchnode'")) << r.err;
}

}  // namespace
}  // namespace remat
