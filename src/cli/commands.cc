// cli/commands.cc — `remat info`, `remat partition`, `remat pareto` (and its
// --peak chart) and `remat report`.
//
// Contract: read the graph (io), call the library (graph_info, the
// partition entry points), and print a human summary. The numbers printed come from the
// library's own results (NodeInfo, PartitionResult.decisions, size_of), so
// the CLI never re-derives a decision. Output is deterministic apart from the
// timing lines; files written with -o are byte-identical across runs unless
// --timings asks for the engine's times.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "options.h"
#include "progress.h"
#include "remat/error.h"
#include "remat/info.h"
#include "remat/io.h"
#include "remat/memory.h"
#include "remat/ops.h"
#include "remat/options.h"
#include "remat/partition.h"
#include "remat/report.h"
#include "remat/explain.h"
#include "remat/graphviz.h"
#include "remat/pareto.h"

namespace remat::cli {

namespace {

using report::bytes_of;
using report::describe_value;
using report::human_bytes;

using Clock = std::chrono::steady_clock;

// Graphs at least this big get timing lines even without --verbose, and a
// progress bar on a terminal, so a long run is never silent.
constexpr size_t kBigGraph = 200000;

// Whether a command wants a progress bar (drawn only on a terminal).
bool wants_progress(const CommonSettings& common, bool long_work) {
  if (common.progress == "never") return false;
  return common.progress == "always" || long_work;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string exe_dir(const std::string& argv0) {
  std::array<char, 4096> buf{};
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  std::string exe = n > 0 ? std::string(buf.data(), static_cast<size_t>(n)) : argv0;
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "." : exe.substr(0, slash);
}

// A joint graph read from the file the command names, and that file's path.
struct Loaded {
  std::string path;
  JointGraph joint;
};

// `bar` (may be null) is drawing "load": erased before a line is printed.
Loaded load(const CommonSettings& common, ProgressBar* bar = nullptr) {
  const std::string path = resolve_graph_path(common);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && st.st_size >= (64 << 20)) {
    if (bar) bar->finish();
    std::fprintf(stderr, "remat: loading %s (%s)...\n", path.c_str(), human_bytes(st.st_size).c_str());
  }
  const auto t0 = Clock::now();
  JointGraph joint = read_joint_graph_file(path, common.max_input_bytes);
  if (common.verbose || joint.graph.size() >= kBigGraph) {
    if (bar) bar->finish();
    std::fprintf(stderr, "remat: loaded %s (%zu nodes) in %.1f ms\n", path.c_str(),
                 joint.graph.size(), ms_since(t0));
  }
  return {path, std::move(joint)};
}

// The dedicated flags of `remat partition`, over the --options / --config
// layers (cli/options.h's precedence).
void apply_partition_flags(const PartitionSettings& s, PartitionOptions& options) {
  if (s.no_cse) options.cse = false;
  if (!s.cut_side.empty()) {
    options.cut_side = s.cut_side == "source" ? CutSide::kSourceMinimal : CutSide::kSinkMinimal;
  }
  if (s.memory_budget) options.activation_memory_budget = *s.memory_budget;
  if (!s.peak_budget.empty()) options.peak_memory_budget = parse_size(s.peak_budget, "--peak-budget");
  if (!s.peak_search.empty()) options.peak_search = *peak_search_from_name(s.peak_search);
  if (s.peak_search_nodes) options.peak_search_nodes = *s.peak_search_nodes;
  if (s.peak_search_seconds) options.peak_search_seconds = *s.peak_search_seconds;
  if (!s.backward_order.empty()) options.backward_order = *backward_order_from_name(s.backward_order);
  if (!s.memory_model.empty()) options.memory_model = *memory_model_from_name(s.memory_model);
  if (s.no_inductor_reorder) options.inductor_reorder = false;
  if (!s.solver.empty()) options.activation_memory_budget_solver = s.solver;
  if (!s.estimator.empty()) options.activation_memory_budget_runtime_estimator = s.estimator;
  if (!s.activation_quantization.empty()) {
    options.activation_quantization =
        ActivationQuantizationOptions::from_json(s.activation_quantization);
  }
}

// The SVG beside a DOT file: PATH.dot becomes PATH.svg, any other PATH gets
// ".svg" appended.
std::string svg_path_for(std::string svg) {
  if (svg.size() > 4 && svg.compare(svg.size() - 4, 4, ".dot") == 0) svg.resize(svg.size() - 4);
  return svg + ".svg";
}

// The simulated memory of the plan (remat/memory.h), in three lines.
void print_memory(const PartitionResult& r) {
  const MemoryProfile& m = r.memory;
  std::string where = "-";
  if (m.peak_node != kNoNode) {
    const Graph& g = m.peak_pass == Pass::kForward ? r.forward : r.backward;
    where = fmt::format("{} node '{}'", pass_name(m.peak_pass), g.name(m.peak_node));
  }
  std::printf("peak memory: %s (%lld bytes) at %s%s\n", human_bytes(m.peak_bytes).c_str(),
              static_cast<long long>(m.peak_bytes), where.c_str(),
              m.model == MemoryModel::kInductor ? ", under inductor's memory model" : "");
  std::printf("  forward peak %s, backward peak %s, inputs %s, alive between the passes %s\n",
              human_bytes(m.forward_peak_bytes).c_str(), human_bytes(m.backward_peak_bytes).c_str(),
              human_bytes(m.inputs_bytes).c_str(), human_bytes(m.between_bytes).c_str());
  std::printf("  estimated recompute runtime: %.6g\n", r.recompute_runtime);
  const PeakSearchSummary& p = r.peak_search;
  if (p.search.empty()) return;
  std::string proof;
  if (p.optimal) proof = ", optimal (proven)";
  else if (p.recompute_lower_bound >= 0)
    proof = fmt::format(", no valid plan that fits recomputes less than {:.6g} (proven)",
                        p.recompute_lower_bound);
  const std::string cut = p.stopped_by == "nodes"  ? " (stopped: --peak-search-nodes ran out)"
                          : p.stopped_by == "time" ? " (stopped: --peak-search-seconds ran out)"
                                                   : "";
  std::printf("  peak search %s: %d plans built, %d cut%s, %d solver rounds (%lld nodes), %.3g s%s%s\n",
              p.search.c_str(), p.plans_built, p.cuts, p.cuts == 1 ? "" : "s", p.solver_rounds,
              static_cast<long long>(p.solver_nodes), p.seconds, proof.c_str(), cut.c_str());
}

int explain(const JointGraph& joint, const PartitionResult& r, const std::string& name,
            const PartitionOptions& options) {
  const Graph& g = joint.graph;
  const NodeId id = g.find(name);
  if (id == kNoNode) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("--explain: node '{}' is not in the joint graph", name));
  }
  if (id >= r.decisions.size()) {
    std::printf("\nnode '%s'\n  no decision recorded for it\n", name.c_str());
    return 0;
  }
  std::printf("\n%s\n", report::explain_node(g, id, r.decisions[id], options).c_str());
  // Its inputs' fates: what a recomputation starts from.
  std::string inputs;
  size_t shown = 0;
  for (NodeId in : g.inputs(id)) {
    if (shown++ == 8) {
      inputs += ", ...";
      break;
    }
    inputs += fmt::format("{}{} ({})", shown > 1 ? ", " : "", g.name(in),
                          in < r.decisions.size() ? where_name(r.decisions[in].where) : "?");
  }
  if (!inputs.empty()) std::printf("  inputs: %s\n", inputs.c_str());
  return 0;
}

}  // namespace

