// ops/options.cc — PartitionOptions::validate (remat/options.h).
//
// Contract: rejects values torch would reject or silently misuse, with
// Error(kInvalidOption) naming the field; accepts everything else unchanged.
// (torch checks the quantization dtypes only once a saved value is a
// candidate; remat checks them up front.)
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "graph/dtypes.h"
#include "ops/memory_budget.h"
#include "remat/error.h"
#include "remat/options.h"

namespace remat {
namespace {

// config.activation_memory_budget_solver / _runtime_estimator values torch
// understands (partitioners._optimize_runtime_with_given_memory and
// estimate_runtime).
// "custom" stands for torch's CustomKnapsackSolver / CustomRuntimeEstimator
// instances: the hooks in PartitionOptions.
constexpr std::string_view kSolvers[] = {"greedy", "ilp", "dp", "dp_knapsack_sliding_hirschberg",
                                         "dynamic_memory_budget_dp", "custom"};
constexpr std::string_view kEstimators[] = {"flops", "testing", "profile", "custom"};

template <size_t N>
bool one_of(const std::string& v, const std::string_view (&allowed)[N]) {
  for (std::string_view a : allowed) {
    if (v == a) return true;
  }
  return false;
}

template <size_t N>
std::string joined(const std::string_view (&allowed)[N]) {
  std::string out;
  for (std::string_view a : allowed) {
    if (!out.empty()) out += ", ";
    out += '"';
    out += a;
    out += '"';
  }
  return out;
}

// torch resolves the dtype names with getattr(torch, ...) and the range
// with torch.finfo, so an unknown name or a quant_type finfo rejects would
// make it raise; complex quant types are refused too (torch's clamps reject
// them once a tensor is quantized).
void validate_quantization(const ActivationQuantizationOptions& q) {
  const std::string_view quant = canonical_dtype(q.quant_type);
  if (quant.empty() || !float_range(quant)) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("activation_quantization.quant_type: \"{}\" is not a real "
                            "floating-point torch dtype that torch.finfo supports",
                            q.quant_type));
  }
  for (const std::string& d : q.allowed_dtypes) {
    if (canonical_dtype(d).empty()) {
      throw Error(ErrorCode::kInvalidOption,
                  fmt::format("activation_quantization.allowed_dtypes: \"{}\" is not a torch "
                              "dtype",
                              d));
    }
  }
}

}  // namespace

void PartitionOptions::validate() const {
  if (activation_quantization.enabled) validate_quantization(activation_quantization);
  check_memory_budget(activation_memory_budget, "activation_memory_budget");
  if (peak_memory_budget < 0) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("peak_memory_budget must be a number of bytes >= 0 (0: none), got {}",
                            peak_memory_budget));
  }
  if (max_dist_from_bw < 0) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("max_dist_from_bw must be >= 0, got {}", max_dist_from_bw));
  }
  if (!one_of(activation_memory_budget_solver, kSolvers)) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("activation_memory_budget_solver: unknown solver \"{}\" (one of {})",
                            activation_memory_budget_solver, joined(kSolvers)));
  }
  if (!one_of(activation_memory_budget_runtime_estimator, kEstimators)) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("activation_memory_budget_runtime_estimator: unknown estimator "
                            "\"{}\" (one of {})",
                            activation_memory_budget_runtime_estimator, joined(kEstimators)));
  }
  // Only a prefetching offload reads the bandwidth and node runtimes.
  if (enable_activation_offloading && activation_offload_separate_stream &&
      activation_reload_prefetch) {
    if (!(activation_offload_cpu_gpu_bw > 0.0 && std::isfinite(activation_offload_cpu_gpu_bw))) {
      throw Error(ErrorCode::kInvalidOption,
                  fmt::format("activation_offload_cpu_gpu_bw must be a positive number of GB/s, "
                              "got {}",
                              activation_offload_cpu_gpu_bw));
    }
    if (!offload_node_runtime) {
      throw Error(ErrorCode::kInvalidOption,
                  "activation_reload_prefetch: needs offload_node_runtime (torch benchmarks "
                  "each backward compute node; remat takes the times from its caller)");
    }
  }
  if (activation_memory_budget_solver == "custom" && !custom_knapsack) {
    throw Error(ErrorCode::kInvalidOption,
                "activation_memory_budget_solver: \"custom\" needs custom_knapsack to be set");
  }
  if (activation_memory_budget_runtime_estimator == "custom" && !custom_runtime_estimator) {
    throw Error(ErrorCode::kInvalidOption,
                "activation_memory_budget_runtime_estimator: \"custom\" needs "
                "custom_runtime_estimator to be set");
  }
}

}  // namespace remat
