// graph/graph.cc — GraphBuilder and the IR invariants it checks.
//
// finish() is the single place where a graph becomes valid: it derives FX's
// all_input_nodes from the argument trees, builds users in CSR form and
// rejects every malformed shape of graph with an Error naming the node.
#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "remat/error.h"
#include "remat/graph.h"
#include "remat/ops.h"

namespace remat {

struct GraphBuilder::Interner {
  std::unordered_map<StrId, OpId> op_by_name;
};

// Keyed by StrId, so copies of a Graph (which share the pool) may share it.
struct Graph::Index {
  std::vector<NodeId> node_by_name;  // indexed by StrId
  std::unordered_map<StrId, OpId> op_by_name;
};

GraphBuilder::GraphBuilder() : interner_(std::make_unique<Interner>()) {}
GraphBuilder::GraphBuilder(const Graph& base) : GraphBuilder() {
  g_.strings_ = base.strings_;
  g_.values_ = base.values_;
}
GraphBuilder::~GraphBuilder() = default;

StrId GraphBuilder::intern(std::string_view s) { return g_.strings_->intern(s); }

void GraphBuilder::reserve(size_t nodes, size_t arg_items) {
  g_.nodes_.reserve(nodes);
  structure_->args.reserve(arg_items);
}

OpId GraphBuilder::add_op(const OpInfo& info, std::span<const std::string> mutable_args) {
  if (auto it = interner_->op_by_name.find(info.name); it != interner_->op_by_name.end()) {
    return it->second;
  }
  OpInfo op = info;
  op.mutable_args_begin = static_cast<uint32_t>(symbol_count());
  op.mutable_args_count = static_cast<uint32_t>(mutable_args.size());
  for (const std::string& a : mutable_args) g_.values_->add_symbol(intern(a));
  g_.ops_.push_back(op);
  const OpId id = static_cast<OpId>(g_.ops_.size() - 1);
  interner_->op_by_name.emplace(info.name, id);
  return id;
}

OpId GraphBuilder::add_op_by_name(std::string_view name) {
  StrId id = intern(name);
  if (auto it = interner_->op_by_name.find(id); it != interner_->op_by_name.end()) {
    return it->second;
  }
  OpFacts f = default_op_facts(name);
  OpInfo op;
  op.name = id;
  op.ns = intern(f.ns);
  op.packet = intern(f.packet);
  op.kind = f.kind;
  op.is_mutable = f.is_mutable;
  op.is_view = f.is_view;
  op.tags = f.tags;
  op.packet_tags = f.packet_tags;
  return add_op(op);
}

ArgId GraphBuilder::leaf(const Arg& a) {
  std::vector<Arg>& args = structure_->args;
  args.push_back(a);
  args.back().span = 1;
  return static_cast<ArgId>(args.size() - 1);
}

ArgId GraphBuilder::begin(ArgKind container) {
  Arg a;
  a.kind = container;
  structure_->args.push_back(a);
  ArgId id = static_cast<ArgId>(structure_->args.size() - 1);
  open_.push_back(id);
  return id;
}

void GraphBuilder::end(ArgId container) {
  if (open_.empty() || open_.back() != container) {
    throw Error(ErrorCode::kInternal, "GraphBuilder::end: containers closed out of order");
  }
  open_.pop_back();
  std::vector<Arg>& args = structure_->args;
  args[container].span = static_cast<uint32_t>(args.size() - container);
}

ArgId GraphBuilder::add_tree(const Graph& src, ArgId root, std::span<const NodeId> remap) {
  const std::span<const Arg> items(&src.arg(root), src.arg(root).span);
  std::vector<Arg>& args = structure_->args;
  const ArgId copy = static_cast<ArgId>(args.size());
  args.insert(args.end(), items.begin(), items.end());
  for (auto a = args.begin() + copy; a != args.end(); ++a) {
    if (a->kind != ArgKind::kNode) continue;
    if (a->id >= remap.size() || remap[a->id] == kNoNode) {
      const std::string used = a->id < src.size() ? std::string(src.name(a->id)) : "?";
      args.resize(copy);
      throw Error(ErrorCode::kInternal,
                  fmt::format("node '{}' is used but has no copy in the new graph", used));
    }
    a->id = remap[a->id];
  }
  return copy;
}

uint32_t GraphBuilder::add_dim(const Dim& d) { return g_.values_->add_dim(d); }
uint32_t GraphBuilder::add_tensor(const TensorMeta& t) { return g_.values_->add_tensor(t); }
uint32_t GraphBuilder::add_symbol(StrId s) { return g_.values_->add_symbol(s); }
uint32_t GraphBuilder::add_extra(const NodeExtra& e) { return g_.values_->add_extra(e); }

NodeId GraphBuilder::add_node(Node n, const NodeExtra& extra) {
  n.extra = extra == NodeExtra{} ? kNoExtra : add_extra(extra);
  return add_node(n);
}

NodeId GraphBuilder::add_node(const Node& n) {
  g_.nodes_.push_back(n);
  return static_cast<NodeId>(g_.nodes_.size() - 1);
}

namespace {

// Explains why `from` cannot precede `to`: either a cycle through both, or
// plain misordering. Iterative DFS so that long chains cannot overflow.
// `offsets`/`pool` hold each node's inputs in CSR form.
std::string describe_order_violation(const Graph& g, const std::vector<uint32_t>& offsets,
                                     const std::vector<NodeId>& pool, NodeId user, NodeId used) {
  // Search a path used -> ... -> user along input edges (user depends on used;
  // a cycle exists if used also depends on user).
  const size_t n = offsets.size() - 1;
  std::vector<NodeId> parent(n, kNoNode);
  std::vector<uint8_t> seen(n, 0);
  std::vector<NodeId> stack{used};
  seen[used] = 1;
  bool found = false;
  while (!stack.empty() && !found) {
    NodeId cur = stack.back();
    stack.pop_back();
    for (uint32_t k = offsets[cur]; k < offsets[cur + 1]; ++k) {
      const NodeId in = pool[k];
      if (in >= n || seen[in]) continue;
      seen[in] = 1;
      parent[in] = cur;
      if (in == user) {
        found = true;
        break;
      }
      stack.push_back(in);
    }
  }
  if (!found) {
    return fmt::format(
        "node '{}' uses '{}', which comes later: nodes must be in topological order",
        g.str(g.node(user).name), g.str(g.node(used).name));
  }
  // parent[] leads from user back up to used (each entry is a user of the
  // one before); reversed, it is the path used -> ... -> user in the order
  // "uses". Printed: user -> used (the offending edge), then on to user.
  std::vector<NodeId> chain;
  for (NodeId cur = user; cur != used; cur = parent[cur]) chain.push_back(parent[cur]);
  std::string text = fmt::format("'{}' -> ", g.name(user));
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) text += fmt::format("'{}' -> ", g.name(*it));
  text += fmt::format("'{}'", g.name(user));
  return fmt::format("cycle in graph: {} (each node uses the next)", text);
}

// Names: present and unique. Returns the node of each StrId (kNoNode: none).
std::vector<NodeId> index_names(const Graph& g) {
  std::vector<NodeId> by_name(g.strings().size(), kNoNode);
  for (NodeId id = 0; id < g.size(); ++id) {
    const StrId name = g.node(id).name;
    if (name == 0 || name >= by_name.size()) {
      throw Error(ErrorCode::kInvalidGraph, fmt::format("node #{}: field 'name' is empty", id));
    }
    if (by_name[name] != kNoNode) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("node '{}' (#{}): duplicate name (also node #{})", g.name(id), id,
                              by_name[name]));
    }
    by_name[name] = id;
  }
  return by_name;
}

