// sync/agree.cc — sync_decision_cross_ranks (remat/sync.h): ranks agree on
// one partition decision.
//
// Contract: torch 2.13's `_sync_decision_cross_ranks`, step for step (see
// remat/sync.h): the same collectives in the same order with the same
// payloads, the same pick (smallest of the per-rank maxima of each list's
// size, the first on a tie) and the same trace payload. It works on a plan
// through its public interface only, as any caller of the stage boundary
// would.
#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "analyze/analyze.h"
#include "graph/query.h"
#include "remat/error.h"
#include "remat/sync.h"
#include "sync/canonical.h"

namespace remat {
namespace {

// torch's payload dict `saved_ops_with_sizes`: this rank's saved nodes by
// name, and "total size", which torch rewrites for every rank in turn (so it
// ends as the last rank's total) but which keeps the place of its first
// insertion, as Python dicts do.
class PayloadDict {
 public:
  void set(std::string key, int64_t value) {
    for (auto& [k, v] : entries_) {
      if (k == key) {
        v = value;
        return;
      }
    }
    entries_.emplace_back(std::move(key), value);
  }
  std::string repr() const {
    std::string out = "{";
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (i) out += ", ";
      out += fmt::format("{}: {}", py_repr(entries_[i].first), entries_[i].second);
    }
    return out + "}";
  }

 private:
  std::vector<std::pair<std::string, int64_t>> entries_;  // few: one per saved value
};

}  // namespace

SyncOutcome sync_decision_cross_ranks(const PartitionPlan& plan, RankGroup& group) {
  SyncOutcome out;
  out.saved = plan.saved();
  const Graph& g = plan.prepared();
  if (group.world_size() <= 1) {
    out.status = SyncOutcome::Status::kSingleRank;
    return out;
  }
  if (!has_functional_collectives(g)) {
    out.status = SyncOutcome::Status::kNoCollectives;
    return out;
  }

  const std::vector<std::string> names = canonical_node_names(g, &group);
  const std::string digest = canonical_graph_digest(g, names, &group);
  const std::vector<std::string> digests = group.all_gather(digest);
  for (const std::string& d : digests) {
    if (d != digests.front()) {
      out.status = SyncOutcome::Status::kGraphsDiffer;
      return out;
    }
  }

  // This rank's decision in canonical names.
  std::unordered_map<std::string_view, NodeId> by_name;
  by_name.reserve(names.size());
  for (NodeId id = 0; id < g.size(); ++id) by_name.emplace(names[id], id);
  NodeId joint_size = 0;
  for (const Node& n : g.nodes()) joint_size = std::max(joint_size, n.origin + 1);
  const std::vector<NodeId> prepared_of = nodes_by_joint_id(g, joint_size);
  std::vector<std::string> mine;
  mine.reserve(plan.saved().size());
  for (NodeId j : plan.saved()) mine.push_back(names[prepared_of[j]]);

  const std::vector<std::vector<std::string>> lists = group.all_gather(mine);
  const int rank = group.rank();
  std::vector<std::vector<NodeId>> nodes(lists.size());
  std::vector<int64_t> sizes;
  sizes.reserve(lists.size());
  PayloadDict payload;
  for (size_t r = 0; r < lists.size(); ++r) {
    int64_t total = 0;
    for (const std::string& name : lists[r]) {
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        throw Error(ErrorCode::kInvalidGraph,
                    fmt::format("cross-rank sync: rank {} saves '{}', which this rank's graph "
                                "does not have",
                                r, name));
      }
      const int64_t size = size_of(g, it->second, plan.options());
      total += size;
      if (static_cast<int>(r) == rank) payload.set(std::string(g.name(it->second)), size);
      nodes[r].push_back(it->second);
    }
    payload.set("total size", total);
    sizes.push_back(total);
  }
  const std::vector<int64_t> maxima = group.all_reduce_max(sizes);
  size_t picked = 0;
  for (size_t r = 1; r < maxima.size(); ++r) {
    if (maxima[r] < maxima[picked]) picked = r;
  }
  if (picked >= nodes.size()) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("cross-rank sync: all_reduce_max returned {} values for {} ranks",
                            maxima.size(), nodes.size()));
  }

  out.status = SyncOutcome::Status::kAgreed;
  out.picked_rank = static_cast<int>(picked);
  out.saved.clear();
  for (NodeId id : nodes[picked]) out.saved.push_back(joint_id(g, id));
  out.trace_payload = fmt::format("picked_rank_idx={}, saved_nodes of current rank={}", picked,
                                  payload.repr());
  group.agreed(out.picked_rank, out.trace_payload);
  return out;
}

const char* sync_status_name(SyncOutcome::Status s) {
  switch (s) {
    case SyncOutcome::Status::kSingleRank: return "single_rank";
    case SyncOutcome::Status::kNoCollectives: return "no_collectives";
    case SyncOutcome::Status::kGraphsDiffer: return "graphs_differ";
    case SyncOutcome::Status::kAgreed: return "agreed";
  }
  return "?";
}

}  // namespace remat
