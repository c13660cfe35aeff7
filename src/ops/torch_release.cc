// ops/torch_release.cc — torch version strings and the release table
// (remat/torch_release.h).
//
// Contract: parse_torch_version reads what torch.__version__ and pip print;
// TorchBehavior::of is the one place that maps a release to its switches.
// Each switch is set by comparing with the release that introduced it, here
// and nowhere else in the engine.
#include <charconv>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "remat/error.h"
#include "remat/torch_release.h"

namespace remat {
namespace {

// Reads a decimal number at the front of `s`, advancing it.
std::optional<int> take_number(std::string_view& s) {
  int value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end == s.data()) return std::nullopt;
  s.remove_prefix(static_cast<size_t>(end - s.data()));
  return value;
}

}  // namespace

std::string TorchRelease::str() const { return fmt::format("{}.{}", major, minor); }

std::optional<TorchVersion> parse_torch_version(std::string_view text) {
  // The local part (+cpu, +cu132, +git1234) says how it was built, not what.
  std::string_view s = text.substr(0, text.find('+'));
  TorchVersion v;
  const std::optional<int> major = take_number(s);
  if (!major || s.empty() || s.front() != '.') return std::nullopt;
  s.remove_prefix(1);
  const std::optional<int> minor = take_number(s);
  if (!minor) return std::nullopt;
  v.release = {*major, *minor};
  if (!s.empty() && s.front() == '.') {  // the patch number
    s.remove_prefix(1);
    if (!take_number(s)) return std::nullopt;
  }
  // Anything left is a pre-release or development tag: a0, rc1, .dev2026...
  if (!s.empty()) {
    const bool known = s.starts_with(".dev") || s.starts_with("a") || s.starts_with("b") ||
                       s.starts_with("rc") || s.starts_with(".post");
    if (!known) return std::nullopt;
    // A post-release is a release (a re-upload); the others are not.
    v.prerelease = !s.starts_with(".post");
  }
  return v;
}

bool is_supported(TorchRelease release) {
  return kOldestTorchRelease <= release && release <= kNewestTorchRelease;
}

std::string supported_torch_releases() {
  return fmt::format("torch {} to {}", kOldestTorchRelease.str(), kNewestTorchRelease.str());
}

TorchRelease nearest_supported(TorchRelease release) {
  if (release < kOldestTorchRelease) return kOldestTorchRelease;
  if (release > kNewestTorchRelease) return kNewestTorchRelease;
  return release;
}

TorchBehavior TorchBehavior::of(TorchRelease release) {
  if (!is_supported(release)) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("torch_release: torch {} is not supported (remat reproduces {})",
                            release.str(), supported_torch_releases()));
  }
  TorchBehavior b;
  b.release = release;
  for (const TorchSwitch& s : torch_switches()) b.*s.member = release >= s.since;
  return b;
}

