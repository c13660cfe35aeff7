// ops/registry.cc — the op registry (remat/ops.h): torch 2.13's default op
// categories, and op facts guessed from an op's name.
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
// from torch by tools/gen_default_ops.py into default_ops.inc.
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
  static const OpRegistry reg = [] {
    OpRegistry r;
    // fusible = recomputable | random, as get_default_op_list builds it.
    for (std::string_view k : kDefaultRecomputable) r.add(k, kRecomputableFusible);
    for (std::string_view k : kDefaultRandom) r.add(k, kCatRandom | kCatFusible);
    for (std::string_view k : kDefaultView) r.add(k, kCatView);
    for (std::string_view k : kDefaultComputeIntensive) r.add(k, kCatComputeIntensive);
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
  by_key_[std::string(key)] |= categories;
}

uint8_t OpRegistry::lookup(std::string_view key) const {
  const std::string k(key);
  if (auto it = overrides_.find(k); it != overrides_.end()) return it->second;
  auto it = by_key_.find(k);
  return it == by_key_.end() ? 0 : it->second;
}

bool OpRegistry::has_override(std::string_view key) const {
  return overrides_.count(std::string(key)) != 0;
}

uint8_t OpRegistry::categories(const Graph& g, const OpInfo& op) const {
  // get_aten_target: the packet of an overload, the target itself otherwise.
  const std::string_view key = g.str(op.packet != 0 ? op.packet : op.name);
  if (has_override(key)) return lookup(key);
  uint8_t cats = lookup(key);
  // pointwise_ops() enumerates torch.ops.aten only.
  if (op.kind == OpKind::kOverload && (op.packet_tags & kTagPointwise) &&
      g.str(op.ns) == "aten") {
    cats |= kRecomputableFusible;
  }
  return cats;
}

std::vector<uint8_t> OpRegistry::classify(const Graph& g) const {
  std::vector<uint8_t> out;
  out.reserve(g.ops().size());
  for (const OpInfo& op : g.ops()) out.push_back(categories(g, op));
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
  // An overload ("ns.op.overload"), or a bare packet of a known namespace.
  f.kind = OpKind::kOverload;
  f.packet = std::string(packet);
  const std::string_view op = packet.substr(first + 1);
  const OpLibrary& lib = library();
  const bool is_overload = !overload.empty();
  if (lib.pointwise_packets.count(packet)) {
    f.packet_tags |= kTagPointwise;
    if (is_overload && !lib.non_pointwise.count(name)) f.tags |= kTagPointwise;
  }
  if (lib.seeded_packets.count(packet)) f.packet_tags |= kTagNondeterministicSeeded;
  if (is_overload && lib.seeded.count(name)) f.tags |= kTagNondeterministicSeeded;
  f.is_view = is_overload && lib.views.count(name) != 0;
  f.is_mutable = name_rule_mutable(op, overload);
  if (is_overload && lib.mutability_exceptions.count(name)) f.is_mutable = !f.is_mutable;
  return f;
}

}  // namespace remat
