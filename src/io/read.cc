// io/read.cc — reads a joint graph from JSON format v1 (docs/format.md).
//
// Contract: read_joint_graph parses with simdjson's DOM parser (one pass over
// the text builds a compact tape; our two passes then walk the tape, not the
// text) and builds the Graph through GraphBuilder. Pass 1 maps every node name
// to its id, so a reference can be resolved wherever it points and a dangling
// one is reported by name; pass 2 builds ops and nodes. GraphBuilder::finish
// then checks order, cycles and the output node. Every rejection is a
// remat::Error whose message starts with the node (by name, or by index when
// it has none) or op at fault and names the field: kParse for text that is not
// JSON or a field of the wrong type or an unknown enum value, kInvalidGraph
// for a well-typed document that breaks a graph invariant, kUnsupported for a
// format version other than 1. Nesting is bounded by simdjson's depth limit,
// so no input can exhaust the stack.
#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "graph/dtypes.h"
#include "io/categories.h"
#include "io/file.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/ops.h"
#include "remat/torch_release.h"

namespace remat {

namespace {

namespace dom = simdjson::dom;
using simdjson::dom::element_type;

constexpr int64_t kUnhintedNumel = 4096;  // torch's size_hint fallback

const char* json_type_name(element_type t) {
  switch (t) {
    case element_type::ARRAY: return "an array";
    case element_type::OBJECT: return "an object";
    case element_type::INT64: return "an integer";
    case element_type::UINT64: return "an integer";
    case element_type::DOUBLE: return "a float";
    case element_type::STRING: return "a string";
    case element_type::BOOL: return "a bool";
    case element_type::NULL_VALUE: return "null";
  }
  return "a value";
}

struct OpFields;  // one "ops" entry, by key

class Reader {
 public:
  JointGraph read(dom::element root);
  // One nested graph module ("subgraphs" entry): its nodes against the
  // document's op table, errors prefixed with the subgraph's name.
  NestedGraph read_nested(dom::element e, std::optional<dom::element> ops, size_t index);

 private:
  // --- error reporting: "<where>: field '<field>': <what>" -------------------
  std::string where() const {
    if (node_ != kNoNode) {
      return context_ + (node_name_.empty() ? fmt::format("node #{}", node_)
                                            : fmt::format("node '{}'", node_name_));
    }
    if (op_ != kNoOp) {
      return op_name_.empty() ? fmt::format("op #{}", op_) : fmt::format("op '{}'", op_name_);
    }
    return context_.empty() ? "joint graph" : context_.substr(0, context_.size() - 2);
  }
  [[noreturn]] void fail(ErrorCode code, std::string_view field, std::string_view what) const {
    throw Error(code, fmt::format("{}: field '{}': {}", where(), field, what));
  }
  [[noreturn]] void type_error(std::string_view field, dom::element e, const char* expected) const {
    fail(ErrorCode::kParse, field,
         fmt::format("expected {}, got {}", expected, json_type_name(e.type())));
  }

  // --- typed access ---------------------------------------------------------
  // These return by value: a range-for directly over
  // `e.get_array().value_unsafe()` would iterate a reference into a destroyed
  // temporary.
  std::string_view as_string(dom::element e, std::string_view field) const {
    if (e.type() != element_type::STRING) type_error(field, e, "a string");
    return e.get_string().value_unsafe();
  }
  bool as_bool(dom::element e, std::string_view field) const {
    if (e.type() != element_type::BOOL) type_error(field, e, "a bool");
    return e.get_bool().value_unsafe();
  }
  int64_t as_int(dom::element e, std::string_view field) const {
    if (e.type() == element_type::UINT64) {
      fail(ErrorCode::kInvalidGraph, field,
           fmt::format("integer {} does not fit in a signed 64-bit integer",
                       e.get_uint64().value_unsafe()));
    }
    if (e.type() != element_type::INT64) type_error(field, e, "an integer");
    return e.get_int64().value_unsafe();
  }
  double as_number(dom::element e, std::string_view field) const {
    switch (e.type()) {
      case element_type::INT64: return static_cast<double>(e.get_int64().value_unsafe());
      case element_type::UINT64: return static_cast<double>(e.get_uint64().value_unsafe());
      case element_type::DOUBLE: return e.get_double().value_unsafe();
      default: type_error(field, e, "a number");
    }
  }
  dom::array as_array(dom::element e, std::string_view field) const {
    if (e.type() != element_type::ARRAY) type_error(field, e, "an array");
    return e.get_array().value_unsafe();
  }
  dom::object as_object(dom::element e, std::string_view field) const {
    if (e.type() != element_type::OBJECT) type_error(field, e, "an object");
    return e.get_object().value_unsafe();
  }
  int as_small_int(dom::element e, std::string_view field, int lo) const {
    const int64_t v = as_int(e, field);
    if (v < lo || v > std::numeric_limits<int>::max()) {
      fail(ErrorCode::kInvalidGraph, field, fmt::format("{} is out of range", v));
    }
    return static_cast<int>(v);
  }

  // --- parts ------------------------------------------------------------------
  void read_ops(dom::array ops);
  void read_op(const OpFields& f);
  OpKind read_op_kind(dom::element e) const;
  uint8_t read_op_tags(dom::element e, std::string_view field) const;
  void read_dropout_p(dom::element e, OpInfo& info) const;
  void record_op_categories(dom::element e, std::string key);
  Graph read_nodes(dom::array nodes);
  std::vector<NodeId> read_mutated_inputs(dom::element list, const Graph& g);
  std::string read_torch_version(dom::element e);
  void collect_names(dom::array nodes);
  void read_node(dom::element e);
  void read_args(dom::element e, bool kwargs);
  void read_arg(dom::element e, std::string_view field);
  void read_tagged_arg(dom::object o, std::string_view field);
  void read_container_arg(std::string_view tag, dom::element v, std::string_view field);
  double read_float_arg(dom::element v, std::string_view field) const;
  double read_nan_bits(dom::element v, double value, std::string_view field) const;
  StrId read_custom_context(dom::element v);
  void read_value(dom::element e, Node& n);
  void read_container_value(dom::object o, ValueKind kind);
  void read_sym_value(dom::object o, ValueKind kind);
  void read_generator_value(dom::object o);
  std::vector<std::string_view> read_symbol_names(dom::element e, std::string_view field) const;
  void read_unreplaced_symbols(dom::element e, const std::vector<std::string_view>& replaced);
  StrId read_device_value(dom::object o);
  void check_nested_value(dom::element e, std::string_view field);
  void read_tensor(dom::object o, std::string_view field, int32_t index, bool record);
  uint16_t read_itemsize(std::string_view dtype, std::optional<dom::element> itemsize,
                         const std::string& f) const;
  int64_t numel_of_shape(const std::string& f) const;
  Dim read_dim(dom::element e, std::string_view field, bool size);
  StrId read_nested_int(dom::element e, std::string_view field);
  void read_meta(dom::element e, Node& n);
  NodeId resolve(std::string_view name, std::string_view field);

