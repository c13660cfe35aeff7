// decide/ban_rules.cc — solve_min_cut's ban rules.
//
// Contract: ban_rules.h. Torch's quadratic membership tests are replaced by flags and epoch stamps
// with the same answers (see find_first_unfusible).
#include "decide/ban_rules.h"

#include <algorithm>
#include <functional>
#include <queue>

#include <fmt/format.h>

#include "decide/cut_memo.h"
#include "graph/query.h"

namespace remat {
namespace {

using Int = __int128;  // Python ints do not overflow; sums of sizes here do not either.

constexpr std::string_view kTritonWrapper = "higher_order.triton_kernel_wrapper_functional";

}  // namespace

bool is_non_builtin_to_include(const Graph& g, NodeId n, const PartitionOptions& options) {
  if (!options.is_non_builtin_to_include) return false;
  const OpInfo* op = g.op(n);
  if (!op) return false;
  if (op->kind == OpKind::kOverload) {
    std::string_view ns = g.str(op->ns);
    if (ns != "aten" && ns != "prim" && ns != "prims") return true;
  }
  return g.str(op->name) == kTritonWrapper;
}

bool is_collective(const Graph& g, NodeId n) {
  const OpInfo* op = g.op(n);
  return op && op->kind == OpKind::kOverload && g.str(op->ns) == "_c10d_functional";
}

BanRules::BanRules(const DecideContext& ctx, const MinCutOptions& mc,
                   const std::vector<uint8_t>& dont_ban, const std::vector<uint8_t>& force_ban,
                   const std::vector<uint8_t>& force_recompute, CapacityGraph& cg,
                   MinCutResult& result)
    : g_(ctx.graph),
      info_(ctx.info),
      dist_(ctx.dist_from_bw),
      opt_(ctx.options),
      mc_(mc),
      dont_ban_(dont_ban),
      force_ban_(force_ban),
      force_recompute_(force_recompute),
      op_categories_(ctx.op_categories),
      fusion_(ctx.graph, ctx.op_categories),
      cg_(cg),
      result_(result),
      banned_(ctx.graph.size(), 0),
      stamp_(ctx.graph.size(), 0),
      tracing_(ctx.trace != nullptr),
      story_(tracing_ || ctx.story),
      memo_(story_ ? nullptr : ctx.memo) {
  if (!memo_) size_.assign(g_.size(), CutMemo::kUnknownSize);
  result_.ban_reason.assign(g_.size(), std::string_view());
  if (story_) {
    result_.lifted.assign(g_.size(), std::string_view());
    result_.ban_detail.assign(g_.size(), std::string());
  }
}

bool BanRules::forced_recompute(NodeId n) const {
  return !force_recompute_.empty() && force_recompute_[n] &&
         g_.node(n).kind == NodeKind::kCallFunction && !is_view(n);
}

void BanRules::log(LogRecord::Level level, bool debug_only, std::string_view format,
                   std::vector<std::string> args) {
  result_.log.push_back({level, debug_only, std::string(format), std::move(args)});
}

int64_t BanRules::size(NodeId n) {
  int64_t& known = memo_ ? memo_->size(n) : size_[n];
  if (known == CutMemo::kUnknownSize) known = size_of(g_, n, opt_);
  return known;
}

bool BanRules::ban(NodeId n, std::string_view torch_reason, std::string_view label,
                   std::string_view detail) {
  if (is_view(n)) return false;
  if (!dont_ban_.empty() && dont_ban_[n] && !forced_ban(n)) {
    // Collectives stay banned whatever the memory budget says.
    if (opt_.unsafe_allow_optimization_of_collectives || !is_collective(g_, n)) {
      if (story_) result_.lifted[n] = torch_reason.empty() ? label : torch_reason;
      return false;
    }
  }
  const Node& node = g_.node(n);
  if (must_recompute(node)) return false;
  if (node.value == ValueKind::kSymFloat) return false;
  if (!banned_[n]) {
    banned_[n] = 1;
    result_.banned_nodes.push_back(n);
  }
  result_.ban_reason[n] = torch_reason.empty() ? label : torch_reason;
  if (story_) result_.ban_detail[n].assign(detail);
  reason_.assign("cannot recompute");
  if (!torch_reason.empty()) reason_.append(": ").append(torch_reason);
  uint32_t s = cg_.source();
  uint32_t v = cg_.in(n);
  cg_.add_edge(s, v, CapacityGraph::kInf, reason_);
  return true;
}

// is_materialized_backwards: some backward use (through forward views)
// cannot fuse with its producer.
bool BanRules::materialized_backwards(NodeId n) {
  if (is_view(n)) return false;
  ++epoch_;
  stack_.clear();
  stack_.push_back(n);
  stamp_[n] = epoch_;
  while (!stack_.empty()) {
    NodeId cur = stack_.back();
    stack_.pop_back();
    for (NodeId user : g_.users(cur)) {
      if (!required_fw(user) && !fusion_.fusible(cur, user)) {
        unfusible_user_ = user;
        return true;
      }
      if (is_view(user) && stamp_[user] != epoch_) {
        stamp_[user] = epoch_;
        stack_.push_back(user);
      }
    }
  }
  return false;
}

const char* BanRules::should_ban(NodeId n) {
  detail_.clear();
  if (memo_) {
    std::optional<const char*>& known = memo_->ban_reason(mc_, n);
    if (!known) known = should_ban_rule(n);
    return *known;
  }
  const char* reason = should_ban_rule(n);
  if (story_ && reason != nullptr) explain_rule(n, reason);
  return reason;
}

// What the rule that banned `n` measured, in words (traced runs only).
void BanRules::explain_rule(NodeId n, std::string_view reason) {
  const std::string_view target = target_name(g_, n);
  if (reason == "not in recomputable allowlist" || reason == "random op" ||
      reason == "compute intensive op" || reason == "non-builtin op") {
    detail_ = fmt::format("op {}", target);
  } else if (reason == "materialized in backward" && unfusible_user_ != kNoNode) {
    detail_ = g_.node(unfusible_user_).kind == NodeKind::kOutput
                  ? std::string("the joint graph returns it (a gradient), which no kernel fuses")
                  : fmt::format("its backward user '{}' cannot fuse with it", g_.name(unfusible_user_));
  } else if (reason == "too far from backward") {
    detail_ = fmt::format("{} nodes from the backward, more than max_dist_from_bw {}", dist_[n],
                          opt_.max_dist_from_bw);
  } else if (reason == "reduction op") {
    detail_ = fmt::format("output {} B, less than a quarter of its inputs' {} B", size(n),
                          static_cast<int64_t>(reduction_inputs(n)));
  }
}

// The bytes of a node's top-level positional node arguments, as `for i in
// node.args` sees them (a node given twice counts twice).
__int128 BanRules::reduction_inputs(NodeId n) {
  const Node& node = g_.node(n);
  __int128 inputs = 0;
  if (node.args != kNoArg) {
    const ArgId stop = node.args + g_.arg(node.args).span;
    for (ArgId c = node.args + 1; c < stop; c += g_.arg(c).span)
      if (g_.arg(c).kind == ArgKind::kNode) inputs += size(g_.arg(c).id);
  }
  return inputs;
}

const char* BanRules::should_ban_rule(NodeId n) {
  const Node& node = g_.node(n);
  if (node.kind != NodeKind::kCallFunction) return nullptr;
  if (fusion_.is_getitem(n)) return nullptr;
  if (node.recompute == RecomputePolicy::kMustSave) return "marked MUST_SAVE";
  if (opt_.recompute_views && is_view(n)) return nullptr;
  std::string_view target = target_name(g_, n);
  if (target == "aten.lift_fresh_copy.default" || target == "aten.lift_fresh.default") return nullptr;
  // 2.15: a node that computes a torch.device is never banned (it cannot be
  // saved either, being no tensor, so it is recomputed wherever the backward
  // needs it). 2.14 bans it by the rules below (not in the allowlist).
  if (opt_.torch.device_valued_nodes && node.value == ValueKind::kDevice) return nullptr;

  const uint8_t cat = fusion_.categories(n);
  if (mc_.ban_if_not_in_allowlist) {
    if (!(cat & kCatRecomputable)) return "not in recomputable allowlist";
  } else {
    if (cat & kCatRandom) return "random op";
    if (cat & kCatComputeIntensive) return "compute intensive op";
    if (is_non_builtin_to_include(g_, n, opt_)) return "non-builtin op";
  }
  if (mc_.ban_if_materialized_backward && materialized_backwards(n)) {
    if (tracing_)
      log(LogRecord::Level::kDebug, false, "materialized backwards: %s %s",
          {name(n), users_tuple(n)});
    return "materialized in backward";
  }
  const int64_t d = dist_[n];
  if (d < 1000 && d > opt_.max_dist_from_bw) return "too far from backward";
  if (mc_.ban_if_reduction) {
    const Int output = size(n);
    if (output * 4 < reduction_inputs(n)) return "reduction op";
  }
  return nullptr;
}

// torch's find_first_unfusible: a heap of (fw order, node, fusible-edge)
// tuples, popped in order; the first tuple whose edge is unfusible gives
// the answer. torch skips a push when the same tuple is still in the heap.
// Every push is of a user, whose order exceeds the popped one, so pops are
// monotone and a tuple is never pushed again after it was popped: "still
// in the heap" is "pushed before in this call", a per-(node, flag) stamp.
// (A node may sit in the heap twice, once per flag; False pops first.)
int32_t BanRules::find_first_unfusible(const std::vector<NodeId>& starts, int32_t max_range) {
  ++epoch_;
  heap_.clear();
  auto key = [](int32_t ord, bool fusible) { return (static_cast<uint64_t>(ord) << 1) | (fusible ? 1 : 0); };
  auto cmp = std::greater<uint64_t>();
  for (NodeId s : starts) {
    seen_[2 * static_cast<size_t>(order(s)) + 1] = epoch_;
    heap_.push_back(key(order(s), true));
    std::push_heap(heap_.begin(), heap_.end(), cmp);
  }
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), cmp);
    uint64_t top = heap_.back();
    heap_.pop_back();
    const int32_t ord = static_cast<int32_t>(top >> 1);
    if (!(top & 1)) return ord;
    const NodeId node = info_.required_fw_nodes[ord];
    for (NodeId user : g_.users(node)) {
      if (!required_fw(user)) continue;
      const int32_t uo = order(user);
      if (uo > max_range) continue;
      const bool f = fusion_.fusible(node, user);
      uint32_t& s = seen_[2 * static_cast<size_t>(uo) + (f ? 1 : 0)];
      if (s == epoch_) continue;
      s = epoch_;
      heap_.push_back(key(uo, f));
      std::push_heap(heap_.begin(), heap_.end(), cmp);
    }
  }
  return max_range;
}

