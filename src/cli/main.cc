// cli/main.cc — the `remat` command: argument parsing and error reporting.
//
// Contract: `remat --help`, `remat --version`, `remat info [GRAPH]`,
// `remat partition [GRAPH] [options]`, `remat pareto [GRAPH] -o SVG [--peak] [options]`,
// `remat report [GRAPH] -o HTML [options]`.
// Every failure is one "remat: error: ..." message on stderr and a non-zero
// exit status: 2 for every usage error (a bad option or option value, caught
// by the parser or checked after it, before any file is read, or a value
// the graph refutes, such as --explain's node), with a message that says
// what is accepted; 1 for errors in the input files and everything else.
// No exception escapes main, so the process never aborts with a stack trace. SIGINT,
// SIGTERM and SIGHUP remove the temporary file of an output being written.
#include <malloc.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/version.h"

namespace {

// The engine builds a few graph-sized buffers per stage and frees the last
// stage's. glibc would hand big ones back to the kernel and fault fresh pages
// in for the next; a one-shot command keeps them in its heap to reuse instead
// (a quarter less time on a 10^6-node graph). Only the command does this:
// the library leaves its host's allocator alone.
void keep_freed_memory() {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);
#endif
}

// The exit status of a usage error (a bad option, a missing argument).
constexpr int kUsageError = 2;

// The first argument, when it is neither an option nor a command: CLI11
// would call it "A subcommand is required", which hides the typo.
const char* unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return nullptr;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->get_name() == argv[1]) return nullptr;
  return argv[1];
}

// Usage errors look like every other error, with a pointer to the help of
// the command that was given ("remat partition --help").
std::string help_pointer(const CLI::App* app) {
  const std::string help =
      app->get_help_ptr() != nullptr ? app->get_help_ptr()->get_name() : "--help";
  return app->get_parent() != nullptr ? app->get_name() + " " + help : help;
}

std::string usage_error(const CLI::App* app, const CLI::Error& e) {
  // CLI11 hands over the top app: the command given is its parsed subcommand.
  const std::vector<CLI::App*> given = app->get_subcommands();
  return fmt::format("remat: error: {}\nRun with {} for more information.\n", e.what(),
                     help_pointer(given.empty() ? app : given.front()));
}

// An output path given as '' would otherwise mean "no output" silently.
const CLI::Validator kNonEmptyPath(
    [](const std::string& path) { return path.empty() ? std::string("the path is empty") : ""; },
    "PATH");

// CLI::PositiveNumber prints its bound, the smallest double, in 309 digits.
const CLI::Validator kPositive(
    [](const std::string& text) {
      double v = 0;
      return CLI::detail::lexical_cast(text, v) && v > 0 && std::isfinite(v)
                 ? std::string()
                 : fmt::format("'{}' is not a number greater than 0", text);
    },
    "NUMBER > 0");

// A whole number > 0 (a count of solver nodes).
const CLI::Validator kPositiveCount(
    [](const std::string& text) {
      int64_t v = 0;
      return CLI::detail::lexical_cast(text, v) && v > 0
                 ? std::string()
                 : fmt::format("'{}' is not a whole number greater than 0", text);
    },
    "COUNT > 0");

// --explain '' would otherwise mean "no --explain" silently.
const CLI::Validator kNodeName(
    [](const std::string& name) {
      return name.empty() ? std::string("the node name is empty (give a node of the joint graph)")
                          : std::string();
    },
    "");

const CLI::Validator kFraction(
    [](const std::string& text) {
      double v = -1;
      return CLI::detail::lexical_cast(text, v) && v >= 0 && v <= 1
                 ? std::string()
                 : fmt::format("'{}' is not a fraction in [0, 1] (0: save only the inputs, 1: "
                               "torch's runtime-optimized plan)",
                               text);
    },
    "");

