// tests/cpp/cli_runner.h — runs the `remat` command as a separate process
// for the CLI tests: exit status, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "graph_fixture.h"

namespace remat::testing {

struct CliRun {
  int status = -1;
  std::string out, err;
};

// Runs `remat ARGS` through the shell; `env` is prefixed to the command.
inline CliRun remat(const std::string& args, const std::string& env = "") {
  static int counter = 0;
  const std::string base = "/tmp/remat_cli_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
  const std::string cmd = env + " '" + std::string(REMAT_CLI_PATH) + "' " + args + " >" + base +
                          ".out 2>" + base + ".err";
  const int raw = std::system(cmd.c_str());
  CliRun r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

}  // namespace remat::testing
