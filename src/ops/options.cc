// ops/options.cc — PartitionOptions::validate (remat/options.h).
//
// Contract: rejects values torch would reject or silently misuse, with
// Error(kInvalidOption) naming the field; accepts everything else unchanged.
// Solver and estimator names are checked here and only here, against the
// registries of src/budget (an unknown one lists the valid names).
// (torch checks the quantization dtypes only once a saved value is a
// candidate; remat checks them up front.)
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "budget/flops.h"
#include "budget/knapsack.h"
#include "graph/dtypes.h"
#include "ops/memory_budget.h"
#include "remat/error.h"
#include "remat/options.h"

namespace remat {
namespace {

// "custom" stands for torch's CustomKnapsackSolver / CustomRuntimeEstimator
// instances: the hooks in PartitionOptions. The other names are the
// registries' (src/budget), built-in and registered alike, so a registered
// solver or estimator is as valid as torch's own.
std::string listed(std::vector<std::string> names) {
  names.emplace_back("custom");
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";
    out += '"' + n + '"';
  }
  return out;
}

void validate_names(const PartitionOptions& o) {
  const std::string& solver = o.activation_memory_budget_solver;
  if (solver != "custom" && !has_knapsack_solver(solver)) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("activation_memory_budget_solver: unknown solver \"{}\" (one of {})",
                            solver, listed(knapsack_solver_names())));
  }
  const std::string& estimator = o.activation_memory_budget_runtime_estimator;
  if (estimator != "custom" && !has_runtime_estimator(estimator)) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("activation_memory_budget_runtime_estimator: unknown estimator "
                            "\"{}\" (one of {})",
                            estimator, listed(runtime_estimator_names())));
  }
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
  if (!(peak_search_seconds >= 0) || !std::isfinite(peak_search_seconds)) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("peak_search_seconds must be a number of seconds >= 0 (0: no time limit), got {}",
                            peak_search_seconds));
  }
  if (peak_search_nodes < 0) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("peak_search_nodes must be a number of solver nodes >= 0 (0: sized to the "
                            "program), got {}",
                            peak_search_nodes));
  }
  if (max_dist_from_bw < 0) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("max_dist_from_bw must be >= 0, got {}", max_dist_from_bw));
  }
  validate_names(*this);
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

const char* peak_search_name(PartitionOptions::PeakSearch s) {
  switch (s) {
    case PartitionOptions::PeakSearch::kTorchPlans: return "torch_plans";
    case PartitionOptions::PeakSearch::kFast: return "fast";
    case PartitionOptions::PeakSearch::kExact: return "exact";
  }
  return "torch_plans";
}

std::optional<PartitionOptions::PeakSearch> peak_search_from_name(std::string_view name) {
  for (auto s : {PartitionOptions::PeakSearch::kTorchPlans, PartitionOptions::PeakSearch::kFast,
                 PartitionOptions::PeakSearch::kExact})
    if (name == peak_search_name(s)) return s;
  return std::nullopt;
}

const char* backward_order_name(PartitionOptions::BackwardOrder o) {
  return o == PartitionOptions::BackwardOrder::kMemory ? "memory" : "autograd";
}

const char* memory_model_name(MemoryModel m) {
  return m == MemoryModel::kInductor ? "inductor" : "aten";
}

std::optional<MemoryModel> memory_model_from_name(std::string_view name) {
  for (auto m : {MemoryModel::kAten, MemoryModel::kInductor})
    if (name == memory_model_name(m)) return m;
  return std::nullopt;
}

std::optional<PartitionOptions::BackwardOrder> backward_order_from_name(std::string_view name) {
  for (auto o : {PartitionOptions::BackwardOrder::kAutograd, PartitionOptions::BackwardOrder::kMemory})
    if (name == backward_order_name(o)) return o;
  return std::nullopt;
}

}  // namespace remat
