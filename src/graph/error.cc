// graph/error.cc — the names of remat/error.h's error codes.
//
// Contract: error_code_name gives each ErrorCode a stable snake_case name
// (the binding picks the Python RematError subclass by it). It lives with
// the error model, not with the IR that happens to throw most errors.
#include "remat/error.h"

namespace remat {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidGraph: return "invalid_graph";
    case ErrorCode::kParse: return "parse";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kInvalidOption: return "invalid_option";
    case ErrorCode::kNoFiniteCut: return "no_finite_cut";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kInternal: return "internal";
    case ErrorCode::kBudgetUnreachable: return "budget_unreachable";
  }
  return "?";
}

}  // namespace remat
