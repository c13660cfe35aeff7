// decide/fusible.cc — Fusion's one pass over the graph. See fusible.h.
#include "decide/fusible.h"

#include "graph/query.h"

namespace remat {
namespace {

constexpr std::string_view kAutoFunctionalized = "higher_order.auto_functionalized";
constexpr std::string_view kTritonWrapper = "higher_order.triton_kernel_wrapper_functional";

// Direct children of an argument container, without allocating.
template <typename F>
void for_each_child(const Graph& g, ArgId id, F&& f) {
  const ArgId stop = id + g.arg(id).span;
  for (ArgId c = id + 1; c < stop; c += g.arg(c).span) f(c);
}

}  // namespace

Fusion::Fusion(const Graph& g, const std::vector<uint8_t>& op_categories)
    : cat_(g.size(), 0), flags_(g.size(), 0), into_off_(g.size() + 1, 0) {
  // Per-op facts first, then per node.
  const auto ops = g.ops();
  std::vector<uint8_t> op_flag(ops.size(), 0);
  for (OpId o = 0; o < ops.size(); ++o) {
    std::string_view name = g.str(ops[o].name);
    // get_aten_target(b) == aten.cat: the overload packet, for OpOverloads.
    if (ops[o].kind == OpKind::kOverload && g.str(ops[o].packet) == "aten.cat") op_flag[o] |= kCat;
    if (name == kAutoFunctionalized || name == kTritonWrapper) op_flag[o] |= kSpecialConsumer;
    if (name == "operator.getitem") op_flag[o] |= kGetitem;
  }
  const OpId triton = g.find_op(kTritonWrapper);
  const OpId autofn = g.find_op(kAutoFunctionalized);

  for (NodeId n = 0; n < g.size(); ++n) {
    const Node& node = g.node(n);
    if (node.op == kNoOp) continue;
    cat_[n] = node.op < op_categories.size() ? op_categories[node.op] : 0;
    flags_[n] = op_flag[node.op];
    if ((flags_[n] & kGetitem) && triton != kNoOp && node.args != kNoArg) {
      // a.target is getitem and a.args[0].target is the triton wrapper.
      const ArgId root = node.args;
      if (g.arg(root).span > 1) {
        const Arg& first = g.arg(root + 1);
        if (first.kind == ArgKind::kNode && g.node(first.id).op == triton)
          flags_[n] |= kGetitemOfTriton;
      }
    }
  }

  // Producers that fuse into each special consumer, in one pass.
  for (NodeId b = 0; b < g.size(); ++b) {
    into_off_[b + 1] = into_off_[b];
    if (!(flags_[b] & kSpecialConsumer)) continue;
    const Node& node = g.node(b);
    auto add = [&](ArgId v) {
      if (v != kNoArg && g.arg(v).kind == ArgKind::kNode) {
        into_.push_back(g.arg(v).id);
        ++into_off_[b + 1];
      }
    };
    if (node.op == autofn) {
      // The mutated op is args[0]; its schema names the written arguments,
      // which auto_functionalized receives as kwargs (a node or a list).
      if (node.args == kNoArg || g.arg(node.args).span <= 1) continue;
      const Arg& target = g.arg(node.args + 1);
      if (target.kind != ArgKind::kTarget && target.kind != ArgKind::kStr) continue;
      OpId mutated = g.find_op(g.str(target.id));
      if (mutated == kNoOp) continue;
      for (StrId name : g.mutable_args(g.ops()[mutated])) {
        ArgId v = dict_lookup(g, node.kwargs, g.str(name));
        if (v == kNoArg) continue;
        if (g.arg(v).kind == ArgKind::kNode) add(v);
        else if (g.arg(v).kind == ArgKind::kList) for_each_child(g, v, add);
      }
    } else {
      // triton_kernel_wrapper_functional: kwargs["tensors_to_clone"] names
      // entries of kwargs["kwargs"].
      ArgId names = dict_lookup(g, node.kwargs, "tensors_to_clone");
      ArgId inner = dict_lookup(g, node.kwargs, "kwargs");
      if (names == kNoArg || inner == kNoArg) continue;
      for_each_child(g, names, [&](ArgId c) {
        if (g.arg(c).kind == ArgKind::kStr) add(dict_lookup(g, inner, g.str(g.arg(c).id)));
      });
    }
  }
}

}  // namespace remat
