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
// The ban rules (steps 1 to 3) live in ban_rules.h; this file is the walk,
// the weights and the cut. With ctx.trace set, the lines torch logs along
// the way are recorded in MinCutResult::log with torch's text and arguments.
#include <algorithm>
#include <cmath>

#include "decide/ban_rules.h"
#include "decide/capacity_graph.h"
#include "decide/cut_memo.h"
#include "decide/decide.h"
#include "graph/query.h"
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

class MinCutSolver {
 public:
  MinCutSolver(const DecideContext& ctx, const MinCutOptions& mc, const std::vector<uint8_t>& dont_ban,
               const std::vector<uint8_t>& force_ban, const std::vector<uint8_t>& force_recompute)
      : g_(ctx.graph),
        info_(ctx.info),
        dist_(ctx.dist_from_bw),
        opt_(ctx.options),
        mc_(mc),
        cg_(ctx.graph, ctx.options.torch),
        rules_(ctx, mc, dont_ban, force_ban, force_recompute, cg_, result_),
        fusion_(rules_.fusion()),
        tracing_(ctx.trace != nullptr),
        story_(tracing_ || ctx.story),
        memo_(story_ ? nullptr : ctx.memo) {
    for (int k = 1; k <= 100; ++k) pow11_[k] = std::pow(1.1, static_cast<double>(k));
    if (story_) {
      result_.capacity.assign(g_.size(), MinCutResult::kNoCapacity);
      result_.tie.resize(g_.size());
    }
  }

  MinCutResult run() {
    if (tracing_) rules_.log_banned_ops();
    build();
    if (mc_.ban_if_used_far_apart) rules_.ban_used_far_apart();
    if (mc_.ban_if_long_fusible_chains) rules_.ban_long_fusible_chains();
    result_.saved_values = cg_.cut(opt_.cut_side);
    return std::move(result_);
  }

 private:
  bool required_fw(NodeId n) const { return info_.required_fw[n] != 0; }
  bool is_view(NodeId n) const { return fusion_.is_view(n); }
  int64_t size(NodeId n) { return rules_.size(n); }

  // --- is_materialized ----------------------------------------------------
  bool materialized(NodeId n) const {
    if (g_.node(n).kind == NodeKind::kPlaceholder) return true;
    for (NodeId user : g_.users(n))
      if (!fusion_.fusible(n, user)) return true;
    return false;
  }

  // --- the weight of X_in -> X_out --------------------------------------
  using Weight = NodeWeight;

  // get_node_weight, from the memo when the context has one: the weight
  // reads the node and the context only (decide/cut_memo.h).
  Weight node_weight(NodeId n) {
    if (memo_ == nullptr) return get_node_weight(n);
    std::optional<Weight>& known = memo_->weight(n);
    if (!known) known = get_node_weight(n);
    return *known;
  }

  Weight get_node_weight(NodeId n) {
    // 2.15: saving an input the runtime epilogue overwrites after the forward
    // would hand the backward the overwritten data; before, it weighs as any.
    if (opt_.torch.epilogue_mutation_unsaveable && g_.node(n).has(kFlagEpilogueMutation))
      return {CapacityGraph::kInf, "input mutation replayed after forward", true};
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

  void tie(NodeId n, std::string_view why) {
    if (story_) result_.tie[n] = why;
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
          tie(n, kTieTangent);
          continue;
        }
      }
      if (must_recompute(node)) {
        uint32_t u = cg_.in(n);
        uint32_t t = cg_.sink();
        cg_.add_edge(u, t, CapacityGraph::kInf, "must recompute: marked by checkpoint policy");
        tie(n, node.recompute == RecomputePolicy::kMustRecompute
                   ? "its checkpoint policy is MUST_RECOMPUTE"
                   : "its checkpoint policy is PREFER_RECOMPUTE");
        continue;
      }
      if (rules_.forced_recompute(n)) {
        cg_.add_edge(cg_.in(n), cg_.sink(), CapacityGraph::kInf,
                     "must recompute: chosen by the peak memory budget");
        tie(n, "the peak memory budget chose to recompute it");
        continue;
      }
      if (is_primal(g_, n)) {
        rules_.ban(n, "primal input", "");
      } else if (is_fwd_seed_offset(g_, n)) {
        rules_.ban(n, "forward RNG seed", "");
      }
      // Evaluated for every node, as torch does (its size lookups can raise).
      const char* reason = rules_.should_ban(n);
      if (required_fw(n) && reason) rules_.ban(n, reason, "", rules_.detail());
      if (rules_.forced_ban(n) && required_fw(n) && !rules_.banned(n) && !must_recompute(node))
        rules_.ban(n, "", "kept saved by the peak memory budget");