std::string resolve_graph_path(const CommonSettings& common) {
  if (!common.graph.empty()) return common.graph;
  static constexpr const char* kExample = "mlp.json";
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("REMAT_EXAMPLES"); env != nullptr && *env != '\0') {
    dirs.emplace_back(env);
  }
  dirs.push_back(exe_dir(common.argv0) + "/../share/remat/examples");
  // Installed from a repaired wheel, the binary lives in site-packages
  // (remat.scripts/) and <prefix>/bin/remat is a Python script that execs
  // it with its own path as argv[0]: the examples are beside that one.
  if (const size_t slash = common.argv0.rfind('/'); slash != std::string::npos)
    dirs.push_back(common.argv0.substr(0, slash) + "/../share/remat/examples");
#ifdef REMAT_EXAMPLES_DIR
  dirs.emplace_back(REMAT_EXAMPLES_DIR);
#endif
  std::string looked;
  for (const std::string& d : dirs) {
    const std::string p = d + "/" + kExample;
    if (is_file(p)) return p;
    looked += "\n  " + p;
  }
  throw Error(ErrorCode::kIo,
              fmt::format("no GRAPH given and the example '{}' was not found; looked in:{}",
                          kExample, looked));
}

int64_t parse_size(const std::string& text, const char* option) {
  auto bad = [&](std::string_view why) -> Error {
    return Error(ErrorCode::kInvalidOption,
                 fmt::format("{}: '{}' {} (expected bytes, or a number with a unit: B, KB, MB, "
                             "GB, TB, KiB, MiB, GiB, TiB)",
                             option, text, why));
  };
  // A decimal number (exponents allowed: 1e9, 2.5E3), then an optional unit.
  // strtod alone would also take signs, "inf", "nan" and hex: the first
  // character must be a digit or a point.
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.'))
    throw bad("is not a size");
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  size_t i = static_cast<size_t>(end - text.c_str());
  if (i == 0 || text.find_first_of("xXpP") < i) throw bad("is not a size");
  while (i < text.size() && text[i] == ' ') ++i;
  std::string unit;
  for (; i < text.size(); ++i) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},     {"b", 1},          {"kb", 1e3},       {"mb", 1e6},           {"gb", 1e9},
      {"tb", 1e12}, {"kib", 1024.0},  {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0}};
  double scale = 0;
  for (const auto& [name, factor] : kUnits)
    if (unit == name) scale = factor;
  if (scale == 0) throw bad(fmt::format("has an unknown unit '{}'", unit));
  const double bytes = value * scale;
  if (!(bytes >= 1)) throw bad("is not a positive size");
  if (!(bytes < 9.2e18)) throw bad("is too large (at most 8 EiB, 9.2e18 bytes)");
  return static_cast<int64_t>(bytes);
}

