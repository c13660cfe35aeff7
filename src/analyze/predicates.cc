// analyze/predicates.cc — node predicates and `_size_of` (analyze.h).
//
// Contract: each predicate mirrors the torch helper of the same name
// (aot_autograd.utils._is_primal & co, proxy_tensor.is_sym_node,
// graph_compile.is_opaque_node; _must_be_in_forward & co live in
// graph/query.h, since select_subgraph reads them). Placeholder
// roles are read from the placeholder's FX target string, as torch does.
#include <string_view>

#include <fmt/format.h>

#include "analyze/analyze.h"
#include "remat/error.h"

namespace remat {
namespace {

bool target_contains(const Graph& g, NodeId n, std::string_view what) {
  return g.str(g.node(n).target).find(what) != std::string_view::npos;
}

bool is_placeholder(const Graph& g, NodeId n) {
  return g.node(n).kind == NodeKind::kPlaceholder;
}

}  // namespace

bool is_primal(const Graph& g, NodeId n) {
  return is_placeholder(g, n) && !target_contains(g, n, "tangents") &&
         !is_bwd_seed_offset(g, n) && !is_fwd_seed_offset(g, n);
}

bool is_tangent(const Graph& g, NodeId n) {
  return is_placeholder(g, n) && target_contains(g, n, "tangents");
}

bool is_fwd_seed_offset(const Graph& g, NodeId n) {
  return is_placeholder(g, n) &&
         (target_contains(g, n, "fwd_seed") || target_contains(g, n, "fwd_base_offset"));
}

bool is_bwd_seed_offset(const Graph& g, NodeId n) {
  return is_placeholder(g, n) &&
         (target_contains(g, n, "bwd_seed") || target_contains(g, n, "bwd_base_offset"));
}

bool is_backward_state(const Graph& g, NodeId n) {
  return is_placeholder(g, n) && g.node(n).value == ValueKind::kBackwardState;
}

bool is_sym_node(const Graph& g, NodeId n) {
  const ValueKind v = g.node(n).value;
  return v == ValueKind::kSymInt || v == ValueKind::kSymFloat || v == ValueKind::kSymBool;
}

bool is_opaque_node(const Graph& g, NodeId n) {
  const ValueKind v = g.node(n).value;
  // A generator is one of torch's opaque values too (is_opaque_value).
  return v == ValueKind::kScriptObject || v == ValueKind::kOpaque || v == ValueKind::kGenerator;
}

bool is_assert_only_symbool(const Graph& g, NodeId n) {
  if (g.node(n).value != ValueKind::kSymBool) return false;
  std::span<const NodeId> users = g.users(n);
  if (users.empty()) return false;
  for (NodeId u : users) {
    const OpInfo* op = g.op(u);
    if (op == nullptr || g.str(op->name) != "aten._assert_scalar.default") return false;
  }
  return true;
}

int64_t size_of(const Graph& g, NodeId n, const PartitionOptions& options) {
  const Node& node = g.node(n);
  auto bytes = [](const TensorMeta& t) { return t.numel_hint * static_cast<int64_t>(t.itemsize); };
  switch (node.value) {
    case ValueKind::kSymInt:
    case ValueKind::kSymFloat:
    case ValueKind::kSymBool:
      return 1;
    case ValueKind::kTensor:
    case ValueKind::kSequence:
    case ValueKind::kDict: {
      // A sequence or dict counts its tensor elements; other elements are 0.
      int64_t total = 0;
      for (const TensorMeta& t : g.tensors(n)) total += bytes(t);
      return total;
    }
    case ValueKind::kScriptObject:
      if (options.unsafe_treat_script_objects_as_zero_size) return 0;
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("node '{}': cannot compute the size of a script object (it may "
                              "hold tensors); set unsafe_treat_script_objects_as_zero_size to "
                              "treat it as zero size",
                              g.name(n)));
    case ValueKind::kMissing: {
      if (node.kind == NodeKind::kGetAttr) return 0;
      const OpInfo* op = g.op(n);
      if (op != nullptr && op->kind == OpKind::kOverload && op->num_returns == 0) return 0;
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("node '{}' has no 'val' metadata; every node needs one to be sized",
                              g.name(n)));
    }
    default:
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("node '{}': cannot compute the size of a value of kind '{}'",
                              g.name(n), value_kind_name(node.value)));
  }
}

}  // namespace remat
