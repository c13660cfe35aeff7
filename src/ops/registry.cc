// ops/registry.cc — the op registry (remat/ops.h): torch's default op
// categories, per release, and op facts guessed from an op's name.
//
// Target names. Categories are keyed by what torch's get_aten_target returns,
// spelled as a string:
//  * an OpOverload "aten.mm.default" is keyed by its packet "aten.mm"
//    (namespace "." op name, as str(torch.ops.aten.mm) without "torch.ops.");
//  * a HigherOrderOperator by "higher_order." + op.name();
//  * any other Python callable by `fn.__module__ + "." + fn.__qualname__`,
//    with one normalization: the C module "_operator" is spelled "operator".
//    So operator.getitem -> "operator.getitem", math.floor -> "math.floor",
//    round -> "builtins.round", torch.sym_float -> "torch.sym_float",
//    torch._sym_sqrt -> "torch._sym_sqrt". (SymInt.is_integer's lambda is
//    "torch.fx.experimental.sym_node.<lambda>".) Adapters producing target
//    names must follow the same rule.
//
// The pointwise rule: torch appends partitioners.pointwise_ops() — every aten
// packet with a pointwise-tagged overload — to the recomputable list, so an
// aten op whose packet_tags carry kTagPointwise is recomputable and fusible,
// unless its key was replaced with set().
//
// The data (category lists, tags, views, mutability exceptions) is generated
// from torch by tools/gen_default_ops.py into default_ops.inc: one table, of
// the newest release. What older releases lack is below (kReleaseGated*),
// each entry under the TorchBehavior switch that added it, and taken away
// in categories() when the switch is off.
#include <string_view>
#include <unordered_set>

#include "remat/error.h"
#include "remat/ops.h"

namespace remat {
namespace {

#include "ops/default_ops.inc"

using NameSet = std::unordered_set<std::string_view>;

template <size_t N>
NameSet make_set(const std::string_view (&names)[N]) {
  return NameSet(std::begin(names), std::end(names));
}

// Lookup tables over the generated arrays; built once, read-only after.
struct OpLibrary {
  NameSet namespaces = make_set(kOpNamespaces);
  NameSet pointwise_packets = make_set(kPointwisePackets);
  NameSet non_pointwise = make_set(kNonPointwiseOverloads);
  NameSet seeded = make_set(kSeededOverloads);
  NameSet seeded_packets;
  NameSet views = make_set(kViewOverloads);
  NameSet mutability_exceptions = make_set(kMutabilityExceptions);