  GraphBuilder b_;
  std::string context_;  // "subgraph 'name': " while reading a nested graph
  std::vector<NodeId> node_of_name_;  // by the name's StrId
  std::vector<StrId> name_of_node_;   // by NodeId
  std::unordered_map<std::string_view, OpId> ops_;    // the "ops" table
  std::vector<std::pair<std::string, uint8_t>> overrides_;
  std::unordered_map<std::string, uint8_t> override_by_key_;
  NodeId node_ = kNoNode;
  std::string_view node_name_;
  NodeExtra extra_;  // of the node being read
  OpId op_ = kNoOp;
  std::string_view op_name_;
  std::vector<Dim> shape_, stride_;  // scratch, reused across tensors
};

// --- the document -------------------------------------------------------------

JointGraph Reader::read(dom::element root) {
  dom::object top = as_object(root, "(document)");
  std::optional<dom::element> format, version, num_fwd, statics, ops, nodes, subgraphs, mutated,
      torch_version;
  for (dom::key_value_pair kv : top) {
    if (kv.key == "format") format = kv.value;
    else if (kv.key == "version") version = kv.value;
    else if (kv.key == "num_fwd_outputs") num_fwd = kv.value;
    else if (kv.key == "static_lifetime_input_indices") statics = kv.value;
    else if (kv.key == "ops") ops = kv.value;
    else if (kv.key == "nodes") nodes = kv.value;
    else if (kv.key == "subgraphs") subgraphs = kv.value;
    else if (kv.key == "mutated_inputs") mutated = kv.value;
    else if (kv.key == "torch_version") torch_version = kv.value;
  }
  if (!format) fail(ErrorCode::kParse, "format", "missing (expected \"remat.joint_graph\")");
  const std::string_view fmt_name = as_string(*format, "format");
  if (fmt_name != "remat.joint_graph") {
    fail(ErrorCode::kParse, "format",
         fmt::format("expected \"remat.joint_graph\", got \"{}\"", fmt_name));
  }
  if (!version) fail(ErrorCode::kParse, "version", "missing");
  if (version->type() != element_type::INT64 || version->get_int64().value_unsafe() != kFormatVersion) {
    const std::string got = version->type() == element_type::INT64
                                ? std::to_string(version->get_int64().value_unsafe())
                                : std::string(json_type_name(version->type()));
    throw Error(ErrorCode::kUnsupported,
                fmt::format("joint graph: field 'version': unsupported format version {} "
                            "(this remat reads version {})",
                            got, kFormatVersion));
  }

  JointGraph out;
  if (!num_fwd) fail(ErrorCode::kParse, "num_fwd_outputs", "missing");
  out.num_fwd_outputs = as_small_int(*num_fwd, "num_fwd_outputs", 0);
  if (statics) {
    for (dom::element e : as_array(*statics, "static_lifetime_input_indices")) {
      out.static_lifetime_input_indices.push_back(
          as_small_int(e, "static_lifetime_input_indices", 0));
    }
  }
  if (!nodes) fail(ErrorCode::kParse, "nodes", "missing");
  dom::array node_list = as_array(*nodes, "nodes");
  if (node_list.size() >= kNoNode) fail(ErrorCode::kUnsupported, "nodes", "too many nodes");

  if (ops) read_ops(as_array(*ops, "ops"));
  out.graph = read_nodes(node_list);
  out.op_overrides = std::move(overrides_);
  if (mutated) out.mutated_inputs = read_mutated_inputs(*mutated, out.graph);
  if (torch_version) out.torch_version = read_torch_version(*torch_version);
  if (subgraphs) {
    size_t index = 0;
    for (dom::element e : as_array(*subgraphs, "subgraphs")) {
      out.nested.push_back(Reader().read_nested(e, ops, index++));
    }
  }
  return out;
}

Graph Reader::read_nodes(dom::array node_list) {
  collect_names(node_list);
  NodeId id = 0;
  for (dom::element e : node_list) {
    node_ = id++;
    node_name_ = {};
    read_node(e);
  }
  node_ = kNoNode;
  return b_.finish();
}

NestedGraph Reader::read_nested(dom::element e, std::optional<dom::element> ops, size_t index) {
  context_ = fmt::format("subgraphs[{}]: ", index);
  dom::object o = as_object(e, "subgraphs");
  dom::element name, nodes;
  if (o.at_key("name").get(name) != simdjson::SUCCESS) fail(ErrorCode::kParse, "name", "missing");
  NestedGraph out;
  out.name = std::string(as_string(name, "name"));
  if (out.name.empty()) fail(ErrorCode::kInvalidGraph, "name", "empty");
  context_ = fmt::format("subgraph '{}': ", out.name);
  if (o.at_key("nodes").get(nodes) != simdjson::SUCCESS) fail(ErrorCode::kParse, "nodes", "missing");
  dom::array node_list = as_array(nodes, "nodes");
  if (node_list.size() >= kNoNode) fail(ErrorCode::kUnsupported, "nodes", "too many nodes");
  if (ops) read_ops(as_array(*ops, "ops"));
  try {
    out.graph = read_nodes(node_list);
  } catch (const Error& err) {
    // GraphBuilder::finish names the node but not the graph it is in.
    const std::string what = err.what();
    if (what.rfind(context_, 0) == 0) throw;
    throw Error(err.code(), context_ + what);
  }
  return out;
}

// "mutated_inputs": names of placeholders, each at most once.
std::vector<NodeId> Reader::read_mutated_inputs(dom::element list, const Graph& g) {
  std::vector<NodeId> out;
  for (dom::element e : as_array(list, "mutated_inputs")) {
    const std::string_view name = as_string(e, "mutated_inputs");
    const NodeId id = g.find(name);
    if (id == kNoNode || g.node(id).kind != NodeKind::kPlaceholder)
      fail(ErrorCode::kInvalidGraph, "mutated_inputs",
           fmt::format("'{}' is not a placeholder of the graph", name));
    out.push_back(id);
  }
  std::sort(out.begin(), out.end());
  const auto twice = std::adjacent_find(out.begin(), out.end());
  if (twice != out.end())
    fail(ErrorCode::kInvalidGraph, "mutated_inputs",
         fmt::format("'{}' is listed twice", g.name(*twice)));
  return out;
}

// "torch_version": torch.__version__ at capture. Any release is read (a
// graph from a newer torch is still a graph); whether remat reproduces that
// release is the front door's question (default_options).
std::string Reader::read_torch_version(dom::element e) {
  const std::string_view text = as_string(e, "torch_version");
  if (!parse_torch_version(text)) {
    fail(ErrorCode::kParse, "torch_version",
         fmt::format("\"{}\" is not a torch version (such as \"2.15.0\")", text));
  }
  return std::string(text);
}

// The fields of one "ops" entry, by key; unknown keys are ignored.
struct OpFields {
  std::optional<dom::element> name, kind, ns, packet, is_mut, view, returns, tags, packet_tags,
      mutable_args, categories, dropout_p;
};

OpFields op_fields(dom::object o) {
  OpFields f;
  for (dom::key_value_pair kv : o) {
    const std::string_view k = kv.key;
    if (k == "name") f.name = kv.value;
    else if (k == "kind") f.kind = kv.value;
    else if (k == "namespace") f.ns = kv.value;
    else if (k == "packet") f.packet = kv.value;
    else if (k == "mutable") f.is_mut = kv.value;
    else if (k == "view") f.view = kv.value;
    else if (k == "returns") f.returns = kv.value;
    else if (k == "tags") f.tags = kv.value;
    else if (k == "packet_tags") f.packet_tags = kv.value;
    else if (k == "mutable_args") f.mutable_args = kv.value;
    else if (k == "categories") f.categories = kv.value;
    else if (k == "dropout_p") f.dropout_p = kv.value;
  }
  return f;
}

void Reader::read_ops(dom::array ops) {
  OpId index = 0;
  for (dom::element e : ops) {
    op_ = index++;
    op_name_ = {};
    read_op(op_fields(as_object(e, "ops")));
  }
  op_ = kNoOp;
  op_name_ = {};
}

void Reader::read_op(const OpFields& f) {
  if (!f.name) fail(ErrorCode::kParse, "name", "missing");
  op_name_ = as_string(*f.name, "name");
  if (op_name_.empty()) fail(ErrorCode::kParse, "name", "empty");
  if (ops_.count(op_name_)) {
    fail(ErrorCode::kInvalidGraph, "name", "the op is listed twice in 'ops'");
  }
  // Fields left out take the facts remat derives from the name.
  const OpFacts facts = default_op_facts(op_name_);
  OpInfo info;
  info.name = b_.intern(op_name_);
  info.kind = f.kind ? read_op_kind(*f.kind) : facts.kind;
  info.ns = b_.intern(f.ns ? as_string(*f.ns, "namespace") : std::string_view(facts.ns));
  info.packet = b_.intern(f.packet ? as_string(*f.packet, "packet") : std::string_view(facts.packet));
  info.is_mutable = f.is_mut ? as_bool(*f.is_mut, "mutable") : facts.is_mutable;
  info.is_view = f.view ? as_bool(*f.view, "view") : facts.is_view;
  if (f.returns && f.returns->type() != element_type::NULL_VALUE) {
    const int64_t r = as_int(*f.returns, "returns");
    if (r < -1 || r > std::numeric_limits<int16_t>::max()) {
      fail(ErrorCode::kInvalidGraph, "returns", fmt::format("{} is out of range", r));
    }
    info.num_returns = static_cast<int16_t>(r);
  }
  info.tags = f.tags ? read_op_tags(*f.tags, "tags") : facts.tags;
  info.packet_tags = f.packet_tags ? read_op_tags(*f.packet_tags, "packet_tags") : facts.packet_tags;
  if (f.dropout_p && f.dropout_p->type() != element_type::NULL_VALUE) {
    read_dropout_p(*f.dropout_p, info);
  }
  std::vector<std::string> margs;
  if (f.mutable_args) {
    for (dom::element x : as_array(*f.mutable_args, "mutable_args")) {
      margs.emplace_back(as_string(x, "mutable_args"));
    }
  }
  if (f.categories) {
    // The registry is keyed by packet (torch's get_aten_target).
    std::string key = f.packet ? std::string(as_string(*f.packet, "packet")) : facts.packet;
    if (key.empty()) key = std::string(op_name_);
    record_op_categories(*f.categories, std::move(key));
  }
  ops_.emplace(op_name_, b_.add_op(info, margs));
}

OpKind Reader::read_op_kind(dom::element e) const {
  const std::string_view k = as_string(e, "kind");
  if (k == "overload") return OpKind::kOverload;
  if (k == "higher_order") return OpKind::kHigherOrder;
  if (k == "function") return OpKind::kFunction;
  if (k == "packet") return OpKind::kPacket;
  fail(ErrorCode::kParse, "kind",
       fmt::format("unknown op kind '{}' (expected overload, higher_order, function or packet)", k));
}

// "dropout_p": {"index": 3, "default": 0.0}: the schema argument named
// dropout_p, its position and its default (null or absent: none).
void Reader::read_dropout_p(dom::element e, OpInfo& info) const {
  std::optional<dom::element> index, fallback;
  for (dom::key_value_pair kv : as_object(e, "dropout_p")) {
    if (kv.key == "index") index = kv.value;
    else if (kv.key == "default") fallback = kv.value;
  }
  if (!index) fail(ErrorCode::kParse, "dropout_p.index", "missing");
  const int64_t i = as_int(*index, "dropout_p.index");
  if (i < 0 || i > std::numeric_limits<int16_t>::max()) {
    fail(ErrorCode::kInvalidGraph, "dropout_p.index", fmt::format("{} is out of range", i));
  }
  info.dropout_p_index = static_cast<int16_t>(i);
  if (fallback && fallback->type() != element_type::NULL_VALUE) {
    info.dropout_p_has_default = true;
    info.dropout_p_default = read_float_arg(*fallback, "dropout_p.default");
  }
}

uint8_t Reader::read_op_tags(dom::element e, std::string_view field) const {
  uint8_t bits = 0;
  for (dom::element x : as_array(e, field)) {
    const std::string_view s = as_string(x, field);
    // Other torch tags ("core", "pt2_compliant_tag", ...) are not read by
    // the partitioner and are ignored.
    if (s == "pointwise") bits |= kTagPointwise;
    else if (s == "nondeterministic_seeded") bits |= kTagNondeterministicSeeded;
  }
  return bits;
}

// An op's "categories": recorded as an override of the registry entry `key`,
// which every op of that key must give the same way.
void Reader::record_op_categories(dom::element e, std::string key) {
  const uint8_t bits =
      io::read_op_categories(e, [&](std::string_view why) { fail(ErrorCode::kParse, "categories", why); });
  auto [it, inserted] = override_by_key_.try_emplace(key, bits);
  if (!inserted && it->second != bits) {
    fail(ErrorCode::kInvalidGraph, "categories",
         fmt::format("conflicts with the categories another op gives its packet '{}'", key));
  }
  if (inserted) overrides_.emplace_back(std::move(key), bits);
}

void Reader::collect_names(dom::array nodes) {
  name_of_node_.reserve(nodes.size());
  NodeId id = 0;
  for (dom::element e : nodes) {
    node_ = id;
    node_name_ = {};
    dom::object o = as_object(e, "nodes");
    dom::element name;
    if (o.at_key("name").get(name) != simdjson::SUCCESS) fail(ErrorCode::kParse, "name", "missing");
    const std::string_view s = as_string(name, "name");
    if (s.empty()) fail(ErrorCode::kInvalidGraph, "name", "empty");
    const StrId sid = b_.intern(s);
    if (sid >= node_of_name_.size()) node_of_name_.resize(2 * sid + 1024, kNoNode);
    if (node_of_name_[sid] != kNoNode) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("node '{}' (#{}): field 'name': duplicate name (also node #{})", s,
                              id, node_of_name_[sid]));
    }
    node_of_name_[sid] = id;
    name_of_node_.push_back(sid);
    ++id;
  }
  node_ = kNoNode;
}

