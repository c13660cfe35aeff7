// remat/options.h — every knob of the partitioner.
//
// Contract: the torch release to reproduce (its behavioral switches,
// remat/torch_release.h), one field per flag the reference reads from
// torch._functorch.config (same name, same default as torch's), plus the
// few facts torch takes from its runtime (whether the DCE treats random ops
// as impure, whether torch.distributed is available), plus remat's own
// choices, which default to torch's behavior. The Python front door fills
// these from the running torch's version and config at call time.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "remat/cut_side.h"
#include "remat/memory.h"
#include "remat/ops.h"
#include "remat/torch_release.h"

namespace remat {

class RankGroup;  // remat/sync.h

// torch's CustomKnapsackSolver, as the engine calls it. `memory` holds the
// knapsack items' normalized sizes, `banned_nodes` the items themselves as
// joint-graph NodeIds (the caller's ids), both in torch's item order (largest
// first); `max_memory` is the budget. Returns (saved, recomputed) item
// indices. Only `recomputed` is used, as in torch: an index outside
// [0, memory.size()) is skipped (torch's caller swallows the IndexError;
// Python's negative indices are normalized by the front door). The expected
// runtime is 0, as torch reports it. Exceptions propagate out of the
// partition call unchanged.
using CustomKnapsackFn = std::function<std::pair<std::vector<int>, std::vector<int>>(
    const std::vector<double>& memory, double max_memory, const std::vector<NodeId>& banned_nodes)>;

// torch's CustomRuntimeEstimator: the runtime of recomputing one knapsack
// item, given as its joint-graph NodeId. Called once per item, in item
// order, before the solver. Exceptions propagate unchanged.
using CustomRuntimeEstimatorFn = std::function<double(NodeId joint_node)>;

// The runtime, in milliseconds, that torch's reload prefetch credits one
// backward node with: `benchmark_node(node)` for a compute node (an op with a
// flop formula), 0 otherwise. Asked only for nodes copied from the joint
// graph (given as their joint NodeId), only where torch's scheduler asks, in
// its order; nodes the partitioner created count 0 without a call.
// Exceptions propagate unchanged.
using OffloadNodeRuntimeFn = std::function<double(NodeId joint_node)>;
// How torch settles the size test of FP8 activation quantization for a
// tensor whose size is symbolic (see ActivationQuantizationOptions).
enum class SizeQuery : uint8_t {
  // bool(size_in_mb >= threshold): the size hints decide, and torch's
  // ShapeEnv records a guard on the outcome.
  kGuard,
  // statically_known_true / statically_known_false: only what the ShapeEnv
  // can prove from its ranges and guards, without recording anything.
  kStatic,
};

// Answers torch's size question for one joint-graph node (its NodeId in the
// caller's joint graph) whose numel is symbolic: whether
// `numel * itemsize / 2**20 >= size_in_mb`, or nullopt when it is not known
// (kStatic only). Called on the partitioning thread, in the order torch asks.
using SymbolicSizeFn = std::function<std::optional<bool>(NodeId joint_node, SizeQuery how)>;

// inductor's post_grad_fusion_options["activation_quantization_aten_pass"],
// which makes torch's extraction quantize large saved activations to FP8 in
// the forward and dequantize them in the backward
// (partitioners.enable_activation_quantization). One field per key torch
// reads, with torch's default. Dtype names are torch's, with or without the
// "torch." prefix ("torch.float8_e5m2", "bfloat16"; aliases such as "half"
// included); they are kept canonical here ("float8_e5m2").
struct ActivationQuantizationOptions {
  bool enabled = false;  // the dict is set (not None)
  std::string quant_type = "float8_e5m2";
  double size_in_mb = 100;
  // torch reads "use_scaling" with default True where the forward quantizes
  // and where the backward gains the scale inputs, but with default False
  // where the backward dequantizes. nullopt (the key absent) reproduces that
  // mix; a value applies to all three.
  std::optional<bool> use_scaling;
  bool exclude_primals = false;  // skip saved values whose name contains "primals"
  std::vector<std::string> allowed_dtypes = {"bfloat16"};
  // Decide symbolic sizes statically (kStatic) instead of with a guard.
  bool skip_dynamo_guards = false;
  // With skip_dynamo_guards: quantize unless provably too small (instead of
  // only when provably large enough).
  bool quantize_dynamic_shape = false;
  // torch asks its ShapeEnv about symbolic sizes; remat asks this hook.
  // Without it, kGuard decides by the size hints (an unbacked size is an
  // Error, as torch raises) and kStatic knows nothing.
  SymbolicSizeFn symbolic_size;

  bool scale_forward() const { return use_scaling.value_or(true); }
  bool scale_backward() const { return use_scaling.value_or(false); }

  // Parses torch's dict as a JSON object ({"quant_type": "torch.float8_e4m3fn",
  // "size_in_mb": 0, "use_scaling": true, "allowed_dtypes":
  // "torch.bfloat16;torch.float32", ...}; `null` leaves the pass off). Throws
  // Error(kInvalidOption) naming the key for unknown keys, wrong types and
  // unknown dtypes. The result is enabled unless the JSON is null.
  static ActivationQuantizationOptions from_json(std::string_view json);
};

struct PartitionOptions {
  // --- the torch release -------------------------------------------------
  // Whose partitioner to reproduce: TorchBehavior::of(release) sets every
  // switch for one release (default: the newest supported). Stages read the
  // switches, never the release.
  TorchBehavior torch = TorchBehavior::of(kNewestTorchRelease);

