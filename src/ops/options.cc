// ops/options.cc — PartitionOptions::validate (remat/options.h).
//
// Contract: rejects values torch would reject or silently misuse, with
// Error(kInvalidOption) naming the field; accepts everything else unchanged.
#include <cmath>
#include <string_view>

#include <fmt/format.h>

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

}  // namespace

void PartitionOptions::validate() const {
  for (const auto& [on, field] : {std::pair{enable_activation_offloading, "enable_activation_offloading"},
                                  std::pair{activation_quantization, "activation_quantization"}}) {
    if (on) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("{}: remat does not reproduce this torch rewrite yet; leave it off "
                              "(or let remat.torch.install() fall back to torch)",
                              field));
    }
  }
  if (!(activation_memory_budget >= 0.0 && activation_memory_budget <= 1.0)) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("activation_memory_budget must be in [0, 1], got {}",
                            activation_memory_budget));
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