// --options FILE and --config KEY=VALUE, the same on every command that
// partitions; the footer states the precedence and the accepted flags.
void add_option_sources(CLI::App* cmd, remat::cli::OptionSources& sources) {
  cmd->add_option("--torch", sources.torch,
                  fmt::format("the torch release whose partitioner to reproduce ({}; e.g. 2.14). "
                              "Default: the release the graph records (its torch_version), "
                              "else the newest",
                              remat::supported_torch_releases()))
      ->type_name("RELEASE");
  cmd->add_option("--options", sources.file,
                  "read options from this JSON file: the options object of docs/format.md "
                  "(schema/partition_options.v1.schema.json), e.g. "
                  "'{\"recompute_views\": true, \"activation_memory_budget\": 0.5}'")
      ->check(kNonEmptyPath);
  cmd->add_option("--config", sources.config,
                  "set a torch._functorch.config flag remat honors, under torch's name "
                  "(repeatable): recompute_views=True, activation_memory_budget=0.5, "
                  "activation_memory_budget_solver=greedy; values are True/False/None, numbers, "
                  "JSON lists or strings")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  cmd->footer(fmt::format("{}\n--config flags: {}.\n", remat::cli::kOptionPrecedence,
                          remat::cli::torch_flag_list()));
}

void add_progress_option(CLI::App* cmd, remat::cli::CommonSettings& common) {
  cmd->add_option("--progress", common.progress,
                  "progress bar on stderr when it is a terminal: auto (long work; default), "
                  "always, never; never drawn into a pipe or file")
      ->check(CLI::IsMember({"auto", "always", "never"}));
}

// The option values the library checks (a release, a --config entry, a
// solver name, a size): checked after parsing and before any file is read,
// so a bad one is a usage error (exit 2) in the library's words, which say
// what is accepted. Throws remat::Error naming the flag.
void check_sources(const remat::cli::OptionSources& s) {
  if (!s.torch.empty()) remat::cli::check_torch_release(s.torch);
  for (const std::string& entry : s.config) remat::cli::check_config_entry(entry);
}

void check_values(const remat::cli::PartitionSettings& s) {
  check_sources(s.sources);
  if (!s.solver.empty()) remat::cli::check_solver(s.solver);
  if (!s.estimator.empty()) remat::cli::check_estimator(s.estimator);
  if (!s.peak_budget.empty()) remat::cli::parse_size(s.peak_budget, "--peak-budget");
  if (!s.activation_quantization.empty())
    remat::cli::check_activation_quantization(s.activation_quantization);
}

void check_values(const remat::cli::ParetoSettings& s) {
  check_sources(s.sources);
  if (!s.solver.empty()) remat::cli::check_solver(s.solver);
  if (!s.estimator.empty()) remat::cli::check_estimator(s.estimator);
}

// A usage error found after parsing, said as CLI11's are.
int usage_failure(const CLI::App* sub, const std::string& message) {
  std::fprintf(stderr, "remat: error: %s\nRun with %s for more information.\n", message.c_str(),
               help_pointer(sub).c_str());
  return kUsageError;
}

// The subcommands and their options; each returns its subcommand.
CLI::App* add_info(CLI::App& app, remat::cli::CommonSettings& common) {
  CLI::App* info = app.add_subcommand("info", "Summarize a joint graph: node counts, op "
                                              "categories, forward/backward split, activation bytes");
  info->add_option("graph", common.graph, "joint graph JSON file");
  info->add_flag("-v,--verbose", common.verbose, "print timing lines to stderr");
  return info;
}

