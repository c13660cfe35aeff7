// io/options_json.cc — the options object of docs/format.md
// (schema/partition_options.v1.schema.json): read_options / apply_options
// (remat/io.h), the torch flags the command line accepts, and
// ActivationQuantizationOptions::from_json (remat/options.h), torch's
// activation_quantization_aten_pass dict.
//
// Contract: one home for options as JSON. The keys are PartitionOptions'
// field names; an unknown key, a wrong type or an unknown enum value is
// Error(kInvalidOption) naming the key ("option 'cse': expected a bool"): a
// typo must not silently fall back to torch's default. Malformed JSON is
// Error(kParse). Keys not given keep the value they had. The quantization
// dict's keys are the ones torch's partitioner reads, spelled as in torch's
// dict; values have JSON's types for torch's (strings for dtypes, bools for
// flags, a number for size_in_mb). Dtype strings are resolved as torch does
// (the text after the last '.', then getattr(torch, ...), so aliases such as
// "torch.half" work) and stored canonical. unmatched_op_keys tells which
// "ops" keys name no operator of a graph, for the front doors to say so.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "graph/dtypes.h"
#include "io/categories.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/options.h"

namespace remat {
namespace {

[[noreturn]] void bad(std::string_view key, std::string_view why) {
  throw Error(ErrorCode::kInvalidOption,
              fmt::format("activation_quantization.{}: {}", key, why));
}

// torch: getattr(torch, name.split(".")[-1]).
std::string resolve_dtype(std::string_view key, std::string_view name) {
  const size_t dot = name.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? name : name.substr(dot + 1);
  const std::string_view canonical = canonical_dtype(last);
  if (canonical.empty()) bad(key, fmt::format("\"{}\" is not a torch dtype", name));
  return std::string(canonical);
}

bool as_bool(std::string_view key, simdjson::dom::element v) {
  bool b = false;
  if (v.get(b)) bad(key, "expected a bool");
  return b;
}

std::string_view as_string(std::string_view key, simdjson::dom::element v) {
  std::string_view s;
  if (v.get(s)) bad(key, "expected a string");
  return s;
}

}  // namespace

ActivationQuantizationOptions ActivationQuantizationOptions::from_json(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(json.data(), json.size()).get(root)) {
    throw Error(ErrorCode::kParse,
                fmt::format("activation_quantization: {}", simdjson::error_message(err)));
  }
  ActivationQuantizationOptions q;
  if (root.is_null()) return q;
  simdjson::dom::object obj;
  if (root.get(obj)) {
    throw Error(ErrorCode::kInvalidOption,
                "activation_quantization: expected an object of torch's "
                "activation_quantization_aten_pass options, or null");
  }
  q.enabled = true;
  for (auto [key, value] : obj) {
    if (key == "quant_type") {
      q.quant_type = resolve_dtype(key, as_string(key, value));
    } else if (key == "size_in_mb") {
      double d = 0;
      if (value.get(d)) bad(key, "expected a number");
      q.size_in_mb = d;
    } else if (key == "use_scaling") {
      q.use_scaling = as_bool(key, value);
    } else if (key == "exclude_primals") {
      q.exclude_primals = as_bool(key, value);
    } else if (key == "allowed_dtypes") {
      // torch: "torch.bfloat16;torch.float32", split on ';'.
      q.allowed_dtypes.clear();
      std::string_view rest = as_string(key, value);
      while (true) {
        const size_t semi = rest.find(';');
        q.allowed_dtypes.push_back(resolve_dtype(key, rest.substr(0, semi)));
        if (semi == std::string_view::npos) break;
        rest = rest.substr(semi + 1);
      }
    } else if (key == "skip_dynamo_guards") {
      q.skip_dynamo_guards = as_bool(key, value);
    } else if (key == "quantize_dynamic_shape") {
      q.quantize_dynamic_shape = as_bool(key, value);
    } else {
      bad(key, "unknown key (torch reads quant_type, size_in_mb, use_scaling, exclude_primals, "
               "allowed_dtypes, skip_dynamo_guards, quantize_dynamic_shape)");
    }
  }
  return q;
}

