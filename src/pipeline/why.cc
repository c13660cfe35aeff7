// pipeline/why.cc — see why.h.
#include "pipeline/why.h"

#include <algorithm>

namespace remat {
namespace {

using W = NodeDecision::Where;
using Why = NodeDecision::Why;

// The joint ids of the knapsack items the last knapsack kept (its saved
// items), when the knapsack decided.
std::vector<uint8_t> knapsack_kept(const PartitionTrace& trace, size_t joint_size) {
  std::vector<uint8_t> kept;
  if (trace.budget_step != "knapsack" || trace.knapsack.empty()) return kept;
  const KnapsackRecord& k = trace.knapsack.back();
  kept.assign(joint_size, 0);
  for (int idx : k.saved_items)
    if (idx >= 0 && static_cast<size_t>(idx) < k.items.size() && k.items[idx] < joint_size)
      kept[k.items[idx]] = 1;
  return kept;
}

// The reason of a node the min-cut partitioner placed.
Why min_cut_why(NodeId id, W where, const CutStory& story, bool inputs_step,
                const std::vector<uint8_t>& kept, NodeDecision& d) {
  const bool traced = !story.capacity.empty();
  const std::string_view tie = traced ? story.tie[id] : std::string_view();
  const std::string_view lifted = traced ? story.lifted[id] : std::string_view();
  if (traced && story.capacity[id] != MinCutResult::kNoCapacity) d.capacity = story.capacity[id];
  switch (where) {
    case W::kSaved:
      if (d.ban_reason.empty()) return Why::kSavedCheaper;
      return !kept.empty() && kept[id] ? Why::kSavedKnapsack : Why::kSavedBanned;
    case W::kForwardOnly:
      return Why::kNotNeeded;
    case W::kRecomputed:
    case W::kBackwardOnly:
      if (tie == kTieTangent) return Why::kTangent;
      if (!tie.empty()) {
        d.detail = std::string(tie);
        return Why::kTied;
      }
      if (!lifted.empty()) {
        d.detail = std::string(lifted);
        return Why::kRecomputedLifted;
      }
      if (inputs_step) return Why::kBudgetInputs;
      // Untraced, a backward-only node may be a tangent's: say no more
      // than what is certain.
      if (where == W::kBackwardOnly && !traced) return Why::kBackwardOnly;
      return Why::kRecomputedCheaper;
    default:
      return Why::kUnused;
  }
}

Why default_why(W where) {
  switch (where) {
    case W::kSaved: return Why::kSavedDefault;
    case W::kRecomputed: return Why::kRecomputedDefault;
    case W::kForwardOnly: return Why::kNotNeeded;
    case W::kBackwardOnly: return Why::kBackwardOnly;
    default: return Why::kUnused;
  }
}

}  // namespace

void fill_why(const Graph& prepared, std::string_view partitioner, const CutStory& story,
              const PartitionTrace& trace, std::vector<NodeDecision>& decisions) {
  const size_t n = decisions.size();
  std::vector<NodeKind> kind(n, NodeKind::kOutput);
  for (const Node& node : prepared.nodes())
    if (node.origin < n) kind[node.origin] = node.kind;
  const bool min_cut = partitioner == "min_cut";
  const bool inputs_step =
      trace.budget_step == "inputs" || trace.budget_step == "inputs_and_must_save";
  const std::vector<uint8_t> kept = knapsack_kept(trace, n);
  const bool has_story = story.ban_reason.size() == n;
  for (NodeId id = 0; id < n; ++id) {
    NodeDecision& d = decisions[id];
    if (d.where == W::kRemoved) {
      d.why = d.merged_into != kNoNode ? Why::kMerged : Why::kDead;
    } else if (d.where == W::kUnused) {
      d.why = Why::kUnused;
    } else if (kind[id] == NodeKind::kPlaceholder) {
      d.why = d.where == W::kBackwardOnly ? Why::kTangent : Why::kInput;
    } else if (min_cut && has_story) {
      d.why = min_cut_why(id, d.where, story, inputs_step, kept, d);
    } else if (min_cut) {
      d.why = d.where == W::kForwardOnly ? Why::kNotNeeded : Why::kUnknown;
    } else {
      d.why = default_why(d.where);
    }
  }
}

}  // namespace remat