CLI::App* add_partition(CLI::App& app, remat::cli::CommonSettings& common,
                        remat::cli::PartitionSettings& ps) {
  CLI::App* part = app.add_subcommand(
      "partition", "Partition a joint graph and summarize what is saved, recomputed and banned");
  part->add_option("graph", common.graph, "joint graph JSON file");
  part->add_option("-o,--output", ps.output, "write the partition result JSON here")
      ->check(kNonEmptyPath);
  part->add_flag("--timings", ps.timings,
                 "put the engine's seconds and stages into the -o result (then two runs differ)");
  part->add_option("--partitioner", ps.partitioner, "min_cut (default) or default")
      ->check(CLI::IsMember({"min_cut", "default"}));
  part->add_option("--explain", ps.explain, "explain why NODE was saved, recomputed, banned or removed")
      ->type_name("NODE")
      ->check(kNodeName);
  part->add_option("--cut-side", ps.cut_side,
                   "which minimum cut to return when several tie: sink (torch's, default) or source")
      ->check(CLI::IsMember({"sink", "source"}));
  part->add_option("--memory-budget", ps.memory_budget,
                   "activation memory budget, a fraction in [0, 1] (torch's "
                   "activation_memory_budget; default 1.0)")
      ->type_name("FRACTION")
      ->check(kFraction);
  part->add_option("--peak-budget", ps.peak_budget,
                   "plan for a simulated peak memory of at most SIZE (bytes, or with a unit: "
                   "512MiB, 2GiB, 1.5GB): the plan with the least estimated recompute runtime "
                   "that fits (remat's own mode; --memory-budget is then ignored)");
  part->add_option("--peak-search", ps.peak_search,
                   "how --peak-budget searches: fast (default: remat's optimizer over every valid "
                   "plan, priced min-cuts, never worse than torch_plans), torch_plans (torch's "
                   "budget plans, then repairs), exact (the least recompute of any valid plan "
                   "that fits, proven by a MILP solver, within --peak-search-nodes)")
      ->check(CLI::IsMember({"torch_plans", "fast", "exact"}));
  part->add_option("--peak-search-nodes", ps.peak_search_nodes,
                   "how much --peak-search exact may search: branch-and-bound nodes over all its "
                   "solves (default: sized to the program, the least of 2e6 / size and 2.2e14 / "
                   "size^3, size = rows + columns, between 1 and 20000); counted work, so every "
                   "machine returns the same plan; when they run out the best plan found is "
                   "returned with its gap")
      ->check(kPositiveCount);
  part->add_option("--peak-search-seconds", ps.peak_search_seconds,
                   "a wall-time safety net over the peak search (default: none); a search it cuts "
                   "short says so (stopped_by \"time\") and may then differ between machines")
      ->check(kPositive);
  part->add_option("--backward-order", ps.backward_order,
                   "the order the backward runs in: autograd (torch's, default) or memory "
                   "(independent nodes reordered to lower the simulated peak, kept only when "
                   "it does; remat's own)")
      ->check(CLI::IsMember({"autograd", "memory"}));
  part->add_option("--memory-model", ps.memory_model,
                   "how the graphs will run, for the reported memory and --peak-budget: aten "
                   "(op by op, as eager FX code and aot_eager; default) or inductor (intermediates "
                   "inductor fuses into kernels get no buffer)")
      ->check(CLI::IsMember({"aten", "inductor"}));
  part->add_flag("--no-inductor-reorder", ps.no_inductor_reorder,
                 "under --memory-model inductor: the graphs run in their own order (inductor's "
                 "reorder_for_peak_memory off); by default each is also counted in the orders "
                 "that pass may keep, and the highest peak counts");
  part->add_option("--solver", ps.solver,
                   "knapsack solver of the memory budget (torch's activation_memory_budget_solver): "
                   "dp (default), greedy, ilp, dp_knapsack_sliding_hirschberg or "
                   "dynamic_memory_budget_dp");
  part->add_option("--runtime-estimator,--estimator", ps.estimator,
                   "runtime estimator of the memory budget (torch's "
                   "activation_memory_budget_runtime_estimator): flops (default), testing, or "
                   "profile (with profiled_runtimes in --options)");
  part->add_flag("--no-cse", ps.no_cse, "do not deduplicate equal nodes first (torch's config.cse = False)");
  part->add_option("--activation-quantization", ps.activation_quantization,
                   "FP8-quantize large saved activations as torch's inductor does: JSON of its "
                   "post_grad_fusion_options[\"activation_quantization_aten_pass\"], e.g. "
                   "'{\"size_in_mb\": 0, \"allowed_dtypes\": \"torch.float32\"}'");
  part->add_option("--dot", ps.dot,
                   "when no finite cut exists, write the capacity graph here as DOT (and an SVG "
                   "next to it when graphviz's dot is on PATH)")
      ->check(kNonEmptyPath);
  part->add_flag("-v,--verbose", common.verbose, "print timing lines to stderr");
  add_option_sources(part, ps.sources);
  add_progress_option(part, common);
  return part;
}