// Output: exactly one, and last. Returns it.
NodeId find_output(const Graph& g) {
  NodeId output = kNoNode;
  for (NodeId id = 0; id < g.size(); ++id) {
    if (g.node(id).kind != NodeKind::kOutput) continue;
    if (output != kNoNode) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("node '{}': a second output node (the first is '{}')", g.name(id),
                              g.name(output)));
    }
    output = id;
  }
  if (output == kNoNode) {
    throw Error(ErrorCode::kInvalidGraph, "graph has no output node");
  }
  if (output != g.size() - 1) {
    throw Error(ErrorCode::kInvalidGraph,
                fmt::format("output node '{}' is not the last node", g.name(output)));
  }
  return output;
}

// Appends the node references of the argument tree at `root` (a node of
// `user`'s) to `pool`, first occurrence per user only; `last_seen` remembers
// which user last listed each node.
void add_tree_inputs(const Graph& g, const GraphStructure& s, NodeId user, ArgId root,
                     std::vector<NodeId>& last_seen, std::vector<NodeId>& pool) {
  if (root >= s.args.size()) {
    throw Error(ErrorCode::kInvalidGraph,
                fmt::format("node '{}': argument tree out of range", g.name(user)));
  }
  const ArgId stop = root + s.args[root].span;
  for (ArgId a = root; a < stop; ++a) {
    const Arg& arg = s.args[a];
    if (arg.kind != ArgKind::kNode) continue;
    if (arg.id >= g.size()) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("node '{}': field 'args' refers to node #{}, which does not exist",
                              g.name(user), arg.id));
    }
    if (arg.id == user) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("cycle in graph: node '{}' uses itself", g.name(user)));
    }
    if (last_seen[arg.id] != user) {
      last_seen[arg.id] = user;
      pool.push_back(arg.id);
    }
  }
}

