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

// A value-less node `_size_of` counts as 0 bytes: from 2.13 on, any op whose
// schema returns nothing (asserts, record_stream, profiler exits); before,
// only _assert_scalar by name.
bool returns_nothing(const Graph& g, NodeId n, const TorchBehavior& torch) {
  const OpInfo* op = g.op(n);
  if (op == nullptr) return false;
  if (!torch.size_of_no_return_ops) return g.str(op->name) == "aten._assert_scalar.default";
  return op->kind == OpKind::kOverload && op->num_returns == 0;
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

bool is_opaque_node(const Graph& g, NodeId n, const TorchBehavior& torch) {
  // torch 2.11 has no opaque values: a script object is a non-tensor like
  // any other there (its min-cut weight and saved slot are special-cased
  // where torch special-cases FakeScriptObject, not here).
  if (!torch.opaque_values_saved) return false;
  const ValueKind v = g.node(n).value;
  // 2.13 registers torch.Generator as an opaque reference type.
  if (v == ValueKind::kGenerator) return torch.generator_is_opaque;
  return v == ValueKind::kScriptObject || v == ValueKind::kOpaque;
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

bool is_collective_wait(const Graph& g, NodeId n, const TorchBehavior& torch) {
  const OpInfo* op = g.op(n);
  if (op == nullptr) return false;
  const std::string_view name = g.str(op->name);
  return name == "_c10d_functional.wait_tensor.default" ||
         (torch.wait_tensors_like_wait_tensor && name == "_c10d_functional.wait_tensors.default");
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
    case ValueKind::kDevice:
      // 2.15: a device holds no memory. Older releases know no such value.
      if (options.torch.device_valued_nodes) return 0;
      break;
    case ValueKind::kScriptObject:
      // The flag exists from 2.13 on; 2.11 and 2.12 never read it.
      if (options.torch.script_object_size_flag) {
        if (options.unsafe_treat_script_objects_as_zero_size) return 0;
        throw Error(ErrorCode::kUnsupported,
                    fmt::format("node '{}': cannot compute the size of a script object (it may "
                                "hold tensors); set unsafe_treat_script_objects_as_zero_size to "
                                "treat it as zero size",
                                g.name(n)));
      }
      break;
    case ValueKind::kMissing: {
      if (node.kind == NodeKind::kGetAttr) return 0;
      if (returns_nothing(g, n, options.torch)) return 0;
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("node '{}' has no 'val' metadata; every node needs one to be sized",
                              g.name(n)));
    }
    default:
      break;
  }
  throw Error(ErrorCode::kUnsupported,
              fmt::format("node '{}': cannot compute the size of a value of kind '{}'", g.name(n),
                          value_kind_name(node.value)));
}

}  // namespace remat