// --- the options object ----------------------------------------------------

namespace {

using simdjson::dom::element;

[[noreturn]] void bad_option(std::string_view key, std::string_view why) {
  throw Error(ErrorCode::kInvalidOption, fmt::format("option '{}': {}", key, why));
}

bool option_bool(std::string_view k, element v) {
  bool b = false;
  if (v.get(b)) bad_option(k, "expected a bool");
  return b;
}
int64_t option_int(std::string_view k, element v) {
  int64_t i = 0;
  if (v.get(i)) bad_option(k, "expected an integer");
  return i;
}
double option_double(std::string_view k, element v) {
  double d = 0;
  if (v.get(d)) bad_option(k, "expected a number");
  return d;
}
std::string option_string(std::string_view k, element v) {
  std::string_view s;
  if (v.get(s)) bad_option(k, "expected a string");
  return std::string(s);
}

template <bool PartitionOptions::*F>
void set_bool(PartitionOptions& o, std::string_view k, element v) {
  o.*F = option_bool(k, v);
}
template <double PartitionOptions::*F>
void set_double(PartitionOptions& o, std::string_view k, element v) {
  o.*F = option_double(k, v);
}
template <std::string PartitionOptions::*F>
void set_string(PartitionOptions& o, std::string_view k, element v) {
  o.*F = option_string(k, v);
}

void set_max_dist(PartitionOptions& o, std::string_view k, element v) {
  o.max_dist_from_bw = static_cast<int>(option_int(k, v));
}
void set_peak(PartitionOptions& o, std::string_view k, element v) {
  o.peak_memory_budget = option_int(k, v);
}
void set_search_nodes(PartitionOptions& o, std::string_view k, element v) {
  o.peak_search_nodes = option_int(k, v);
}
void set_quantization(PartitionOptions& o, std::string_view, element v) {
  o.activation_quantization = ActivationQuantizationOptions::from_json(simdjson::minify(v));
}
void set_device_types(PartitionOptions& o, std::string_view k, element v) {
  simdjson::dom::array list;
  if (v.get(list)) bad_option(k, "expected a list of device type names");
  o.graphsafe_rng_device_types.clear();
  for (element x : list) o.graphsafe_rng_device_types.push_back(option_string(k, x));
}
void set_profiled(PartitionOptions& o, std::string_view k, element v) {
  simdjson::dom::array list;
  if (v.get(list)) bad_option(k, "expected a list of numbers (one per joint node)");
  o.profiled_runtimes.clear();
  for (element x : list) o.profiled_runtimes.push_back(option_double(k, x));
}
void set_cut_side(PartitionOptions& o, std::string_view k, element v) {
  const std::string s = option_string(k, v);
  if (s == "sink_minimal") o.cut_side = CutSide::kSinkMinimal;
  else if (s == "source_minimal") o.cut_side = CutSide::kSourceMinimal;
  else bad_option(k, "expected \"sink_minimal\" or \"source_minimal\"");
}
void set_peak_search(PartitionOptions& o, std::string_view k, element v) {
  const std::optional<PartitionOptions::PeakSearch> s = peak_search_from_name(option_string(k, v));
  if (!s) bad_option(k, "expected \"torch_plans\", \"fast\" or \"exact\"");
  o.peak_search = *s;
}
void set_backward_order(PartitionOptions& o, std::string_view k, element v) {
  const std::optional<PartitionOptions::BackwardOrder> b = backward_order_from_name(option_string(k, v));
  if (!b) bad_option(k, "expected \"autograd\" or \"memory\"");
  o.backward_order = *b;
}
void set_memory_model(PartitionOptions& o, std::string_view k, element v) {
  const std::optional<MemoryModel> m = memory_model_from_name(option_string(k, v));
  if (!m) bad_option(k, "expected \"aten\" or \"inductor\"");
  o.memory_model = *m;
}
// {"aten.foo": ["recomputable", "fusible"], ...}: replaces those keys'
// categories in the op registry.
void set_ops(PartitionOptions& o, std::string_view k, element v) {
  simdjson::dom::object ops;
  if (v.get(ops)) bad_option(k, "expected an object of category lists");
  for (simdjson::dom::key_value_pair kv : ops) {
    // A named variable, not a structured binding: clang 14 cannot capture those.
    const std::string_view name = kv.key;
    o.ops.set(name, io::read_op_categories(kv.value, [&](std::string_view why) {
      bad_option(k, fmt::format("'{}': {}", name, why));
    }));
  }
}

// "2.14", "2.14.1", "2.14.1+cu132": a supported release (a pre-release is
// not one: its partitioner may sit anywhere between two releases).
TorchRelease option_release(std::string_view k, element v) {
  const std::string text = option_string(k, v);
  const std::optional<TorchVersion> parsed = parse_torch_version(text);
  if (!parsed) bad_option(k, fmt::format("\"{}\" is not a torch release such as \"2.15\"", text));
  if (parsed->prerelease || !is_supported(parsed->release)) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("option '{}': torch {} is not a supported release (remat reproduces "
                            "{})",
                            k, text, supported_torch_releases()));
  }
  return parsed->release;
}
void set_torch_release(PartitionOptions& o, std::string_view k, element v) {
  o.torch = TorchBehavior::of(option_release(k, v));
}
// {"cse_partition_key": false, ...}: single switches over the release's.
void set_torch_switches(PartitionOptions& o, std::string_view k, element v) {
  simdjson::dom::object switches;
  if (v.get(switches)) bad_option(k, "expected an object of switch names and bools");
  for (simdjson::dom::key_value_pair kv : switches) {
    const TorchSwitch* s = find_torch_switch(kv.key);
    if (s == nullptr) {
      bad_option(k, fmt::format("'{}' is not a switch (docs/torch-releases.md lists them)",
                                std::string_view(kv.key)));
    }
    o.torch.*s->member = option_bool(k, kv.value);
  }
}

