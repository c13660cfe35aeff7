// sync/canonical.cc — names for a graph's nodes that every rank agrees on
// (canonical_node_names, canonical_graph_digest in remat/sync.h).
//
// Contract: the same names and the same digests as torch's
// `_canonical_node_names` / `_cone_hashes` (2.13 on) and the hash in
// `_sync_decision_cross_ranks` (every release), bit for bit, with targets
// spelled as the release spells them (TargetSpelling): ranks running remat
// and ranks running torch exchange these strings and must recognise each
// other's.
// That is why the hashes below are SHA-256 over the text of Python tuples:
// torch hashes `str((self_key, user_hashes))`, and its heap orders ready
// nodes by Python's tuple comparison; both are spelled out here.
#include <nettle/sha2.h>

#include <algorithm>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "remat/error.h"
#include "remat/sync.h"
#include "sync/canonical.h"

namespace remat {
namespace {

// hashlib.sha256(text).hexdigest(), with Nettle's SHA-256.
std::string sha256_hex(std::string_view text) {
  sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, text.size(), reinterpret_cast<const uint8_t*>(text.data()));
  uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(&ctx, SHA256_DIGEST_SIZE, digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * SHA256_DIGEST_SIZE, '0');
  for (size_t i = 0; i < SHA256_DIGEST_SIZE; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return out;
}

// A placeholder's key material: torch keys tensors by (str(dtype),
// requires_grad), SymInts by ("symint",), anything else by ().
struct PlaceholderMeta {
  enum Kind : uint8_t { kTensor, kSymInt, kOther } kind = kOther;
  std::string dtype;  // "torch.float32" for kTensor
};

PlaceholderMeta placeholder_meta(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  PlaceholderMeta m;
  if (n.value == ValueKind::kTensor && n.tensors_count == 1) {
    m.kind = PlaceholderMeta::kTensor;
    m.dtype = fmt::format("torch.{}", g.str(g.tensors(id)[0].dtype));
  } else if (n.value == ValueKind::kSymInt) {
    m.kind = PlaceholderMeta::kSymInt;
  }
  return m;
}

// Python's str() of a tuple of already-printed items.
std::string py_tuple(const std::vector<std::string>& items) {
  std::string out = "(";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += items[i];
  }
  if (items.size() == 1) out += ',';
  out += ')';
  return out;
}

// torch's `_cone_hashes`: per node, SHA-256 of str((self_key, sorted user
// hashes)), from the output backwards.
std::vector<std::string> cone_hashes(const Graph& g, const std::vector<std::string>& targets) {
  std::vector<std::string> hashes(g.size());
  std::vector<std::string> self_key, users;
  for (NodeId id = static_cast<NodeId>(g.size()); id-- > 0;) {
    const Node& n = g.node(id);
    self_key.clear();
    if (n.kind == NodeKind::kPlaceholder) {
      self_key.push_back(py_repr("placeholder"));
      const PlaceholderMeta m = placeholder_meta(g, id);
      if (m.kind == PlaceholderMeta::kTensor) {
        self_key.push_back(py_repr(m.dtype));
        self_key.push_back("False");  // requires_grad, see remat/sync.h
      } else if (m.kind == PlaceholderMeta::kSymInt) {
        self_key.push_back(py_repr("symint"));
      }
    } else if (n.kind == NodeKind::kOutput) {
      self_key.push_back(py_repr("output"));
    } else {
      self_key.push_back(py_repr(node_kind_name(n.kind)));
      self_key.push_back(py_repr(targets[id]));
    }
    users.clear();
    for (NodeId u : g.users(id)) users.push_back(hashes[u]);
    std::sort(users.begin(), users.end());
    for (std::string& h : users) h = py_repr(h);
    hashes[id] = sha256_hex(py_tuple({py_tuple(self_key), py_tuple(users)}));
  }
  return hashes;
}

// The heap key of a ready node, compared as torch's Python tuples compare:
//   placeholder (0, meta_key, cone hash)   get_attr (1, target)
//   call        (2, target, canonical input indices)   output (3,)
// then by the order nodes became ready.
struct ReadyKey {
  int group = 0;
  PlaceholderMeta meta;        // group 0
  std::string_view text;       // group 0: cone hash; 1, 2: target
  std::vector<uint32_t> inputs;  // group 2
  uint64_t counter = 0;
  NodeId node = kNoNode;
};

// Python's comparison of the placeholder meta keys () < ("symint",) and
// (dtype, False): element by element (strings, then the bool), then length.
int compare_meta(const PlaceholderMeta& a, const PlaceholderMeta& b) {
  auto first = [](const PlaceholderMeta& m) -> std::string_view {
    return m.kind == PlaceholderMeta::kTensor ? std::string_view(m.dtype) : "symint";
  };
  auto length = [](const PlaceholderMeta& m) {
    return m.kind == PlaceholderMeta::kTensor ? 2 : m.kind == PlaceholderMeta::kSymInt ? 1 : 0;
  };
  const int la = length(a), lb = length(b);
  if (la && lb) {
    if (int c = first(a).compare(first(b))) return c < 0 ? -1 : 1;
    // Both tensors with equal dtypes: requires_grad is False for both.
  }
  return la < lb ? -1 : la > lb ? 1 : 0;
}

// True when a should pop after b (std::priority_queue is a max-heap).
struct PopsLater {
  bool operator()(const ReadyKey& a, const ReadyKey& b) const {
    if (a.group != b.group) return a.group > b.group;
    int c = 0;
    if (a.group == 0) {
      c = compare_meta(a.meta, b.meta);
      if (c == 0) c = a.text.compare(b.text);
    } else if (a.group == 1 || a.group == 2) {
      c = a.text.compare(b.text);
      if (c == 0 && a.group == 2 && a.inputs != b.inputs) c = a.inputs < b.inputs ? -1 : 1;
    }
    if (c != 0) return c > 0;
    return a.counter > b.counter;
  }
};

}  // namespace

