// decide/min_cut.cc — solve_min_cut: torch 2.13's ban rules and capacity
// graph, an exact max-flow, and the cut networkx returns.
//
// The pass, in torch's order (the order matters: later rules read which
// nodes earlier ones banned, and the diagnosis follows edge insertion order):
//  1. One walk over the graph. Per node: edges to the sink for values the
//     backward needs; MUST/PREFER_RECOMPUTE nodes tied to the sink; primals
//     and forward seeds banned; should_ban_recomputation's rules; the node's
//     own X_in -> X_out edge weighted by what saving it costs; and an infinite
//     X_out -> user_in edge per user.
//  2. "Used far apart": a fusible use placed after the first unfusible node
//     reachable from its producer's forward uses is banned.
//  3. "Long fusible chains": a fusible chain running over 100 forward
//     positions past its start is cut by banning where it ends.
//  4. The minimum cut; saved values are the nodes whose X_in -> X_out edge
//     crosses it.
// Torch's quadratic membership tests are replaced by flags and epoch stamps
// with the same answers (see find_first_unfusible).
// With ctx.trace set, the lines torch logs along the way (the banned ops,
// "materialized backwards", "used above/below fusible", "too long") are
// recorded in MinCutResult::log with torch's text and arguments.
#include <algorithm>
#include <cmath>
#include <queue>

#include <fmt/format.h>

#include "decide/capacity_graph.h"
#include "decide/decide.h"
#include "decide/rules.h"
#include "remat/error.h"

namespace remat {

MinCutOptions min_cut_options_from(const PartitionOptions& o) {
  MinCutOptions mc;
  mc.ban_if_used_far_apart = o.ban_recompute_used_far_apart;
  mc.ban_if_long_fusible_chains = o.ban_recompute_long_fusible_chains;
  mc.ban_if_materialized_backward = o.ban_recompute_materialized_backward;
  mc.ban_if_not_in_allowlist = o.ban_recompute_not_in_allowlist;
  mc.ban_if_reduction = o.ban_recompute_reductions;
  return mc;
}

namespace {

using Int = __int128;  // Python ints do not overflow; sums of sizes here do not either.

class MinCutSolver {
 public:
  MinCutSolver(const DecideContext& ctx, const MinCutOptions& mc, const std::vector<uint8_t>& dont_ban)
      : g_(ctx.graph),
        info_(ctx.info),
        dist_(ctx.dist_from_bw),
        opt_(ctx.options),
        mc_(mc),
        dont_ban_(dont_ban),
        fusion_(ctx.graph, ctx.op_categories),
        ctx_categories_(ctx.op_categories),
        cg_(ctx.graph),
        banned_(ctx.graph.size(), 0),
        size_(ctx.graph.size(), kUnknownSize),
        stamp_(ctx.graph.size(), 0),
        tracing_(ctx.trace != nullptr) {
    result_.ban_reason.assign(g_.size(), std::string_view());
    for (int k = 1; k <= 100; ++k) pow11_[k] = std::pow(1.1, static_cast<double>(k));
  }

  MinCutResult run() {
    if (tracing_) log_banned_ops();
    build();
    if (mc_.ban_if_used_far_apart) ban_used_far_apart();
    if (mc_.ban_if_long_fusible_chains) ban_long_fusible_chains();
    result_.saved_values = cg_.cut(opt_.cut_side);
    return std::move(result_);
  }

 private:
  static constexpr int64_t kUnknownSize = std::numeric_limits<int64_t>::min();

  bool required_fw(NodeId n) const { return info_.required_fw[n] != 0; }
  int32_t order(NodeId n) const { return info_.fw_order[n]; }
  bool is_view(NodeId n) const { return fusion_.is_view(n); }

  // --- the log (ctx.trace only) -----------------------------------------
  void log(LogRecord::Level level, bool debug_only, std::string_view format,
           std::vector<std::string> args) {
    result_.log.push_back({level, debug_only, std::string(format), std::move(args)});
  }
  std::string name(NodeId n) const { return std::string(g_.name(n)); }