NodeId Reader::resolve(std::string_view name, std::string_view field) {
  // Every node name is interned already; a name that is not ends the read.
  const StrId sid = b_.intern(name);
  if (sid >= node_of_name_.size() || node_of_name_[sid] == kNoNode) {
    fail(ErrorCode::kInvalidGraph, field,
         fmt::format("refers to '{}', which does not exist", name));
  }
  return node_of_name_[sid];
}

// --- nodes ----------------------------------------------------------------------

void Reader::read_node(dom::element e) {
  dom::object o = e.get_object().value_unsafe();  // checked by collect_names
  std::optional<dom::element> name, op, target, args, kwargs, val, tensor_meta, free_symbols,
      binds_symbol, impure, stream_sync, meta, free_symbols_unreplaced,
      binds_symbol_unreplaced;
  for (dom::key_value_pair kv : o) {
    const std::string_view k = kv.key;
    if (k == "name") name = kv.value;
    else if (k == "op") op = kv.value;
    else if (k == "target") target = kv.value;
    else if (k == "args") args = kv.value;
    else if (k == "kwargs") kwargs = kv.value;
    else if (k == "val") val = kv.value;
    else if (k == "tensor_meta") tensor_meta = kv.value;
    else if (k == "free_symbols") free_symbols = kv.value;
    else if (k == "binds_symbol") binds_symbol = kv.value;
    else if (k == "free_symbols_unreplaced") free_symbols_unreplaced = kv.value;
    else if (k == "binds_symbol_unreplaced") binds_symbol_unreplaced = kv.value;
    else if (k == "impure") impure = kv.value;
    else if (k == "stream_sync") stream_sync = kv.value;
    else if (k == "meta") meta = kv.value;
    // "origin" (result graphs) and unknown keys are ignored.
  }
  node_name_ = name->get_string().value_unsafe();  // checked by collect_names

  Node n;
  extra_ = NodeExtra{};
  n.name = name_of_node_[b_.next_id()];
  if (!op) fail(ErrorCode::kParse, "op", "missing");
  const std::string_view kind = as_string(*op, "op");
  if (kind == "call_function") n.kind = NodeKind::kCallFunction;
  else if (kind == "placeholder") n.kind = NodeKind::kPlaceholder;
  else if (kind == "output") n.kind = NodeKind::kOutput;
  else if (kind == "get_attr") n.kind = NodeKind::kGetAttr;
  else {
    fail(ErrorCode::kParse, "op",
         fmt::format("unknown node op '{}' (expected placeholder, call_function, get_attr or "
                     "output)",
                     kind));
  }
  if (!target) fail(ErrorCode::kParse, "target", "missing");
  const std::string_view tgt = as_string(*target, "target");
  n.target = b_.intern(tgt);
  if (n.kind == NodeKind::kCallFunction) {
    if (tgt.empty()) fail(ErrorCode::kInvalidGraph, "target", "empty op name");
    auto it = ops_.find(tgt);
    n.op = it != ops_.end() ? it->second : b_.add_op_by_name(tgt);
    if (tgt == "higher_order.with_effects") n.flags |= kFlagWithEffects;
  }

  // FX always has an args tuple and a kwargs dict; so does every read node.
  n.args = b_.begin(ArgKind::kTuple);
  if (args) read_args(*args, false);
  b_.end(n.args);
  n.kwargs = b_.begin(ArgKind::kDict);
  if (kwargs) read_args(*kwargs, true);
  b_.end(n.kwargs);

  if (val) read_value(*val, n);
  if (tensor_meta && as_bool(*tensor_meta, "tensor_meta")) n.flags |= kFlagTensorMeta;
  if (impure && as_bool(*impure, "impure")) n.flags |= kFlagImpure;
  if (stream_sync && as_bool(*stream_sync, "stream_sync")) n.flags |= kFlagStreamSync;
  std::vector<std::string_view> names;
  if (free_symbols) names = read_symbol_names(*free_symbols, "free_symbols");
  n.symbols_begin = static_cast<uint32_t>(b_.symbol_count());
  n.symbols_count = static_cast<uint32_t>(names.size());
  for (std::string_view s : names) b_.add_symbol(b_.intern(s));
  if (binds_symbol && binds_symbol->type() != element_type::NULL_VALUE) {
    extra_.binds_symbol = b_.intern(as_string(*binds_symbol, "binds_symbol"));
  }
  if (free_symbols_unreplaced) read_unreplaced_symbols(*free_symbols_unreplaced, names);
  if (binds_symbol_unreplaced) {
    // Present: the raw expression's answer, null for "binds nothing".
    extra_.binds_unreplaced_differs = true;
    if (binds_symbol_unreplaced->type() != element_type::NULL_VALUE) {
      extra_.binds_unreplaced =
          b_.intern(as_string(*binds_symbol_unreplaced, "binds_symbol_unreplaced"));
    }
  }
  if (meta) read_meta(*meta, n);
  b_.add_node(n, extra_);
}

