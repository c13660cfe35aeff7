// ops/memory_budget.cc — the memory budget range check.
//
// Contract: memory_budget.h.
#include "ops/memory_budget.h"

#include <fmt/format.h>

namespace remat {

std::string python_float(double x) {
  std::string s = fmt::format("{}", x);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

void check_memory_budget(double budget, std::string_view field, ErrorCode code) {
  if (budget >= 0 && budget <= 1) return;
  throw Error(code, fmt::format("{}: the valid ranges for memory budget are 0 <= m <= 1. The "
                                "provided value is {}",
                                field, python_float(budget)));
}

}  // namespace remat