using Setter = void (*)(PartitionOptions&, std::string_view, element);
struct OptionKey {
  std::string_view key;
  Setter set;
};

// Every key of the options object, in options.h's order.
constexpr OptionKey kOptionKeys[] = {
    {"torch_release", set_torch_release},  // applied first, whatever its place
    {"torch_switches", set_torch_switches},
    {"cse", set_bool<&PartitionOptions::cse>},
    {"unsafe_allow_optimization_of_collectives",
     set_bool<&PartitionOptions::unsafe_allow_optimization_of_collectives>},
    {"recompute_views", set_bool<&PartitionOptions::recompute_views>},
    {"max_dist_from_bw", set_max_dist},
    {"ban_recompute_used_far_apart", set_bool<&PartitionOptions::ban_recompute_used_far_apart>},
    {"ban_recompute_long_fusible_chains",
     set_bool<&PartitionOptions::ban_recompute_long_fusible_chains>},
    {"ban_recompute_materialized_backward",
     set_bool<&PartitionOptions::ban_recompute_materialized_backward>},
    {"ban_recompute_not_in_allowlist", set_bool<&PartitionOptions::ban_recompute_not_in_allowlist>},
    {"ban_recompute_reductions", set_bool<&PartitionOptions::ban_recompute_reductions>},
    {"aggressive_recomputation", set_bool<&PartitionOptions::aggressive_recomputation>},
    {"treat_parameters_as_free_to_save",
     set_bool<&PartitionOptions::treat_parameters_as_free_to_save>},
    {"is_non_builtin_to_include", set_bool<&PartitionOptions::is_non_builtin_to_include>},
    {"unsafe_treat_script_objects_as_zero_size",
     set_bool<&PartitionOptions::unsafe_treat_script_objects_as_zero_size>},
    {"graphsafe_rng_functionalization",
     set_bool<&PartitionOptions::graphsafe_rng_functionalization>},
    {"activation_memory_budget", set_double<&PartitionOptions::activation_memory_budget>},
    {"activation_memory_budget_require_full_coverage",
     set_bool<&PartitionOptions::activation_memory_budget_require_full_coverage>},
    {"activation_memory_budget_solver",
     set_string<&PartitionOptions::activation_memory_budget_solver>},
    {"activation_memory_budget_runtime_estimator",
     set_string<&PartitionOptions::activation_memory_budget_runtime_estimator>},
    {"enable_activation_offloading", set_bool<&PartitionOptions::enable_activation_offloading>},
    {"activation_offload_separate_stream",
     set_bool<&PartitionOptions::activation_offload_separate_stream>},
    {"activation_offload_sink_wait", set_bool<&PartitionOptions::activation_offload_sink_wait>},
    {"activation_reload_prefetch", set_bool<&PartitionOptions::activation_reload_prefetch>},
    {"activation_offload_cpu_gpu_bw", set_double<&PartitionOptions::activation_offload_cpu_gpu_bw>},
    {"sync_decision_cross_ranks", set_bool<&PartitionOptions::sync_decision_cross_ranks>},
    {"activation_quantization", set_quantization},
    {"dce_impure_random", set_bool<&PartitionOptions::dce_impure_random>},
    {"distributed_available", set_bool<&PartitionOptions::distributed_available>},
    {"graphsafe_rng_device_types", set_device_types},
    {"cut_side", set_cut_side},
    {"peak_memory_budget", set_peak},
    {"peak_search", set_peak_search},
    {"backward_order", set_backward_order},
    {"memory_model", set_memory_model},
    {"inductor_reorder", set_bool<&PartitionOptions::inductor_reorder>},
    {"peak_search_seconds", set_double<&PartitionOptions::peak_search_seconds>},
    {"peak_search_nodes", set_search_nodes},
    {"profiled_runtimes", set_profiled},
    {"trace", set_bool<&PartitionOptions::trace>},
    {"visualize_memory_budget_pareto", set_bool<&PartitionOptions::visualize_memory_budget_pareto>},
    {"keep_snapshots", set_bool<&PartitionOptions::keep_snapshots>},
    {"ops", set_ops},
};

