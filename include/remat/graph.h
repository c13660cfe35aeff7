// remat/graph.h — the IR: a joint forward+backward graph, as torch FX hands it
// to a partition function, stored flat.
//
// Contract:
//  * Nodes live in one vector and are addressed by a dense NodeId. Their order
//    is the FX order of the joint graph; it is meaningful (the reference breaks
//    ties and sorts results by it) and always topological.
//  * Strings (names, targets, dtypes, symbols) are interned once, in a pool a
//    joint graph shares with the graphs derived from it; StrId 0 is "".
//    Value metadata (tensors, dims, symbol lists, NodeExtra) is shared the
//    same way, and a graph's argument trees and adjacency by its copies.
//    Pools may be layered (Graph::layer_pools): a pass that must not append
//    to a graph's pools, such as a partition of a joint graph other threads
//    partition too, appends to a layer of its own over them instead.
//  * Inputs (FX `all_input_nodes`) and users are id ranges into those pools;
//    users are kept in graph order, which is FX's order for a traced graph.
//  * Everything the reference partitioner reads from `node.meta`, the target
//    and the op schema has a field here (Node, or NodeExtra for what few
//    nodes have). Fields it does not read are dropped.
//  * A Graph is built by GraphBuilder, which validates it. Once built, only a
//    node's recompute policy (prepare passes force saves) and origin (the
//    pipeline maps derived graphs back) may change.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace remat {

using NodeId = uint32_t;
using StrId = uint32_t;
using OpId = uint32_t;
using ArgId = uint32_t;
inline constexpr NodeId kNoNode = std::numeric_limits<uint32_t>::max();
inline constexpr OpId kNoOp = std::numeric_limits<uint32_t>::max();
inline constexpr ArgId kNoArg = std::numeric_limits<uint32_t>::max();
// Node::origin of a node a rewrite created (it has no joint counterpart).
// Distinct from kNoNode, which means "not derived: the node is its own origin".
inline constexpr NodeId kCreatedNode = std::numeric_limits<uint32_t>::max() - 1;

// FX `node.op`. call_module and call_method never reach a partitioner.
enum class NodeKind : uint8_t { kPlaceholder, kCallFunction, kGetAttr, kOutput };

// What `node.meta["val"]` holds.
enum class ValueKind : uint8_t {
  kMissing,        // no "val" key at all
  kNone,           // None
  kTensor,         // a (fake) tensor
  kSymInt,
  kSymFloat,
  kSymBool,
  kSequence,       // a list or tuple; its tensor elements are in tensors()
  kDict,           // a dict; its tensor values are in tensors()
  kScriptObject,   // torch.ScriptObject / FakeScriptObject
  kOpaque,         // another opaque value (a process group, ...)
  kBackwardState,  // torch.fx.experimental._backward_state.BackwardState
  kConstant,       // a plain Python value (int, float, ...)
  kGenerator,      // a torch.Generator (the state of a graph-safe RNG input)
  kDevice,         // a torch.device (an op returning one, as compile-on-one-rank's
                   // current_device)
};

// torch.utils.checkpoint.CheckpointPolicy, or none.
enum class RecomputePolicy : uint8_t {
  kNone,
  kMustSave,
  kPreferSave,
  kMustRecompute,
  kPreferRecompute,
  // The CPU-offload policies: torch's partitioner treats them as neither a
  // save nor a recompute request (they only reach it as tags).
  kMustCpuOffload,
  kPreferCpuOffload,
};

// `node.meta["partitioner_tag"]`. Unknown strings are kept as kOther.
enum class PartitionerTag : uint8_t {
  kNone,
  kIsForward,
  kIsBackward,
  kMustBeInForward,
  kMustBeInBackward,
  kOther,
};

// What kind of callable a call_function targets.
enum class OpKind : uint8_t {
  kOverload,     // torch._ops.OpOverload: "aten.mm.default"
  kHigherOrder,  // HigherOrderOperator: "higher_order.auto_functionalized"
  kFunction,     // a Python callable: "operator.getitem", "torch.sym_sum"
  // torch._ops.OpOverloadPacket: "aten.rand" (AOTAutograd traces overloads;
  // a joint pass may insert a packet). torch's checks for an OpOverload do
  // not apply to it; its categories are its own (get_aten_target is the
  // packet itself).
  kPacket,
};

