// pipeline/why.cc — see why.h.
#include "pipeline/why.h"

#include <algorithm>

#include <fmt/format.h>

namespace remat {
namespace {

using W = NodeDecision::Where;
using Why = NodeDecision::Why;

// A tier's name as the reason says it.
std::string_view tier_words(std::string_view tier) {
  return tier == "more_aggressive" ? "more aggressive" : tier;
}

// The reason of a node the min-cut partitioner placed.
Why min_cut_why(NodeId id, W where, const CutStory& story, bool inputs_step, NodeDecision& d) {
  const bool recorded = !story.capacity.empty();
  const std::string_view tie = recorded ? story.tie[id] : std::string_view();
  const std::string_view lifted = recorded ? story.lifted[id] : std::string_view();
  const std::string_view tier_lifted =
      story.tier_lifted.empty() ? std::string_view() : story.tier_lifted[id];
  const bool kept = !story.knapsack_kept.empty() && story.knapsack_kept[id];
  if (recorded && story.capacity[id] != MinCutResult::kNoCapacity) d.capacity = story.capacity[id];
  switch (where) {
    case W::kSaved:
      if (d.ban_reason.empty()) return Why::kSavedCheaper;
      return kept ? Why::kSavedKnapsack : Why::kSavedBanned;
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
      if (!tier_lifted.empty()) {
        d.detail = fmt::format("{} tier drops the rule that banned it ({})",
                               tier_words(story.tier), tier_lifted);
        return Why::kRecomputedTier;
      }
      if (inputs_step) return Why::kBudgetInputs;
      // Without the story, a backward-only node may be a tangent's: say no more
      // than what is certain.
      if (where == W::kBackwardOnly && !recorded) return Why::kBackwardOnly;
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
              std::vector<NodeDecision>& decisions) {
  const size_t n = decisions.size();
  std::vector<NodeKind> kind(n, NodeKind::kOutput);
  for (const Node& node : prepared.nodes())
    if (node.origin < n) kind[node.origin] = node.kind;
  const bool min_cut = partitioner == "min_cut";
  const bool inputs_step =
      story.budget_step == "inputs" || story.budget_step == "inputs_and_must_save";
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
      d.why = min_cut_why(id, d.where, story, inputs_step, d);
    } else if (min_cut) {
      d.why = d.where == W::kForwardOnly ? Why::kNotNeeded : Why::kUnknown;
    } else {
      d.why = default_why(d.where);
    }
  }
}

}  // namespace remat
