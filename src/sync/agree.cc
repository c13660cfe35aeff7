// sync/agree.cc — sync_decision_cross_ranks (remat/sync.h): ranks agree on
// one partition decision.
//
// Contract: the reproduced release's `_sync_decision_cross_ranks`, step for
// step (see remat/sync.h): the same collectives in the same order with the
// same payloads, the same pick (smallest of the per-rank maxima of each
// list's size, the first on a tie), the same trace payload and debug line.
// It works on a plan through its public interface only, as any caller of the
// stage boundary would. The release's switches are read here, once:
// sync_canonical_names (how ranks name the graph) and sync_stable_target_str
// (how they spell targets, and the debug line).
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
#include "remat/torch_release.h"
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

// What ranks exchange to recognise the same graph and the same nodes.
struct RankNames {
  std::vector<std::string> names;  // per NodeId of the prepared graph
  std::string digest;              // all-gathered: equal on ranks with the same graph
};

RankNames rank_names(const Graph& g, const RankGroup& group, const TorchBehavior& torch) {
  RankNames out;
  if (torch.sync_canonical_names) {
    // 2.13 on: names and a digest that do not depend on the order the ranks
    // traced their graphs in, nor on the names tracing gave their nodes.
    const TargetSpelling spelling =
        torch.sync_stable_target_str ? TargetSpelling::kQualified : TargetSpelling::kStr;
    out.names = canonical_node_names(g, &group, spelling);
    out.digest = canonical_graph_digest(g, out.names, &group, spelling);
    return out;
  }
  // 2.11 and 2.12: the nodes' own names, in graph order. Ranks that traced
  // the same ops in another order differ here and keep their own decisions.
  out.names.reserve(g.size());
  for (NodeId id = 0; id < g.size(); ++id) out.names.emplace_back(g.name(id));
  out.digest = node_name_digest(g);
  return out;
}

// The first rank whose digest differs from rank 0's, or -1.
int first_differing_rank(const std::vector<std::string>& digests) {
  for (size_t r = 1; r < digests.size(); ++r) {
    if (digests[r] != digests.front()) return static_cast<int>(r);
  }
  return -1;
}

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

  const TorchBehavior& torch = plan.options().torch;
  const RankNames named = rank_names(g, group, torch);
  const std::vector<std::string>& names = named.names;
  const int differing = first_differing_rank(group.all_gather(named.digest));
  if (differing >= 0) {
    out.status = SyncOutcome::Status::kGraphsDiffer;
    // torch 2.14 added this line along with its stable target strings.
    if (torch.sync_stable_target_str) {
      out.log.push_back({LogRecord::Level::kDebug, false,
                         "Skipping sync decision cross rank due to different inputs between "
                         "rank 0 and rank %s",
                         {std::to_string(differing)}});
    }
    return out;
  }

  // This rank's decision by those names.
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
