// budget/flops.h — stage 2/3 (analyze for the memory budget): how long
// recomputing a node takes, as torch's `estimate_runtime` sees it.
//
// Contract:
//  * count_flops(g, n) is what torch.utils.flop_counter.FlopCounterMode
//    counts when the node's op runs once on its argument shapes: the formulas
//    of mm, addmm, bmm, baddbmm, _scaled_mm, convolution (convolution,
//    _convolution, convolution_overrideable, cudnn_convolution) and
//    convolution_backward (transposed or not), the scaled-dot-product
//    attention ops (flash, efficient, cudnn; forward and backward) and
//    _flash_attention_* / _efficient_attention_* (nested/jagged inputs
//    counted as torch does for fake offsets: every sequence at max length).
//    Other ops count 0. Shapes come from the TensorMeta of the node's
//    tensor arguments; a symbolic dim uses its hint, and 4096 (torch's
//    fallback) when it has none; a SymInt argument likewise. Where torch's
//    formula asserts (mismatched shapes) an Error(kInvalidGraph) names the
//    node.
//    Not reproduced: composite ops that FlopCounterMode decomposes before
//    counting (aten.matmul, aten.linear, ... never survive into an AOT joint
//    graph), higher-order ops (flex_attention, triton kernels, cond) and
//    aten._slow_conv2d_forward (torch's formula raises TypeError on it).
//  * Estimators, by torch's activation_memory_budget_runtime_estimator name:
//      "flops"   -> max(count_flops, 1)
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

namespace remat {

// FLOPs FlopCounterMode would count for node n (0 when its op has no
// formula). The exact integer, rounded once to double.
double count_flops(const Graph& g, NodeId n);

// Whether FlopCounterMode has a formula for an overload packet ("aten.mm").
bool has_flop_formula(std::string_view packet);

using RuntimeEstimator = std::function<double(const Graph& g, NodeId n)>;

// Registers (or replaces) a custom estimator; "flops", "testing" and
// "profile" cannot be replaced, "custom" is reserved. Thread-safe.
void register_runtime_estimator(const std::string& name, RuntimeEstimator estimator);
bool has_runtime_estimator(std::string_view name);
// Every name estimate_runtime accepts: "flops", "testing", "profile", then
// the registered ones by name.
std::vector<std::string> runtime_estimator_names();

// The runtime torch's estimate_runtime(node) gives under `estimator`.
// `profiled` holds one measured time per node of g (indexed by NodeId); it is
// read only by "profile", which throws Error(kInvalidOption) without it.
double estimate_runtime(const Graph& g, NodeId n, std::string_view estimator,
                        std::span<const double> profiled = {});

// estimate_runtime for each node of `nodes`, in that order.
std::vector<double> estimate_runtimes(const Graph& g, std::span<const NodeId> nodes,
                                      std::string_view estimator,
                                      std::span<const double> profiled = {});

}  // namespace remat