  // --- torch._functorch.config -------------------------------------------
  bool cse = true;
  bool unsafe_allow_optimization_of_collectives = false;
  bool recompute_views = false;
  int max_dist_from_bw = 1000;
  bool ban_recompute_used_far_apart = true;
  bool ban_recompute_long_fusible_chains = true;
  bool ban_recompute_materialized_backward = true;
  bool ban_recompute_not_in_allowlist = true;
  bool ban_recompute_reductions = true;
  bool aggressive_recomputation = false;
  bool treat_parameters_as_free_to_save = true;
  bool is_non_builtin_to_include = false;
  bool unsafe_treat_script_objects_as_zero_size = false;
  bool graphsafe_rng_functionalization = true;
  double activation_memory_budget = 1.0;
  // A region_activation_memory_budget annotation must cover every forward op
  // of its graph; False applies a partial annotation's budget to the whole
  // graph. torch 2.15's flag: earlier releases lack it and always require
  // the coverage, so only TorchBehavior::region_budget_full_coverage_flag
  // reads it.
  bool activation_memory_budget_require_full_coverage = true;
  // A torch solver name, or "custom" for `custom_knapsack` below.
  std::string activation_memory_budget_solver = "dp";
  // A torch estimator name, or "custom" for `custom_runtime_estimator`.
  std::string activation_memory_budget_runtime_estimator = "flops";
  // Activation offloading (torch's _activation_offloading package): saved
  // activations whose joint node has meta["should_offload"] go to the CPU
  // after their last forward use and come back before their first backward
  // use. The other flags only matter when it is on; sink_wait and
  // reload_prefetch only with separate_stream, as in torch.
  bool enable_activation_offloading = false;
  bool activation_offload_separate_stream = false;  // async ao.offload/ao.reload + ao.wait_tensor
  bool activation_offload_sink_wait = false;        // forward waits move before the output
  bool activation_reload_prefetch = false;          // backward reloads move earlier (needs offload_node_runtime)
  double activation_offload_cpu_gpu_bw = 50.0;      // GB/s: transfer time estimate of prefetch
  // config._sync_decision_cross_ranks: ranks agree on one decision through
  // `rank_group` below. Without a group of more than one rank there is
  // nothing to agree on and it changes nothing, as in torch.
  bool sync_decision_cross_ranks = false;

  // --- torch._inductor.config --------------------------------------------
  // post_grad_fusion_options["activation_quantization_aten_pass"]
  ActivationQuantizationOptions activation_quantization;

  // --- facts torch reads from its runtime --------------------------------
  // Graph.eliminate_dead_code treats random ops as impure unless a tracing
  // context exists, in which case inductor's fallback_random decides.
  bool dce_impure_random = true;
  // torch.distributed.is_available(): enables the wait_tensor rules.
  bool distributed_available = true;
  // The device types whose random ops torch functionalizes graph-safely
  // (torch._functorch._aot_autograd.utils._GRAPHSAFE_RNG_DEVICE_TYPES, which
  // register_graphsafe_rng_device_type extends): supports_graphsafe_rng.
  std::vector<std::string> graphsafe_rng_device_types = {"cuda"};