  // AOT_PARTITIONER_DEBUG's first line: the op packets of the graph that are
  // not recomputable, as str() of torch's OrderedSet prints them.
  void log_banned_ops() {
    std::vector<StrId> seen;
    std::string list;
    const std::vector<uint8_t>& cats = ctx_categories_;
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
  std::string users_tuple(NodeId n) const {
    std::string s = "(";
    size_t count = 0;
    for (NodeId user : g_.users(n)) {
      s += (count++ ? ", " : "") + name(user);
    }
    return s + (count == 1 ? ",)" : ")");
  }

  int64_t size(NodeId n) {
    if (size_[n] == kUnknownSize) size_[n] = size_of(g_, n, opt_);
    return size_[n];
  }

  // --- ban_recomputation_if_allowed -------------------------------------
  // `torch_reason` is what torch writes on the source edge; `label` is
  // remat's own name for the ban when torch gives none.
  bool ban(NodeId n, std::string_view torch_reason, std::string_view label) {
    if (is_view(n)) return false;
    if (!dont_ban_.empty() && dont_ban_[n]) {
      // Collectives stay banned whatever the memory budget says.
      if (opt_.unsafe_allow_optimization_of_collectives || !is_collective(g_, n)) return false;
    }
    const Node& node = g_.node(n);
    if (must_recompute(node)) return false;
    if (node.value == ValueKind::kSymFloat) return false;
    if (!banned_[n]) {
      banned_[n] = 1;
      result_.banned_nodes.push_back(n);
    }
    result_.ban_reason[n] = torch_reason.empty() ? label : torch_reason;
    reason_.assign("cannot recompute");
    if (!torch_reason.empty()) reason_.append(": ").append(torch_reason);
    uint32_t s = cg_.source();
    uint32_t v = cg_.in(n);
    cg_.add_edge(s, v, CapacityGraph::kInf, reason_);
    return true;
  }

  // --- is_materialized_backwards ------------------------------------------
  // Some backward use (through forward views) cannot fuse with its producer.
  bool materialized_backwards(NodeId n) {
    if (is_view(n)) return false;
    ++epoch_;
    stack_.clear();
    stack_.push_back(n);
    stamp_[n] = epoch_;
    while (!stack_.empty()) {
      NodeId cur = stack_.back();
      stack_.pop_back();
      for (NodeId user : g_.users(cur)) {
        if (!required_fw(user) && !fusion_.fusible(cur, user)) return true;
        if (is_view(user) && stamp_[user] != epoch_) {
          stamp_[user] = epoch_;
          stack_.push_back(user);
        }
      }
    }
    return false;
  }

  // --- should_ban_recomputation -------------------------------------------
  const char* should_ban(NodeId n) {
    const Node& node = g_.node(n);
    if (node.kind != NodeKind::kCallFunction) return nullptr;
    if (fusion_.is_getitem(n)) return nullptr;
    if (node.recompute == RecomputePolicy::kMustSave) return "marked MUST_SAVE";
    if (opt_.recompute_views && is_view(n)) return nullptr;
    std::string_view target = target_name(g_, n);
    if (target == "aten.lift_fresh_copy.default" || target == "aten.lift_fresh.default") return nullptr;

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
      // Only the top-level positional arguments that are nodes, as
      // `for i in node.args` sees them (a node given twice counts twice).
      Int inputs = 0;
      if (node.args != kNoArg) {
        const ArgId stop = node.args + g_.arg(node.args).span;
        for (ArgId c = node.args + 1; c < stop; c += g_.arg(c).span)
          if (g_.arg(c).kind == ArgKind::kNode) inputs += size(g_.arg(c).id);
      }
      Int output = size(n);
      if (output * 4 < inputs) return "reduction op";
    }
    return nullptr;
  }

  // --- is_materialized ----------------------------------------------------
  bool materialized(NodeId n) const {
    if (g_.node(n).kind == NodeKind::kPlaceholder) return true;
    for (NodeId user : g_.users(n))
      if (!fusion_.fusible(n, user)) return true;
    return false;
  }

  // --- the weight of X_in -> X_out --------------------------------------
  struct Weight {
    int64_t capacity;
    const char* cannot_save;  // torch's reason, for infinite weights
    bool is_float;            // a Python float in torch (prints as "1.0")
  };

  Weight get_node_weight(NodeId n) {
    if (opt_.treat_parameters_as_free_to_save && info_.static_lifetime[n]) return {0, nullptr, false};
    const int64_t mem = size(n);
    if (opt_.recompute_views && is_view(n))
      return {CapacityGraph::kInf, "view op (recompute_views=True)", true};
    const ValueKind vk = g_.node(n).value;
    if (vk == ValueKind::kMissing)  // torch reads node.meta["val"] here: KeyError
      throw Error(ErrorCode::kInvalidGraph,
                  "node '" + std::string(g_.name(n)) + "' has tensor_meta but no val metadata");
    if (vk == ValueKind::kSymFloat || vk == ValueKind::kSymBool)
      return {CapacityGraph::kIntInf, "SymFloat (non-SymInt symbolic value)", false};
    // int(mem * 1.1 ** max(min(dist, 100), 1)): a double power, a double
    // product (the int converted to double first), truncation toward zero.
    const int64_t d = dist_[n];
    const int k = static_cast<int>(std::max<int64_t>(std::min<int64_t>(d, 100), 1));
    const double scaled = static_cast<double>(mem) * pow11_[k];
    if (!(scaled < 4.0e18))
      throw Error(ErrorCode::kUnsupported,
                  "min-cut weight of node '" + std::string(g_.name(n)) + "' overflows int64");
    int64_t w = static_cast<int64_t>(scaled);
    if (!materialized(n)) w *= 2;
    return {w, nullptr, false};
  }