int run_info(const CommonSettings& common) {
  const auto [path, joint] = load(common);
  const GraphInfo info = graph_info(joint);
  const auto& k = info.by_kind;
  std::printf("graph: %s\n", path.c_str());
  std::printf("nodes: %zu (placeholder %zu, call_function %zu, get_attr %zu, output %zu)\n",
              info.nodes, k[0], k[1], k[2], k[3]);
  std::printf("forward outputs: %d\n", info.num_fwd_outputs);
  if (!joint.torch_version.empty()) {
    std::printf("captured under: torch %s\n", joint.torch_version.c_str());
  }
  // Op categories, counted over call_function nodes.
  std::printf("ops: %zu distinct;", info.ops);
  for (size_t i = 0; i < info.by_category.size(); ++i) {
    std::printf(" %s %zu,", std::string(kOpCategoryNames[i].name).c_str(), info.by_category[i]);
  }
  std::printf(" none %zu\n", info.uncategorized);
  if (info.op_overrides != 0) std::printf("op category overrides: %zu\n", info.op_overrides);
  if (info.split_error.empty()) {
    std::printf("forward: %zu nodes, backward: %zu nodes, unclaimed: %zu\n", info.forward,
                info.backward, info.unclaimed);
  } else {
    std::printf("forward/backward: unavailable (%s)\n", info.split_error.c_str());
  }
  std::printf("activations: %s", human_bytes(info.activation_bytes).c_str());
  if (info.activation_bytes >= 1024) {
    std::printf(" (%lld bytes)", static_cast<long long>(info.activation_bytes));
  }
  std::printf(" over %zu call_function nodes", info.sized);
  if (info.unsized != 0) std::printf("; %zu without a size", info.unsized);
  std::printf("\n");
  return 0;
}