CLI::App* add_pareto(CLI::App& app, remat::cli::CommonSettings& common,
                     remat::cli::ParetoSettings& pa) {
  CLI::App* pareto = app.add_subcommand(
      "pareto", "Sweep activation memory budgets and draw the recompute-runtime / memory "
                "trade-off (torch's visualize_memory_budget_pareto); with --peak, torch's budget "
                "plans and remat's peak frontier as peak memory against recompute");
  pareto->add_option("graph", common.graph, "joint graph JSON file");
  pareto->add_option("-o,--output", pa.svg, "write the frontier here as an SVG chart")
      ->required()
      ->check(kNonEmptyPath);
  pareto->add_option("--csv", pa.csv, "also write the points as CSV")->check(kNonEmptyPath);
  pareto->add_option("--json", pa.json, "also write the points as JSON")->check(kNonEmptyPath);
  pareto->add_option("--solver", pa.solver,
                     "knapsack solver: dp (default), greedy, ilp, dp_knapsack_sliding_hirschberg "
                     "or dynamic_memory_budget_dp");
  pareto->add_option("--runtime-estimator,--estimator", pa.estimator,
                     "runtime estimator: flops (default), testing, or profile (with "
                     "profiled_runtimes in --options)");
  CLI::Option* resolution =
      pareto->add_option("--resolution", pa.resolution,
                         "stop bisecting budget intervals narrower than this (torch: 0.001)")
          ->check(kPositive);
  pareto->add_flag("--no-cse", pa.no_cse, "do not deduplicate equal nodes first");
  CLI::Option* peak =
      pareto->add_flag("--peak", pa.peak,
                       "instead of the sweep, draw simulated peak memory against recompute: "
                       "torch's activation-budget plans (as remat report does) beside remat's own "
                       "frontier, the plan its optimizer finds at each of --points peak limits "
                       "from the runtime-optimized plan's peak down to the smallest reachable; "
                       "--json and --csv then hold both lists");
  resolution->excludes(peak);
  pareto->add_option("--peak-search", pa.peak_search,
                     "with --peak, the optimizer that draws remat's frontier: fast (default, "
                     "unless --options sets exact) or exact (the least recompute of any valid "
                     "plan at each limit, proven, each within --peak-search-nodes)")
      ->check(CLI::IsMember({"fast", "exact"}))
      ->needs(peak);
  pareto->add_option("--peak-search-nodes", pa.peak_search_nodes,
                     "with --peak, the solver nodes of each exact search (default: sized to the "
                     "program); there are --points + 1 of them")
      ->check(kPositiveCount)
      ->needs(peak);
  pareto->add_option("--peak-search-seconds", pa.peak_search_seconds,
                     "with --peak, a wall-time safety net over each search (default: none)")
      ->check(kPositive)
      ->needs(peak);
  pareto->add_option("--points", pa.points,
                     "with --peak, how many peak limits remat's frontier is planned at (default "
                     "8; plans met twice are drawn once)")
      ->check(CLI::Range(2, 1000))
      ->needs(peak);
  pareto->add_flag("-v,--verbose", common.verbose, "print timing lines to stderr");
  add_option_sources(pareto, pa.sources);
  add_progress_option(pareto, common);
  return pareto;
}