// The torch._functorch.config flags remat honors, and the option each sets:
// the same name but for the one torch keeps private.
constexpr TorchConfigFlag kTorchFlags[] = {
    {"cse", "cse"},
    {"unsafe_allow_optimization_of_collectives", "unsafe_allow_optimization_of_collectives"},
    {"recompute_views", "recompute_views"},
    {"max_dist_from_bw", "max_dist_from_bw"},
    {"ban_recompute_used_far_apart", "ban_recompute_used_far_apart"},
    {"ban_recompute_long_fusible_chains", "ban_recompute_long_fusible_chains"},
    {"ban_recompute_materialized_backward", "ban_recompute_materialized_backward"},
    {"ban_recompute_not_in_allowlist", "ban_recompute_not_in_allowlist"},
    {"ban_recompute_reductions", "ban_recompute_reductions"},
    {"aggressive_recomputation", "aggressive_recomputation"},
    {"treat_parameters_as_free_to_save", "treat_parameters_as_free_to_save"},
    {"is_non_builtin_to_include", "is_non_builtin_to_include"},
    {"unsafe_treat_script_objects_as_zero_size", "unsafe_treat_script_objects_as_zero_size"},
    {"graphsafe_rng_functionalization", "graphsafe_rng_functionalization"},
    {"activation_memory_budget", "activation_memory_budget"},
    {"activation_memory_budget_require_full_coverage",
     "activation_memory_budget_require_full_coverage"},
    {"activation_memory_budget_solver", "activation_memory_budget_solver"},
    {"activation_memory_budget_runtime_estimator", "activation_memory_budget_runtime_estimator"},
    {"visualize_memory_budget_pareto", "visualize_memory_budget_pareto"},
    {"enable_activation_offloading", "enable_activation_offloading"},
    {"activation_offload_separate_stream", "activation_offload_separate_stream"},
    {"activation_offload_sink_wait", "activation_offload_sink_wait"},
    {"activation_reload_prefetch", "activation_reload_prefetch"},
    {"activation_offload_cpu_gpu_bw", "activation_offload_cpu_gpu_bw"},
    {"_sync_decision_cross_ranks", "sync_decision_cross_ranks"},
};