  // --- stage 1: the walk ----------------------------------------------------
  void build() {
    for (NodeId n = 0; n < g_.size(); ++n) {
      const Node& node = g_.node(n);
      if (node.kind == NodeKind::kOutput) continue;

      if (info_.required_bw[n]) {
        // See torch's Note [tangents_closure vs required_bw_nodes]: values
        // derived from tangents exist only in the backward.
        if (!info_.tangents_closure[n]) {
          uint32_t u = cg_.out(n);
          uint32_t t = cg_.sink();
          cg_.add_edge(u, t, CapacityGraph::kInf,
                       "must be available for backward: input required for gradient");
        } else {
          uint32_t u = cg_.in(n);
          uint32_t t = cg_.sink();
          cg_.add_edge(u, t, CapacityGraph::kInf, "must be computed in backward: required for gradient");
          continue;
        }
      }
      if (must_recompute(node)) {
        uint32_t u = cg_.in(n);
        uint32_t t = cg_.sink();
        cg_.add_edge(u, t, CapacityGraph::kInf, "must recompute: marked by checkpoint policy");
        continue;
      }
      if (is_primal(g_, n)) {
        ban(n, "primal input", "");
      } else if (is_fwd_seed_offset(g_, n)) {
        ban(n, "forward RNG seed", "");
      }
      // Evaluated for every node, as torch does (its size lookups can raise).
      const char* reason = should_ban(n);
      if (required_fw(n) && reason) ban(n, reason, "");

      Weight w;
      bool non_tensor = (node.value == ValueKind::kMissing && !node.has(kFlagTensorMeta)) ||
                        (node.value != ValueKind::kMissing && node.value != ValueKind::kTensor);
      if (is_sym_node(g_, n)) {
        w = {node.value == ValueKind::kSymFloat ? 4 : 1, nullptr, true};
      } else if (non_tensor) {
        if (node.value == ValueKind::kBackwardState || node.value == ValueKind::kScriptObject ||
            is_opaque_node(g_, n))
          w = {0, nullptr, true};
        else
          w = {CapacityGraph::kInf, "non-tensor output", true};
      } else {
        w = get_node_weight(n);
      }
      uint32_t in = cg_.in(n);
      uint32_t out = cg_.out(n);
      if (w.cannot_save && (w.capacity == CapacityGraph::kInf || w.capacity == CapacityGraph::kIntInf))
        cg_.add_edge(in, out, w.capacity, std::string("cannot save: ") + w.cannot_save, w.is_float);
      else
        cg_.add_edge(in, out, w.capacity, {}, w.is_float);

      for (NodeId user : g_.users(n)) {
        uint32_t v = cg_.in(user);
        cg_.add_edge(out, v, CapacityGraph::kInf, "data dependency");
      }
    }
  }

  // --- stage 2: used far apart ----------------------------------------------
  // torch's find_first_unfusible: a heap of (fw order, node, fusible-edge)
  // tuples, popped in order; the first tuple whose edge is unfusible gives
  // the answer. torch skips a push when the same tuple is still in the heap.
  // Every push is of a user, whose order exceeds the popped one, so pops are
  // monotone and a tuple is never pushed again after it was popped: "still
  // in the heap" is "pushed before in this call", a per-(node, flag) stamp.
  // (A node may sit in the heap twice, once per flag; False pops first.)
  int32_t find_first_unfusible(const std::vector<NodeId>& starts, int32_t max_range) {
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

  void ban_used_far_apart() {
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
          ban(user, "", "used far apart from an unfusible use");
        }
      }
    }
  }

  // --- stage 3: long fusible chains -------------------------------------
  // The heap keeps duplicates on purpose: torch breaks only when the heap is
  // empty after popping, so a duplicate entry of the node changes the answer.
  // Forward orders identify nodes (ties are the same node), so the heap holds
  // orders alone. `visited` is shared by all start nodes, as in torch.
  void ban_long_fusible_chains() {
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
          ban(cur, "", "long fusible chain");
          break;
        }
        for (NodeId user : g_.users(cur))
          if (required_fw(user) && fusion_.fusible(cur, user) && !banned_[user]) heap.push(order(user));
      }
    }
  }

  const Graph& g_;
  const NodeInfo& info_;
  const std::vector<int64_t>& dist_;
  const PartitionOptions& opt_;
  MinCutOptions mc_;
  const std::vector<uint8_t>& dont_ban_;
  Fusion fusion_;
  const std::vector<uint8_t>& ctx_categories_;
  CapacityGraph cg_;
  MinCutResult result_;
  std::vector<uint8_t> banned_;
  std::vector<int64_t> size_;
  // Epoch-stamped scratch: no clearing between searches.
  uint32_t epoch_ = 0;
  std::vector<uint32_t> stamp_;
  std::vector<uint32_t> seen_;
  std::vector<NodeId> stack_;
  std::vector<uint64_t> heap_;
  std::string reason_;  // the source edge's reason, rebuilt per ban without allocating
  double pow11_[101] = {};
  bool tracing_;
};

}  // namespace

MinCutResult solve_min_cut(const DecideContext& ctx, const MinCutOptions& mc,
                           const std::vector<uint8_t>& dont_ban) {
  return MinCutSolver(ctx, mc, dont_ban).run();
}

}  // namespace remat