// A fusible use placed after the first unfusible node reachable from its
// producer's forward uses is banned.
void BanRules::ban_used_far_apart() {
  seen_.assign(2 * info_.required_fw_nodes.size() + 2, 0);
  std::vector<NodeId> fw_users;
  for (NodeId used : info_.required_fw_nodes) {
    fw_users.clear();
    int32_t max_order = -1;
    for (NodeId user : g_.users(used)) {
      if (!required_fw(user)) continue;
      fw_users.push_back(user);
      max_order = std::max(max_order, order(user));
    }
    if (fw_users.empty()) continue;
    const int32_t first_unfusible = find_first_unfusible(fw_users, max_order);
    for (NodeId user : g_.users(used)) {
      if (required_fw(user) && order(user) > first_unfusible && fusion_.fusible(used, user)) {
        if (banned_[user]) continue;
        if (tracing_)
          log(LogRecord::Level::kInfo, false, "used above/below fusible %s:(%s) -> %s -> %s:(%s)",
              {name(used), std::to_string(order(used)), std::to_string(first_unfusible),
               name(user), std::to_string(order(user))});
        ban(user, "", "used far apart from an unfusible use",
            story_ ? fmt::format("at forward position {}, past the first unfusible use of '{}' at {}",
                                   order(user), g_.name(used), first_unfusible)
                     : std::string());
      }
    }
  }
}