// Hooks given select the "custom" solver / estimator, as torch's config
// holding a CustomKnapsackSolver / CustomRuntimeEstimator instance does.
void attach_hooks(PartitionOptions& o, const OptionHooks& hooks) {
  if (hooks.rank_group) o.rank_group = hooks.rank_group;
  if (hooks.knapsack_solver) {
    o.custom_knapsack = hooks.knapsack_solver;
    o.activation_memory_budget_solver = "custom";
  }
  if (hooks.runtime_estimator) {
    o.custom_runtime_estimator = hooks.runtime_estimator;
    o.activation_memory_budget_runtime_estimator = "custom";
  }
  if (hooks.offload_node_runtime) o.offload_node_runtime = hooks.offload_node_runtime;
  if (hooks.size_check) o.activation_quantization.symbolic_size = hooks.size_check;
}

}  // namespace

void apply_options(std::string_view json, PartitionOptions& options) {
  simdjson::dom::parser parser;
  element root;
  if (auto err = parser.parse(json.data(), json.size()).get(root)) {
    throw Error(ErrorCode::kParse, fmt::format("options: {}", simdjson::error_message(err)));
  }
  simdjson::dom::object obj;
  if (root.get(obj)) bad_option("<root>", "expected a JSON object");
  // The release sets every switch, so it goes before the single switches
  // (and everything else) whatever the object's order.
  element release;
  if (obj["torch_release"].get(release) == simdjson::SUCCESS) {
    set_torch_release(options, "torch_release", release);
  }
  for (auto [key, value] : obj) {
    const OptionKey* found = nullptr;
    for (const OptionKey& k : kOptionKeys) {
      if (k.key == key) found = &k;
    }
    if (found == nullptr) bad_option(key, "unknown option");
    if (found->set != set_torch_release) found->set(options, key, value);
  }
}

bool names_torch_release(std::string_view json) {
  if (json.empty()) return false;
  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  // Malformed JSON is apply_options' to report.
  if (parser.parse(json.data(), json.size()).get(obj)) return false;
  element release;
  return obj["torch_release"].get(release) == simdjson::SUCCESS;
}

std::vector<std::string> unmatched_op_keys(const JointGraph& joint, std::string_view json) {
  std::vector<std::string> out;
  if (json.empty()) return out;
  simdjson::dom::parser parser;
  simdjson::dom::object obj, ops;
  if (parser.parse(json.data(), json.size()).get(obj) || obj["ops"].get(ops)) return out;
  const Graph& g = joint.graph;
  std::unordered_set<std::string_view> keys;
  for (const OpInfo& op : g.ops()) keys.insert(g.str(op.packet != 0 ? op.packet : op.name));
  for (simdjson::dom::key_value_pair kv : ops)
    if (!keys.count(kv.key)) out.emplace_back(kv.key);
  return out;
}

PartitionOptions default_options(const JointGraph& joint) {
  PartitionOptions o;
  if (joint.torch_version.empty()) return o;
  const std::optional<TorchVersion> v = parse_torch_version(joint.torch_version);
  if (!v || v->prerelease || !is_supported(v->release)) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("joint graph: field 'torch_version': the graph was captured under "
                            "torch {}, and remat reproduces {}; choose the release to reproduce "
                            "(torch_release, the command line's --torch)",
                            joint.torch_version, supported_torch_releases()));
  }
  o.torch = TorchBehavior::of(v->release);
  return o;
}

PartitionOptions read_options(std::string_view json, const OptionHooks& hooks,
                              const JointGraph* joint) {
  PartitionOptions o;
  // An explicit release wins over the graph's, so a graph captured under
  // an unsupported torch can still be partitioned as a supported one.
  if (joint != nullptr && !names_torch_release(json)) o = default_options(*joint);
  if (!json.empty()) apply_options(json, o);
  attach_hooks(o, hooks);
  o.validate();
  return o;
}

std::span<const TorchConfigFlag> torch_config_flags() { return kTorchFlags; }

}  // namespace remat