// Op tags the reference reads.
enum OpTag : uint8_t {
  kTagPointwise = 1 << 0,
  kTagNondeterministicSeeded = 1 << 1,
};

// Facts about one distinct call_function target.
struct OpInfo {
  StrId name = 0;         // qualified: "aten.mm.default", "operator.getitem"
  StrId ns = 0;           // "aten", "_c10d_functional", "higher_order", "operator"
  StrId packet = 0;       // overload packet ("aten.mm"); the name itself otherwise
  OpKind kind = OpKind::kOverload;
  bool is_mutable = false;  // schema.is_mutable
  bool is_view = false;     // schema aliases its first input without writing
  int16_t num_returns = -1; // len(schema.returns); -1 when unknown
  uint8_t tags = 0;         // OpTag bits of this overload (a packet: of its .default, if any)
  uint8_t packet_tags = 0;  // OpTag bits carried by any overload of the packet
  // Schema argument names the op writes to (auto_functionalized reads them).
  uint32_t mutable_args_begin = 0;
  uint32_t mutable_args_count = 0;
  // The schema argument named "dropout_p" (the SDPA family): its position,
  // -1 when the schema has none or is unknown, and its default when it has
  // one. torch 2.14 on reads it to tell a random op from one whose dropout
  // is statically zero (graph/random_op.h).
  int16_t dropout_p_index = -1;
  bool dropout_p_has_default = false;
  double dropout_p_default = 0;
};

// One dimension of a shape or stride: a constant, or a symbol with its hint.
struct Dim {
  int64_t value = 0;      // the constant, or the size hint of a symbolic dim
  StrId expr = 0;         // symbolic expression ("s0*s1"); 0 for a constant
  bool has_hint = true;   // false for an unbacked symbol without a hint
};

struct TensorMeta {
  StrId dtype = 0;        // "float32", "bfloat16", ...
  uint16_t itemsize = 0;  // bytes per element
  StrId device = 0;       // "cpu", "cuda:0", "meta"
  uint32_t shape_begin = 0;   // into the dim pool
  uint32_t rank = 0;
  uint32_t stride_begin = 0;  // rank entries, when has_stride
  bool has_stride = false;
  int64_t numel_hint = 0;     // hint of numel(); 4096 when it has none (as torch)
  int64_t storage = -1;       // storage identity; equal ids alias; -1: none
  int32_t index = 0;          // position inside a sequence/dict value
};

enum class ArgKind : uint8_t {
  kNone,
  kBool,          // i
  kInt,           // i
  kFloat,         // f
  kStr,           // str
  kNode,          // node
  kList,          // children
  kTuple,         // children
  kDict,          // children: key (kStr), value, key, value, ...
  kSlice,         // children: start, stop, step
  kDtype,         // str: "float32"
  kDevice,        // str: "cpu", "cuda:0"
  kLayout,        // str: "strided"
  kMemoryFormat,  // str: "contiguous_format"
  kTarget,        // str: an op name used as a value (auto_functionalized's op)
  kOpaque,        // str: repr; i: handle of the host's object (or -1)
};

// One item of an argument tree, stored in pre-order. A container's children
// follow it; `span` is the size of its whole subtree (1 for a leaf).
struct Arg {
  ArgKind kind = ArgKind::kNone;
  uint32_t span = 1;
  int64_t i = 0;
  double f = 0;
  uint32_t id = 0;  // StrId for string-like kinds, NodeId for kNode
};

