// prepare/cse.cc — common_subexpression_elimination: compile_utils.fx_graph_cse.
//
// Contract: a call_function node merges into the earliest kept node with the
// same target, the same extra key (when the caller gives one: 2.14's
// partition key) and the same arguments (node references compared after
// substitution, constants compared with their Python type: 1, 1.0 and True
// differ), when both lie in the same mutation region. Floats compare by
// value up to 2.13 (-0.0 equals 0.0; NaN equals nothing: torch hashes it by
// identity, and a traced graph holds distinct NaN objects), by bit pattern
// from 2.14 on (-0.0 and 0.0 differ; NaNs with the same bits are equal).
//
// From 2.14 on a node also merges only into a node of the same stream /
// memory-pool context (meta["custom"]). That context is part of torch's
// token but not of its hash: a node that finds an equal one of another
// context is kept, and the one found stays the node later equals merge into.
//
// From 2.14 on, nodes a functional wrapper mutates (the bases of
// auto_functionalized_v2's `_all_bases`, v1's schema-named mutable kwargs,
// triton_kernel_wrapper_functional's `tensors_to_clone`) are distinct
// buffers: never merged, never merged into.
//
// Never merged, never merged into: placeholders, output, get_attr,
// compile_utils.rand_ops, aten.empty, and tensor nodes whose storage is the
// storage of a tensor the output node uses directly; from 2.14 on also
// impure nodes (Node.is_impure() with impure_random: side effects,
// mutation, every nondeterministic_seeded op).
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
#include "graph/impure.h"
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
  // get_aten_target: an overload's packet, or a packet target itself.
  if (op.kind != OpKind::kOverload && op.kind != OpKind::kPacket) return false;
  const std::string_view packet = g.str(op.packet);
  if (packet == "aten.empty") return true;
  for (std::string_view r : kRandPackets) {
    if (packet == r) return true;
  }
  return false;
}

// Calls f(node) for a node argument, or for each node directly inside a
// list or tuple argument (fx_graph_cse's _add_base).
template <typename F>
void for_each_base(const Graph& g, ArgId a, F&& f) {
  if (a == kNoArg) return;
  const Arg& arg = g.arg(a);
  if (arg.kind == ArgKind::kNode) {
    f(arg.id);
  } else if (arg.kind == ArgKind::kList || arg.kind == ArgKind::kTuple) {
    for (ArgId c = a + 1; c < a + arg.span; c += g.arg(c).span) {
      if (g.arg(c).kind == ArgKind::kNode) f(g.arg(c).id);
    }
  }
}

// fx_graph_cse's nodes_used_as_mutation_base: per node, whether a
// functional wrapper mutates it.
std::vector<uint8_t> mutation_bases(const Graph& g) {
  std::vector<uint8_t> base(g.size(), 0);
  auto mark = [&](NodeId id) { base[id] = 1; };
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (n.kind != NodeKind::kCallFunction || n.op == kNoOp) continue;
    const std::string_view target = target_name(g, id);
    if (target == "higher_order.auto_functionalized_v2") {
      // v2 lists its mutable buffers in `_all_bases`.
      const ArgId all = dict_lookup(g, n.kwargs, "_all_bases");
      if (all == kNoArg || (g.arg(all).kind != ArgKind::kList && g.arg(all).kind != ArgKind::kTuple))
        continue;
      for (ArgId c = all + 1; c < all + g.arg(all).span; c += g.arg(c).span) for_each_base(g, c, mark);
    } else if (target == "higher_order.auto_functionalized") {
      // v1: the kwargs the wrapped op's (args[0]) schema writes to.
      const ArgId first = positional(g, id, 0);
      if (first == kNoArg) continue;
      const Arg& op_arg = g.arg(first);
      if (op_arg.kind != ArgKind::kTarget && op_arg.kind != ArgKind::kStr) continue;
      const OpId op = g.find_op(g.str(op_arg.id));
      if (op == kNoOp) continue;
      for (StrId name : g.mutable_args(g.ops()[op])) {
        for_each_base(g, dict_lookup(g, n.kwargs, g.str(name)), mark);
      }
    } else if (target == "higher_order.triton_kernel_wrapper_functional") {
      // `tensors_to_clone` names entries of kwargs["kwargs"].
      const ArgId names = dict_lookup(g, n.kwargs, "tensors_to_clone");
      const ArgId inner = dict_lookup(g, n.kwargs, "kwargs");
      if (names == kNoArg || (g.arg(names).kind != ArgKind::kList && g.arg(names).kind != ArgKind::kTuple))
        continue;
      for (ArgId c = names + 1; c < names + g.arg(names).span; c += g.arg(c).span) {
        if (g.arg(c).kind == ArgKind::kStr) for_each_base(g, dict_lookup(g, inner, g.str(g.arg(c).id)), mark);
      }
    }
  }
  return base;
}

