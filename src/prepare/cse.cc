// prepare/cse.cc — common_subexpression_elimination: compile_utils.fx_graph_cse.
//
// Contract: a call_function node merges into the earliest kept node with the
// same target and the same arguments (node references compared after
// substitution, constants compared with their Python type: 1, 1.0 and True
// differ; -0.0 equals 0.0; NaN equals nothing), when both lie in the same
// mutation region. Never merged, never merged into: placeholders, output,
// get_attr, compile_utils.rand_ops, aten.empty, and tensor nodes whose
// storage is the storage of a tensor the output node uses directly.
//
// Mutation regions (inductor's compute_mutation_region_ids): the region id
// grows by one at each mutation op, starting with it. When an equal node is
// found in another region, the new node is kept and becomes the one later
// duplicates merge into.
//
// Not reproduced: torch also keeps nodes whose val is a raw sympy.Symbol
// with free unbacked symbols; a graph's val is never a sympy.Symbol (it is
// a SymInt), so the clause never fires on traced graphs.
#include <bit>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graph/copy.h"
#include "prepare/impure.h"
#include "prepare/prepare.h"

namespace remat {
namespace {

// compile_utils.rand_ops: packets CSE must not merge.
constexpr std::string_view kRandPackets[] = {
    "aten.dropout",   "aten._fused_dropout", "aten._standard_gamma", "aten.bernoulli",
    "aten.multinomial", "aten.native_dropout", "aten.normal",       "aten.poisson",
    "aten.binomial",  "aten.rrelu",          "aten.rand_like",      "aten.randint",
    "aten.randn",     "aten.randperm",       "aten.rand",
};

bool never_merged_op(const Graph& g, const OpInfo& op) {
  if (op.kind != OpKind::kOverload) return false;
  const std::string_view packet = g.str(op.packet);
  if (packet == "aten.empty") return true;
  for (std::string_view r : kRandPackets) {
    if (packet == r) return true;
  }
  return false;
}

// Serializes a node's target and argument trees into a byte key: equal keys
// <=> equal tokens in fx_graph_cse (same target, same flattened leaves with
// their types, same tree structure).
class KeyWriter {
 public:
  KeyWriter(const Graph& g, const std::vector<NodeId>& replaced) : g_(g), replaced_(replaced) {}

  std::string key(const Node& n) {
    out_.clear();
    put(static_cast<uint64_t>(n.target));
    tree(n.args, ArgKind::kTuple);
    tree(n.kwargs, ArgKind::kDict);
    return out_;
  }

 private:
  void put(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }

  // An absent tree is an empty container of its default kind.
  void tree(ArgId root, ArgKind empty_kind) {
    if (root == kNoArg) {
      put(static_cast<uint64_t>(empty_kind));
      put(1);  // span
      return;
    }
    const ArgId stop = root + g_.arg(root).span;
    for (ArgId a = root; a < stop; ++a) leaf(g_.arg(a));
  }

  void leaf(const Arg& a) {
    put(static_cast<uint64_t>(a.kind));
    put(a.span);  // containers: the span fixes the tree's shape
    switch (a.kind) {
      case ArgKind::kNone:
      case ArgKind::kList:
      case ArgKind::kTuple:
      case ArgKind::kDict:
      case ArgKind::kSlice:
        break;
      case ArgKind::kBool:
      case ArgKind::kInt:
        put(static_cast<uint64_t>(a.i));
        break;
      case ArgKind::kFloat:
        if (a.f != a.f) {
          put(unique_++);  // NaN: hashed by identity in Python, never equal
        } else {
          put(std::bit_cast<uint64_t>(a.f == 0.0 ? 0.0 : a.f));  // -0.0 == 0.0
        }
        break;
      case ArgKind::kNode:
        put(replaced_[a.id]);
        break;
      case ArgKind::kOpaque:
        // Compared by identity: the host's handle, when it gave one.
        put(a.i >= 0 ? static_cast<uint64_t>(a.i) : unique_++);
        put(a.i >= 0 ? 0 : 1);
        break;
      default:  // string-like leaves compare by value
        put(a.id);
        break;
    }
  }

  const Graph& g_;
  const std::vector<NodeId>& replaced_;
  std::string out_;
  uint64_t unique_ = uint64_t{1} << 63;
};

}  // namespace

Graph common_subexpression_elimination(Graph g, std::vector<NodeId>& replaced) {
  const size_t n = g.size();
  replaced.resize(n);
  for (NodeId id = 0; id < n; ++id) replaced[id] = id;

  // Storages of tensors the output node uses directly; nodes sharing them
  // are kept apart (they are distinct outputs in eager mode).
  std::unordered_set<int64_t> output_storages;
  const NodeId out = g.output();
  auto checkable = [&](NodeId id) {
    return g.node(id).value == ValueKind::kTensor && g.node(id).tensors_count > 0 &&
           g.tensors(id)[0].storage >= 0;
  };
  for (NodeId in : g.inputs(out)) {
    if (checkable(in)) output_storages.insert(g.tensors(in)[0].storage);
  }

  KeyWriter writer(g, replaced);
  std::unordered_map<std::string, NodeId> seen;  // key -> node later equals merge into
  std::vector<uint32_t> region(n, 0);
  uint32_t region_id = 0;
  size_t merged = 0;
  for (NodeId id = 0; id < n; ++id) {
    if (is_mutation_op(g, id)) ++region_id;
    region[id] = region_id;
    const Node& node = g.node(id);
    if (node.kind != NodeKind::kCallFunction) continue;
    const OpInfo* op = g.op(id);
    if (op != nullptr && never_merged_op(g, *op)) continue;
    if (checkable(id) && output_storages.count(g.tensors(id)[0].storage)) continue;

    auto [it, inserted] = seen.try_emplace(writer.key(node), id);
    if (inserted) continue;
    if (region[it->second] == region_id) {
      replaced[id] = it->second;
      ++merged;
    } else {
      it->second = id;  // later duplicates merge into this one
    }
  }
  if (merged == 0) return unchanged(std::move(g));

  GraphBuilder b(g);  // shares g's strings: copies re-hash nothing
  NodeCopier copier(g, b);
  std::vector<NodeId> remap(n, kNoNode);
  for (NodeId id = 0; id < n; ++id) {
    if (replaced[id] == id) {
      remap[id] = copier.copy(id, remap);
    } else {
      remap[id] = remap[replaced[id]];
    }
  }
  return b.finish();
}

}  // namespace remat
