// budget/flops.h — stage 2/3 (analyze for the memory budget): how long
// recomputing a node takes, as torch's `estimate_runtime` sees it.
//
// Contract:
//  * count_flops(g, n, torch) is what torch.utils.flop_counter.FlopCounterMode
//    of `torch`'s release counts when the node's op runs once on its
//    argument shapes: the formulas of mm, addmm, bmm, baddbmm, _scaled_mm,
//    convolution (convolution, _convolution, convolution_overrideable,
//    cudnn_convolution) and convolution_backward (transposed or not), the
//    scaled-dot-product attention ops (flash, efficient, cudnn, and from 2.15
//    the CPU flash kernel; forward and backward), _flash_attention_* /
//    _efficient_attention_* (nested/jagged inputs counted as torch does for
//    fake offsets: every sequence at max length), and from 2.15 the
//    flex_attention HOPs. Other ops count 0. Shapes come from the
//    TensorMeta of the node's tensor arguments; a symbolic dim uses its
//    hint, and 4096 (torch's fallback) when it has none; a SymInt argument
//    likewise.
//  * The release differences (TorchBehavior): grouped-query attention heads
//    (sdpa_flops_gqa, 2.12), the raw flash kernels read as (batch, seq,
//    heads, dim) (flops_flash_attention_bshd, 2.14), the .dtype overloads of
//    addmm / bmm / baddbmm (flops_mm_family_extra_args, 2.14: a TypeError
//    before), the CPU flash kernels (flops_sdpa_for_cpu, 2.15), the
//    flex_attention HOPs (flops_registered_hops, 2.15: a TypeError before)
//    and the value head size of jagged backward attention
//    (flops_nested_attention_dv, 2.15).
//  * Where torch's formula raises (mismatched shapes, the errors above),
//    remat throws TorchError with torch's exception type and text, naming
//    the node in its context; where torch would fail on a malformed node in
//    a way of its own (a shape of the wrong rank), Error(kInvalidGraph)
//    names the node.
//    Not reproduced: composite ops that FlopCounterMode decomposes before
//    counting (aten.matmul, aten.linear, ... never survive into an AOT joint
//    graph), higher-order ops other than flex_attention (triton kernels,
//    cond: counted 0) and aten._slow_conv2d_forward (torch's formula raises
//    TypeError on it).
//  * Estimators, by torch's activation_memory_budget_runtime_estimator name:
//      "flops"   -> max(count_flops, 1), after torch's materialize_arg: an
//                   argument node without "val" metadata is its KeyError
//      "testing" -> 1
//      "profile" -> a measured time per node, passed in (remat benchmarks
//                   nothing itself)
//    plus custom estimators registered by name. An unknown name throws
//    Error(kInvalidOption) naming it. "custom" is reserved: it names
//    PartitionOptions::custom_runtime_estimator (torch's
//    CustomRuntimeEstimator, called per joint node), which the partitioner
//    calls itself rather than through estimate_runtime.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "remat/graph.h"
#include "remat/torch_release.h"

namespace remat {

// FLOPs the release's FlopCounterMode would count for node n (0 when its op
// has no formula). The exact integer, rounded once to double.
double count_flops(const Graph& g, NodeId n, const TorchBehavior& torch);

// Whether the release's FlopCounterMode has a formula for an overload
// packet ("aten.mm") or a HOP ("higher_order.flex_attention").
bool has_flop_formula(std::string_view key, const TorchBehavior& torch);

using RuntimeEstimator = std::function<double(const Graph& g, NodeId n)>;

// Registers (or replaces) a custom estimator; "flops", "testing" and
// "profile" cannot be replaced, "custom" is reserved. Thread-safe.
void register_runtime_estimator(const std::string& name, RuntimeEstimator estimator);
bool has_runtime_estimator(std::string_view name);
// Every name estimate_runtime accepts: "flops", "testing", "profile", then
// the registered ones by name.
std::vector<std::string> runtime_estimator_names();

// The runtime `torch`'s estimate_runtime(node) gives under `estimator`.
// `profiled` holds one measured time per node of g (indexed by NodeId); it is
// read only by "profile", which throws Error(kInvalidOption) without it.
double estimate_runtime(const Graph& g, NodeId n, std::string_view estimator,
                        const TorchBehavior& torch, std::span<const double> profiled = {});

// estimate_runtime for each node of `nodes`, in that order.
std::vector<double> estimate_runtimes(const Graph& g, std::span<const NodeId> nodes,
                                      std::string_view estimator, const TorchBehavior& torch,
                                      std::span<const double> profiled = {});

}  // namespace remat