namespace {

// The options `remat partition` runs with (torch's defaults, then --options,
// --config and the dedicated flags), checked, and --explain's node.
PartitionOptions partition_options(const JointGraph& joint, const CommonSettings& common,
                                   const PartitionSettings& s) {
  PartitionOptions options = options_from(joint, s.sources, common.max_input_bytes);
  apply_partition_flags(s, options);
  options.validate();
  if (!s.explain.empty() && joint.graph.find(s.explain) == kNoNode)
    throw UsageError(fmt::format("--explain: node '{}' is not in the joint graph", s.explain));
  // The explanation reads the same decision record -o writes (why.h): the
  // partition runs exactly as without --explain.
  return options;
}

// A graph with no finite cut: the message, and the capacity graph drawn
// when --dot asks for it.
void report_no_finite_cut(const NoFiniteCutError& e, const PartitionSettings& s) {
  // The message already walks the conflicting path node by node.
  std::fprintf(stderr, "remat: error: %s\n", e.what());
  if (s.dot.empty()) {
    std::fprintf(stderr, "remat: rerun with --dot PATH to draw the capacity graph\n");
    return;
  }
  write_file_atomic(s.dot, e.dot());
  std::fprintf(stderr, "remat: wrote the capacity graph to %s\n", s.dot.c_str());
  // Drawn when Graphviz is installed; the DOT file is the result either way.
  if (const std::optional<std::string> svg = report::render_svg(e.dot())) {
    const std::string path = svg_path_for(s.dot);
    write_file_atomic(path, *svg);
    std::fprintf(stderr, "remat: rendered %s\n", path.c_str());
  }
}

// The saved values: a count line, then one line per value (40 unless verbose).
void print_saved(const Graph& g, const PartitionResult& r, const PartitionOptions& options,
                 bool verbose) {
  int64_t saved_bytes = 0;
  std::vector<int64_t> sizes;
  for (NodeId id : r.saved_values) {
    const int64_t b = id < g.size() ? bytes_of(g, id, options) : -1;
    sizes.push_back(b);
    if (b > 0) saved_bytes += b;
  }
  std::printf("saved: %zu values, %s", r.saved_values.size(), human_bytes(saved_bytes).c_str());
  if (!r.saved_sym_nodes.empty()) std::printf(", %zu sym nodes", r.saved_sym_nodes.size());
  if (!r.saved_opaque_nodes.empty()) std::printf(", %zu opaque values", r.saved_opaque_nodes.size());
  if (r.num_rng_states != 0) std::printf(", %d RNG states", r.num_rng_states);
  if (!r.quantized_values.empty()) std::printf(", %zu quantized to FP8", r.quantized_values.size());
  std::printf("\n");
  const size_t limit = verbose ? r.saved_values.size() : std::min<size_t>(r.saved_values.size(), 40);
  for (size_t i = 0; i < limit; ++i) {
    const NodeId id = r.saved_values[i];
    if (id >= g.size()) continue;
    std::printf("  %-24s %-24s %s\n", std::string(g.name(id)).c_str(), describe_value(g, id).c_str(),
                sizes[i] >= 0 ? human_bytes(sizes[i]).c_str() : "?");
  }
  if (limit < r.saved_values.size()) {
    std::printf("  ... and %zu more (--verbose lists all)\n", r.saved_values.size() - limit);
  }
}

// The recomputed nodes, on one line (40 unless verbose).
void print_recomputed(const Graph& g, const PartitionResult& r, bool verbose) {
  std::vector<NodeId> recomputed;
  for (NodeId id = 0; id < r.decisions.size() && id < g.size(); ++id) {
    if (r.decisions[id].where == NodeDecision::Where::kRecomputed) recomputed.push_back(id);
  }
  std::printf("recomputed in the backward: %zu ops\n", recomputed.size());
  if (recomputed.empty()) return;
  std::string line = " ";
  size_t shown = 0;
  for (NodeId id : recomputed) {
    if (!verbose && shown == 40) break;
    line += " ";
    line += g.name(id);
    ++shown;
  }
  if (shown < recomputed.size()) line += fmt::format(" ... and {} more", recomputed.size() - shown);
  std::printf("%s\n", line.c_str());
}

// The nodes banned from recomputation: reasons in order of first
// appearance with counts, then one line per node (40 unless verbose).
void print_banned(const Graph& g, const PartitionResult& r, bool verbose) {
  std::vector<NodeId> banned;
  for (NodeId id = 0; id < r.decisions.size() && id < g.size(); ++id) {
    if (!r.decisions[id].ban_reason.empty()) banned.push_back(id);
  }
  std::vector<std::pair<std::string, size_t>> reasons;
  std::unordered_map<std::string, size_t> reason_index;
  for (NodeId id : banned) {
    const std::string& why = r.decisions[id].ban_reason;
    auto [it, inserted] = reason_index.try_emplace(why, reasons.size());
    if (inserted) reasons.emplace_back(why, 0);
    ++reasons[it->second].second;
  }
  std::printf("banned from recomputation: %zu nodes", banned.size());
  for (size_t i = 0; i < reasons.size(); ++i) {
    std::printf("%s%zu %s", i == 0 ? " (" : ", ", reasons[i].second, reasons[i].first.c_str());
  }
  std::printf("%s\n", reasons.empty() ? "" : ")");
  const size_t ban_limit = verbose ? banned.size() : std::min<size_t>(banned.size(), 40);
  for (size_t i = 0; i < ban_limit; ++i) {
    std::printf("  %-24s %s\n", std::string(g.name(banned[i])).c_str(),
                r.decisions[banned[i]].ban_reason.c_str());
  }
  if (ban_limit < banned.size()) {
    std::printf("  ... and %zu more (--verbose lists all)\n", banned.size() - ban_limit);
  }
}

}  // namespace

