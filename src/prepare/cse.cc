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
#include <span>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "graph/copy.h"
#include "prepare/mutation.h"
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

// fx_graph_cse's token equality (same target, same flattened leaves with
// their types, same tree structure) as a 64-bit hash plus an exact check, so
// no key is ever materialized. An absent tree equals an empty container of
// its default kind.
class NodeKeys {
 public:
  NodeKeys(const Graph& g, const std::vector<NodeId>& replaced) : g_(g), replaced_(replaced) {}

  uint64_t hash(const Node& n) const {
    uint64_t h = mix(kSeed, n.target);
    h = hash_tree(h, n.args, ArgKind::kTuple);
    return hash_tree(h, n.kwargs, ArgKind::kDict);
  }

  bool equal(const Node& a, const Node& b) const {
    return a.target == b.target && equal_trees(a.args, b.args, ArgKind::kTuple) &&
           equal_trees(a.kwargs, b.kwargs, ArgKind::kDict);
  }

 private:
  static constexpr uint64_t kSeed = 0x9e3779b97f4a7c15ull;
  static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
  }

  // The items of a tree; an absent one reads as `empty`.
  std::span<const Arg> items(ArgId root, const Arg& empty) const {
    if (root == kNoArg) return {&empty, 1};
    return {&g_.arg(root), g_.arg(root).span};
  }

  uint64_t hash_tree(uint64_t h, ArgId root, ArgKind empty_kind) const {
    Arg empty;
    empty.kind = empty_kind;
    for (const Arg& a : items(root, empty)) h = mix(mix(h, static_cast<uint64_t>(a.kind)), value(a));
    return h;
  }

  // What identifies a leaf's value. NaN and handle-less opaque values never
  // compare equal, so any hash does for them.
  uint64_t value(const Arg& a) const {
    switch (a.kind) {
      case ArgKind::kNone:
      case ArgKind::kList:
      case ArgKind::kTuple:
      case ArgKind::kDict:
      case ArgKind::kSlice:
        return a.span;  // containers: the span fixes the tree's shape
      case ArgKind::kBool:
      case ArgKind::kInt:
      case ArgKind::kOpaque:
        return static_cast<uint64_t>(a.i);
      case ArgKind::kFloat:
        return std::bit_cast<uint64_t>(a.f == 0.0 ? 0.0 : a.f);  // -0.0 == 0.0
      case ArgKind::kNode:
        return replaced_[a.id];
      default:  // string-like leaves compare by value (interned)
        return a.id;
    }
  }

  bool equal_leaves(const Arg& a, const Arg& b) const {
    if (a.kind != b.kind) return false;
    switch (a.kind) {
      case ArgKind::kFloat:
        return a.f == b.f;  // NaN: hashed by identity in Python, never equal
      case ArgKind::kOpaque:
        return a.i >= 0 && a.i == b.i;  // by the host's handle, when it gave one
      default:
        return value(a) == value(b);
    }
  }

  bool equal_trees(ArgId x, ArgId y, ArgKind empty_kind) const {
    Arg empty;
    empty.kind = empty_kind;
    const std::span<const Arg> a = items(x, empty), b = items(y, empty);
    if (a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k) {
      if (!equal_leaves(a[k], b[k])) return false;
    }
    return true;
  }

  const Graph& g_;
  const std::vector<NodeId>& replaced_;
};

// Open addressing over (hash, node): one flat array, no allocation per node.
// Several nodes may share a hash; lookups walk until an equal one or a hole.
class SeenTable {
 public:
  explicit SeenTable(size_t expected) {
    size_t cap = 16;
    while (cap < 2 * expected) cap *= 2;
    slots_.assign(cap, Slot{});
  }

  // Asks the cache for where find(hash) will start, ahead of time: on large
  // graphs the table is far bigger than the cache.
  void prefetch(uint64_t hash) const { __builtin_prefetch(&slots_[hash & (slots_.size() - 1)]); }

  // The slot of a node `equal_to` accepts, or the empty slot to claim.
  template <class Equal>
  NodeId& find(uint64_t hash, Equal&& equal_to) {
    for (size_t i = hash & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& s = slots_[i];
      if (s.node == kNoNode) {
        s.hash = hash;
        return s.node;
      }
      if (s.hash == hash && equal_to(s.node)) return s.node;
    }
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    NodeId node = kNoNode;
  };
  std::vector<Slot> slots_;
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

  // Per op, once: never_merged_op compares packet names, and whether an
  // op mutates is, for most ops, a fact of the op alone (-1: ask per node).
  std::vector<uint8_t> never_merged(g.ops().size(), 0);
  std::vector<int8_t> op_mutates(g.ops().size(), -1);
  for (OpId o = 0; o < g.ops().size(); ++o) {
    never_merged[o] = never_merged_op(g, g.ops()[o]);
    op_mutates[o] = op_mutation(g, g.ops()[o]);
  }

  NodeKeys keys(g, replaced);
  SeenTable seen(n);  // equal nodes -> the one later equals merge into
  std::vector<uint32_t> region(n, 0);
  uint32_t region_id = 0;
  size_t merged = 0;
  // Nodes this far ahead have their slot prefetched, from a hash computed
  // early: exact unless one of their inputs merges meanwhile, and only a hint.
  constexpr NodeId kLookahead = 16;
  for (NodeId id = 0; id < n; ++id) {
    if (id + kLookahead < n && g.node(id + kLookahead).kind == NodeKind::kCallFunction) {
      seen.prefetch(keys.hash(g.node(id + kLookahead)));
    }
    const Node& node = g.node(id);
    const int8_t mutates = node.op == kNoOp ? -1 : op_mutates[node.op];
    if (mutates > 0 || (mutates < 0 && is_mutation_op(g, id))) ++region_id;
    region[id] = region_id;
    if (node.kind != NodeKind::kCallFunction) continue;
    if (node.op != kNoOp && never_merged[node.op]) continue;
    if (checkable(id) && output_storages.count(g.tensors(id)[0].storage)) continue;

    NodeId& first = seen.find(keys.hash(node), [&](NodeId other) {
      return keys.equal(g.node(other), node);
    });
    if (first == kNoNode) {
      first = id;
    } else if (region[first] == region_id) {
      replaced[id] = first;
      ++merged;
    } else {
      first = id;  // later duplicates merge into this one
    }
  }
  if (merged == 0) return unchanged(std::move(g));

  std::vector<NodeId> order;
  order.reserve(n - merged);
  for (NodeId id = 0; id < n; ++id) {
    if (replaced[id] == id) order.push_back(id);
  }
  return GraphBuilder::rearrange(g, order, /*alias=*/replaced);
}

}  // namespace remat
