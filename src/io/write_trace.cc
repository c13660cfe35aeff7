// io/write_trace.cc — see write_trace.h. One member per line at the top,
// each log record and knapsack call on a line of its own.
#include "io/write_trace.h"

#include <cmath>

#include <fmt/format.h>

#include "remat/error.h"

namespace remat::io {
namespace {

// A double, or null where JSON has no spelling (never expected here).
void number_or_null(JsonWriter& w, double v) {
  if (std::isfinite(v)) w.number(v);
  else w.null();
}

void names(JsonWriter& w, const Graph& g, const std::vector<NodeId>& ids) {
  w.begin_array();
  for (NodeId id : ids) {
    if (id >= g.size())
      throw Error(ErrorCode::kInternal,
                  fmt::format("partition trace: node #{} is not in the joint graph", id));
    w.string(g.name(id));
  }
  w.end_array();
}

template <typename T>
void integers(JsonWriter& w, const std::vector<T>& xs) {
  w.begin_array();
  for (T x : xs) w.integer(static_cast<int64_t>(x));
  w.end_array();
}

void numbers(JsonWriter& w, const std::vector<double>& xs) {
  w.begin_array();
  for (double x : xs) number_or_null(w, x);
  w.end_array();
}

const char* level_name(LogRecord::Level l) {
  switch (l) {
    case LogRecord::Level::kDebug: return "debug";
    case LogRecord::Level::kInfo: return "info";
    case LogRecord::Level::kWarning: return "warning";
  }
  return "info";
}

void knapsack_record(JsonWriter& w, const Graph& g, const KnapsackRecord& k) {
  w.begin_object();
  w.key("memory_budget");
  number_or_null(w, k.memory_budget);
  w.key("expected_runtime");
  number_or_null(w, k.expected_runtime);
  w.key("saved_items");
  integers(w, k.saved_items);
  w.key("recomputed_items");
  integers(w, k.recomputed_items);
  w.key("items");
  names(w, g, k.items);
  w.key("item_bytes");
  integers(w, k.item_bytes);
  w.key("item_memory");
  numbers(w, k.item_memory);
  w.key("item_runtime");
  numbers(w, k.item_runtime);
  w.key("saved_values");
  names(w, g, k.saved_values);
  w.key("min_act_size");
  number_or_null(w, k.min_act_size);
  w.key("max_act_size");
  number_or_null(w, k.max_act_size);
  w.key("saved_act_size");
  number_or_null(w, k.saved_act_size);
  w.key("more_aggressive_ratio");
  number_or_null(w, k.more_aggressive_ratio);
  w.key("aggressive_ratio");
  number_or_null(w, k.aggressive_ratio);
  w.end_object();
}

}  // namespace

void write_trace(JsonWriter& w, const Graph& g, const PartitionTrace& trace) {
  auto field = [&](const char* k) {
    w.newline(4);
    w.key(k);
  };
  w.begin_object();
  field("memory_budget");
  number_or_null(w, trace.memory_budget);
  field("budget_step");
  w.string(trace.budget_step);
  field("log");
  w.begin_array();
  for (const LogRecord& r : trace.log) {
    w.newline(6);
    w.begin_object();
    w.key("level");
    w.string(level_name(r.level));
    if (r.debug_only) {
      w.key("debug_only");
      w.boolean(true);
    }
    w.key("format");
    w.string(r.format);
    w.key("args");
    w.begin_array();
    for (const std::string& a : r.args) w.string(a);
    w.end_array();
    w.end_object();
  }
  if (!trace.log.empty()) w.break_line(4);
  w.end_array();
  field("knapsack");
  w.begin_array();
  for (const KnapsackRecord& k : trace.knapsack) {
    w.newline(6);
    knapsack_record(w, g, k);
  }
  if (!trace.knapsack.empty()) w.break_line(4);
  w.end_array();
  field("pareto");
  w.begin_array();
  for (const MemoryBudgetPoint& p : trace.pareto) {
    w.begin_array();
    number_or_null(w, p.budget);
    number_or_null(w, p.recompute_runtime);
    number_or_null(w, p.memory_ratio);
    w.end_array();
  }
  w.end_array();
  field("saved_bytes");
  integers(w, trace.saved_bytes);
  w.break_line(2);
  w.end_object();
}

}  // namespace remat::io