  OpLibrary() {
    for (std::string_view o : kSeededOverloads) seeded_packets.insert(o.substr(0, o.rfind('.')));
  }
};

const OpLibrary& library() {
  static const OpLibrary lib;
  return lib;
}

bool is_function_namespace(std::string_view ns) {
  return ns == "operator" || ns == "_operator" || ns == "torch" || ns == "math" ||
         ns == "builtins";
}

// The same rule the generator checks against: an in-place op name ends in a
// single underscore ("add_", not "__and__"), an out= overload mentions "out".
bool name_rule_mutable(std::string_view op, std::string_view overload) {
  const bool inplace = op.size() >= 1 && op.back() == '_' &&
                       !(op.size() >= 2 && op[op.size() - 2] == '_');
  return inplace || overload.find("out") != std::string_view::npos;
}

constexpr uint8_t kRecomputableFusible = kCatRecomputable | kCatFusible;

// Packets whose pointwise tag a release added. Before it the packet has no
// pointwise overload at all, so pointwise_ops() skips it and, being in no
// other list, it is neither recomputable nor fusible. The tag is torch's
// (a graph file records it per op): the switch overrides what a graph
// captured under a newer torch says.
struct PointwiseSince {
  std::string_view packet;
  bool TorchBehavior::*since;
};
constexpr PointwiseSince kReleaseGatedPointwise[] = {
    // 2.12 tagged leaky_relu.default and _conj_physical.default pointwise
    // (not their .out overloads), and six in-place activations.
    {"aten.leaky_relu", &TorchBehavior::leaky_relu_family_pointwise},
    {"aten._conj_physical", &TorchBehavior::leaky_relu_family_pointwise},
    {"aten.celu_", &TorchBehavior::leaky_relu_family_pointwise},
    {"aten.elu_", &TorchBehavior::leaky_relu_family_pointwise},
    {"aten.hardsigmoid_", &TorchBehavior::leaky_relu_family_pointwise},
    {"aten.hardtanh_", &TorchBehavior::leaky_relu_family_pointwise},
    {"aten.leaky_relu_", &TorchBehavior::leaky_relu_family_pointwise},
    {"aten.selu_", &TorchBehavior::leaky_relu_family_pointwise},
};

// Entries of get_default_op_list() a release added: the categories they
// bring, taken away before it (an override of the key still wins).
struct DefaultSince {
  std::string_view key;
  uint8_t categories;
  bool TorchBehavior::*since;
};
constexpr DefaultSince kReleaseGatedDefaults[] = {
    // 2.13 listed prims.prepare_softmax_online in default_recomputable_ops
    // (so also fusible); 2.12 bans recomputing it under the allowlist rule.
    {"prims.prepare_softmax_online", kRecomputableFusible,
     &TorchBehavior::prepare_softmax_online_recomputable},
};

bool pointwise_in(std::string_view packet, const TorchBehavior& torch) {
  for (const PointwiseSince& p : kReleaseGatedPointwise) {
    if (p.packet == packet) return torch.*p.since;
  }
  return true;
}

}  // namespace

uint8_t op_category_from_name(std::string_view name) {
  for (const OpCategoryName& c : kOpCategoryNames) {
    if (c.name == name) return c.bit;
  }
  return 0;
}

std::string op_category_names(uint8_t categories) {
  std::string out;
  for (auto [bit, name] : kOpCategoryNames) {
    if (!(categories & bit)) continue;
    if (!out.empty()) out += '|';
    out += name;
  }
  return out;
}

const OpRegistry& OpRegistry::defaults() {
  static const std::unordered_map<std::string, uint8_t> lists = [] {
    std::unordered_map<std::string, uint8_t> by_key;
    // fusible = recomputable | random, as get_default_op_list builds it.
    for (std::string_view k : kDefaultRecomputable) by_key[std::string(k)] |= kRecomputableFusible;
    for (std::string_view k : kDefaultRandom) by_key[std::string(k)] |= kCatRandom | kCatFusible;
    for (std::string_view k : kDefaultView) by_key[std::string(k)] |= kCatView;
    for (std::string_view k : kDefaultComputeIntensive) by_key[std::string(k)] |= kCatComputeIntensive;
    return by_key;
  }();
  static const OpRegistry reg = [] {
    OpRegistry r;
    r.defaults_ = &lists;
    return r;
  }();
  return reg;
}

void OpRegistry::set(std::string_view key, uint8_t categories) {
  overrides_[std::string(key)] = categories;
}

void OpRegistry::add(std::string_view key, uint8_t categories) {
  // An overridden key keeps being overridden; the addition goes on top.
  if (auto it = overrides_.find(std::string(key)); it != overrides_.end()) {
    it->second |= categories;
    return;
  }
  added_[std::string(key)] |= categories;
}

uint8_t OpRegistry::added(std::string_view key) const {
  auto it = added_.find(std::string(key));
  return it == added_.end() ? 0 : it->second;
}

uint8_t OpRegistry::lookup(std::string_view key) const {
  const std::string k(key);
  if (auto it = overrides_.find(k); it != overrides_.end()) return it->second;
  uint8_t cats = 0;
  if (defaults_ != nullptr) {
    if (auto it = defaults_->find(k); it != defaults_->end()) cats = it->second;
  }
  if (auto it = added_.find(k); it != added_.end()) cats |= it->second;
  return cats;
}

bool OpRegistry::has_override(std::string_view key) const {
  return overrides_.count(std::string(key)) != 0;
}

uint8_t OpRegistry::categories(const Graph& g, const OpInfo& op,
                               const TorchBehavior& torch) const {
  // get_aten_target: the packet of an overload, the target itself otherwise.
  const std::string_view key = g.str(op.packet != 0 ? op.packet : op.name);
  if (has_override(key)) return lookup(key);
  uint8_t cats = lookup(key);
  for (const DefaultSince& d : kReleaseGatedDefaults) {
    // Only what the default list gave: categories a caller add()ed stay.
    if (d.key == key && !(torch.*d.since)) cats &= static_cast<uint8_t>(~d.categories | added(key));
  }
  // pointwise_ops() enumerates torch.ops.aten only, by packet (which a
  // packet target is).
  if ((op.kind == OpKind::kOverload || op.kind == OpKind::kPacket) &&
      (op.packet_tags & kTagPointwise) &&
      g.str(op.ns) == "aten" && pointwise_in(key, torch)) {
    cats |= kRecomputableFusible;
  }
  return cats;
}

std::vector<uint8_t> OpRegistry::classify(const Graph& g, const TorchBehavior& torch) const {
  std::vector<uint8_t> out;
  out.reserve(g.ops().size());
  for (const OpInfo& op : g.ops()) out.push_back(categories(g, op, torch));
  return out;
}

OpFacts default_op_facts(std::string_view name) {
  OpFacts f{OpKind::kFunction, "", std::string(name), false, false, 0, 0};
  const size_t first = name.find('.');
  if (first == std::string_view::npos) return f;  // a bare callable name
  const std::string_view ns = name.substr(0, first);
  f.ns = std::string(ns);
  if (ns == "higher_order") {
    f.kind = OpKind::kHigherOrder;
    return f;
  }
  if (is_function_namespace(ns)) {
    if (ns == "_operator") f.ns = "operator";
    return f;
  }
  const size_t last = name.rfind('.');
  std::string_view packet = name;
  std::string_view overload;
  if (last != first) {
    packet = name.substr(0, last);
    overload = name.substr(last + 1);
  } else if (!library().namespaces.count(ns)) {
    // "module.fn" outside torch's op namespaces: a plain Python callable.
    return f;
  }
  // An overload ("ns.op.overload"), or a bare packet of a known namespace,
  // whose tags are those of its .default overload (schema facts are an
  // OpOverload's only).
  const bool is_overload = !overload.empty();
  f.kind = is_overload ? OpKind::kOverload : OpKind::kPacket;
  f.packet = std::string(packet);
  const std::string_view op = packet.substr(first + 1);
  const OpLibrary& lib = library();
  const std::string tagged = is_overload ? std::string(name) : std::string(packet) + ".default";
  if (lib.pointwise_packets.count(packet)) {
    f.packet_tags |= kTagPointwise;
    if (!lib.non_pointwise.count(tagged)) f.tags |= kTagPointwise;
  }
  if (lib.seeded_packets.count(packet)) f.packet_tags |= kTagNondeterministicSeeded;
  if (lib.seeded.count(tagged)) f.tags |= kTagNondeterministicSeeded;
  if (!is_overload) return f;
  f.is_view = lib.views.count(name) != 0;
  f.is_mutable = name_rule_mutable(op, overload);
  if (lib.mutability_exceptions.count(name)) f.is_mutable = !f.is_mutable;
  return f;
}

}  // namespace remat
