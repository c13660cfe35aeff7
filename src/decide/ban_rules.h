// decide/ban_rules.h — which forward nodes solve_min_cut bans from
// recomputation, and why (internal to decide/).
//
// Contract: the rules of torch 2.13's solve_min_cut, each under torch's name:
//  * ban() is ban_recomputation_if_allowed: views, MUST/PREFER_RECOMPUTE
//    nodes, SymFloats and nodes the memory budget allows to be recomputed
//    (CutOverrides::dont_ban; collectives stay banned unless the unsafe
//    option is set) are never banned; any other node gets an infinite edge
//    from the source to its X_in, with torch's reason.
//  * should_ban() is should_ban_recomputation (MUST_SAVE, the allowlist or
//    the random / compute-intensive / non-builtin checks, materialized in
//    the backward, too far from it, reductions); it only answers.
//  * ban_used_far_apart() and ban_long_fusible_chains() are the two passes
//    torch runs after its walk over the graph.
// The order of bans is torch's (later rules read earlier bans; the source's
// edges, and so the no-finite-cut diagnosis, follow it). With ctx.trace set
// the rules record the lines torch logs ("materialized backwards", "used
// above/below fusible", "too long", the banned ops) in MinCutResult::log;
// with ctx.trace or ctx.story set, each node's story (the ban a dont_ban
// lifted, what a ban rule measured) in MinCutResult::lifted / ban_detail.
// Without either, sizes and should_ban's answers come from ctx.memo when
// the context has one (decide/cut_memo.h), and go into it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "decide/capacity_graph.h"
#include "decide/decide.h"
#include "decide/fusible.h"

namespace remat {

// torch's is_non_builtin_to_include: the option is on and the target is an
// OpOverload outside {aten, prim, prims}, or triton_kernel_wrapper_functional.
bool is_non_builtin_to_include(const Graph& g, NodeId n, const PartitionOptions& options);

// An OpOverload of the _c10d_functional namespace.
bool is_collective(const Graph& g, NodeId n);

// The ban rules of one solve_min_cut run: they add the source's edges to
// `cg` and record bans (banned_nodes, ban_reason, log) in `result`. The
// override vectors (CutOverrides' fields, each empty or one flag per node),
// `cg` and `result` must outlive them.
class BanRules {
 public:
  BanRules(const DecideContext& ctx, const MinCutOptions& mc, const std::vector<uint8_t>& dont_ban,
           const std::vector<uint8_t>& force_ban, const std::vector<uint8_t>& force_recompute,
           CapacityGraph& cg, MinCutResult& result);

  // ban_recomputation_if_allowed. `torch_reason` is what torch writes on the
  // source edge; `label` is remat's own name for a ban torch gives no reason
  // for; `detail` what the rule measured (recorded in
  // MinCutResult::ban_detail when the story is). Returns whether the node was banned.
  bool ban(NodeId n, std::string_view torch_reason, std::string_view label,
           std::string_view detail = {});
  // should_ban_recomputation: torch's reason, or null when not banned.
  // With the story recorded, detail() then says what the rule measured.
  const char* should_ban(NodeId n);
  const std::string& detail() const { return detail_; }
  void ban_used_far_apart();
  void ban_long_fusible_chains();
  // AOT_PARTITIONER_DEBUG's first line (tracing only).
  void log_banned_ops();

  bool banned(NodeId n) const { return banned_[n] != 0; }
  // remat's own overrides (memory/peak_budget.h), per node.
  bool forced_ban(NodeId n) const { return !force_ban_.empty() && force_ban_[n]; }
  bool forced_recompute(NodeId n) const;
  const Fusion& fusion() const { return fusion_; }
  // `_size_of`, computed once per node.
  int64_t size(NodeId n);

 private:
  bool required_fw(NodeId n) const { return info_.required_fw[n] != 0; }
  int32_t order(NodeId n) const { return info_.fw_order[n]; }
  bool is_view(NodeId n) const { return fusion_.is_view(n); }
  bool materialized_backwards(NodeId n);
  const char* should_ban_rule(NodeId n);
  void explain_rule(NodeId n, std::string_view reason);
  __int128 reduction_inputs(NodeId n);
  int32_t find_first_unfusible(const std::vector<NodeId>& starts, int32_t max_range);

  void log(LogRecord::Level level, bool debug_only, std::string_view format,
           std::vector<std::string> args);
  std::string name(NodeId n) const { return std::string(g_.name(n)); }
  std::string users_tuple(NodeId n) const;

  const Graph& g_;
  const NodeInfo& info_;
  const std::vector<int64_t>& dist_;
  const PartitionOptions& opt_;
  MinCutOptions mc_;
  const std::vector<uint8_t>& dont_ban_;
  const std::vector<uint8_t>& force_ban_;
  const std::vector<uint8_t>& force_recompute_;
  const std::vector<uint8_t>& op_categories_;
  Fusion fusion_;
  CapacityGraph& cg_;
  MinCutResult& result_;
  std::vector<uint8_t> banned_;
  std::vector<int64_t> size_;  // without a memo (CutMemo::kUnknownSize: not yet)
  // Epoch-stamped scratch: no clearing between searches.
  uint32_t epoch_ = 0;
  std::vector<uint32_t> stamp_;
  std::vector<uint32_t> seen_;
  std::vector<NodeId> stack_;
  std::vector<uint64_t> heap_;
  std::string reason_;  // the source edge's reason, rebuilt per ban without allocating
  std::string detail_;  // with the story: what the last should_ban measured
  NodeId unfusible_user_ = kNoNode;  // materialized_backwards' answer
  bool tracing_;  // torch's log lines
  bool story_;    // the per-node story (MinCutResult's lifted, ban_detail)
  CutMemo* memo_;  // ctx.memo, unless the story is recorded
};

}  // namespace remat