int run_partition(const CommonSettings& common, const PartitionSettings& s) {
  const auto [path, joint] = load(common);
  const Graph& g = joint.graph;
  PartitionOptions options = partition_options(joint, common, s);

  const bool timing = common.verbose || g.size() >= kBigGraph;
  if (timing) std::fprintf(stderr, "remat: partitioning with %s...\n", s.partitioner.c_str());
  const auto t0 = Clock::now();
  PartitionResult r;
  ProgressBar bar(wants_progress(common, g.size() >= kBigGraph));
  options.progress = bar.hook();
  try {
    r = s.partitioner == "default" ? default_partition(joint, options)
                                   : min_cut_rematerialization_partition(joint, options);
    bar.finish();
  } catch (const NoFiniteCutError& e) {
    bar.finish();
    report_no_finite_cut(e, s);
    return 1;
  }
  const double elapsed = ms_since(t0);
  if (timing) {
    std::string stages;
    for (const StageTime& t : r.stages) stages += fmt::format(", {} {:.1f}", t.stage, t.seconds * 1e3);
    std::fprintf(stderr, "remat: partitioned in %.1f ms (ms per stage%s)\n", elapsed, stages.c_str());
  }

  std::printf("graph: %s (%zu nodes)\n", path.c_str(), g.size());
  std::printf("partitioner: %s, as torch %s's\n", r.partitioner.c_str(),
              options.torch.release.str().c_str());
  print_saved(g, r, options, common.verbose);
  print_recomputed(g, r, common.verbose);
  print_banned(g, r, common.verbose);
  std::printf("forward: %zu nodes, backward: %zu nodes\n", r.forward.size(), r.backward.size());
  print_memory(r);
  std::printf("time: %.3f ms (engine %.3f ms)\n", elapsed, r.seconds * 1e3);

  for (const MutationHazard& h : r.hazards) {
    std::fprintf(stderr, "remat: warning: %s\n", describe_hazard(r.forward, r.backward, h).c_str());
  }
  if (!s.output.empty()) {
    write_file_atomic(s.output, write_result(joint, r, s.timings));
    std::printf("wrote %s\n", s.output.c_str());
  }
  if (!s.explain.empty()) return explain(joint, r, s.explain, options);
  return 0;
}