std::string py_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(quote)) { out += '\\'; out += quote; }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  out += quote;
  return out;
}

std::string default_target_repr(std::string_view qualified) {
  for (std::string_view module : {"operator.", "math.", "builtins."}) {
    if (qualified.substr(0, module.size()) == module)
      return fmt::format("<built-in function {}>", qualified.substr(module.size()));
  }
  return fmt::format("<function {}>", qualified);
}

// FX's _get_qualified_name of a Python callable from the IR's name of it
// ("{module}.{qualname}", the operator module spelled "operator"):
// operator's functions live in _operator, and builtins go bare.
std::string default_qualified_name(std::string_view qualified) {
  constexpr std::string_view kOperator = "operator.", kBuiltins = "builtins.";
  if (qualified.substr(0, kOperator.size()) == kOperator)
    return fmt::format("_operator.{}", qualified.substr(kOperator.size()));
  if (qualified.substr(0, kBuiltins.size()) == kBuiltins)
    return std::string(qualified.substr(kBuiltins.size()));
  return std::string(qualified);
}

std::string RankGroup::target_repr(std::string_view qualified) const {
  return default_target_repr(qualified);
}

std::string RankGroup::target_qualified_name(std::string_view qualified) const {
  return default_qualified_name(qualified);
}

void RankGroup::agreed(int, const std::string&) {}

namespace {

// Python's str() of a call_function target, named `name` by the IR.
std::string str_of_target(const OpInfo& op, std::string_view name, const RankGroup* group) {
  switch (op.kind) {
    case OpKind::kOverload:
    case OpKind::kPacket: return std::string(name);  // "aten.mm.default", "aten.rand"
    case OpKind::kHigherOrder: {
      // str() of a HigherOrderOperator is its bare name.
      constexpr std::string_view kPrefix = "higher_order.";
      return std::string(name.substr(0, kPrefix.size()) == kPrefix ? name.substr(kPrefix.size())
                                                                    : name);
    }
    case OpKind::kFunction:
      return group ? group->target_repr(name) : default_target_repr(name);
  }
  return std::string(name);
}

// torch 2.14's _stable_target_str of a call_function target: FX's qualified
// name, where operators live in torch.ops ("torch.ops.aten.mm.default",
// "torch.ops.higher_order.invoke_subgraph").
std::string qualified_target(const OpInfo& op, std::string_view name, const RankGroup* group) {
  switch (op.kind) {
    case OpKind::kOverload:
    case OpKind::kPacket:
    case OpKind::kHigherOrder: return fmt::format("torch.ops.{}", name);
    case OpKind::kFunction:
      return group ? group->target_qualified_name(name) : default_qualified_name(name);
  }
  return std::string(name);
}

}  // namespace

