// report/explain.cc — see remat/explain.h.
#include "remat/explain.h"

#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "analyze/analyze.h"
#include "remat/error.h"

namespace remat::report {

std::string human_bytes(int64_t b) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.1f} {}", v, kUnits[u]);
}

std::string describe_value(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (n.value != ValueKind::kTensor || g.tensors(id).empty()) return value_kind_name(n.value);
  const TensorMeta& t = g.tensors(id)[0];
  std::string s = fmt::format("{}[", g.str(t.dtype));
  bool first = true;
  for (const Dim& d : g.shape(t)) {
    if (!first) s += ", ";
    first = false;
    s += d.expr != 0 ? std::string(g.str(d.expr)) : std::to_string(d.value);
  }
  return s + "]";
}

int64_t bytes_of(const Graph& g, NodeId id, const PartitionOptions& options) {
  try {
    return size_of(g, id, options);
  } catch (const Error&) {
    return -1;
  }
}

const char* where_text(NodeDecision::Where w) {
  switch (w) {
    case NodeDecision::Where::kRemoved:
      return "removed before partitioning (dead code, or merged into an equal node by CSE)";
    case NodeDecision::Where::kForwardOnly:
      return "computed in the forward only; the backward does not need it";
    case NodeDecision::Where::kSaved:
      return "computed in the forward and saved for the backward";
    case NodeDecision::Where::kRecomputed:
      return "computed in the forward and recomputed in the backward";
    case NodeDecision::Where::kBackwardOnly:
      return "computed in the backward only";
    case NodeDecision::Where::kUnused:
      return "in neither graph";
  }
  return "?";
}

std::optional<NodeDecision::Where> where_from_name(std::string_view name) {
  using W = NodeDecision::Where;
  for (W w : {W::kRemoved, W::kForwardOnly, W::kSaved, W::kRecomputed, W::kBackwardOnly,
              W::kUnused})
    if (name == where_name(w)) return w;
  return std::nullopt;
}

const char* why_template(NodeDecision::Why why) {
  using Why = NodeDecision::Why;
  switch (why) {
    case Why::kUnknown: return "";
    case Why::kDead: return "dead code: nothing uses its value";
    case Why::kMerged: return "CSE merged it into the equal node '{merged}'";
    case Why::kInput: return "an input of the step: inputs are never recomputed";
    case Why::kTangent:
      return "derived from a gradient input (a tangent): only the backward can compute it";
    case Why::kBackwardOnly: return "only the backward needs it, so only the backward computes it";
    case Why::kNotNeeded: return "the backward needs neither it nor anything recomputed from it";
    case Why::kSavedBanned:
      return "recomputation is banned ({ban}) and the backward needs it, so the min cut "
             "crosses its edge{cap}";
    case Why::kSavedCheaper:
      return "the cheapest cut crosses its edge{cap}: saving it costs less than saving the "
             "values it is computed from";
    case Why::kSavedKnapsack:
      return "a knapsack item ({ban}) the knapsack kept: recomputing it would cost more "
             "runtime than the memory budget asks to give up";
    case Why::kSavedDefault: return "the default partitioner saves every forward value the backward reads";
    case Why::kTied: return "{detail}: the backward computes it whatever it costs";
    case Why::kRecomputedLifted:
      return "the memory budget's knapsack lifted its ban ({detail}), and the cheapest cut "
             "leaves it to the backward{cap}";
    case Why::kRecomputedTier:
      return "the memory budget's {detail}, and the cheapest cut leaves it to the backward{cap}";
    case Why::kRecomputedCheaper:
      return "the cheapest cut leaves it to the backward: recomputing it from saved values "
             "costs less than saving it{cap}";
    case Why::kRecomputedDefault:
      return "tagged recomputable (activation checkpointing): the default partitioner "
             "recomputes it in the backward";
    case Why::kBudgetInputs:
      return "activation memory budget 0: the forward saves only the inputs and the backward "
             "recomputes the rest";
    case Why::kUnused: return "in neither graph";
  }
  return "";
}

std::optional<NodeDecision::Why> why_from_name(std::string_view name) {
  for (int w = 1; w <= static_cast<int>(NodeDecision::Why::kUnused); ++w) {
    const auto why = static_cast<NodeDecision::Why>(w);
    if (name == why_name(why)) return why;
  }
  return std::nullopt;
}

// {cap}: the capacity the cut weighed, "" when none. The cut's infinity
// (an edge it may not cross: the value cannot be saved) is said as such;
// the report's script words it the same way.
namespace {
std::string capacity_words(int64_t capacity) {
  if (capacity < 0) return "";
  if (capacity == std::numeric_limits<int64_t>::max()) return " (infinite capacity: it cannot be saved)";
  return fmt::format(" (capacity {})", capacity);
}
}  // namespace

std::string why_text(const Graph& g, const NodeDecision& d) {
  std::string_view t = why_template(d.why);
  std::string out;
  while (!t.empty()) {
    const size_t open = t.find('{');
    const size_t close = open == std::string_view::npos ? open : t.find('}', open);
    if (close == std::string_view::npos) {
      out += t;
      break;
    }
    out += t.substr(0, open);
    const std::string_view key = t.substr(open + 1, close - open - 1);
    if (key == "ban") out += d.ban_reason;
    else if (key == "detail") out += d.detail;
    else if (key == "merged")
      out += d.merged_into != kNoNode && d.merged_into < g.size() ? g.name(d.merged_into) : "?";
    else if (key == "cap") out += capacity_words(d.capacity);
    t.remove_prefix(close + 1);
  }
  return out;
}

std::string explain_node(const Graph& g, NodeId id, const NodeDecision& d,
                         const PartitionOptions& options) {
  const Node& n = g.node(id);
  std::string s = fmt::format("node '{}' ({} {}, {})\n  {}: {}", g.name(id), node_kind_name(n.kind),
                              g.str(n.target), describe_value(g, id), where_name(d.where),
                              where_text(d.where));
  if (d.why != NodeDecision::Why::kUnknown) s += "\n  why: " + why_text(g, d);
  if (d.merged_into != kNoNode && d.merged_into < g.size())
    s += fmt::format("\n  merged into the equal node '{}'", g.name(d.merged_into));
  if (!d.ban_reason.empty())
    s += "\n  recomputation banned: " + d.ban_reason +
         (d.ban_detail.empty() ? std::string() : " (" + d.ban_detail + ")");
  if (n.recompute != RecomputePolicy::kNone)
    s += fmt::format("\n  checkpoint policy: {}", recompute_policy_name(n.recompute));
  if (const int64_t b = bytes_of(g, id, options); b >= 0) s += "\n  size: " + human_bytes(b);
  return s;
}

}  // namespace remat::report
