// ops/memory_budget.h — the one range check of an activation memory budget,
// wherever the budget comes from.
//
// Contract: check_memory_budget throws Error(code) unless 0 <= budget <= 1
// (NaN fails), with one message format for every source: the field or node
// the value came from, then torch's own words ("<field>: the valid ranges
// for memory budget are 0 <= m <= 1. The provided value is 1.5", the value
// as Python prints a float). The options (PartitionOptions::validate), the
// per-graph budgets (meta["memory_budget"], region annotations), the
// budget-aware driver and the Pareto frontier's explicit budgets all call it.
#pragma once

#include <string>
#include <string_view>

#include "remat/error.h"

namespace remat {

void check_memory_budget(double budget, std::string_view field,
                         ErrorCode code = ErrorCode::kInvalidOption);

// Python's repr of a float ("1.0", "0.5", "inf"), for messages that quote
// torch's.
std::string python_float(double x);

}  // namespace remat