// A list of symbol names, sorted and distinct as the IR keeps them (any
// input order is accepted).
std::vector<std::string_view> Reader::read_symbol_names(dom::element e, std::string_view field) const {
  std::vector<std::string_view> names;
  for (dom::element x : as_array(e, field)) names.push_back(as_string(x, field));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

// "free_symbols_unreplaced": the symbols of the value's raw expressions;
// the IR keeps those free_symbols (`replaced`, sorted) lacks.
void Reader::read_unreplaced_symbols(dom::element e, const std::vector<std::string_view>& replaced) {
  std::vector<std::string_view> raw = read_symbol_names(e, "free_symbols_unreplaced");
  extra_.unreplaced_symbols_begin = static_cast<uint32_t>(b_.symbol_count());
  for (std::string_view s : raw) {
    if (std::binary_search(replaced.begin(), replaced.end(), s)) continue;
    b_.add_symbol(b_.intern(s));
    ++extra_.unreplaced_symbols_count;
  }
  if (extra_.unreplaced_symbols_count == 0) extra_.unreplaced_symbols_begin = 0;  // no extra needed
}

void Reader::read_args(dom::element e, bool kwargs) {
  if (!kwargs) {
    for (dom::element x : as_array(e, "args")) read_arg(x, "args");
    return;
  }
  for (dom::key_value_pair kv : as_object(e, "kwargs")) {
    Arg key;
    key.kind = ArgKind::kStr;
    key.id = b_.intern(kv.key);
    b_.leaf(key);
    read_arg(kv.value, "kwargs");
  }
}

void Reader::read_arg(dom::element e, std::string_view field) {
  Arg a;
  switch (e.type()) {
    case element_type::NULL_VALUE:
      a.kind = ArgKind::kNone;
      break;
    case element_type::BOOL:
      a.kind = ArgKind::kBool;
      a.i = e.get_bool().value_unsafe() ? 1 : 0;
      break;
    case element_type::INT64:
    case element_type::UINT64:
      a.kind = ArgKind::kInt;
      a.i = as_int(e, field);
      break;
    case element_type::DOUBLE:
      a.kind = ArgKind::kFloat;
      a.f = e.get_double().value_unsafe();
      break;
    case element_type::STRING:
      a.kind = ArgKind::kStr;
      a.id = b_.intern(e.get_string().value_unsafe());
      break;
    case element_type::ARRAY: {
      const ArgId list = b_.begin(ArgKind::kList);
      for (dom::element x : as_array(e, field)) read_arg(x, field);
      b_.end(list);
      return;
    }
    case element_type::OBJECT:
      read_tagged_arg(e.get_object().value_unsafe(), field);
      return;
  }
  b_.leaf(a);
}

void Reader::read_tagged_arg(dom::object o, std::string_view field) {
  auto it = o.begin();
  if (it == o.end()) {
    fail(ErrorCode::kParse, field, "an argument object needs a tag such as \"node\" or \"tuple\"");
  }
  const std::string_view tag = it.key();
  const dom::element v = it.value();
  const size_t size = o.size();
  // The one optional second key: an opaque's "handle", a NaN's "bits".
  std::optional<dom::element> handle, bits;
  if (tag == "opaque" || tag == "handle") {
    dom::element h;
    if (o.at_key("handle").get(h) == simdjson::SUCCESS) handle = h;
  } else if (tag == "float" || tag == "bits") {
    dom::element b;
    if (o.at_key("bits").get(b) == simdjson::SUCCESS) bits = b;
  }
  const size_t allowed = handle || bits ? 2 : 1;
  if (size != allowed) {
    fail(ErrorCode::kParse, field,
         fmt::format("argument object with tag '{}' has {} keys; tagged arguments have one", tag,
                     size));
  }
  if (tag == "tuple" || tag == "dict" || tag == "slice") {
    read_container_arg(tag, v, field);
    return;
  }
  Arg a;
  if (tag == "node") {
    a.kind = ArgKind::kNode;
    a.id = resolve(as_string(v, field), field);
  } else if (tag == "float" || tag == "bits") {
    dom::element value;
    if (o.at_key("float").get(value) != simdjson::SUCCESS) {
      fail(ErrorCode::kParse, field, "argument object with 'bits' but no 'float'");
    }
    a.kind = ArgKind::kFloat;
    a.f = read_float_arg(value, field);
    if (bits) a.f = read_nan_bits(*bits, a.f, field);
  } else if (tag == "dtype" || tag == "device" || tag == "layout" || tag == "memory_format" ||
             tag == "target") {
    a.kind = tag == "dtype"    ? ArgKind::kDtype
             : tag == "device" ? ArgKind::kDevice
             : tag == "layout" ? ArgKind::kLayout
             : tag == "target" ? ArgKind::kTarget
                               : ArgKind::kMemoryFormat;
    a.id = b_.intern(as_string(v, field));
  } else if (tag == "opaque" || tag == "handle") {
    dom::element repr;
    if (o.at_key("opaque").get(repr) != simdjson::SUCCESS) {
      fail(ErrorCode::kParse, field, "argument object with 'handle' but no 'opaque'");
    }
    a.kind = ArgKind::kOpaque;
    a.id = b_.intern(as_string(repr, field));
    a.i = handle ? as_int(*handle, field) : -1;
  } else {
    fail(ErrorCode::kParse, field,
         fmt::format("unknown argument tag '{}' (expected node, tuple, dict, slice, float, dtype, "
                     "device, layout, memory_format, target or opaque)",
                     tag));
  }
  b_.leaf(a);
}

// A "tuple", "dict" or "slice" argument: a container of arguments.
void Reader::read_container_arg(std::string_view tag, dom::element v, std::string_view field) {
  if (tag == "tuple") {
    const ArgId c = b_.begin(ArgKind::kTuple);
    for (dom::element x : as_array(v, field)) read_arg(x, field);
    b_.end(c);
  } else if (tag == "dict") {
    const ArgId c = b_.begin(ArgKind::kDict);
    for (dom::key_value_pair kv : as_object(v, field)) {
      Arg key;
      key.kind = ArgKind::kStr;
      key.id = b_.intern(kv.key);
      b_.leaf(key);
      read_arg(kv.value, field);
    }
    b_.end(c);
  } else {
    dom::array parts = as_array(v, field);
    if (parts.size() != 3) {
      fail(ErrorCode::kParse, field,
           fmt::format("a slice has 3 parts [start, stop, step], got {}", parts.size()));
    }
    const ArgId c = b_.begin(ArgKind::kSlice);
    for (dom::element x : parts) read_arg(x, field);
    b_.end(c);
  }
}

// A "float" argument: a number, or "inf", "-inf", "nan" (JSON has no
// spelling for them).
double Reader::read_float_arg(dom::element v, std::string_view field) const {
  if (v.type() != element_type::STRING) return as_number(v, field);
  const std::string_view s = v.get_string().value_unsafe();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  fail(ErrorCode::kParse, field, fmt::format("unknown float '{}' (expected inf, -inf or nan)", s));
}

// A NaN's "bits": its IEEE-754 pattern as 16 hex digits, for a NaN other
// than Python's float("nan") (a sign or a payload: CSE tells them apart from
// torch 2.14 on). Only a NaN has them.
double Reader::read_nan_bits(dom::element v, double value, std::string_view field) const {
  const std::string_view hex = as_string(v, field);
  uint64_t pattern = 0;
  const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), pattern, 16);
  const double bits = std::bit_cast<double>(pattern);
  if (hex.size() != 16 || ec != std::errc() || end != hex.data() + hex.size() || !std::isnan(bits)) {
    fail(ErrorCode::kParse, field,
         fmt::format("float bits '{}' are not 16 hex digits of a NaN", hex));
  }
  if (!std::isnan(value)) {
    fail(ErrorCode::kParse, field, "float 'bits' are given for a NaN only (\"float\": \"nan\")");
  }
  return bits;
}