  // --- remat's own -------------------------------------------------------
  CutSide cut_side = CutSide::kSinkMinimal;
  // A limit on the simulated peak memory of the training step, in bytes
  // (remat/memory.h); 0: none. When set, the min-cut partitioner returns a
  // plan whose simulated peak fits, with no mutation hazard, chosen by
  // `peak_search`; activation_memory_budget is then not read. When nothing
  // fits it throws BudgetUnreachableError (remat/error.h) naming the
  // smallest peak found (and, for "exact" and "fast", a proven lower bound of
  // any valid plan's), in its message and in its fields.
  int64_t peak_memory_budget = 0;
  // How a peak_memory_budget plan is searched (docs/memory.md):
  //  kTorchPlans  the first plan that fits among torch's budget tiers and its
  //               knapsack's plans over a fixed grid of activation budgets,
  //               in order of increasing estimated recompute, then repairs
  //               of the smallest; a smaller limit never gives a higher peak.
  //  kFast        (default) remat's optimizer over every valid plan (torch's
  //               ban rules are not constraints): min-cuts that price
  //               recompute against saved bytes, mixed, corrected by
  //               simulation, then torch's own plans, so never worse than
  //               kTorchPlans' candidates (optimize/fast.h). A fixed number
  //               of cuts and builds: 1.0x-4.6x a plain partition as a
  //               whole `remat partition` command on 2k-50k-node graphs
  //               (docs/scale.md).
  //  kExact       the least estimated recompute of any valid plan that fits:
  //               a MILP (COIN-OR CBC) over a proven lower bound of the peak,
  //               each solution built and simulated, plans that do not fit
  //               cut off, until one fits (optimal) or peak_search_nodes
  //               run out (the best plan found, with the gap).
  enum class PeakSearch : uint8_t { kTorchPlans, kFast, kExact };
  PeakSearch peak_search = PeakSearch::kFast;
  // How much kExact's solver may search, in branch-and-bound nodes over all
  // its solves: counted work, so the same graph, options and limit give the
  // same plan on every machine, at any load, on every rank. 0 (default):
  // sized to the program, since a node of a large program costs far more
  // than one of a small: the least of 2*10^6 / size and 2.2*10^14 / size^3
  // (size = rows + columns of its first program), between 1 and 20000
  // (optimize/search.h auto_node_budget).
  int64_t peak_search_nodes = 0;
  // A wall-time safety net over the whole peak search, in seconds; 0: none
  // (the default). When it stops a search, PeakSearchSummary::stopped_by
  // says "time" and the plan may then differ between machines.
  double peak_search_seconds = 0;
  // The order the backward runs its nodes in (remat/memory.h simulates that
  // order; FX code runs it):
  //  kAutograd  the extraction's and torch's reordering (parity).
  //  kMemory    memory/order.h: independent nodes reordered greedily
  //             between barriers (random, impure, mutating, collective
  //             ops keep their places), kept when the simulated peak is
  //             lower (PartitionResult::backward_reordered). Not applied
  //             under activation offloading, whose waits and prefetches
  //             are placed for its own order. The peak searches plan
  //             against the order the plan will run in.
  enum class BackwardOrder : uint8_t { kAutograd, kMemory };
  BackwardOrder backward_order = BackwardOrder::kAutograd;
  // How the plan's graphs will run, for the memory the result reports and
  // the peak searches plan against (remat/memory.h MemoryModel): kAten, op
  // by op (eager FX code, aot_eager); kInductor, inductor's generated code
  // (fused intermediates get no buffer). Without a peak limit it changes no
  // saved set (under kMemory, it decides which backward order is lower).
  MemoryModel memory_model = MemoryModel::kAten;
  // Under kInductor: whether inductor's reorder_for_peak_memory pass will
  // run (torch._inductor.config.reorder_for_peak_memory, on by default).
  // When it will, each graph is also counted in the kernel orders that pass
  // may keep and the highest peak counts (remat/memory.h); when not, in its
  // own order only. The drop-in sets it from inductor's config.
  bool inductor_reorder = true;
  // Measured runtimes for activation_memory_budget_runtime_estimator =
  // "profile", indexed by joint-graph NodeId (torch benchmarks each node
  // itself; remat takes the times from its caller). Read only by "profile".
  std::vector<double> profiled_runtimes;
  // Used when the solver / estimator above is "custom" (validate() requires
  // them then); ignored otherwise. Called on the partitioning thread.
  CustomKnapsackFn custom_knapsack;
  CustomRuntimeEstimatorFn custom_runtime_estimator;
  // Record PartitionResult::trace: the lines torch's partitioner would log,
  // the knapsack's inputs and choices, saved sizes. Off: no cost.
  bool trace = false;
  // torch's config.visualize_memory_budget_pareto: when the budget reaches
  // the knapsack, also sweep the budget / recompute-runtime frontier into
  // PartitionResult::trace.pareto (torch draws it at that point).
  bool visualize_memory_budget_pareto = false;
  // Told how far long work has come: `task` ("partition", "pareto") and a
  // fraction in [0, 1] that never decreases within one call. Called on the
  // partitioning thread; null: nothing is reported.
  std::function<void(std::string_view task, double fraction)> progress;
  // Node runtimes for activation_reload_prefetch (torch benchmarks nodes on
  // the device; remat asks its caller). validate() requires it when the
  // prefetch runs.
  OffloadNodeRuntimeFn offload_node_runtime;
  // Keep copies of the graphs where torch emits structured-trace artifacts
  // of a rewrite (PartitionResult::snapshots); off, nothing is copied.
  bool keep_snapshots = false;
  // The caller's process group (torch.distributed's default group, for
  // remat.torch), used by the one-call partitioners when
  // sync_decision_cross_ranks is set; null when not distributed.
  std::shared_ptr<RankGroup> rank_group;
  // Op categories; defaults to the newest release's lists, which
  // OpRegistry::categories narrows to `torch`'s release.
  OpRegistry ops = OpRegistry::defaults();

  // Throws Error(kInvalidOption) naming the field when out of range, and
  // Error(kUnsupported) naming it when it asks for what remat cannot do yet.
  void validate() const;
};

// "torch_plans", "fast", "exact" (the options JSON's and the CLI's names).
const char* peak_search_name(PartitionOptions::PeakSearch s);
std::optional<PartitionOptions::PeakSearch> peak_search_from_name(std::string_view name);
// "autograd", "memory".
const char* backward_order_name(PartitionOptions::BackwardOrder o);
std::optional<PartitionOptions::BackwardOrder> backward_order_from_name(std::string_view name);
// "aten", "inductor".
const char* memory_model_name(MemoryModel m);
std::optional<MemoryModel> memory_model_from_name(std::string_view name);

}  // namespace remat
