// report/explain.cc — see remat/explain.h.
#include "remat/explain.h"

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

std::string explain_node(const Graph& g, NodeId id, const NodeDecision& d,
                         const PartitionOptions& options) {
  const Node& n = g.node(id);
  std::string s = fmt::format("node '{}' ({} {}, {})\n  {}: {}", g.name(id), node_kind_name(n.kind),
                              g.str(n.target), describe_value(g, id), where_name(d.where),
                              where_text(d.where));
  if (d.merged_into != kNoNode && d.merged_into < g.size())
    s += fmt::format("\n  merged into the equal node '{}'", g.name(d.merged_into));
  if (!d.ban_reason.empty()) s += "\n  recomputation banned: " + d.ban_reason;
  if (n.recompute != RecomputePolicy::kNone)
    s += fmt::format("\n  checkpoint policy: {}", recompute_policy_name(n.recompute));
  if (const int64_t b = bytes_of(g, id, options); b >= 0) s += "\n  size: " + human_bytes(b);
  return s;
}

}  // namespace remat::report