// meta "custom_context": [stream, mempool, mempool_device], each an integer,
// null or a string (another Python value, by its repr). Kept as the array's
// minified text: CSE only asks whether two nodes' contexts are equal.
StrId Reader::read_custom_context(dom::element v) {
  dom::array items = as_array(v, "meta.custom_context");
  bool valid = items.size() == 3;
  for (dom::element item : items) {
    const element_type t = item.type();
    valid &= t == element_type::INT64 || t == element_type::UINT64 ||
             t == element_type::NULL_VALUE || t == element_type::STRING;
  }
  if (!valid) {
    fail(ErrorCode::kParse, "meta.custom_context",
         "expected [stream, mempool, mempool_device], each an integer, null or a string");
  }
  return b_.intern(simdjson::minify(v));
}

// --- values ---------------------------------------------------------------------

// The kind a "val" object's "kind" names; nullopt for an unknown name.
std::optional<ValueKind> value_kind_from_name(std::string_view k) {
  if (k == "tensor") return ValueKind::kTensor;
  if (k == "symint") return ValueKind::kSymInt;
  if (k == "symfloat") return ValueKind::kSymFloat;
  if (k == "symbool") return ValueKind::kSymBool;
  if (k == "sequence") return ValueKind::kSequence;
  if (k == "dict") return ValueKind::kDict;
  if (k == "script_object") return ValueKind::kScriptObject;
  if (k == "opaque") return ValueKind::kOpaque;
  if (k == "backward_state") return ValueKind::kBackwardState;
  if (k == "none") return ValueKind::kNone;
  if (k == "constant") return ValueKind::kConstant;
  if (k == "generator") return ValueKind::kGenerator;
  if (k == "device") return ValueKind::kDevice;
  return std::nullopt;
}