namespace {

// One row per behavioral difference, grouped by the release that made it.
constexpr TorchSwitch kSwitches[] = {
    // --- 2.12 ---------------------------------------------------------------
    {"output_stack_traces_meta", {2, 12}, &TorchBehavior::output_stack_traces_meta,
     "_extract_graph_with_inputs_outputs",
     "the output node of each extracted graph gets meta[\"output_stack_traces\"]",
     "tests/python/test_release_rewrites.py::test_output_stack_traces_meta"},
    {"fx_name_count_by_base", {2, 12}, &TorchBehavior::fx_name_count_by_base,
     "torch.fx.graph._Namespace.create_name",
     "a taken name base_N continues from the base's counter instead of the smallest free suffix",
     "tests/python/test_release_prepare.py::test_fx_name_count_by_base"},
    {"opaque_values_saved", {2, 12}, &TorchBehavior::opaque_values_saved,
     "solve_min_cut, default_partition, _extract_fwd_bwd_modules",
     "opaque values (registered opaque types, Enum members, script objects) cost 0 to save and get their own saved slot",
     "tests/python/test_release_saved.py::test_opaque_values_saved"},
    {"drop_assert_only_symbool", {2, 12}, &TorchBehavior::drop_assert_only_symbool,
     "min_cut_rematerialization_partition",
     "a SymBool whose only users are runtime asserts is not saved",
     "tests/python/test_release_saved.py::test_drop_assert_only_symbool"},
    {"leaky_relu_family_pointwise", {2, 12}, &TorchBehavior::leaky_relu_family_pointwise,
     "op tags read by get_default_op_list",
     "leaky_relu, _conj_physical and six in-place activations are pointwise (recomputable, fusible)",
     "tests/python/test_release_budget.py::test_leaky_relu_family_pointwise"},
    {"sdpa_flops_gqa", {2, 12}, &TorchBehavior::sdpa_flops_gqa,
     "torch.utils.flop_counter sdpa_flop_count",
     "attention FLOP formulas accept grouped-query heads (2.11 raises)",
     "tests/python/test_release_budget.py::test_sdpa_flops_gqa"},
    {"quantize_skips_user_outputs", {2, 12}, &TorchBehavior::quantize_skips_user_outputs,
     "quantize_activation_fw",
     "FP8 activation quantization leaves the user-visible forward outputs alone",
     "tests/python/test_release_rewrites.py::test_quantize_skips_user_outputs"},
    {"offload_async_ops", {2, 12}, &TorchBehavior::offload_async_ops,
     "_activation_offloading",
     "separate-stream offloading emits ao.offload / ao.reload / ao.wait_tensor instead of device_put between stream ops",
     "tests/python/test_release_rewrites.py::test_offload_async_ops"},
    // --- 2.13 ---------------------------------------------------------------
    {"impure_checks_packet_default", {2, 13}, &TorchBehavior::impure_checks_packet_default,
     "torch.fx.Node.is_impure",
     "an OpOverloadPacket target is judged by its default overload (a dead aten.rand packet node is kept)",
     "tests/python/test_release_prepare.py::test_impure_checks_packet_default"},
    {"default_skips_assert_only_symbool", {2, 13}, &TorchBehavior::default_skips_assert_only_symbool,
     "default_partition",
     "default_partition does not save a SymBool whose only users are runtime asserts",
     "tests/python/test_release_saved.py::test_default_skips_assert_only_symbool"},
    {"default_skips_assert_async", {2, 13}, &TorchBehavior::default_skips_assert_async,
     "default_partition",
     "default_partition does not save for _assert_async nodes",
     "tests/python/test_release_saved.py::test_default_skips_assert_async"},
    {"generator_is_opaque", {2, 13}, &TorchBehavior::generator_is_opaque,
     "_aot_autograd.graph_compile.is_opaque_node",
     "a torch.Generator value is an opaque value",
     "tests/python/test_release_saved.py::test_generator_is_opaque"},
    {"script_object_size_flag", {2, 13}, &TorchBehavior::script_object_size_flag,
     "_size_of",
     "script objects count 0 bytes under config.unsafe_treat_script_objects_as_zero_size (a flag 2.13 added)",
     "tests/python/test_release_saved.py::test_script_object_size_flag"},
    {"size_of_no_return_ops", {2, 13}, &TorchBehavior::size_of_no_return_ops,
     "_size_of",
     "a node whose op returns nothing counts 0 bytes",
     "tests/python/test_release_saved.py::test_size_of_no_return_ops"},
    {"region_memory_budget", {2, 13}, &TorchBehavior::region_memory_budget,
     "min_cut_rematerialization_partition",
     "region_activation_memory_budget annotations set the graph's memory budget",
     "tests/python/test_release_budget.py::test_region_memory_budget"},
    {"prepare_softmax_online_recomputable", {2, 13}, &TorchBehavior::prepare_softmax_online_recomputable,
     "get_default_op_list",
     "prims.prepare_softmax_online is recomputable",
     "tests/python/test_release_budget.py::test_prepare_softmax_online_recomputable"},
    {"offload_reload_layout", {2, 13}, &TorchBehavior::offload_reload_layout,
     "_activation_offloading",
     "ao.reload carries the original size and stride, its wait keeps the CPU copy alive, and the offload meta moves to the backward placeholder",
     "tests/python/test_release_rewrites.py::test_offload_reload_layout"},
    {"mark_autograd_backward_meta", {2, 13}, &TorchBehavior::mark_autograd_backward_meta,
     "_extract_fwd_bwd_modules",
     "backward nodes copied from the joint graph get meta[\"autograd_backward\"]",
     "tests/python/test_release_rewrites.py::test_mark_autograd_backward_meta"},
    {"min_cut_information_payload", {2, 13}, &TorchBehavior::min_cut_information_payload,
     "ac_logging_utils.create_structured_trace_for_min_cut_info",
     "the min_cut_information trace artifact's payload",
     "tests/python/test_release_rewrites.py::test_min_cut_information_payload"},
    {"sync_canonical_names", {2, 13}, &TorchBehavior::sync_canonical_names,
     "_sync_decision_cross_ranks",
     "ranks compare graphs and exchange saved values under canonical node names",
     "tests/python/test_release_sync.py::test_sync_canonical_names"},
    // --- 2.14 ---------------------------------------------------------------
    {"cse_partition_key", {2, 14}, &TorchBehavior::cse_partition_key,
     "min_cut_rematerialization_partition, fx_graph_cse",
     "CSE never merges a value the backward needs with one it does not",
     "tests/python/test_release_prepare.py::test_cse_partition_key"},
    {"cse_float_bit_keys", {2, 14}, &TorchBehavior::cse_float_bit_keys,
     "compile_utils._normalize_cse_arg",
     "CSE compares float constants by bit pattern (-0.0 and 0.0 differ; equal NaNs merge)",
     "tests/python/test_release_prepare.py::test_cse_float_bit_keys"},
    {"cse_skip_impure", {2, 14}, &TorchBehavior::cse_skip_impure,
     "fx_graph_cse",
     "CSE never merges impure nodes (side effects, mutation, seeded random ops)",
     "tests/python/test_release_prepare.py::test_cse_skip_impure"},
    {"cse_custom_context_key", {2, 14}, &TorchBehavior::cse_custom_context_key,
     "fx_graph_cse",
     "CSE keeps nodes of different stream / mempool contexts (meta[\"custom\"]) apart",
     "tests/python/test_release_prepare.py::test_cse_custom_context_key"},
    {"cse_keep_mutation_bases", {2, 14}, &TorchBehavior::cse_keep_mutation_bases,
     "fx_graph_cse",
     "CSE never merges a node a functional wrapper mutates (auto_functionalized bases)",
     "tests/python/test_release_prepare.py::test_cse_keep_mutation_bases"},
    {"functional_graph_allows_shallow_copy_data", {2, 14}, &TorchBehavior::functional_graph_allows_shallow_copy_data,
     "_aot_autograd.functional_utils._is_functional_graph",
     "aten.shallow_copy_data_ does not make a graph non-functional",
     "tests/python/test_release_prepare.py::test_functional_graph_allows_shallow_copy_data"},
    {"sdpa_zero_dropout_not_random", {2, 14}, &TorchBehavior::sdpa_zero_dropout_not_random,
     "is_rng_op",
     "an SDPA-family op whose dropout_p is statically 0 is not a random op",
     "tests/python/test_release_saved.py::test_sdpa_zero_dropout_not_random"},
    {"bind_unreplaced_symbols", {2, 14}, &TorchBehavior::bind_unreplaced_symbols,
     "_extract_fwd_bwd_modules, is_symbol_binding_fx_node",
     "the backward also binds the symbols of values' unreplaced expressions",
     "tests/python/test_release_saved.py::test_bind_unreplaced_symbols"},
    {"knapsack_empty_returns_aggressive", {2, 14}, &TorchBehavior::knapsack_empty_returns_aggressive,
     "choose_saved_values_set",
     "a budget with no recomputable banned node left returns the aggressive tier's saved values",
     "tests/python/test_release_budget.py::test_knapsack_empty_returns_aggressive"},
    {"flops_flash_attention_bshd", {2, 14}, &TorchBehavior::flops_flash_attention_bshd,
     "torch.utils.flop_counter",
     "the raw flash-attention ops' FLOPs read [batch, seq, heads, dim]",
     "tests/python/test_release_budget.py::test_flops_flash_attention_bshd"},
    {"flops_mm_family_extra_args", {2, 14}, &TorchBehavior::flops_mm_family_extra_args,
     "torch.utils.flop_counter",
     "the .dtype overloads of addmm / bmm / baddbmm get a FLOP count (2.13 raises)",
     "tests/python/test_release_budget.py::test_flops_mm_family_extra_args"},
    {"control_deps_extraction", {2, 14}, &TorchBehavior::control_deps_extraction,
     "_extract_graph_with_inputs_outputs, classify_nodes",
     "control_deps: forward syncs vanish from the backward, partial deps are rebuilt, required-backward follows deps",
     "tests/python/test_release_rewrites.py::test_control_deps_extraction"},
    {"sync_stable_target_str", {2, 14}, &TorchBehavior::sync_stable_target_str,
     "_sync_decision_cross_ranks",
     "ranks hash callable targets by qualified name, not str(); a DEBUG line names the first rank with another graph",
     "tests/python/test_release_sync.py::test_sync_stable_target_str"},
    // --- 2.15 ---------------------------------------------------------------
    {"region_budget_full_coverage_flag", {2, 15}, &TorchBehavior::region_budget_full_coverage_flag,
     "min_cut_rematerialization_partition",
     "config.activation_memory_budget_require_full_coverage, and the coverage error's new text",
     "tests/python/test_release_budget.py::test_region_budget_full_coverage_flag"},
    {"epilogue_mutation_unsaveable", {2, 15}, &TorchBehavior::epilogue_mutation_unsaveable,
     "graph_compile._partition_joint_graph_into_fw_bw (the stamp), solve_min_cut, choose_saved_values_set",
     "an input mutated by the runtime epilogue cannot be saved, and budget 0 does not return it",
     "tests/python/test_release_budget.py::test_epilogue_mutation_unsaveable"},
    {"infinite_path_exact_inf", {2, 15}, &TorchBehavior::infinite_path_exact_inf,
     "_find_infinite_capacity_path (the no-finite-cut diagnosis)",
     "the diagnosis follows exactly infinite edges",
     "tests/python/test_release_budget.py::test_infinite_path_exact_inf"},
    {"flops_sdpa_for_cpu", {2, 15}, &TorchBehavior::flops_sdpa_for_cpu,
     "torch.utils.flop_counter",
     "the CPU flash-attention op gets a FLOP count",
     "tests/python/test_release_budget.py::test_flops_sdpa_for_cpu"},
    {"flops_registered_hops", {2, 15}, &TorchBehavior::flops_registered_hops,
     "torch.utils.flop_counter",
     "higher-order ops with registered formulas (flex_attention) get a FLOP count",
     "tests/python/test_release_budget.py::test_flops_registered_hops"},
    {"flops_nested_attention_dv", {2, 15}, &TorchBehavior::flops_nested_attention_dv,
     "torch.utils.flop_counter",
     "nested attention FLOPs use the value head size",
     "tests/python/test_release_budget.py::test_flops_nested_attention_dv"},
    {"wait_tensors_like_wait_tensor", {2, 15}, &TorchBehavior::wait_tensors_like_wait_tensor,
     "_extract_fwd_bwd_modules, default_partition",
     "wait_tensors is pruned and judged like wait_tensor",
     "tests/python/test_release_saved.py::test_wait_tensors_like_wait_tensor"},
    {"collective_leaf_getitems", {2, 15}, &TorchBehavior::collective_leaf_getitems,
     "force_save_collectives",
     "a multi-output collective's leaf getitems are forced saved, not the collective",
     "tests/python/test_release_prepare.py::test_collective_leaf_getitems"},
    {"device_valued_nodes", {2, 15}, &TorchBehavior::device_valued_nodes,
     "_size_of, should_ban_recomputation",
     "a node whose value is a torch.device counts 0 bytes and is never banned",
     "tests/python/test_release_saved.py::test_device_valued_nodes"},
    {"effectful_recompute_policy", {2, 15}, &TorchBehavior::effectful_recompute_policy,
     "force_save_effectful_ops",
     "MUST_RECOMPUTE on an effectful op raises; PREFER_RECOMPUTE no longer exempts it",
     "tests/python/test_release_prepare.py::test_effectful_recompute_policy"},
    {"static_input_meta", {2, 15}, &TorchBehavior::static_input_meta,
     "_extract_fwd_bwd_modules",
     "primal placeholders get meta[\"is_static_input\"]",
     "tests/python/test_release_rewrites.py::test_static_input_meta"},
    {"sync_decision_compile_pg", {2, 15}, &TorchBehavior::sync_decision_compile_pg,
     "_sync_decision_cross_ranks",
     "the ranks' collectives run on dynamo's compile-sync gloo group",
     "tests/python/test_release_sync.py::test_sync_decision_compile_pg"},
};

}  // namespace

std::span<const TorchSwitch> torch_switches() { return kSwitches; }

const TorchSwitch* find_torch_switch(std::string_view name) {
  for (const TorchSwitch& s : kSwitches) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace remat
