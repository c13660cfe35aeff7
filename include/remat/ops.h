// remat/ops.h — the op registry: which ops the partitioner may recompute,
// which are views, random, compute-intensive or fusible.
//
// Contract: categories are keyed by what torch's `get_aten_target` returns:
// the overload packet of an OpOverload ("aten.mm"), or the target itself for
// anything else ("operator.getitem", "higher_order.auto_functionalized").
// A Python callable is named `fn.__module__ + "." + fn.__qualname__`, with
// the module "_operator" spelled "operator" ("operator.add", "math.floor",
// "builtins.round", "torch.sym_float", "torch._sym_sqrt"); a
// HigherOrderOperator is "higher_order." + its name().
// OpRegistry::defaults() holds the newest release's `get_default_op_list()`;
// a packet whose op facts carry the pointwise tag is recomputable and
// fusible, as there. What an older release lacks (a default entry, a
// pointwise tag) is taken away by categories() under that release's
// switches (TorchBehavior: leaky_relu_family_pointwise,
// prepare_softmax_online_recomputable). Users may add ops or override
// categories; an override replaces the packet's categories entirely, in
// every release.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "remat/graph.h"
#include "remat/torch_release.h"

namespace remat {

enum OpCategory : uint8_t {
  kCatRecomputable = 1 << 0,
  kCatView = 1 << 1,
  kCatRandom = 1 << 2,
  kCatComputeIntensive = 1 << 3,
  kCatFusible = 1 << 4,
};

// Every category with its name, in the order remat lists them (the JSON
// format's "categories", `remat info`, error messages): the one table of
// category names.
struct OpCategoryName {
  uint8_t bit;
  std::string_view name;
};
inline constexpr OpCategoryName kOpCategoryNames[] = {
    {kCatRecomputable, "recomputable"}, {kCatView, "view"}, {kCatRandom, "random"},
    {kCatComputeIntensive, "compute_intensive"}, {kCatFusible, "fusible"}};

// Parses "recomputable", "view", ... into a bit; 0 when unknown.
uint8_t op_category_from_name(std::string_view name);
std::string op_category_names(uint8_t categories);  // "recomputable|fusible"

class OpRegistry {
 public:
  // The newest release's default op lists (partitioners.get_default_op_list).
  static const OpRegistry& defaults();

  // Replaces the categories of a packet (or function) name.
  void set(std::string_view key, uint8_t categories);
  // Adds categories to what the packet already has.
  void add(std::string_view key, uint8_t categories);

  // Categories of one op of a graph, as `torch`'s release lists them.
  // Pointwise-tagged packets count as recomputable and fusible unless
  // overridden.
  uint8_t categories(const Graph& g, const OpInfo& op, const TorchBehavior& torch) const;
  // Categories of every op of g, indexed by OpId.
  std::vector<uint8_t> classify(const Graph& g, const TorchBehavior& torch) const;

  // Categories registered for a key (the newest release's defaults and
  // additions, or its override), without the pointwise rule.
  uint8_t lookup(std::string_view key) const;
  bool has_override(std::string_view key) const;

 private:
  uint8_t added(std::string_view key) const;  // what add() gave the key

  // The newest release's default lists, shared by every copy of defaults()
  // (null: none): PartitionOptions, which holds a registry, is copied
  // several times per call, and copying the lists' hundreds of strings
  // each time was an eighth of a small graph's engine time.
  const std::unordered_map<std::string, uint8_t>* defaults_ = nullptr;
  std::unordered_map<std::string, uint8_t> added_;
  std::unordered_map<std::string, uint8_t> overrides_;
};

// Op facts for a name with no recorded schema (a graph written by another
// compiler, or a JSON file without an "ops" table): kind, namespace and packet
// from the name's shape; pointwise and seeded tags from torch 2.13's op
// library; in-place ops (name ends in "_") are mutable.
struct OpFacts {
  OpKind kind;
  std::string ns;
  std::string packet;
  bool is_mutable;
  bool is_view;
  uint8_t tags;
  uint8_t packet_tags;
};
OpFacts default_op_facts(std::string_view name);

}  // namespace remat
