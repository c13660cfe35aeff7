// tests/cpp/test_cli_safety.cc — the `remat` command under misuse: every
// failure is one "remat: error:" message naming the flag or field, outputs
// are byte-identical across runs unless --timings is asked for, inputs have
// a size limit, and an interrupted write leaves no temporary file behind.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cli_runner.h"
#include "graph_fixture.h"
#include "remat/io.h"
#include "temp_dir.h"

extern char** environ;

namespace remat {
namespace {

using testing::CliRun;
using testing::remat;
using testing::has;
using testing::slurp;

// Each test's scratch directory, under a name that says which file made it.
struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("remat_cli_safety") {}
};

const std::string kExamples = REMAT_EXAMPLES_DIR;
const std::string kTiny = kExamples + "/tiny.json";

// --- messages ---------------------------------------------------------------------

TEST(CliMessages, UsageErrorsHaveTheErrorPrefix) {
  for (const char* args : {"partition --frobnicate", "pareto", "frobnicate",
                           "partition --cut-side middle"}) {
    CliRun r = remat(std::string(args) + " " + kTiny);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_EQ(r.err.rfind("remat: error: ", 0), 0u) << args << ": " << r.err;
    EXPECT_TRUE(has(r.err, "--help")) << r.err;
  }
}

TEST(CliMessages, EmptyOutputPathIsAnErrorNamingTheFlag) {
  for (const char* args : {"partition -o ''", "partition --dot ''", "pareto -o ''",
                           "pareto -o x.svg --csv ''", "pareto -o x.svg --json ''",
                           "report -o ''", "report -o x.html --json ''"}) {
    CliRun r = remat(std::string(args) + " " + kTiny);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_TRUE(has(r.err, "remat: error: ")) << r.err;
    EXPECT_TRUE(has(r.err, "the path is empty")) << args << ": " << r.err;
  }
}

TEST(CliMessages, ResolutionMustBeAPositiveNumberSaidBriefly) {
  for (const char* bad : {"0", "-1", "nan", "inf"}) {
    CliRun r = remat("pareto " + kTiny + " -o /dev/null --resolution " + bad);
    EXPECT_NE(r.status, 0) << bad;
    EXPECT_TRUE(has(r.err, "remat: error: --resolution: '" + std::string(bad) +
                               "' is not a number greater than 0"))
        << r.err;
    EXPECT_LT(r.err.size(), 200u) << r.err;  // not the smallest double in 309 digits
  }
}

TEST(CliMessages, TooManyForwardOutputsNamesTheField) {
  TempDir dir;
  std::string text = slurp(kTiny);
  const std::string key = "\"num_fwd_outputs\": 1";
  ASSERT_TRUE(has(text, key));
  text.replace(text.find(key), key.size(), "\"num_fwd_outputs\": 5");
  write_file_atomic(dir / "bad.json", text);
  CliRun r = remat("partition " + (dir / "bad.json"));
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "remat: error: field 'num_fwd_outputs' is 5, but the output node "
                         "'output' returns only 3 values"))
      << r.err;
}

TEST(CliMessages, UnwritableOutputSaysWhy) {
  CliRun r = remat("partition " + kTiny + " -o /proc/version");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "remat: error: cannot write '/proc/version': cannot create a temporary "
                         "file in '/proc'"))
      << r.err;
  r = remat("partition " + kTiny + " -o /nonexistent/dir/out.json");
  EXPECT_TRUE(has(r.err, "directory '/nonexistent/dir'")) << r.err;
}

// --- determinism --------------------------------------------------------------------

TEST(CliOutput, PartitionResultIsByteIdenticalAcrossRuns) {
  TempDir dir;
  const std::string graph = kExamples + "/transformer_block.json";
  ASSERT_EQ(remat("partition " + graph + " -o " + (dir / "a.json")).status, 0);
  ASSERT_EQ(remat("partition " + graph + " -o " + (dir / "b.json")).status, 0);
  const std::string a = slurp(dir / "a.json");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, slurp(dir / "b.json"));
  EXPECT_FALSE(has(a, "\"seconds\"")) << a.substr(a.size() - 200);
  EXPECT_FALSE(has(a, "\"stages\""));
}

TEST(CliOutput, TimingsGoIntoTheResultOnlyWhenAskedFor) {
  TempDir dir;
  CliRun r = remat("partition " + kTiny + " --timings -o " + (dir / "t.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string t = slurp(dir / "t.json");
  EXPECT_TRUE(has(t, "\"seconds\":")) << t;
  EXPECT_TRUE(has(t, "\"stages\":{\"prepare\":")) << t;
  // -v prints them either way.
  r = remat("partition " + kTiny + " -v -o " + (dir / "v.json"));
  EXPECT_TRUE(has(r.err, "ms per stage, prepare ")) << r.err;
  EXPECT_FALSE(has(slurp(dir / "v.json"), "\"stages\""));
}

TEST(CliOutput, ParetoFilesAreByteIdenticalAcrossRuns) {
  TempDir dir;
  const std::string graph = kExamples + "/transformer_block.json";
  for (const char* run : {"a", "b"}) {
    const std::string base = dir / run;
    ASSERT_EQ(remat("pareto " + graph + " -o " + base + ".svg --csv " + base + ".csv --json " +
                    base + ".json")
                  .status,
              0);
  }
  for (const char* ext : {".svg", ".csv", ".json"}) {
    EXPECT_FALSE(slurp(dir / (std::string("a") + ext)).empty());
    EXPECT_EQ(slurp(dir / (std::string("a") + ext)), slurp(dir / (std::string("b") + ext))) << ext;
  }
}

// The report page shows the engine's time; the result it writes with --json
// is the same bytes on every run, as partition's -o.
TEST(CliOutput, ReportJsonIsByteIdenticalAcrossRuns) {
  TempDir dir;
  for (const char* run : {"a", "b"}) {
    const std::string base = dir / run;
    CliRun r = remat("report " + kTiny + " --no-pareto -o " + base + ".html --json " + base + ".json");
    ASSERT_EQ(r.status, 0) << r.err;
  }
  const std::string a = slurp(dir / "a.json");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, slurp(dir / "b.json"));
  EXPECT_FALSE(has(a, "\"seconds\""));
  EXPECT_TRUE(has(slurp(dir / "a.html"), "engine time"));
}

// --- inputs -------------------------------------------------------------------------

TEST(CliInput, EndlessStdinStopsAtTheLimit) {
  CliRun r = remat("info /dev/stdin --max-input-size 1mb", "yes |");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "remat: error: cannot read '/dev/stdin': it is larger than the input "
                         "size limit of 1048576 bytes"))
      << r.err;
  EXPECT_TRUE(has(r.err, "--max-input-size")) << r.err;
}