constexpr const char* kValueKinds =
    "tensor, symint, symfloat, symbool, sequence, dict, script_object, opaque, "
    "backward_state, none, constant, generator or device";

void Reader::read_value(dom::element e, Node& n) {
  dom::object o = as_object(e, "val");
  dom::element kind_el;
  if (o.at_key("kind").get(kind_el) != simdjson::SUCCESS) fail(ErrorCode::kParse, "val.kind", "missing");
  const std::string_view kind = as_string(kind_el, "val.kind");
  const std::optional<ValueKind> vk = value_kind_from_name(kind);
  if (!vk) fail(ErrorCode::kParse, "val.kind", fmt::format("unknown value kind '{}' (expected {})", kind, kValueKinds));
  n.value = *vk;
  n.tensors_begin = static_cast<uint32_t>(b_.tensor_count());
  switch (n.value) {
    case ValueKind::kTensor:
      read_tensor(o, "val", 0, true);
      break;
    case ValueKind::kSequence:
    case ValueKind::kDict:
      read_container_value(o, n.value);
      break;
    case ValueKind::kSymInt:
    case ValueKind::kSymFloat:
    case ValueKind::kSymBool:
      read_sym_value(o, n.value);
      break;
    case ValueKind::kOpaque:
    case ValueKind::kConstant: {
      dom::element repr;
      if (o.at_key("repr").get(repr) == simdjson::SUCCESS) extra_.repr = b_.intern(as_string(repr, "val.repr"));
      dom::element scalar;
      if (o.at_key("scalar").get(scalar) == simdjson::SUCCESS && !as_bool(scalar, "val.scalar")) {
        n.flags |= kFlagNonScalarConstant;
      }
      break;
    }
    case ValueKind::kGenerator:
      read_generator_value(o);
      break;
    case ValueKind::kDevice:
      extra_.device = read_device_value(o);
      break;
    default:
      break;
  }
  n.tensors_count = static_cast<uint32_t>(b_.tensor_count() - n.tensors_begin);
}

// A sequence's or dict's items: the top-level tensors are the node's
// tensors (numbered by position), other items only validated.
void Reader::read_container_value(dom::object o, ValueKind kind) {
  dom::element items;
  if (o.at_key("items").get(items) != simdjson::SUCCESS) fail(ErrorCode::kParse, "val.items", "missing");
  int32_t i = 0;
  auto item = [&](dom::element x) {
    dom::object xo = as_object(x, "val.items");
    dom::element k;
    if (xo.at_key("kind").get(k) == simdjson::SUCCESS && k.type() == element_type::STRING &&
        k.get_string().value_unsafe() == "tensor") {
      read_tensor(xo, "val.items", i, true);
    } else {
      check_nested_value(x, "val.items");
    }
    ++i;
  };
  if (kind == ValueKind::kSequence) {
    for (dom::element x : as_array(items, "val.items")) item(x);
  } else {
    for (dom::key_value_pair kv : as_object(items, "val.items")) item(kv.value);
  }
}

// A SymInt, SymFloat or SymBool: its expression and, when known, its hint
// (a nested int's hint is an object of its own).
void Reader::read_sym_value(dom::object o, ValueKind kind) {
  dom::element expr;
  if (o.at_key("expr").get(expr) != simdjson::SUCCESS) fail(ErrorCode::kParse, "val.expr", "missing");
  extra_.sym_expr = b_.intern(as_string(expr, "val.expr"));
  dom::element hint;
  if (o.at_key("hint").get(hint) != simdjson::SUCCESS) return;
  if (hint.type() == element_type::OBJECT) {
    extra_.nested_hint = read_nested_int(hint, "val.hint");
    return;
  }
  if (hint.type() == element_type::NULL_VALUE) return;
  extra_.has_sym_hint = true;
  if (kind == ValueKind::kSymBool && hint.type() == element_type::BOOL) {
    extra_.sym_hint = hint.get_bool().value_unsafe() ? 1 : 0;
  } else if (kind == ValueKind::kSymFloat) {
    // Only whether a hint exists matters to the partitioner; it is kept
    // to integer precision.
    const double h = as_number(hint, "val.hint");
    if (!(std::fabs(h) < 9.2e18)) fail(ErrorCode::kInvalidGraph, "val.hint", "out of range");
    extra_.sym_hint = static_cast<int64_t>(h);
  } else {
    extra_.sym_hint = as_int(hint, "val.hint");
  }
}

