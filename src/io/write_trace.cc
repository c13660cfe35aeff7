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

// Every JSON array of the trace: `xs` in order, each through `one`.
template <typename T, typename One>
void array_of(JsonWriter& w, const std::vector<T>& xs, One one) {
  w.begin_array();
  for (const T& x : xs) one(x);
  w.end_array();
}

void names(JsonWriter& w, const Graph& g, const std::vector<NodeId>& ids) {
  array_of(w, ids, [&](NodeId id) {
    if (id >= g.size())
      throw Error(ErrorCode::kInternal,
                  fmt::format("partition trace: node #{} is not in the joint graph", id));
    w.string(g.name(id));
  });
}

template <typename T>
void integers(JsonWriter& w, const std::vector<T>& xs) {
  array_of(w, xs, [&](T x) { w.integer(static_cast<int64_t>(x)); });
}

void numbers(JsonWriter& w, const std::vector<double>& xs) {
  array_of(w, xs, [&](double x) { number_or_null(w, x); });
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
  auto number = [&](const char* key, double v) {
    w.key(key);
    number_or_null(w, v);
  };
  auto items = [&](const char* key, const auto& xs) {
    w.key(key);
    integers(w, xs);
  };
  w.begin_object();
  number("memory_budget", k.memory_budget);
  number("expected_runtime", k.expected_runtime);
  items("saved_items", k.saved_items);
  items("recomputed_items", k.recomputed_items);
  w.key("items");
  names(w, g, k.items);
  items("item_bytes", k.item_bytes);
  w.key("item_memory");
  numbers(w, k.item_memory);
  w.key("item_runtime");
  numbers(w, k.item_runtime);
  w.key("saved_values");
  names(w, g, k.saved_values);
  number("min_act_size", k.min_act_size);
  number("max_act_size", k.max_act_size);
  number("saved_act_size", k.saved_act_size);
  number("more_aggressive_ratio", k.more_aggressive_ratio);
  number("aggressive_ratio", k.aggressive_ratio);
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
    array_of(w, r.args, [&](const std::string& a) { w.string(a); });
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
  array_of(w, trace.pareto, [&](const MemoryBudgetPoint& p) {
    numbers(w, {p.budget, p.recompute_runtime, p.memory_ratio});
  });
  field("saved_bytes");
  integers(w, trace.saved_bytes);
  w.break_line(2);
  w.end_object();
}

}  // namespace remat::io