std::vector<std::string> python_targets(const Graph& g, const RankGroup* group,
                                        TargetSpelling spelling) {
  std::vector<std::string> out(g.size());
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    const OpInfo* op = g.op(id);
    // Strings (get_attr's attribute, "output", a placeholder's name) print
    // as themselves either way.
    if (n.kind != NodeKind::kCallFunction || op == nullptr) {
      out[id] = g.str(n.target);
      continue;
    }
    const std::string_view name = g.str(op->name);
    out[id] = spelling == TargetSpelling::kQualified ? qualified_target(*op, name, group)
                                                     : str_of_target(*op, name, group);
  }
  return out;
}

std::vector<std::string> canonical_node_names(const Graph& g, const RankGroup* group,
                                              TargetSpelling spelling) {
  const size_t n = g.size();
  const std::vector<std::string> targets = python_targets(g, group, spelling);
  const std::vector<std::string> cone = cone_hashes(g, targets);

  // Kahn's algorithm; a node's in-degree is its number of distinct inputs.
  std::vector<uint32_t> indeg(n, 0);
  for (NodeId id = 0; id < n; ++id) indeg[id] = static_cast<uint32_t>(g.inputs(id).size());
  std::vector<uint32_t> index(n, 0);  // canonical position, once popped
  uint64_t counter = 0;
  auto key_of = [&](NodeId id) {
    ReadyKey k;
    k.node = id;
    k.counter = counter++;
    switch (g.node(id).kind) {
      case NodeKind::kPlaceholder:
        k.group = 0;
        k.meta = placeholder_meta(g, id);
        k.text = cone[id];
        break;
      case NodeKind::kGetAttr:
        k.group = 1;
        k.text = targets[id];
        break;
      case NodeKind::kOutput:
        k.group = 3;
        break;
      case NodeKind::kCallFunction:
        k.group = 2;
        k.text = targets[id];
        for (NodeId in : g.inputs(id)) k.inputs.push_back(index[in]);
        break;
    }
    return k;
  };
  std::priority_queue<ReadyKey, std::vector<ReadyKey>, PopsLater> ready;
  for (NodeId id = 0; id < n; ++id) {
    if (indeg[id] == 0) ready.push(key_of(id));
  }
  std::vector<std::string> names(n);
  uint32_t next = 0;
  while (!ready.empty()) {
    const NodeId cur = ready.top().node;
    ready.pop();
    index[cur] = next;
    names[cur] = fmt::format("node_{}", next++);
    for (NodeId u : g.users(cur)) {
      if (--indeg[u] == 0) ready.push(key_of(u));
    }
  }
  if (next != n) {
    throw Error(ErrorCode::kInternal, "internal error: canonical naming left nodes unnamed");
  }
  return names;
}

std::string canonical_graph_digest(const Graph& g, const std::vector<std::string>& names,
                                   const RankGroup* group, TargetSpelling spelling) {
  const std::vector<std::string> targets = python_targets(g, group, spelling);
  std::vector<NodeId> order(g.size());
  for (NodeId id = 0; id < g.size(); ++id) order[id] = id;
  // By name as a string, as torch sorts them ("node_10" before "node_2").
  std::sort(order.begin(), order.end(),
            [&](NodeId a, NodeId b) { return names[a] < names[b]; });
  std::string text;
  for (NodeId id : order) {
    if (!text.empty()) text += '/';
    const Node& n = g.node(id);
    text += names[id];
    text += ':';
    text += node_kind_name(n.kind);
    if (n.kind != NodeKind::kPlaceholder) {
      text += ':';
      text += targets[id];
    }
  }
  return sha256_hex(text);
}

std::string node_name_digest(const Graph& g) {
  std::string text;
  for (NodeId id = 0; id < g.size(); ++id) {
    if (id) text += '/';
    text += g.name(id);
  }
  return sha256_hex(text);
}

bool has_functional_collectives(const Graph& g) {
  for (NodeId id = 0; id < g.size(); ++id) {
    const OpInfo* op = g.op(id);
    if (op == nullptr || op->kind != OpKind::kOverload) continue;
    const std::string_view ns = g.str(op->ns);
    if (ns == "_c10d_functional" || ns == "c10d_functional") return true;
  }
  return false;
}

}  // namespace remat