CLI::App* add_report(CLI::App& app, remat::cli::CommonSettings& common,
                     remat::cli::ReportSettings& rs) {
  CLI::App* report = app.add_subcommand(
      "report", "Partition a joint graph and write one self-contained HTML report: summary, "
                "memory timeline, what fills the peak, torch's budget plans against this one, the "
                "cut as a picture, every node's fate and why");
  report->add_option("graph", common.graph, "joint graph JSON file");
  report->add_option("-o,--output", rs.html, "write the HTML report here")
      ->required()
      ->check(kNonEmptyPath);
  report->add_option("--json", rs.json, "also write the partition result JSON here")
      ->check(kNonEmptyPath);
  report->add_option("--partitioner", rs.partitioner, "min_cut (default) or default")
      ->check(CLI::IsMember({"min_cut", "default"}));
  report->add_option("--memory-budget", rs.memory_budget,
                     "activation memory budget, a fraction in [0, 1] (default 1.0)")
      ->type_name("FRACTION")
      ->check(kFraction);
  report->add_flag("--no-cse", rs.no_cse, "do not deduplicate equal nodes first");
  report->add_flag("--no-pareto", rs.no_pareto,
                   "leave torch's budget plans out (each is one more build and simulation of the step)");
  report->add_flag("-v,--verbose", common.verbose, "print timing lines to stderr");
  add_option_sources(report, rs.sources);
  add_progress_option(report, common);
  return report;
}

// Options every subcommand takes.
void add_common_options(std::initializer_list<CLI::App*> subs, remat::cli::CommonSettings& common) {
  for (CLI::App* sub : subs) {
    sub->add_option("--max-input-size", common.max_input_bytes,
                    "refuse a graph larger than this many bytes (default 1GiB, at most 4GiB - 1; "
                    "units kb, mb, gb are powers of 1024)")
        ->transform(CLI::AsSizeValue(false))
        ->check(CLI::Range(uint64_t{1}, remat::kMaxInputBytes));
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace remat;
  keep_freed_memory();
  remove_partial_writes_on_signals();
  CLI::App app{
      "remat: decides which activations a joint forward+backward graph saves for the\n"
      "backward and which it recomputes, as PyTorch's AOTAutograd partitioner does.\n"
      "Graphs are JSON files (format: docs/format.md); without a GRAPH argument the\n"
      "shipped example mlp.json is used.",
      "remat"};
  app.set_version_flag("--version", fmt::format("remat {}", kVersion));
  app.require_subcommand(1);
  app.failure_message(usage_error);

  cli::CommonSettings common;
  common.argv0 = argc > 0 ? argv[0] : "remat";

  cli::PartitionSettings ps;
  cli::ParetoSettings pa;
  cli::ReportSettings rs;
  CLI::App* info = add_info(app, common);
  CLI::App* part = add_partition(app, common, ps);
  CLI::App* pareto = add_pareto(app, common, pa);
  CLI::App* report = add_report(app, common, rs);
  add_common_options({info, part, pareto, report}, common);

  if (const char* cmd = unknown_command(app, argc, argv)) {
    std::fprintf(stderr,
                 "remat: error: unknown command '%s'; the commands are info, partition, pareto "
                 "and report\nRun with --help for more information.\n",
                 cmd);
    return kUsageError;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2, as is
    // conventional (CLI11's own codes, 104-109, say nothing to a shell).
    return app.exit(e) == 0 ? 0 : kUsageError;
  }

  CLI::App* sub = info;
  for (CLI::App* s : {part, pareto, report})
    if (s->parsed()) sub = s;
  try {
    if (part->parsed()) check_values(ps);
    if (pareto->parsed()) check_values(pa);
    if (report->parsed()) check_sources(rs.sources);
  } catch (const Error& e) {
    return usage_failure(sub, e.what());
  }

  try {
    if (info->parsed()) return cli::run_info(common);
    if (part->parsed()) return cli::run_partition(common, ps);
    if (pareto->parsed()) return cli::run_pareto(common, pa);
    if (report->parsed()) return cli::run_report(common, rs);
    std::fputs(app.help().c_str(), stdout);
    return 1;
  } catch (const cli::UsageError& e) {
    return usage_failure(sub, e.what());
  } catch (const NoFiniteCutError& e) {
    // run_partition reports these itself; this is a fallback.
    std::fprintf(stderr, "remat: error: %s\n", e.what());
  } catch (const Error& e) {
    std::fprintf(stderr, "remat: error: %s\n", e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "remat: error: out of memory\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "remat: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "remat: internal error: unknown exception\n");
  }
  return 1;
}
