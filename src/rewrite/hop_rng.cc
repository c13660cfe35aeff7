// rewrite/hop_rng.cc — thread_graphsafe_rng_from_hops: torch 2.13's pass that
// hands the graph-safe RNG states of invoke_subgraph bodies down from the
// outer forward or backward graph.
//
// Contract (rewrite.h). A call is threaded when its target is
// higher_order.invoke_subgraph, its first argument is a get_attr node whose
// target names a graph module of `nested` (torch looks the body up on the
// module; attributes that are no graph module are skipped, as torch does),
// and that body has placeholders whose name contains "fwd_rng_state"
// (forward) or "bwd_rng_state" (backward). Calls and placeholders are taken
// in graph order; j counts the placeholders over all calls. For each:
//  * a placeholder `fwd_rng_state_j` (`bwd_rng_state_j`) of the outer graph,
//    after its last placeholder and those added before, with the body
//    placeholder's value (the same generator: its handle is kept);
//  * the call is replaced in place by a new invoke_subgraph node with the
//    same args plus the new placeholders, no kwargs, and the old node's meta
//    (its origin: torch propagates the meta).
// Names are created as torch creates the nodes: per call, its placeholders,
// then the new call. The bodies themselves do not change.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "graph/copy.h"
#include "graph/query.h"
#include "remat/error.h"
#include "rewrite/node_builder.h"
#include "rewrite/rewrite.h"

namespace remat {
namespace {

constexpr uint32_t kNoCall = UINT32_MAX;

const NestedGraph* body_named(const std::vector<NestedGraph>& nested, std::string_view name) {
  for (const NestedGraph& body : nested) {
    if (body.name == name) return &body;
  }
  return nullptr;
}

using build::empty;

// A placeholder of the outer graph carrying the value of body placeholder
// `p` (torch copies meta["val"] and nothing else).
NodeId add_state_placeholder(GraphBuilder& b, const Graph& body, NodeId p,
                             const std::string& name, const std::string& target) {
  NodeCopier from_body(body, b);
  Node ph;
  from_body.copy_value(p, ph);  // value kind, tensors, symbols
  ph.name = b.intern(name);
  ph.kind = NodeKind::kPlaceholder;
  ph.target = b.intern(target);
  ph.op = kNoOp;
  ph.recompute = RecomputePolicy::kNone;
  ph.tag = PartitionerTag::kNone;
  ph.flags = 0;
  ph.origin = kCreatedNode;
  ph.args = empty(b, ArgKind::kTuple);
  ph.kwargs = empty(b, ArgKind::kDict);
  const NodeExtra& src = body.extra(p);
  NodeExtra x;  // the value's part of the extra, re-interned
  x.sym_expr = from_body.str(src.sym_expr);
  x.sym_hint = src.sym_hint;
  x.has_sym_hint = src.has_sym_hint;
  x.nested_hint = from_body.str(src.nested_hint);
  x.repr = from_body.str(src.repr);
  x.device = from_body.str(src.device);
  x.handle = src.handle;
  return b.add_node(ph, x);
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

Graph thread_graphsafe_rng_from_hops(Graph g, const std::vector<NestedGraph>& nested,
                                     bool is_backward, FxNamespace& names) {
  const std::vector<HopRngCall> calls = find_hop_rng_calls(g, nested, is_backward);
  if (calls.empty()) return g;
  const char* prefix = is_backward ? "bwd_rng_state" : "fwd_rng_state";

  NodeId last_input = kNoNode;
  for (NodeId id = 0; id < g.size(); ++id) {
    if (g.node(id).kind == NodeKind::kPlaceholder) last_input = id;
  }
  if (last_input == kNoNode) {
    throw Error(ErrorCode::kInvalidGraph,
                fmt::format("thread_graphsafe_rng_from_hops: the {} has no placeholder",
                            is_backward ? "backward" : "forward"));
  }

  // Names, in the order torch creates the nodes.
  struct State {
    const Graph* body;
    NodeId p;
    std::string name, target;
  };
  std::vector<State> states;
  std::vector<std::string> call_names;
  std::vector<uint32_t> call_of(g.size(), kNoCall);
  std::vector<std::pair<size_t, size_t>> call_states;  // [begin, end) into states
  int count = 0;
  for (size_t c = 0; c < calls.size(); ++c) {
    const size_t begin = states.size();
    for (NodeId p : calls[c].states) {
      std::string target = fmt::format("{}_{}", prefix, count++);
      std::string name(names.create_name(target));
      states.push_back({&calls[c].body->graph, p, std::move(name), std::move(target)});
    }
    call_states.emplace_back(begin, states.size());
    call_names.emplace_back(names.create_name("invoke_subgraph"));
    call_of[calls[c].hop] = static_cast<uint32_t>(c);
  }

  GraphBuilder b(g);
  NodeCopier copier(g, b);
  std::vector<NodeId> remap(g.size(), kNoNode);
  std::vector<NodeId> made(states.size(), kNoNode);
  for (NodeId id = 0; id < g.size(); ++id) {
    const uint32_t c = call_of[id];
    if (c == kNoCall) {
      remap[id] = copier.copy(id, remap);
      if (id == last_input) {
        for (size_t s = 0; s < states.size(); ++s) {
          made[s] = add_state_placeholder(b, *states[s].body, states[s].p, states[s].name,
                                          states[s].target);
        }
      }
      continue;
    }
    const Node& old = g.node(id);
    Node n;
    copier.copy_value(id, n);  // the old call's meta
    n.name = b.intern(call_names[c]);
    n.origin = joint_id(g, id);
    n.args = b.begin(ArgKind::kTuple);
    for (ArgId a : g.children(old.args)) copier.copy_args(a, remap);
    for (size_t s = call_states[c].first; s < call_states[c].second; ++s) build::node(b, made[s]);
    b.end(n.args);
    n.kwargs = empty(b, ArgKind::kDict);
    remap[id] = b.add_node(n);
  }
  return b.finish();
}

}  // namespace remat