namespace {

// The plans of one series, one line each.
void print_plans(const std::vector<BudgetPlanPoint>& plans) {
  for (const BudgetPlanPoint& p : plans)
    std::printf("  %-28s %-22s %-14.6g %zu\n", p.label.c_str(),
                fmt::format("{} ({} B)", human_bytes(p.peak_bytes), p.peak_bytes).c_str(),
                p.recompute_runtime, p.saved_values);
}

// `remat pareto --peak`: torch's budget plans and remat's peak frontier.
int run_peak_pareto(const CommonSettings& common, const ParetoSettings& s, const std::string& path,
                    const JointGraph& joint, PartitionOptions options) {
  if (!s.peak_search.empty()) options.peak_search = *peak_search_from_name(s.peak_search);
  // The frontier is the optimizer's: torch_plans (given in --options or
  // --config) is torch's plans again, which the chart has already.
  if (options.peak_search == PartitionOptions::PeakSearch::kTorchPlans)
    options.peak_search = PartitionOptions::PeakSearch::kFast;
  if (s.peak_search_nodes) options.peak_search_nodes = *s.peak_search_nodes;
  if (s.peak_search_seconds) options.peak_search_seconds = *s.peak_search_seconds;
  options.validate();
  const std::string search = peak_search_name(options.peak_search);

  const bool timing = common.verbose || joint.graph.size() >= kBigGraph;
  const auto t0 = Clock::now();
  ProgressBar bar(wants_progress(common, /*long_work=*/true));
  options.progress = bar.hook();
  const std::vector<BudgetPlanPoint> torch_plans = budget_plans(
      joint, options, std::vector<double>(std::begin(kPlanBudgets), std::end(kPlanBudgets)));
  const std::vector<BudgetPlanPoint> frontier = peak_frontier(joint, options, s.points);
  bar.finish();
  if (timing)
    std::fprintf(stderr, "remat: built torch's plans and remat's frontier in %.1f ms\n", ms_since(t0));

  // Render everything first: a failure leaves no file half-written.
  const std::string series = "remat_" + search;
  const PlanSeries both[] = {{"torch", torch_plans}, {series, frontier}};
  write_file_atomic(s.svg, plans_svg(torch_plans, nullptr, frontier, "remat " + search));
  if (!s.csv.empty()) write_file_atomic(s.csv, plans_csv(both));
  if (!s.json.empty()) write_file_atomic(s.json, plans_json(both));

  std::printf("graph: %s (%zu nodes)\n", path.c_str(), joint.graph.size());
  std::printf("solver: %s, runtime estimator: %s, peak search: %s\n",
              options.activation_memory_budget_solver.c_str(),
              options.activation_memory_budget_runtime_estimator.c_str(), search.c_str());
  std::printf("torch's activation-budget plans: %zu; peak, recompute runtime, saved values:\n",
              torch_plans.size());
  print_plans(torch_plans);
  std::printf("remat %s frontier: %zu plan%s at %d peak limits:\n", search.c_str(), frontier.size(),
              frontier.size() == 1 ? "" : "s", s.points);
  print_plans(frontier);
  std::printf("wrote %s\n", s.svg.c_str());
  if (!s.csv.empty()) std::printf("wrote %s\n", s.csv.c_str());
  if (!s.json.empty()) std::printf("wrote %s\n", s.json.c_str());
  return 0;
}

}  // namespace