// The "device" of a generator or device value ("cuda:0").
StrId Reader::read_device_value(dom::object o) {
  dom::element device;
  if (o.at_key("device").get(device) != simdjson::SUCCESS) fail(ErrorCode::kParse, "val.device", "missing");
  const std::string_view d = as_string(device, "val.device");
  if (d.empty()) fail(ErrorCode::kInvalidGraph, "val.device", "empty device");
  return b_.intern(d);
}

// A torch.Generator: its device and, in the exporting process, its handle.
void Reader::read_generator_value(dom::object o) {
  extra_.device = read_device_value(o);
  dom::element handle;
  if (o.at_key("handle").get(handle) == simdjson::SUCCESS && handle.type() != element_type::NULL_VALUE) {
    extra_.handle = as_int(handle, "val.handle");
    if (extra_.handle < -1) fail(ErrorCode::kInvalidGraph, "val.handle", "negative handle");
  }
}

// Nested values (inside a sequence or dict) are validated but not stored:
// torch's _size_of only counts tensors at the top level of a container.
void Reader::check_nested_value(dom::element e, std::string_view field) {
  dom::object o = as_object(e, field);
  dom::element kind_el;
  if (o.at_key("kind").get(kind_el) != simdjson::SUCCESS) fail(ErrorCode::kParse, field, "value without 'kind'");
  const std::string_view kind = as_string(kind_el, field);
  const std::optional<ValueKind> known = value_kind_from_name(kind);
  if (!known) fail(ErrorCode::kParse, field, fmt::format("unknown value kind '{}' (expected {})", kind, kValueKinds));
  const ValueKind vk = *known;
  if (vk == ValueKind::kTensor) {
    read_tensor(o, field, 0, false);
  } else if (vk == ValueKind::kSequence || vk == ValueKind::kDict) {
    dom::element items;
    if (o.at_key("items").get(items) != simdjson::SUCCESS) return;
    if (items.type() == element_type::ARRAY) {
      for (dom::element x : as_array(items, field)) check_nested_value(x, field);
    } else if (items.type() == element_type::OBJECT) {
      for (dom::key_value_pair kv : as_object(items, field)) {
        check_nested_value(kv.value, field);
      }
    } else {
      type_error(field, items, "an array or an object");
    }
  }
}

// A hint that is a nested int: {"nested_int": "j1"}.
StrId Reader::read_nested_int(dom::element e, std::string_view field) {
  dom::element name;
  if (e.get_object().value_unsafe().at_key("nested_int").get(name) != simdjson::SUCCESS) {
    fail(ErrorCode::kParse, field,
         "a hint is a number, null or {\"nested_int\": NAME}; this object has no 'nested_int'");
  }
  const std::string_view s = as_string(name, field);
  if (s.empty()) fail(ErrorCode::kInvalidGraph, field, "empty nested int name");
  return b_.intern(s);
}

Dim Reader::read_dim(dom::element e, std::string_view field, bool size) {
  Dim d;
  if (e.type() == element_type::OBJECT) {
    dom::object o = e.get_object().value_unsafe();
    dom::element expr;
    if (o.at_key("expr").get(expr) != simdjson::SUCCESS) {
      fail(ErrorCode::kParse, field, "a symbolic dim needs 'expr'");
    }
    d.expr = b_.intern(as_string(expr, field));
    dom::element hint;
    if (o.at_key("hint").get(hint) == simdjson::SUCCESS && hint.type() == element_type::OBJECT) {
      // Validated, then read as no hint: a dense tensor's dim (all a joint
      // graph holds) is never a nested int, and nothing sizes by it.
      read_nested_int(hint, field);
      d.has_hint = false;
    } else if (o.at_key("hint").get(hint) == simdjson::SUCCESS &&
               hint.type() != element_type::NULL_VALUE) {
      d.value = as_int(hint, field);
    } else {
      d.has_hint = false;
    }
  } else if (e.type() == element_type::INT64 || e.type() == element_type::UINT64) {
    d.value = as_int(e, field);
  } else {
    type_error(field, e, "an integer or {\"expr\": ..., \"hint\": ...}");
  }
  if (size && d.value < 0) {
    fail(ErrorCode::kInvalidGraph, field, fmt::format("negative size {}", d.value));
  }
  return d;
}

// A tensor's itemsize: "itemsize" when given, else the dtype's own; a dtype
// remat does not know needs one.
uint16_t Reader::read_itemsize(std::string_view dtype, std::optional<dom::element> itemsize,
                               const std::string& f) const {
  uint16_t out = dtype_itemsize(dtype);
  if (itemsize) {
    const int64_t s = as_int(*itemsize, f + ".itemsize");
    if (s < 1 || s > std::numeric_limits<uint16_t>::max()) {
      fail(ErrorCode::kInvalidGraph, f + ".itemsize", fmt::format("{} is out of range", s));
    }
    out = static_cast<uint16_t>(s);
  }
  if (out == 0) {
    fail(ErrorCode::kInvalidGraph, f + ".dtype",
         fmt::format("unknown dtype '{}' without 'itemsize'", dtype));
  }
  return out;
}

// numel of shape_: the product of the hints (0 if any size is 0), torch's
// 4096 when a size has no hint; the product must fit in int64.
int64_t Reader::numel_of_shape(const std::string& f) const {
  bool all_hinted = true, any_zero = false;
  for (const Dim& d : shape_) {
    all_hinted &= d.has_hint;
    any_zero |= d.has_hint && d.value == 0;
  }
  if (any_zero) return 0;
  int64_t product = 1;
  for (const Dim& d : shape_) {
    if (d.has_hint && __builtin_mul_overflow(product, d.value, &product)) {
      fail(ErrorCode::kInvalidGraph, f + ".shape", "the number of elements overflows int64");
    }
  }
  return all_hinted ? product : kUnhintedNumel;
}