enum NodeFlag : uint16_t {
  kFlagTensorMeta = 1 << 0,      // "tensor_meta" in node.meta
  kFlagBackwardHook = 1 << 1,    // meta["has_backward_hook"]
  kFlagNoVcCheck = 1 << 2,       // meta["saved_tensor_with_no_vc_check"]
  kFlagImpure = 1 << 3,          // node.is_impure(impure_random=False)
  kFlagAcGraphId = 1 << 4,       // "ac_graph_id" in node.meta
  kFlagMemoryBudget = 1 << 5,    // meta["memory_budget"] is a float
  kFlagWithEffects = 1 << 6,     // target is higher_order.with_effects
  kFlagRegionBudget = 1 << 7,    // a region_activation_memory_budget annotation
  kFlagShouldOffload = 1 << 8,   // meta["should_offload"]: a joint pass asks for CPU offloading
  kFlagSavedForOffloading = 1 << 9,  // meta["saved_for_offloading"] (result graphs)
  // meta["aot_runtime_epilogue_input_mutation"]: a primal whose data AOT
  // Autograd's runtime epilogue overwrites after the forward (torch 2.15
  // stamps it before calling the partitioner).
  kFlagEpilogueMutation = 1 << 10,
  // A kConstant value that is no int, float or bool (an Enum member torch
  // does not count opaque, a string ...): torch's free_symbols cannot read it.
  kFlagNonScalarConstant = 1 << 11,
  // A control_deps call whose subgraph calls a stream synchronization op
  // (torch's _SYNC_OPS: record/wait events, wait_stream, synchronize_*).
  kFlagStreamSync = 1 << 12,
};

// What a node's value and meta hold beyond the common case: symbolic
// values, printable constants, checkpoint and budget annotations. Few nodes
// have any of it, so it lives beside Node (see Graph::extra), which stays at
// 60 bytes: every pass walks nodes, so their size is what large graphs cost.
struct NodeExtra {
  StrId tag_name = 0;     // the partitioner_tag string, kept for kOther
  StrId sym_expr = 0;     // SymInt/SymFloat/SymBool: the expression
  int64_t sym_hint = 0;   // and its hint, when has_sym_hint
  bool has_sym_hint = false;
  // A SymInt whose hint is a nested int (the ragged size of a jagged nested
  // tensor: "j1", "2*j1") has no numeric hint; this keeps its name.
  StrId nested_hint = 0;
  StrId binds_symbol = 0; // the symbol this node binds (is_symbol_binding_fx_node)
  // torch 2.14 on (TorchBehavior::bind_unreplaced_symbols) reads symbols
  // from the value's raw expressions, before ShapeEnv's replacements:
  // the symbols those add to free_symbols (a range in the value pool's
  // symbols, sorted by name), and, when `binds_unreplaced_differs`, the
  // symbol the node binds by its raw expression (0: none) in place of
  // binds_symbol.
  uint32_t unreplaced_symbols_begin = 0;
  uint32_t unreplaced_symbols_count = 0;
  StrId binds_unreplaced = 0;
  bool binds_unreplaced_differs = false;
  StrId repr = 0;         // kConstant/kOpaque values: a printable form
  // kGenerator values: the generator's device, and the host's handle of the
  // very object (-1: none; the host makes a fresh one for the device).
  // kDevice values: the device itself ("cuda:0"), in `device`.
  StrId device = 0;
  int64_t handle = -1;
  int64_t ac_graph_id = 0;
  double memory_budget = 0;
  // torch.autograd.graph.region_activation_memory_budget's annotation
  // (node.meta["custom"]["_region_activation_memory_budget"]), when
  // kFlagRegionBudget is set.
  double region_memory_budget = 0;
  // fx_graph_cse's custom_context_key: (stream, mempool, mempool_device) of
  // node.meta["custom"], as the JSON array that holds it (minified), when it
  // is not (0, None, None); 0 otherwise. Nodes of different contexts (a CUDA
  // stream, a memory pool) are never merged from torch 2.14 on.
  StrId custom_context = 0;
  // A backward placeholder that receives an offloaded activation: the tensor
  // it stood for before offloading (torch's meta original_device /
  // original_size / original_stride), as an index into the value pool's
  // tensors; kNoTensor otherwise.
  // A forward node marked saved_for_offloading may hold its own tensor here
  // (torch 2.11 and 2.12 record its device as meta original_device).
  uint32_t original_tensor = std::numeric_limits<uint32_t>::max();
  // Whether original_tensor's size and stride are meta too (original_size /
  // original_stride, torch 2.13 on), or only its device.
  bool original_layout = false;

