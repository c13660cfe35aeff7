// tests/probe/knapsack_probe.cc — test-only executable `remat_knapsack_probe`:
// lets tests/python/test_knapsack_parity.py run remat's knapsack solvers and
// flop formulas on inputs it also hands to torch, live.
//
// Reads one request per line on stdin, answers one line each on stdout:
//   knapsack SOLVER MAX_MEMORY N M0 R0 M1 R1 ...
//       -> ok RUNTIME|S0 S1 ...|R0 R1 ...        (saved | recomputed indices)
//   knee MAX_MEMORY N M0 R0 ...   -> ok BUDGET
//   flops OPLINE                  -> ok FLOPS    (OPLINE: see op_graph.h)
//   runtime ESTIMATOR OPLINE      -> ok RUNTIME
//   release 2.14                  -> ok          (the torch release of the
//                                                 flops/runtime lines after it;
//                                                 the newest until then)
//   switch NAME 0|1               -> ok          (flips one of its switches)
// Errors answer "err CODE MESSAGE"; one torch raises too (remat::TorchError)
// answers "err torch TYPE TORCH_MESSAGE". Numbers are printed with 17
// significant digits, so doubles round-trip exactly.
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "budget/flops.h"
#include "budget/knapsack.h"
#include "op_graph.h"
#include "remat/error.h"
#include "remat/torch_release.h"

namespace {

remat::TorchBehavior g_torch = remat::TorchBehavior::of(remat::kNewestTorchRelease);

std::string join(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ' ';  // not (i ? " " : "") + ...: GCC 12 -O3 warns (-Wrestrict), wrongly
    out += std::to_string(v[i]);
  }
  return out;
}

void read_items(std::istringstream& in, std::vector<double>& memory,
                std::vector<double>& runtimes) {
  size_t n = 0;
  in >> n;
  memory.resize(n);
  runtimes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    std::string m, r;
    in >> m >> r;
    memory[i] = std::stod(m);
    runtimes[i] = std::stod(r);
  }
  if (!in) throw remat::Error(remat::ErrorCode::kParse, "truncated item list");
}

std::string answer(const std::string& line) {
  std::istringstream in(line);
  std::string cmd;
  in >> cmd;
  if (cmd == "knapsack") {
    std::string solver, budget;
    in >> solver >> budget;
    std::vector<double> memory, runtimes;
    read_items(in, memory, runtimes);
    const remat::KnapsackResult r =
        remat::solve_knapsack(solver, memory, runtimes, std::stod(budget));
    return fmt::format("ok {:.17g}|{}|{}", r.expected_runtime, join(r.saved),
                       join(r.recomputed));
  }
  if (cmd == "knee") {
    std::string budget;
    in >> budget;
    std::vector<double> memory, runtimes;
    read_items(in, memory, runtimes);
    return fmt::format("ok {:.17g}",
                       remat::knee_point_memory_budget(memory, runtimes, std::stod(budget)));
  }
  if (cmd == "flops" || cmd == "runtime") {
    std::string estimator = "flops";
    if (cmd == "runtime") in >> estimator;
    std::string rest;
    std::getline(in, rest);
    const remat::Graph g = remat::testing::op_graph(rest);
    const remat::NodeId op = g.find("op");
    const double v = cmd == "flops" ? remat::count_flops(g, op, g_torch)
                                    : remat::estimate_runtime(g, op, estimator, g_torch);
    return fmt::format("ok {:.17g}", v);
  }
  if (cmd == "release") {
    std::string text;
    in >> text;
    const std::optional<remat::TorchVersion> v = remat::parse_torch_version(text);
    if (!v) throw remat::Error(remat::ErrorCode::kParse, "release: '" + text + "'");
    g_torch = remat::TorchBehavior::of(v->release);
    return "ok";
  }
  if (cmd == "switch") {
    std::string name;
    int on = 0;
    in >> name >> on;
    const remat::TorchSwitch* s = remat::find_torch_switch(name);
    if (s == nullptr) throw remat::Error(remat::ErrorCode::kParse, "switch: '" + name + "'");
    g_torch.*s->member = on != 0;
    return "ok";
  }
  throw remat::Error(remat::ErrorCode::kParse, "unknown request '" + cmd + "'");
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  for (std::string line; std::getline(std::cin, line);) {
    if (line.empty()) continue;
    try {
      std::cout << answer(line) << '\n';
    } catch (const remat::TorchError& e) {
      std::cout << "err torch " << e.python_type() << ' ' << e.torch_message() << '\n';
    } catch (const remat::Error& e) {
      std::cout << "err " << remat::error_code_name(e.code()) << ' ' << e.what() << '\n';
    } catch (const std::exception& e) {
      std::cout << "err exception " << e.what() << '\n';
    }
  }
  return 0;
}