      Weight w;
      bool non_tensor = (node.value == ValueKind::kMissing && !node.has(kFlagTensorMeta)) ||
                        (node.value != ValueKind::kMissing && node.value != ValueKind::kTensor);
      if (is_sym_node(g_, n)) {
        w = {node.value == ValueKind::kSymFloat ? 4 : 1, nullptr, true};
      } else if (non_tensor) {
        if (node.value == ValueKind::kBackwardState || node.value == ValueKind::kScriptObject ||
            is_opaque_node(g_, n, opt_.torch))
          w = {0, nullptr, true};
        else
          w = {CapacityGraph::kInf, "non-tensor output", true};
      } else {
        w = node_weight(n);
      }
      uint32_t in = cg_.in(n);
      uint32_t out = cg_.out(n);
      if (story_) result_.capacity[n] = w.capacity;
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

  const Graph& g_;
  const NodeInfo& info_;
  const std::vector<int64_t>& dist_;
  const PartitionOptions& opt_;
  MinCutOptions mc_;
  // result_ and cg_ before rules_, which writes into both.
  MinCutResult result_;
  CapacityGraph cg_;
  BanRules rules_;
  const Fusion& fusion_;
  double pow11_[101] = {};
  bool tracing_;  // torch's log lines
  bool story_;    // capacity and tie per node
  CutMemo* memo_;  // ctx.memo, unless the story is recorded
};

}  // namespace

MinCutResult solve_min_cut(const DecideContext& ctx, const MinCutOptions& mc,
                           const CutOverrides& overrides) {
  return MinCutSolver(ctx, mc, overrides.dont_ban, overrides.ban, overrides.recompute).run();
}

MinCutResult solve_min_cut(const DecideContext& ctx, const MinCutOptions& mc,
                           const std::vector<uint8_t>& dont_ban) {
  static const std::vector<uint8_t> kNone;  // no overrides of remat's own
  return MinCutSolver(ctx, mc, dont_ban, kNone, kNone).run();
}

CutStory cut_story(const Graph& g, const MinCutResult& cut, size_t joint_size) {
  CutStory out;
  out.ban_reason.resize(joint_size);
  const bool traced = !cut.capacity.empty();
  if (traced) {
    out.capacity.assign(joint_size, MinCutResult::kNoCapacity);
    out.tie.resize(joint_size);
    out.lifted.resize(joint_size);
    out.ban_detail.resize(joint_size);
  }
  out.budget_step = cut.budget_step;
  out.tier = cut.tier;
  if (!cut.tier_lifted.empty()) out.tier_lifted.resize(joint_size);
  if (!cut.knapsack_kept.empty()) out.knapsack_kept.assign(joint_size, 0);
  for (NodeId id = 0; id < cut.ban_reason.size(); ++id) {
    const NodeId j = joint_id(g, id);
    if (j >= joint_size) continue;
    out.ban_reason[j] = cut.ban_reason[id];
    if (!traced) continue;
    out.capacity[j] = cut.capacity[id];
    out.tie[j] = cut.tie[id];
    out.lifted[j] = cut.lifted[id];
    out.ban_detail[j] = cut.ban_detail[id];
    if (!cut.tier_lifted.empty()) out.tier_lifted[j] = cut.tier_lifted[id];
    if (!cut.knapsack_kept.empty()) out.knapsack_kept[j] = cut.knapsack_kept[id];
  }
  return out;
}

}  // namespace remat