void Reader::read_tensor(dom::object o, std::string_view field, int32_t index, bool record) {
  std::optional<dom::element> dtype, shape, stride, device, storage, numel, itemsize;
  for (dom::key_value_pair kv : o) {
    const std::string_view k = kv.key;
    if (k == "dtype") dtype = kv.value;
    else if (k == "shape") shape = kv.value;
    else if (k == "stride") stride = kv.value;
    else if (k == "device") device = kv.value;
    else if (k == "storage") storage = kv.value;
    else if (k == "numel_hint") numel = kv.value;
    else if (k == "itemsize") itemsize = kv.value;
  }
  const std::string f(field);
  TensorMeta t;
  t.index = index;
  if (!dtype) fail(ErrorCode::kParse, f + ".dtype", "missing");
  const std::string_view dt = as_string(*dtype, f + ".dtype");
  t.dtype = b_.intern(dt);
  t.itemsize = read_itemsize(dt, itemsize, f);
  if (device) t.device = b_.intern(as_string(*device, f + ".device"));

  if (!shape) fail(ErrorCode::kParse, f + ".shape", "missing");
  shape_.clear();
  for (dom::element x : as_array(*shape, f + ".shape")) shape_.push_back(read_dim(x, f + ".shape", true));
  stride_.clear();
  if (stride) {
    for (dom::element x : as_array(*stride, f + ".stride")) stride_.push_back(read_dim(x, f + ".stride", false));
    if (stride_.size() != shape_.size()) {
      fail(ErrorCode::kInvalidGraph, f + ".stride",
           fmt::format("has {} entries but the shape has {}", stride_.size(), shape_.size()));
    }
  }

  t.numel_hint = numel_of_shape(f);
  if (numel) {
    t.numel_hint = as_int(*numel, f + ".numel_hint");
    if (t.numel_hint < 0) {
      fail(ErrorCode::kInvalidGraph, f + ".numel_hint", fmt::format("negative size {}", t.numel_hint));
    }
  }
  // The size in bytes must fit in int64 too, so that byte counts downstream
  // cannot overflow.
  int64_t bytes;
  if (__builtin_mul_overflow(t.numel_hint, static_cast<int64_t>(t.itemsize), &bytes)) {
    fail(ErrorCode::kInvalidGraph, f + ".shape", "the size in bytes overflows int64");
  }
  if (storage) {
    t.storage = as_int(*storage, f + ".storage");
    if (t.storage < -1) {
      fail(ErrorCode::kInvalidGraph, f + ".storage", fmt::format("{} is not a storage id", t.storage));
    }
  }
  if (!record) return;
  t.rank = static_cast<uint32_t>(shape_.size());
  t.shape_begin = static_cast<uint32_t>(b_.dim_count());
  for (const Dim& d : shape_) b_.add_dim(d);
  t.stride_begin = static_cast<uint32_t>(b_.dim_count());
  t.has_stride = stride.has_value();
  for (const Dim& d : stride_) b_.add_dim(d);
  b_.add_tensor(t);
}

void Reader::read_meta(dom::element e, Node& n) {
  for (dom::key_value_pair kv : as_object(e, "meta")) {
    const std::string_view k = kv.key;
    if (k == "recompute") {
      if (kv.value.type() == element_type::NULL_VALUE) continue;
      const std::string_view p = as_string(kv.value, "meta.recompute");
      if (p == "MUST_SAVE") n.recompute = RecomputePolicy::kMustSave;
      else if (p == "PREFER_SAVE") n.recompute = RecomputePolicy::kPreferSave;
      else if (p == "MUST_RECOMPUTE") n.recompute = RecomputePolicy::kMustRecompute;
      else if (p == "PREFER_RECOMPUTE") n.recompute = RecomputePolicy::kPreferRecompute;
      else if (p == "MUST_CPU_OFFLOAD") n.recompute = RecomputePolicy::kMustCpuOffload;
      else if (p == "PREFER_CPU_OFFLOAD") n.recompute = RecomputePolicy::kPreferCpuOffload;
      else {
        fail(ErrorCode::kParse, "meta.recompute",
             fmt::format("unknown recompute policy '{}' (expected MUST_SAVE, PREFER_SAVE, "
                         "MUST_RECOMPUTE, PREFER_RECOMPUTE, MUST_CPU_OFFLOAD or "
                         "PREFER_CPU_OFFLOAD)",
                         p));
      }
    } else if (k == "ac_graph_id") {
      extra_.ac_graph_id = as_int(kv.value, "meta.ac_graph_id");
      n.flags |= kFlagAcGraphId;
    } else if (k == "partitioner_tag") {
      const std::string_view t = as_string(kv.value, "meta.partitioner_tag");
      extra_.tag_name = b_.intern(t);
      if (t == "is_forward") n.tag = PartitionerTag::kIsForward;
      else if (t == "is_backward") n.tag = PartitionerTag::kIsBackward;
      else if (t == "must_be_in_forward") n.tag = PartitionerTag::kMustBeInForward;
      else if (t == "must_be_in_backward") n.tag = PartitionerTag::kMustBeInBackward;
      else n.tag = PartitionerTag::kOther;
    } else if (k == "has_backward_hook") {
      if (as_bool(kv.value, "meta.has_backward_hook")) n.flags |= kFlagBackwardHook;
    } else if (k == "saved_tensor_with_no_vc_check") {
      if (as_bool(kv.value, "meta.saved_tensor_with_no_vc_check")) n.flags |= kFlagNoVcCheck;
    } else if (k == "should_offload") {
      if (as_bool(kv.value, "meta.should_offload")) n.flags |= kFlagShouldOffload;
    } else if (k == "aot_runtime_epilogue_input_mutation") {
      if (as_bool(kv.value, "meta.aot_runtime_epilogue_input_mutation")) {
        n.flags |= kFlagEpilogueMutation;
      }
    } else if (k == "memory_budget") {
      if (kv.value.type() == element_type::NULL_VALUE) continue;
      extra_.memory_budget = as_number(kv.value, "meta.memory_budget");
      n.flags |= kFlagMemoryBudget;
    } else if (k == "region_memory_budget") {
      if (kv.value.type() == element_type::NULL_VALUE) continue;
      extra_.region_memory_budget = as_number(kv.value, "meta.region_memory_budget");
      n.flags |= kFlagRegionBudget;
    } else if (k == "custom_context") {
      extra_.custom_context = read_custom_context(kv.value);
    }
  }
}

}  // namespace

JointGraph read_joint_graph(std::string_view json) {
  simdjson::padded_string text(json.data(), json.size());
  dom::parser parser;
  dom::element root;
  if (auto err = parser.parse(text).get(root); err != simdjson::SUCCESS) {
    throw Error(ErrorCode::kParse, fmt::format("invalid JSON: {}", simdjson::error_message(err)));
  }
  return Reader().read(root);
}

JointGraph read_joint_graph_file(const std::string& path, uint64_t max_bytes) {
  // A regular file loads straight into simdjson's padded buffer: one copy of
  // the text, not two. Streams go through read_file, which stops at the limit
  // (and produces the system's reason and the kIo code when reading fails).
  max_bytes = std::min(max_bytes, kMaxInputBytes);
  simdjson::padded_string text;
  if (!is_regular_within_limit(path, max_bytes) ||
      simdjson::padded_string::load(path).get(text) != simdjson::SUCCESS) {
    text = simdjson::padded_string(read_file(path, max_bytes));
  }
  dom::parser parser;
  dom::element root;
  if (auto err = parser.parse(text).get(root); err != simdjson::SUCCESS) {
    throw Error(ErrorCode::kParse,
                fmt::format("{}: invalid JSON: {}", path, simdjson::error_message(err)));
  }
  try {
    return Reader().read(root);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace remat