// A fusible chain running over 100 forward positions past its start is cut
// by banning where it ends. The heap keeps duplicates on purpose: torch
// breaks only when the heap is empty after popping, so a duplicate entry of
// the node changes the answer. Forward orders identify nodes (ties are the
// same node), so the heap holds orders alone. `visited` is shared by all
// start nodes, as in torch.
void BanRules::ban_long_fusible_chains() {
  std::vector<uint8_t> visited(g_.size(), 0);
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<int32_t>> heap;
  for (NodeId start = 0; start < g_.size(); ++start) {
    if (!required_fw(start)) continue;
    const int32_t start_order = order(start);
    heap = decltype(heap)();
    heap.push(start_order);
    while (!heap.empty()) {
      const NodeId cur = info_.required_fw_nodes[heap.top()];
      heap.pop();
      if (visited[cur]) continue;
      visited[cur] = 1;
      if (order(cur) > start_order + 100 && heap.empty()) {
        if (tracing_)
          log(LogRecord::Level::kInfo, false, "too long %s %s %s %s",
              {name(cur), name(start), std::to_string(order(cur)), std::to_string(start_order)});
        ban(cur, "", "long fusible chain",
            story_ ? fmt::format("the fusible chain from '{}' (forward position {}) reaches "
                                   "position {}, more than 100 further",
                                   g_.name(start), start_order, order(cur))
                     : std::string());
        break;
      }
      for (NodeId user : g_.users(cur))
        if (required_fw(user) && fusion_.fusible(cur, user) && !banned_[user]) heap.push(order(user));
    }
  }
}

// The op packets of the graph that are not recomputable, as str() of
// torch's OrderedSet prints them.
void BanRules::log_banned_ops() {
  std::vector<StrId> seen;
  std::string list;
  const std::vector<uint8_t>& cats = op_categories_;
  for (NodeId n = 0; n < g_.size(); ++n) {
    if (g_.node(n).kind != NodeKind::kCallFunction) continue;
    const OpInfo* op = g_.op(n);
    if (op == nullptr || op->kind != OpKind::kOverload) continue;
    if (std::find(seen.begin(), seen.end(), op->packet) != seen.end()) continue;
    seen.push_back(op->packet);
    if (g_.node(n).op < cats.size() && (cats[g_.node(n).op] & kCatRecomputable)) continue;
    list += fmt::format("{}'{}'", list.empty() ? "" : ", ", g_.str(op->packet));
  }
  log(LogRecord::Level::kInfo, true, "Ops banned from re-materialization: %s",
      {"OrderedSet([" + list + "])"});
}

// Python's str() of a tuple of FX nodes: "(a,)", "(a, b)".
std::string BanRules::users_tuple(NodeId n) const {
  std::string s = "(";
  size_t count = 0;
  for (NodeId user : g_.users(n)) {
    s += (count++ ? ", " : "") + name(user);
  }
  return s + (count == 1 ? ",)" : ")");
}

}  // namespace remat