  bool operator==(const NodeExtra&) const = default;
};

inline constexpr uint32_t kNoExtra = std::numeric_limits<uint32_t>::max();

struct Node {
  StrId name = 0;
  NodeKind kind = NodeKind::kCallFunction;
  ValueKind value = ValueKind::kMissing;
  RecomputePolicy recompute = RecomputePolicy::kNone;
  PartitionerTag tag = PartitionerTag::kNone;
  uint16_t flags = 0;
  StrId target = 0;       // call_function: the op name; otherwise FX's target
  OpId op = kNoOp;        // call_function only
  ArgId args = kNoArg;    // a kTuple root (output: the returned structure)
  ArgId kwargs = kNoArg;  // a kDict root
  uint32_t inputs_begin = 0, inputs_count = 0;    // FX all_input_nodes
  uint32_t tensors_begin = 0, tensors_count = 0;  // tensor parts of the value
  uint32_t symbols_begin = 0, symbols_count = 0;  // free symbols, sorted by name
  uint32_t extra = kNoExtra;  // into the value pool's extras; kNoExtra: all default
  // In a derived graph: the joint node this one comes from; kCreatedNode for
  // nodes a rewrite made; kNoNode in a graph that is not derived.
  NodeId origin = kNoNode;

  bool has(NodeFlag f) const { return (flags & f) != 0; }
};

class GraphBuilder;

// Interned strings, shared by a joint graph and every graph derived from it
// (DCE, CSE, forward, backward ...), so copying a node between them needs no
// re-hashing: a StrId means the same string in all of them. Append-only, so
// ids and views stay valid.
//
// A pool may be a layer over a parent pool: ids below the parent's size at
// the layer's creation are the parent's strings (interning one of those
// returns the parent's id), and new strings get the ids after them, stored in
// the layer. The layer only reads its parent. Reading (view, find, size) is
// safe from any number of threads while nobody interns into that pool;
// interning is not safe concurrently with anything else on the same pool, so
// threads that add strings each add them to a layer of their own.
class StringPool {
 public:
  StringPool() { intern(""); }
  explicit StringPool(std::shared_ptr<const StringPool> parent);
  StrId intern(std::string_view s);
  StrId find(std::string_view s) const;  // 0 when absent
  std::string_view view(StrId id) const {
    const StringPool* p = this;
    while (id < p->base_) p = p->parent_.get();  // no iteration in a pool without parent
    return p->views_[id - p->base_];
  }
  size_t size() const { return base_ + views_.size(); }

 private:
  // One slot of the open-addressing table: the upper half of the string's
  // hash (most mismatches end there) and the string's index in views_.
  struct Slot {
    uint32_t tag = 0;
    uint32_t index = std::numeric_limits<uint32_t>::max();  // max: empty
  };
  // The index of the slot holding `s`, or of the empty one where it belongs.
  size_t probe(std::string_view s, uint64_t hash) const;
  // The id of `s` in this pool or its parents, or 0 when absent.
  StrId find_hashed(std::string_view s, uint64_t hash) const;
  void grow();

  std::shared_ptr<const StringPool> parent_;
  StrId base_ = 0;  // ids below this are the parent's

  // The bytes, packed back to back in chunks that never move (the views
  // point into them): strings interned together stay together in memory.
  std::vector<std::unique_ptr<char[]>> chunks_;
  char* chunk_next_ = nullptr;
  size_t chunk_left_ = 0;
  size_t chunk_size_ = 0;  // the last chunk's planned size (chunks double)
  std::vector<std::string_view> views_;
  std::vector<Slot> table_;  // power-of-two size, at most half full
};

// Value metadata: tensors, their dims, symbol lists (free symbols and
// mutable-arg names) and NodeExtra records, each in a column addressed by a
// dense index. Shared like the string pool by a graph and the graphs derived
// from it, so a copied node points at the same entries instead of copying
// them. Append-only, so indices stay valid. Layered like StringPool: a layer
// over a parent holds what was appended to it; lower indices are the
// parent's. A range of entries (a node's tensors, a shape) is always appended
// in one piece, so it lies wholly in one layer. The same thread-safety rule
// as StringPool's holds.
class ValuePool {
 public:
  ValuePool() = default;
  explicit ValuePool(std::shared_ptr<const ValuePool> parent);