// Inputs from argument trees: node references in pre-order, args before
// kwargs, first occurrence only (FX all_input_nodes), straight into the CSR
// pool s.input_pool. Returns each node's offset into it (n + 1 entries).
std::vector<uint32_t> collect_inputs(const Graph& g, GraphStructure& s) {
  const size_t n = g.size();
  s.input_pool.clear();
  std::vector<uint32_t> offsets(n + 1, 0);
  std::vector<NodeId> last_seen(n, kNoNode);
  for (NodeId id = 0; id < n; ++id) {
    const Node& node = g.node(id);
    for (ArgId root : {node.args, node.kwargs}) {
      if (root != kNoArg) add_tree_inputs(g, s, id, root, last_seen, s.input_pool);
    }
    offsets[id + 1] = static_cast<uint32_t>(s.input_pool.size());
  }
  return offsets;
}

// Every input comes before its user.
void check_order(const Graph& g, const std::vector<uint32_t>& offsets,
                 const std::vector<NodeId>& pool) {
  for (NodeId id = 0; id < g.size(); ++id) {
    for (uint32_t k = offsets[id]; k < offsets[id + 1]; ++k) {
      if (pool[k] > id) {
        throw Error(ErrorCode::kInvalidGraph, describe_order_violation(g, offsets, pool, id, pool[k]));
      }
    }
  }
}

// Users in CSR form (graph order): count, prefix-sum, fill; and each node's
// range of the input pool.
void link_users(std::vector<Node>& nodes, const std::vector<uint32_t>& offsets, GraphStructure& s) {
  const size_t n = nodes.size();
  s.user_offsets.assign(n + 1, 0);
  for (NodeId in : s.input_pool) ++s.user_offsets[in + 1];
  for (size_t i = 0; i < n; ++i) s.user_offsets[i + 1] += s.user_offsets[i];
  s.user_pool.assign(s.input_pool.size(), kNoNode);
  std::vector<uint32_t> fill(s.user_offsets.begin(), s.user_offsets.end() - 1);
  for (NodeId id = 0; id < n; ++id) {
    Node& node = nodes[id];
    node.inputs_begin = offsets[id];
    node.inputs_count = offsets[id + 1] - offsets[id];
    for (uint32_t k = offsets[id]; k < offsets[id + 1]; ++k) {
      s.user_pool[fill[s.input_pool[k]]++] = id;
    }
  }
}

}  // namespace

Graph GraphBuilder::finish() {
  if (!open_.empty()) {
    throw Error(ErrorCode::kInternal, "GraphBuilder::finish: an argument container is open");
  }
  Graph& g = g_;
  GraphStructure& s = *structure_;
  auto index = std::make_shared<Graph::Index>();
  index->node_by_name = index_names(g);
  g.output_ = find_output(g);
  const std::vector<uint32_t> offsets = collect_inputs(g, s);
  check_order(g, offsets, s.input_pool);
  link_users(g.nodes_, offsets, s);

  index->op_by_name = std::move(interner_->op_by_name);
  g.index_ = std::move(index);
  g.structure_ = std::move(structure_);
  structure_ = std::make_shared<GraphStructure>();
  Graph out = std::move(g_);
  g_ = Graph();
  g_.strings_ = out.strings_;  // a reused builder keeps interning into the same pools
  g_.values_ = out.values_;
  interner_ = std::make_unique<Interner>();
  return out;
}

Graph GraphBuilder::rearrange(const Graph& g, std::span<const NodeId> order,
                              std::span<const NodeId> alias) {
  const size_t n = g.size();
  std::vector<NodeId> remap(n, kNoNode);
  for (size_t k = 0; k < order.size(); ++k) remap[order[k]] = static_cast<NodeId>(k);
  if (!alias.empty()) {
    for (NodeId id = 0; id < n; ++id) {
      if (remap[id] == kNoNode && alias[id] < n) remap[id] = remap[alias[id]];
    }
  }

  GraphBuilder b;
  Graph& out = b.g_;
  out.strings_ = g.strings_;
  out.ops_ = g.ops_;
  out.values_ = g.values_;
  if (g.index_ != nullptr) b.interner_->op_by_name = g.index_->op_by_name;
  out.nodes_.reserve(order.size());
  b.structure_->args.reserve(g.structure_->args.size());
  for (NodeId id : order) {
    Node node = g.nodes_[id];
    if (node.origin == kNoNode) node.origin = id;
    for (ArgId* root : {&node.args, &node.kwargs}) {
      if (*root != kNoArg) *root = b.add_tree(g, *root, remap);
    }
    out.nodes_.push_back(node);
  }
  return b.finish();
}

