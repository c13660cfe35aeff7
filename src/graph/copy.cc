// graph/copy.cc — see copy.h.
#include "graph/copy.h"

#include <algorithm>

#include "graph/query.h"
#include "remat/error.h"

namespace remat {

Graph unchanged(Graph g) {
  for (NodeId id = 0; id < g.size(); ++id) {
    if (g.node(id).origin == kNoNode) g.set_origin(id, id);
  }
  return g;
}

Graph copy_kept(const Graph& g, const std::vector<uint8_t>& keep) {
  const size_t n = g.size();
  if (std::find(keep.begin(), keep.end(), 0) == keep.end()) return unchanged(g);
  std::vector<NodeId> order;
  order.reserve(n);
  for (NodeId id = 0; id < n; ++id) {
    if (keep[id]) order.push_back(id);
  }
  return GraphBuilder::rearrange(g, order);
}

NodeCopier::NodeCopier(const Graph& src, GraphBuilder& dst)
    : src_(src),
      dst_(dst),
      same_pool_(dst.shares_strings_with(src)),
      same_values_(same_pool_ && dst.shares_values_with(src)),
      str_map_(same_pool_ ? 0 : src.strings().size(), 0),
      op_map_(src.ops().size(), kNoOp) {}

StrId NodeCopier::str(StrId s) {
  if (s == 0 || same_pool_) return s;
  if (str_map_[s] == 0) str_map_[s] = dst_.intern(src_.str(s));
  return str_map_[s];
}

OpId NodeCopier::op(OpId o) {
  if (o == kNoOp) return kNoOp;
  if (op_map_[o] == kNoOp) {
    const OpInfo& in = src_.ops()[o];
    OpInfo info = in;
    info.name = str(in.name);
    info.ns = str(in.ns);
    info.packet = str(in.packet);
    std::vector<std::string> mutable_args;
    for (StrId a : src_.mutable_args(in)) mutable_args.emplace_back(src_.str(a));
    op_map_[o] = dst_.add_op(info, mutable_args);
  }
  return op_map_[o];
}

ArgId NodeCopier::copy_args(ArgId root, std::span<const NodeId> remap) {
  if (root == kNoArg) return kNoArg;
  // Strings carry over: the tree is copied in one piece.
  if (same_pool_) return dst_.add_tree(src_, root, remap);
  // Pre-order with spans: reopen containers as we meet them and close each
  // when its subtree ends.
  std::vector<std::pair<ArgId, ArgId>> open;  // (dst container, src end)
  ArgId new_root = kNoArg;
  const ArgId stop = root + src_.arg(root).span;
  for (ArgId a = root; a < stop; ++a) {
    while (!open.empty() && a >= open.back().second) {
      dst_.end(open.back().first);
      open.pop_back();
    }
    const Arg& in = src_.arg(a);
    ArgId made;
    switch (in.kind) {
      case ArgKind::kList:
      case ArgKind::kTuple:
      case ArgKind::kDict:
      case ArgKind::kSlice:
        made = dst_.begin(in.kind);
        open.emplace_back(made, a + in.span);
        break;
      case ArgKind::kNode: {
        Arg out = in;
        if (in.id >= remap.size() || remap[in.id] == kNoNode) {
          throw Error(ErrorCode::kInternal, "NodeCopier: node '" + std::string(src_.name(in.id)) +
                                                "' is used but has no copy");
        }
        out.id = remap[in.id];
        made = dst_.leaf(out);
        break;
      }
      case ArgKind::kStr:
      case ArgKind::kDtype:
      case ArgKind::kDevice:
      case ArgKind::kLayout:
      case ArgKind::kMemoryFormat:
      case ArgKind::kTarget:
      case ArgKind::kOpaque: {
        Arg out = in;
        out.id = str(in.id);
        made = dst_.leaf(out);
        break;
      }
      default:
        made = dst_.leaf(in);
        break;
    }
    if (a == root) new_root = made;
  }
  while (!open.empty()) {
    dst_.end(open.back().first);
    open.pop_back();
  }
  return new_root;
}

void NodeCopier::copy_value(NodeId id, Node& out) {
  const Node& in = src_.node(id);
  out.name = str(in.name);
  out.kind = in.kind;
  out.value = in.value;
  out.recompute = in.recompute;
  out.tag = in.tag;
  out.flags = in.flags;
  out.target = str(in.target);
  out.op = op(in.op);

  out.tensors_count = in.tensors_count;
  out.symbols_count = in.symbols_count;
  if (same_values_) {  // the entries are already in the destination's pool
    out.tensors_begin = in.tensors_begin;
    out.symbols_begin = in.symbols_begin;
    out.extra = in.extra;
    return;
  }
  out.extra = kNoExtra;
  uint32_t original = kNoExtra;  // an offloaded placeholder's original tensor, copied first
  if (in.extra != kNoExtra && src_.extra(id).original_tensor < src_.values().sizes().tensors)
    original = copy_tensor(*src_.values().tensors(src_.extra(id).original_tensor));
  if (in.extra != kNoExtra) {
    NodeExtra x = src_.extra(id);
    for (StrId* s : {&x.tag_name, &x.sym_expr, &x.binds_symbol, &x.repr, &x.nested_hint,
                     &x.device, &x.binds_unreplaced})
      *s = str(*s);
    x.original_tensor = original;
    x.unreplaced_symbols_begin = static_cast<uint32_t>(dst_.symbol_count());
    for (StrId s : src_.unreplaced_symbols(id)) dst_.add_symbol(str(s));
    out.extra = dst_.add_extra(x);
  }
  out.tensors_begin = static_cast<uint32_t>(dst_.tensor_count());
  for (const TensorMeta& t : src_.tensors(id)) copy_tensor(t);
  out.symbols_begin = static_cast<uint32_t>(dst_.symbol_count());
  for (StrId s : src_.free_symbols(id)) dst_.add_symbol(str(s));
}

uint32_t NodeCopier::copy_tensor(const TensorMeta& t) {
  TensorMeta c = t;
  c.dtype = str(t.dtype);
  c.device = str(t.device);
  c.shape_begin = static_cast<uint32_t>(dst_.dim_count());
  for (Dim d : src_.shape(t)) {
    d.expr = str(d.expr);
    dst_.add_dim(d);
  }
  c.stride_begin = static_cast<uint32_t>(dst_.dim_count());
  for (Dim d : src_.stride(t)) {
    d.expr = str(d.expr);
    dst_.add_dim(d);
  }
  return dst_.add_tensor(c);
}

NodeId NodeCopier::copy(NodeId id, std::span<const NodeId> remap, NodeId origin, StrId name) {
  Node out;
  copy_value(id, out);
  if (name != 0) out.name = name;
  const Node& in = src_.node(id);
  out.args = copy_args(in.args, remap);
  out.kwargs = copy_args(in.kwargs, remap);
  out.origin = origin != kNoNode ? origin : joint_id(src_, id);
  return dst_.add_node(out);
}

NodeId NodeCopier::copy_as_placeholder(NodeId id, NodeId origin, StrId name) {
  Node out;
  copy_value(id, out);
  out.kind = NodeKind::kPlaceholder;
  out.target = out.name;
  if (name != 0) out.name = name;
  out.op = kNoOp;
  out.origin = origin != kNoNode ? origin : joint_id(src_, id);
  return dst_.add_node(out);
}

}  // namespace remat