  const TensorMeta* tensors(uint32_t begin) const { return at(&ValuePool::tensors_, begin); }
  const Dim* dims(uint32_t begin) const { return at(&ValuePool::dims_, begin); }
  const StrId* symbols(uint32_t begin) const { return at(&ValuePool::symbols_, begin); }
  const NodeExtra& extra(uint32_t index) const { return *at(&ValuePool::extras_, index); }

  // Each returns the index of what it appended.
  uint32_t add_tensor(const TensorMeta& t) { return add(tensors_, t); }
  uint32_t add_dim(const Dim& d) { return add(dims_, d); }
  uint32_t add_symbol(StrId s) { return add(symbols_, s); }
  uint32_t add_extra(const NodeExtra& e) { return add(extras_, e); }

  // How many entries each column has, parents' included.
  struct Sizes {
    size_t tensors = 0, dims = 0, symbols = 0, extras = 0;
    bool operator==(const Sizes&) const = default;
  };
  Sizes sizes() const {
    return {tensors_.size(), dims_.size(), symbols_.size(), extras_.size()};
  }

 private:
  template <typename T>
  struct Column {
    uint32_t base = 0;  // indices below this are the parent's
    std::vector<T> items;
    size_t size() const { return base + items.size(); }
  };
  template <typename T>
  const T* at(Column<T> ValuePool::*column, uint32_t index) const {
    const ValuePool* p = this;
    while (index < (p->*column).base) p = p->parent_.get();  // none without a parent
    const Column<T>& c = p->*column;
    return c.items.data() + (index - c.base);
  }
  template <typename T>
  static uint32_t add(Column<T>& c, const T& value) {
    c.items.push_back(value);
    return static_cast<uint32_t>(c.size() - 1);
  }

  std::shared_ptr<const ValuePool> parent_;
  Column<TensorMeta> tensors_;
  Column<Dim> dims_;
  Column<StrId> symbols_;
  Column<NodeExtra> extras_;
};

// What a graph never changes once built: its argument trees and the
// input/user adjacency. Copies of a graph share it.
struct GraphStructure {
  std::vector<Arg> args;
  std::vector<NodeId> input_pool;
  std::vector<uint32_t> user_offsets{0};
  std::vector<NodeId> user_pool;
};

class Graph {
 public:
  Graph() = default;

  size_t size() const { return nodes_.size(); }
  std::span<const Node> nodes() const { return nodes_; }
  const Node& node(NodeId id) const { return nodes_[id]; }
  std::string_view str(StrId id) const { return strings_->view(id); }
  std::string_view name(NodeId id) const { return strings_->view(nodes_[id].name); }

  std::span<const NodeId> inputs(NodeId id) const {
    const Node& n = nodes_[id];
    return {structure_->input_pool.data() + n.inputs_begin, n.inputs_count};
  }
  std::span<const NodeId> users(NodeId id) const {
    const std::vector<uint32_t>& offsets = structure_->user_offsets;
    return {structure_->user_pool.data() + offsets[id], offsets[id + 1] - offsets[id]};
  }
  std::span<const TensorMeta> tensors(NodeId id) const {
    const Node& n = nodes_[id];
    return {values_->tensors(n.tensors_begin), n.tensors_count};
  }
  std::span<const Dim> shape(const TensorMeta& t) const {
    return {values_->dims(t.shape_begin), t.rank};
  }
  std::span<const Dim> stride(const TensorMeta& t) const {
    return {values_->dims(t.stride_begin), t.has_stride ? t.rank : 0u};
  }
  const NodeExtra& extra(NodeId id) const {
    static const NodeExtra kDefault;
    const uint32_t x = nodes_[id].extra;
    return x == kNoExtra ? kDefault : values_->extra(x);
  }
  std::span<const StrId> free_symbols(NodeId id) const {
    const Node& n = nodes_[id];
    return {values_->symbols(n.symbols_begin), n.symbols_count};
  }
  // The symbols of the value's raw expressions that free_symbols lacks
  // (NodeExtra::unreplaced_symbols_*).
  std::span<const StrId> unreplaced_symbols(NodeId id) const {
    const NodeExtra& x = extra(id);
    return {values_->symbols(x.unreplaced_symbols_begin), x.unreplaced_symbols_count};
  }
  // The symbol the node binds: by its replaced expression, or with
  // `unreplaced` by its raw one (torch 2.14's is_symbol_binding_fx_node).
  StrId binds_symbol(NodeId id, bool unreplaced) const {
    const NodeExtra& x = extra(id);
    return unreplaced && x.binds_unreplaced_differs ? x.binds_unreplaced : x.binds_symbol;
  }