ValuePool::ValuePool(std::shared_ptr<const ValuePool> parent) : parent_(std::move(parent)) {
  const Sizes below = parent_->sizes();
  tensors_.base = static_cast<uint32_t>(below.tensors);
  dims_.base = static_cast<uint32_t>(below.dims);
  symbols_.base = static_cast<uint32_t>(below.symbols);
  extras_.base = static_cast<uint32_t>(below.extras);
}

void Graph::layer_pools() {
  strings_ = std::make_shared<StringPool>(std::shared_ptr<const StringPool>(strings_));
  values_ = std::make_shared<ValuePool>(std::shared_ptr<const ValuePool>(values_));
}

std::vector<ArgId> Graph::children(ArgId id) const {
  std::vector<ArgId> out;
  const ArgId stop = id + arg(id).span;
  for (ArgId c = id + 1; c < stop; c += arg(c).span) out.push_back(c);
  return out;
}

OpId Graph::find_op(std::string_view name) const {
  StrId s = find_str(name);
  if (s == 0) return kNoOp;
  auto it = index_->op_by_name.find(s);
  return it == index_->op_by_name.end() ? kNoOp : it->second;
}

NodeId Graph::find(std::string_view name) const { return node_named(find_str(name)); }

NodeId Graph::node_named(StrId name) const {
  const std::vector<NodeId>& by_name = index_->node_by_name;
  return name == 0 || name >= by_name.size() ? kNoNode : by_name[name];
}

StrId Graph::find_str(std::string_view s) const {
  return strings_->find(s);
}

const char* node_kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::kPlaceholder: return "placeholder";
    case NodeKind::kCallFunction: return "call_function";
    case NodeKind::kGetAttr: return "get_attr";
    case NodeKind::kOutput: return "output";
  }
  return "?";
}

const char* value_kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::kMissing: return "missing";
    case ValueKind::kNone: return "none";
    case ValueKind::kTensor: return "tensor";
    case ValueKind::kSymInt: return "symint";
    case ValueKind::kSymFloat: return "symfloat";
    case ValueKind::kSymBool: return "symbool";
    case ValueKind::kSequence: return "sequence";
    case ValueKind::kDict: return "dict";
    case ValueKind::kScriptObject: return "script_object";
    case ValueKind::kOpaque: return "opaque";
    case ValueKind::kBackwardState: return "backward_state";
    case ValueKind::kConstant: return "constant";
    case ValueKind::kGenerator: return "generator";
    case ValueKind::kDevice: return "device";
  }
  return "?";
}

const char* recompute_policy_name(RecomputePolicy p) {
  switch (p) {
    case RecomputePolicy::kNone: return "NONE";
    case RecomputePolicy::kMustSave: return "MUST_SAVE";
    case RecomputePolicy::kPreferSave: return "PREFER_SAVE";
    case RecomputePolicy::kMustRecompute: return "MUST_RECOMPUTE";
    case RecomputePolicy::kPreferRecompute: return "PREFER_RECOMPUTE";
    case RecomputePolicy::kMustCpuOffload: return "MUST_CPU_OFFLOAD";
    case RecomputePolicy::kPreferCpuOffload: return "PREFER_CPU_OFFLOAD";
  }
  return "?";
}

const char* partitioner_tag_name(PartitionerTag t) {
  switch (t) {
    case PartitionerTag::kNone: return "";
    case PartitionerTag::kIsForward: return "is_forward";
    case PartitionerTag::kIsBackward: return "is_backward";
    case PartitionerTag::kMustBeInForward: return "must_be_in_forward";
    case PartitionerTag::kMustBeInBackward: return "must_be_in_backward";
    case PartitionerTag::kOther: return "other";
  }
  return "?";
}

const char* arg_kind_name(ArgKind k) {
  switch (k) {
    case ArgKind::kNone: return "none";
    case ArgKind::kBool: return "bool";
    case ArgKind::kInt: return "int";
    case ArgKind::kFloat: return "float";
    case ArgKind::kStr: return "str";
    case ArgKind::kNode: return "node";
    case ArgKind::kList: return "list";
    case ArgKind::kTuple: return "tuple";
    case ArgKind::kDict: return "dict";
    case ArgKind::kSlice: return "slice";
    case ArgKind::kDtype: return "dtype";
    case ArgKind::kDevice: return "device";
    case ArgKind::kLayout: return "layout";
    case ArgKind::kMemoryFormat: return "memory_format";
    case ArgKind::kTarget: return "target";
    case ArgKind::kOpaque: return "opaque";
  }
  return "?";
}

}  // namespace remat
