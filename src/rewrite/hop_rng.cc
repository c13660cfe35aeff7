// rewrite/hop_rng.cc — the invoke_subgraph calls of a forward or backward
// graph whose bodies take graph-safe RNG states (what torch 2.13's
// thread_graphsafe_rng_from_hops threads through the outer graph).
//
// Contract (rewrite.h). A call is listed when its target is
// higher_order.invoke_subgraph, its first argument is a get_attr node whose
// target names a graph module of `nested` (torch looks the body up on the
// module; attributes that are no graph module are skipped, as torch does),
// and that body has placeholders whose name contains "fwd_rng_state"
// (forward) or "bwd_rng_state" (backward). Calls and placeholders are in
// graph order.
#include <string_view>

#include <fmt/format.h>

#include "remat/error.h"
#include "rewrite/rewrite.h"

namespace remat {
namespace {

const NestedGraph* body_named(const std::vector<NestedGraph>& nested, std::string_view name) {
  for (const NestedGraph& body : nested) {
    if (body.name == name) return &body;
  }
  return nullptr;
}

}  // namespace

std::vector<HopRngCall> find_hop_rng_calls(const Graph& g, const std::vector<NestedGraph>& nested,
                                           bool is_backward) {
  std::vector<HopRngCall> calls;
  if (nested.empty()) return calls;
  const std::string_view marker = is_backward ? "bwd_rng_state" : "fwd_rng_state";
  for (NodeId id = 0; id < g.size(); ++id) {
    const OpInfo* op = g.op(id);
    if (op == nullptr || g.str(op->name) != "higher_order.invoke_subgraph") continue;
    const Node& n = g.node(id);
    const std::vector<ArgId> args = n.args == kNoArg ? std::vector<ArgId>{} : g.children(n.args);
    const Arg* first = args.empty() ? nullptr : &g.arg(args[0]);
    if (first == nullptr || first->kind != ArgKind::kNode ||
        g.node(first->id).kind != NodeKind::kGetAttr) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("node '{}': invoke_subgraph's first argument must be the get_attr "
                              "node of its body",
                              g.name(id)));
    }
    const NestedGraph* body = body_named(nested, g.str(g.node(first->id).target));
    if (body == nullptr) continue;
    HopRngCall call{id, body, {}};
    const Graph& b = body->graph;
    for (NodeId p = 0; p < b.size(); ++p) {
      if (b.node(p).kind == NodeKind::kPlaceholder &&
          b.name(p).find(marker) != std::string_view::npos) {
        call.states.push_back(p);
      }
    }
    if (!call.states.empty()) calls.push_back(std::move(call));
  }
  return calls;
}

}  // namespace remat