TEST(CliInput, LimitCanBeRaisedAndIsChecked) {
  EXPECT_EQ(remat("info " + kTiny + " --max-input-size 100").status, 1);
  EXPECT_EQ(remat("info " + kTiny + " --max-input-size 1kb").status, 1);
  EXPECT_EQ(remat("info " + kTiny + " --max-input-size 1mb").status, 0);
  CliRun r = remat("info " + kTiny + " --max-input-size 5gb");  // beyond simdjson's 4 GiB - 1
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.err, "remat: error: --max-input-size")) << r.err;
}

// --- interrupted writes -------------------------------------------------------------

// A joint graph whose result JSON is tens of MB: a forward chain of `n` relus
// and a backward that needs its end, so writing it takes a while.
std::string chain_graph(int n) {
  auto tensor = [](int storage) {
    return R"("val": {"kind": "tensor", "dtype": "float32", "shape": [64, 64], "stride": [64, 1], )"
           R"("device": "cpu", "storage": )" +
           std::to_string(storage) + R"(}, "tensor_meta": true})";
  };
  std::string s = R"({"format": "remat.joint_graph", "version": 1, "num_fwd_outputs": 1, "nodes": [)";
  s += R"({"name": "primals_1", "op": "placeholder", "target": "primals_1", )" + tensor(0) + ",\n";
  s += R"({"name": "tangents_1", "op": "placeholder", "target": "tangents_1", )" + tensor(1) + ",\n";
  std::string prev = "primals_1";
  for (int i = 0; i < n; ++i) {
    const std::string name = "relu_" + std::to_string(i);
    s += R"({"name": ")" + name + R"(", "op": "call_function", "target": "aten.relu.default", )" +
         R"("args": [{"node": ")" + prev + R"("}], )" + tensor(2 + i) + ",\n";
    prev = name;
  }
  s += R"({"name": "grad", "op": "call_function", "target": "aten.mul.Tensor", "args": [{"node": "tangents_1"}, {"node": ")" +
       prev + R"("}], )" + tensor(2 + n) + ",\n";
  s += R"({"name": "output", "op": "output", "target": "output", "args": [[{"node": ")" + prev +
       R"("}, {"node": "grad"}]]}]})";
  return s;
}

bool has_temporary(const TempDir& dir) {
  for (const std::string& e : dir.entries()) {
    if (has(e, ".tmp.")) return true;
  }
  return false;
}

// SIGINT or SIGTERM while the result is being written: the temporary file
// goes, and the process still dies of the signal. The signal is sent once
// the temporary file exists, so it lands during the write (or, on a fast
// machine, after the rename: then the run is repeated).
TEST(CliSignals, InterruptedWriteLeavesNoTemporaryFile) {
  TempDir dir;
  write_file_atomic(dir / "chain.json", chain_graph(60000));
  const std::string out = dir / "result.json";
  for (int sig : {SIGINT, SIGTERM}) {
    bool interrupted = false;
    for (int attempt = 0; attempt < 10 && !interrupted; ++attempt) {
      std::vector<std::string> args{REMAT_CLI_PATH, "partition", dir / "chain.json", "-o", out};
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      posix_spawn_file_actions_t fa;
      posix_spawn_file_actions_init(&fa);
      posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
      posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
      // The command starts with the signal at its default action and
      // unblocked, as from a terminal, even if this test inherited it ignored.
      posix_spawnattr_t attr;
      posix_spawnattr_init(&attr);
      sigset_t defaults, none;
      sigemptyset(&defaults);
      sigaddset(&defaults, sig);
      sigemptyset(&none);
      posix_spawnattr_setsigdefault(&attr, &defaults);
      posix_spawnattr_setsigmask(&attr, &none);
      posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
      pid_t pid = 0;
      ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), environ), 0);
      posix_spawn_file_actions_destroy(&fa);
      posix_spawnattr_destroy(&attr);
      int status = 0;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      bool done = false;
      while (!done && std::chrono::steady_clock::now() < deadline) {
        if (has_temporary(dir)) {
          kill(pid, sig);
          break;
        }
        done = waitpid(pid, &status, WNOHANG) == pid;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      if (!done) {
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
      }
      interrupted = WIFSIGNALED(status) && WTERMSIG(status) == sig;
      EXPECT_FALSE(has_temporary(dir)) << "signal " << sig << ", attempt " << attempt;
      std::remove(out.c_str());
    }
    EXPECT_TRUE(interrupted) << "the write always finished before signal " << sig << " arrived";
  }
}

}  // namespace
}  // namespace remat