  // Arguments, as pre-order trees. children() lists direct children.
  const Arg& arg(ArgId id) const { return structure_->args[id]; }
  std::vector<ArgId> children(ArgId id) const;

  // Ops.
  std::span<const OpInfo> ops() const { return ops_; }
  const OpInfo* op(NodeId id) const {
    OpId o = nodes_[id].op;
    return o == kNoOp ? nullptr : &ops_[o];
  }
  OpId find_op(std::string_view name) const;  // kNoOp if absent
  std::span<const StrId> mutable_args(const OpInfo& op) const {
    return {values_->symbols(op.mutable_args_begin), op.mutable_args_count};
  }

  // Lookups. find() and node_named() return kNoNode when absent.
  NodeId find(std::string_view name) const;
  NodeId node_named(StrId name) const;
  StrId find_str(std::string_view s) const;  // 0 when not interned
  NodeId output() const { return output_; }

  // The only mutations after building: prepare passes force saves, and the
  // pipeline stamps where each node of a derived graph comes from.
  void set_recompute(NodeId id, RecomputePolicy p) { nodes_[id].recompute = p; }
  void set_origin(NodeId id, NodeId origin) { nodes_[id].origin = origin; }
  // Gives this graph string and value pools of its own, layered over the
  // ones it shared: every id it holds keeps its meaning, and what it and the
  // graphs derived from it add from now on goes into the new layers, leaving
  // the old pools (and the graphs still sharing them) untouched. A partition
  // does this first, so that partitions of one joint graph may run at once.
  void layer_pools();

  // Pools, for writers and builders that copy a graph wholesale.
  const StringPool& strings() const { return *strings_; }
  // The pool itself, for what names nodes of derived graphs (FxNamespace).
  // It is append-only, so interning through it leaves this graph intact.
  std::shared_ptr<StringPool> shared_strings() const { return strings_; }
  // Whether two graphs intern into the same pool (their StrIds agree).
  bool shares_strings_with(const Graph& other) const { return strings_ == other.strings_; }
  // Whether two graphs share value metadata (their tensor ranges agree).
  bool shares_values_with(const Graph& other) const { return values_ == other.values_; }
  const std::vector<Arg>& arg_pool() const { return structure_->args; }
  // The shared value pool: entries of other graphs derived from the same
  // joint graph may be in it too.
  const ValuePool& values() const { return *values_; }

 private:
  friend class GraphBuilder;

  std::vector<Node> nodes_;
  std::shared_ptr<StringPool> strings_ = std::make_shared<StringPool>();
  std::vector<OpInfo> ops_;
  std::shared_ptr<ValuePool> values_ = std::make_shared<ValuePool>();
  std::shared_ptr<const GraphStructure> structure_ = std::make_shared<GraphStructure>();
  NodeId output_ = kNoNode;
  // name -> id and op name -> id; built by GraphBuilder::finish.
  struct Index;
  std::shared_ptr<const Index> index_;
};