// fx_graph_cse's token equality (same target, same flattened leaves with
// their types, same tree structure) as a 64-bit hash plus an exact check, so
// no key is ever materialized. An absent tree equals an empty container of
// its default kind.
class NodeKeys {
 public:
  NodeKeys(const Graph& g, const std::vector<NodeId>& replaced, std::span<const uint8_t> extra_key,
           bool float_bits)
      : g_(g), replaced_(replaced), extra_key_(extra_key), float_bits_(float_bits) {}

  uint64_t hash(NodeId id) const {
    const Node& n = g_.node(id);
    uint64_t h = mix(kSeed, n.target);
    h = mix(h, extra(id));
    h = hash_tree(h, n.args, ArgKind::kTuple);
    return hash_tree(h, n.kwargs, ArgKind::kDict);
  }

  bool equal(NodeId x, NodeId y) const {
    const Node& a = g_.node(x);
    const Node& b = g_.node(y);
    return a.target == b.target && extra(x) == extra(y) &&
           equal_trees(a.args, b.args, ArgKind::kTuple) &&
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

  // What identifies a leaf's value. Handle-less opaque values (and NaN when
  // floats compare by value) never compare equal, so any hash does for them.
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
      case ArgKind::kFloat:  // by value, -0.0 == 0.0; or by bits
        return std::bit_cast<uint64_t>(a.f == 0.0 && !float_bits_ ? 0.0 : a.f);
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
        return float_bits_ ? value(a) == value(b) : a.f == b.f;
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

  // extra_node_key's value for a node; every node has the same without one.
  uint8_t extra(NodeId id) const { return extra_key_.empty() ? 0 : extra_key_[id]; }

  const Graph& g_;
  const std::vector<NodeId>& replaced_;
  std::span<const uint8_t> extra_key_;
  // compile_utils._normalize_cse_arg (2.14 on): a float is its IEEE-754 bits.
  bool float_bits_;
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

Graph common_subexpression_elimination(Graph g, std::vector<NodeId>& replaced,
                                       const TorchBehavior& torch,
                                       std::span<const uint8_t> extra_key) {
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

  NodeKeys keys(g, replaced, extra_key, torch.cse_float_bit_keys);
  // 2.14 on: merging two factory calls whose buffers two wrappers mutate
  // would make both mutate one buffer. 2.13 merges them.
  std::vector<uint8_t> bases;
  if (torch.cse_keep_mutation_bases) bases = mutation_bases(g);
  SeenTable seen(n);  // equal nodes -> the one later equals merge into
  std::vector<uint32_t> region(n, 0);
  uint32_t region_id = 0;
  size_t merged = 0;
  // Nodes this far ahead have their slot prefetched, from a hash computed
  // early: exact unless one of their inputs merges meanwhile, and only a hint.
  constexpr NodeId kLookahead = 16;
  for (NodeId id = 0; id < n; ++id) {
    if (id + kLookahead < n && g.node(id + kLookahead).kind == NodeKind::kCallFunction) {
      seen.prefetch(keys.hash(id + kLookahead));
    }
    const Node& node = g.node(id);
    const int8_t mutates = node.op == kNoOp ? -1 : op_mutates[node.op];
    if (mutates > 0 || (mutates < 0 && is_mutation_op(g, id))) ++region_id;
    region[id] = region_id;
    if (node.kind != NodeKind::kCallFunction) continue;
    if (node.op != kNoOp && never_merged[node.op]) continue;
    // 2.14 on: two draws of randn_like are two draws, and a side effect
    // happens as often as the graph says. 2.13 merges them.
    if (torch.cse_skip_impure && is_impure_node(g, id, impurity(/*impure_random=*/true, torch))) continue;
    if (!bases.empty() && bases[id]) continue;
    if (checkable(id) && output_storages.count(g.tensors(id)[0].storage)) continue;

    NodeId& first = seen.find(keys.hash(id), [&](NodeId other) { return keys.equal(other, id); });
    if (first == kNoNode) {
      first = id;
    } else if (torch.cse_custom_context_key &&
               g.extra(first).custom_context != g.extra(id).custom_context) {
      continue;  // another stream or pool: kept, and not what later equals find
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
