// remat/error.h — the one error type of the library.
//
// Contract: every failure that bad input or an impossible partition can cause
// is reported as a remat::Error. Its message names the node or the field at
// fault. Nothing in remat aborts the process on bad input.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace remat {

enum class ErrorCode {
  kInvalidGraph,     // the graph breaks an IR invariant (dangling ref, cycle, ...)
  kParse,            // the JSON text is not JSON, or a field has the wrong type
  kUnsupported,      // a format version or feature remat does not handle
  kInvalidOption,    // a PartitionOptions field is out of range
  kNoFiniteCut,      // a value is needed by backward but can be neither saved nor recomputed
  kIo,               // a file could not be read or written
  kInternal,         // an invariant of remat itself was broken: a bug
  kBudgetUnreachable,// no plan fits the peak memory budget
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// A min-cut that has no finite cut. `explanation` walks the infinite path
// node by node with the reason for each constraint; `dot` is the capacity
// graph in Graphviz syntax, for rendering; `edge_list` is the same graph as
// networkx's generate_edgelist prints it (one "u v {data}" line per edge),
// which torch logs as its min_cut_failed_edge_list artifact.
class NoFiniteCutError : public Error {
 public:
  NoFiniteCutError(std::string message, std::string explanation, std::string dot,
                   std::string edge_list = {})
      : Error(ErrorCode::kNoFiniteCut, std::move(message)),
        explanation_(std::move(explanation)),
        dot_(std::move(dot)),
        edge_list_(std::move(edge_list)) {}
  const std::string& explanation() const { return explanation_; }
  const std::string& dot() const { return dot_; }
  const std::string& edge_list() const { return edge_list_; }

 private:
  std::string explanation_;
  std::string dot_;
  std::string edge_list_;
};

// No plan fits PartitionOptions::peak_memory_budget. The message names the
// limit and what the search learned; the same numbers come as fields, so a
// caller (peak_frontier, a retry at a reachable limit) need not parse it.
//  * smallest_peak: the smallest simulated peak of the valid plans without
//    a mutation hazard that the search built; -1 when it built none.
//  * proven_bound: no valid plan has a smaller peak (fast and exact prove
//    one; equal to smallest_peak when that is proven the least); -1 when
//    the search proves none (torch_plans).
class BudgetUnreachableError : public Error {
 public:
  BudgetUnreachableError(std::string message, int64_t smallest_peak, int64_t proven_bound)
      : Error(ErrorCode::kBudgetUnreachable, std::move(message)),
        smallest_peak_(smallest_peak),
        proven_bound_(proven_bound) {}
  int64_t smallest_peak() const { return smallest_peak_; }
  int64_t proven_bound() const { return proven_bound_; }

 private:
  int64_t smallest_peak_;
  int64_t proven_bound_;
};

// A failure torch raises at the same point with a Python exception of its
// own (a FLOP formula's AssertionError, a formula signature's TypeError,
// materialize_arg's KeyError): `python_type` names the builtin exception
// ("AssertionError", "TypeError", "KeyError"), `torch_message` is what torch
// constructs it with, exactly (its str(), but for KeyError's quotes: the
// key "val"), and `context` says where remat met it (the node), for what()
// and for the Python exception's notes. The drop-in
// raises a RematError that is also that builtin, named like it, with
// torch's text: what torch's own partitioner would raise there.
class TorchError : public Error {
 public:
  TorchError(ErrorCode code, std::string python_type, std::string torch_message,
             std::string context)
      : Error(code, context.empty() ? torch_message : torch_message + " (" + context + ")"),
        python_type_(std::move(python_type)),
        torch_message_(std::move(torch_message)),
        context_(std::move(context)) {}
  const std::string& python_type() const { return python_type_; }
  const std::string& torch_message() const { return torch_message_; }
  const std::string& context() const { return context_; }

 private:
  std::string python_type_;
  std::string torch_message_;
  std::string context_;
};

}  // namespace remat