// Builds a Graph node by node and validates it in finish().
//
// Node references may point forward while building (a JSON reader knows all
// names first); finish() rejects dangling references, duplicate names,
// cycles, graphs that are not in topological order and a missing or
// misplaced output node, each with an Error that names the node and field.
class GraphBuilder {
 public:
  GraphBuilder();
  // Builds a graph derived from `base`: it interns into base's string pool
  // and appends to its value pool, so StrIds and value ranges carry over
  // unchanged (see NodeCopier).
  explicit GraphBuilder(const Graph& base);
  ~GraphBuilder();  // out of line: Interner is complete only in graph.cc

  StrId intern(std::string_view s);
  // Room for this many nodes and argument items, when the caller knows.
  void reserve(size_t nodes, size_t arg_items);
  // Whether this builder interns into g's string pool (StrIds agree), and
  // appends to g's value pool (value ranges agree).
  bool shares_strings_with(const Graph& g) const { return g.shares_strings_with(g_); }
  bool shares_values_with(const Graph& g) const { return g.shares_values_with(g_); }

  // Registers an op; a second call with the same name returns the first id.
  // Ops not registered explicitly get facts guessed from their name by
  // add_op_by_name (see ops.h: default_op_info).
  OpId add_op(const OpInfo& info, std::span<const std::string> mutable_args = {});
  OpId add_op_by_name(std::string_view name);
  const OpInfo& op_info(OpId id) const { return g_.ops_[id]; }

  // Argument trees: leaves, and containers opened with begin() and closed
  // with end(). Returns the id of the item.
  ArgId leaf(const Arg& a);
  ArgId begin(ArgKind container);  // kList, kTuple, kDict or kSlice
  void end(ArgId container);
  // Copies src's argument tree at `root` in one go (src's strings must be in
  // this builder's pool), node references mapped through `remap`; one with
  // no mapping is an internal Error naming the node. Returns the new root.
  ArgId add_tree(const Graph& src, ArgId root, std::span<const NodeId> remap);

  // Value metadata for the node about to be added.
  uint32_t add_dim(const Dim& d);
  uint32_t add_tensor(const TensorMeta& t);  // returns its index in the pool
  uint32_t add_symbol(StrId s);

  // Adds a node. `n.inputs_*` are ignored: inputs are derived from the args.
  // `n.tensors_*` and `n.symbols_*` must be ranges returned by add_tensor /
  // add_symbol; `n.extra` an index returned by add_extra (or kNoExtra).
  // Returns the new id.
  NodeId add_node(const Node& n);
  // The same, storing `extra` for it unless it is all default.
  NodeId add_node(Node n, const NodeExtra& extra);
  uint32_t add_extra(const NodeExtra& e);

  // The id the next add_node will return.
  NodeId next_id() const { return static_cast<NodeId>(g_.nodes_.size()); }
  size_t tensor_count() const { return g_.values_->sizes().tensors; }
  size_t symbol_count() const { return g_.values_->sizes().symbols; }
  size_t dim_count() const { return g_.values_->sizes().dims; }

  // Validates and returns the graph. The builder is empty afterwards.
  Graph finish();

  // The nodes of `g` listed in `order`, in that order, as a new graph built
  // from bulk copies of their records and argument trees: for passes that
  // only drop, merge or reorder nodes (DCE, CSE, reordering). A reference to node x becomes one
  // to the copy of x, or, when x is not in `order`, to the copy of
  // `alias[x]` (alias may be empty). Nodes get the origin a NodeCopier copy
  // would: their own origin when they have one, else their id in g. Value
  // metadata and strings are shared with g; unused entries may remain.
  static Graph rearrange(const Graph& g, std::span<const NodeId> order,
                         std::span<const NodeId> alias = {});

 private:
  Graph g_;
  std::shared_ptr<GraphStructure> structure_ = std::make_shared<GraphStructure>();  // g_'s, while building
  struct Interner;
  std::unique_ptr<Interner> interner_;
  std::vector<ArgId> open_;
};

const char* node_kind_name(NodeKind k);        // "placeholder", ...
const char* value_kind_name(ValueKind k);      // "tensor", "symint", ...
const char* recompute_policy_name(RecomputePolicy p);  // "MUST_SAVE", ...
const char* partitioner_tag_name(PartitionerTag t);    // "is_backward", ...
const char* arg_kind_name(ArgKind k);

}  // namespace remat