int run_pareto(const CommonSettings& common, const ParetoSettings& s) {
  const auto [path, joint] = load(common);

  PartitionOptions options = options_from(joint, s.sources, common.max_input_bytes);
  if (s.no_cse) options.cse = false;
  if (!s.solver.empty()) options.activation_memory_budget_solver = s.solver;
  if (!s.estimator.empty()) options.activation_memory_budget_runtime_estimator = s.estimator;
  options.validate();
  if (s.peak) return run_peak_pareto(common, s, path, joint, std::move(options));

  const bool timing = common.verbose || joint.graph.size() >= kBigGraph;
  const auto t0 = Clock::now();
  ProgressBar bar(wants_progress(common, /*long_work=*/true));
  options.progress = bar.hook();
  const std::vector<MemoryBudgetPoint> points = memory_budget_pareto(joint, options, s.resolution);
  bar.finish();
  if (timing) std::fprintf(stderr, "remat: swept the frontier in %.1f ms\n", ms_since(t0));

  // Render everything first: a failure leaves no file half-written.
  const std::string svg = pareto_svg(points);
  write_file_atomic(s.svg, svg);
  if (!s.csv.empty()) write_file_atomic(s.csv, pareto_csv(points));
  if (!s.json.empty()) write_file_atomic(s.json, pareto_json(points));

  std::printf("graph: %s (%zu nodes)\n", path.c_str(), joint.graph.size());
  std::printf("solver: %s, runtime estimator: %s\n", options.activation_memory_budget_solver.c_str(),
              options.activation_memory_budget_runtime_estimator.c_str());
  std::printf("%zu points; budget -> recompute runtime, memory ratio:\n", points.size());
  double last_budget = -1;
  for (const MemoryBudgetPoint& p : points) {
    if (p.budget == last_budget) continue;  // torch's list repeats interval ends
    last_budget = p.budget;
    std::printf("  %-10.6g %-14.6g %.4f\n", p.budget, p.recompute_runtime, p.memory_ratio);
  }
  std::printf("wrote %s\n", s.svg.c_str());
  if (!s.csv.empty()) std::printf("wrote %s\n", s.csv.c_str());
  if (!s.json.empty()) std::printf("wrote %s\n", s.json.c_str());
  return 0;
}

int run_report(const CommonSettings& common, const ReportSettings& s) {
  // Every phase of a report on a big graph takes a while: the bar (on a
  // terminal) names each as it starts.
  ProgressBar bar(wants_progress(common, true));
  bar.update("load", 0);
  const auto [path, joint] = load(common, &bar);
  PartitionOptions options = options_from(joint, s.sources, common.max_input_bytes);
  if (s.no_cse) options.cse = false;
  if (s.memory_budget) options.activation_memory_budget = *s.memory_budget;
  options.trace = true;  // the budget step, the cut's capacities and ties feed the report
  options.validate();
  options.progress = bar.hook();

  ReportOptions report;
  report.title = path;
  report.options = options;
  report.options.progress = nullptr;
  PartitionResult r;
  try {
    r = s.partitioner == "default" ? default_partition(joint, options)
                                   : min_cut_rematerialization_partition(joint, options);
  } catch (const NoFiniteCutError& e) {
    // No partition, but a report all the same: the diagnosis is what the
    // reader needs. The command still fails.
    bar.update("render", 0);
    const std::string html = html_no_cut_report(joint, e, report);
    bar.finish();
    write_file_atomic(s.html, html);
    std::fprintf(stderr, "remat: error: %s\n", e.what());
    std::fprintf(stderr, "remat: wrote the diagnosis to %s\n", s.html.c_str());
    return 1;
  }
  // The report shows the engine's time; the --json file, like partition's
  // -o, is the same bytes on every run.
  const std::string result = write_result(joint, r, /*timings=*/true);

  if (s.no_pareto) {
    report.pareto_note = "Not computed (--no-pareto).";
  } else if (s.partitioner == "default") {
    report.pareto_note = "The default partitioner has no memory budget.";
  } else {
    try {
      report.plans = budget_plans(joint, options,
                                  std::vector<double>(std::begin(kPlanBudgets), std::end(kPlanBudgets)));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kUnsupported) throw;
      report.pareto_note = std::string("No trade-off to draw: ") + e.what();
    }
  }
  // Render everything first: a failure leaves no file half-written.
  bar.update("render", 0);
  const std::string html = html_report(joint, result, report);
  bar.update("write", 0);
  write_file_atomic(s.html, html);
  if (!s.json.empty()) write_file_atomic(s.json, write_result(joint, r));
  bar.finish();
  std::printf("graph: %s (%zu nodes)\n", path.c_str(), joint.graph.size());
  std::printf("wrote %s\n", s.html.c_str());
  if (!s.json.empty()) std::printf("wrote %s\n", s.json.c_str());
  return 0;
}

}  // namespace remat::cli
