// extract/extract.cc — stage 4: the forward and backward graphs, as torch
// 2.13's `_extract_fwd_bwd_modules` builds them (omit_aot_autograd_runtime
// False, no fp8 quantization).
//
// Contract (extract.h), in torch's order:
//  1. A first backward selection over saved_sym_nodes + saved_opaque_nodes +
//     saved_values + tangents + bwd seed offsets. Its placeholders decide the
//     pruning, each matched back *by name* as torch's `_remove_by_name` does:
//     unused ones leave all three saved lists; with distributed available, so
//     do ones whose only users are collective waits nobody uses; a
//     BackwardState leaves saved_values (the backward takes it directly).
//  2. Symbol bindings: saved sym nodes that bind a symbol go first; then the
//     free symbols of the derived sym nodes, saved values and tangents, in
//     that order, each node's new symbols sorted by name and mapped to the
//     first node of the graph that binds them (2.14 on: the symbols of the
//     raw expressions too, bound by raw expression).
//  3. Saved tensors: version-counter-checked first, then no-vc-check ones;
//     script objects move to their own list, after the tensors.
//  4. The final forward and backward selections, built into Graphs whose
//     names follow FX's namespace rules (every created name reserved, DCE'd
//     ones included; placeholders named from their target as
//     fx.Graph.placeholder does).
// Nodes keep `origin` through NodeCopier's rule: the source's origin when it
// has one, else the source id.
#include <algorithm>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "analyze/analyze.h"
#include "extract/extract.h"
#include "graph/copy.h"
#include "graph/query.h"
#include "graph/subgraph.h"
#include "remat/error.h"

namespace remat {
namespace {

constexpr uint32_t kNone32 = std::numeric_limits<uint32_t>::max();

// fx.Graph._target_to_str for a string target: "__x__" loses its dunders,
// then camelCase becomes snake_case. fx.Graph.placeholder(name) names the
// node from this, not from `name` itself.
std::string target_to_str(std::string_view target) {
  if (target.size() >= 2 && target.substr(0, 2) == "__" &&
      target.substr(target.size() - 2) == "__") {
    target = target.size() >= 4 ? target.substr(2, target.size() - 4) : std::string_view{};
  }
  std::string out;
  out.reserve(target.size() + 4);
  for (size_t i = 0; i < target.size(); ++i) {
    const char c = target[i];
    if (c >= 'A' && c <= 'Z') {
      if (i > 0 && target[i - 1] >= 'a' && target[i - 1] <= 'z') out.push_back('_');
      out.push_back(static_cast<char>(c - 'A' + 'a'));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// The name fx.Graph.placeholder gives a placeholder for node `id`.
StrId placeholder_name(FxNamespace& names, const Graph& g, NodeId id) {
  const std::string_view name = g.name(id);
  const bool plain = !(name.starts_with("__") && name.ends_with("__")) &&
                     std::none_of(name.begin(), name.end(),
                                  [](char c) { return c >= 'A' && c <= 'Z'; });
  if (plain) return names.create(g.node(id).name);  // the common case: no new string
  return names.create(g.shared_strings()->intern(target_to_str(name)));
}

// A selection turned into a Graph, with FX's name state after building it.
struct Built {
  Graph graph;
  FxNamespace names;
};

// `passthrough[i]`, when not kNoArg, is the argument item of g's output node
// that output i stands for when it is no node (a constant, None, ...): it is
// copied as is, as torch's extraction appends non-node outputs unchanged.
Built build(const Graph& g, const SubgraphSelection& sel, std::span<const ArgId> passthrough,
            const TorchBehavior& torch) {
  const size_t n = g.size();
  Built out{Graph(), FxNamespace(g.shared_strings(), torch.fx_name_count_by_base)};
  // Names first, in creation order: placeholders, every copy (even those
  // DCE removed afterwards), then the output node.
  std::vector<StrId> input_names;
  input_names.reserve(sel.inputs.size());
  for (NodeId id : sel.inputs) input_names.push_back(placeholder_name(out.names, g, id));
  std::vector<StrId> copy_name(n, 0);
  for (size_t k = sel.inputs.size(); k < sel.created.size(); ++k) {
    const NodeId id = sel.created[k];
    copy_name[id] = out.names.create(g.node(id).name);
  }
  const std::string_view output_name = out.names.create_name("output");

  GraphBuilder b(g);  // shares g's pools: copies re-hash nothing
  size_t arg_items = 3 + sel.outputs.size();  // the output node's
  for (NodeId id : sel.body) {
    for (ArgId root : {g.node(id).args, g.node(id).kwargs}) {
      if (root != kNoArg) arg_items += g.arg(root).span;
    }
  }
  b.reserve(sel.inputs.size() + sel.body.size() + 1, arg_items);
  NodeCopier copier(g, b);
  std::vector<NodeId> remap(n, kNoNode);
  // A node listed twice as input: the later placeholder takes the uses.
  for (size_t i = 0; i < sel.inputs.size(); ++i) {
    remap[sel.inputs[i]] = copier.copy_as_placeholder(sel.inputs[i], kNoNode, input_names[i]);
  }
  // A node standing for another reads that one's copy (its dependency comes
  // first in graph order, so its copy exists by the time a user is copied).
  size_t next_alias = 0;
  auto alias_up_to = [&](NodeId stop) {
    for (; next_alias < std::min<size_t>(stop, sel.stands_for.size()); ++next_alias) {
      if (sel.stands_for[next_alias] != kNoNode) remap[next_alias] = remap[sel.stands_for[next_alias]];
    }
  };
  for (NodeId id : sel.body) {
    alias_up_to(id);
    remap[id] = copier.copy(id, remap, kNoNode, copy_name[id]);
  }
  alias_up_to(static_cast<NodeId>(n));

  // graph.output(tuple(values)): args is (values,), as FX stores it.
  Node output;
  output.args = b.begin(ArgKind::kTuple);
  const ArgId values = b.begin(ArgKind::kTuple);
  for (size_t i = 0; i < sel.outputs.size(); ++i) {
    const NodeId x = sel.outputs[i];
    if (x == kNoNode && i < passthrough.size() && passthrough[i] != kNoArg) {
      b.add_tree(g, passthrough[i], remap);
      continue;
    }
    Arg a;
    if (x != kNoNode) {
      a.kind = ArgKind::kNode;
      a.id = remap[x];
    }
    b.leaf(a);
  }
  b.end(values);
  b.end(output.args);
  output.kwargs = b.begin(ArgKind::kDict);
  b.end(output.kwargs);
  output.kind = NodeKind::kOutput;
  output.name = b.intern(output_name);
  output.target = b.intern("output");
  if (g.output() != kNoNode) {
    const NodeId o = g.output();
    output.origin = joint_id(g, o);
  }
  b.add_node(output);
  out.graph = b.finish();
  return out;
}

std::vector<NodeId> concat(std::initializer_list<const std::vector<NodeId>*> parts) {
  size_t total = 0;
  for (const auto* p : parts) total += p->size();
  std::vector<NodeId> out;
  out.reserve(total);
  for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
  return out;
}

// Removes, from `list`, the first `pending[x]` occurrences of each x: what
// repeated `_remove_by_name` calls (first match each time) leave.
void remove_first_occurrences(std::vector<NodeId>& list, std::vector<uint32_t>& pending) {
  size_t w = 0;
  for (NodeId x : list) {
    if (pending[x] > 0) {
      --pending[x];
      continue;
    }
    list[w++] = x;
  }
  list.resize(w);
}

// Step 1: prunes the saved lists with a first backward selection.
void prune_saved(const Graph& g, SavedSets& saved, const std::vector<NodeId>& tangents,
                 const std::vector<NodeId>& bwd_seeds, const std::vector<NodeId>& bwd_outputs,
                 const std::vector<NodeId>& backward_state_inputs,
                 const PartitionOptions& options) {
  const size_t n = g.size();
  const std::vector<NodeId> inputs =
      concat({&saved.saved_sym_nodes, &saved.saved_opaque_nodes, &saved.saved_values, &tangents,
              &bwd_seeds});
  const SubgraphSelection sel = select_subgraph(g, inputs, bwd_outputs, Subgraph::kBackward,
                                                impurity(options.dce_impure_random, options.torch),
                                                false, options.torch.control_deps_extraction);

  // Uses inside the selected backward: by live copies, or by the output.
  std::vector<uint8_t> in_body(n, 0), in_output(n, 0);
  for (NodeId id : sel.body) in_body[id] = 1;
  for (NodeId x : sel.outputs) {
    if (x != kNoNode) in_output[x] = 1;
  }
  // x's users in that backward: live copies reading x, also through a node
  // that stands for x (a see-through getitem: its users read x).
  std::vector<std::vector<NodeId>> users_through(sel.stands_for.empty() ? 0 : n);
  for (NodeId a = 0; a < sel.stands_for.size(); ++a) {
    if (sel.stands_for[a] == kNoNode) continue;
    for (NodeId w : g.users(a)) {
      if (in_body[w]) users_through[sel.stands_for[a]].push_back(w);
    }
  }
  auto body_users = [&](NodeId x, auto&& visit) {
    for (NodeId u : g.users(x)) {
      if (in_body[u]) visit(u);
    }
    if (!users_through.empty()) {
      for (NodeId w : users_through[x]) visit(w);
    }
  };
  auto has_users = [&](NodeId x) {
    bool any = in_output[x] != 0;
    body_users(x, [&](NodeId) { any = true; });
    return any;
  };
  // The placeholder that takes the uses of an input listed twice is the last.
  std::vector<uint32_t> last(n, kNone32);
  for (size_t i = 0; i < inputs.size(); ++i) last[inputs[i]] = static_cast<uint32_t>(i);

  // The placeholders' names in that backward.
  FxNamespace names(g.shared_strings(), options.torch.fx_name_count_by_base);
  std::vector<uint32_t> drop_values(n, 0), drop_syms(n, 0), drop_opaque(n, 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const NodeId x = inputs[i];
    // What `_remove_by_name` matches: the joint node of the same name.
    const NodeId named = g.node_named(placeholder_name(names, g, x));
    const bool used = last[x] == i && has_users(x);
    bool drop_all = !used;
    if (used && options.distributed_available && !in_output[x]) {
      // A dead collective's activation: every use is a collective wait that
      // nothing uses.
      drop_all = true;
      body_users(x, [&](NodeId u) {
        if (!is_collective_wait(g, u, options.torch) || has_users(u)) drop_all = false;
      });
    }
    if (drop_all) {
      if (named != kNoNode) {
        ++drop_values[named];
        ++drop_syms[named];
        ++drop_opaque[named];
      }
    } else if (g.node(x).value == ValueKind::kBackwardState) {
      if (named != kNoNode) ++drop_values[named];
      if (backward_state_inputs.empty()) {
        throw Error(ErrorCode::kInvalidGraph,
                    fmt::format("node '{}': a saved BackwardState, but the joint graph has "
                                "no BackwardState placeholder",
                                g.name(x)));
      }
    }
  }
  remove_first_occurrences(saved.saved_values, drop_values);
  remove_first_occurrences(saved.saved_sym_nodes, drop_syms);
  remove_first_occurrences(saved.saved_opaque_nodes, drop_opaque);
}

// Step 2: puts the nodes binding every symbol the backward inputs mention
// first in saved_sym_nodes. 2.13 and older read symbols and bindings from
// the values' expressions after ShapeEnv's replacements; 2.14 on
// (bind_unreplaced_symbols) also binds the symbols of their raw
// expressions, and a node binds the symbol of its raw expression (so a
// symbol replaced by another still gets a binder of its own).
void bind_symbols(const Graph& g, std::vector<NodeId>& saved_sym_nodes,
                  const std::vector<NodeId>& saved_values, const std::vector<NodeId>& tangents,
                  const TorchBehavior& torch) {
  const bool raw = torch.bind_unreplaced_symbols;
  const size_t num_strings = g.strings().size();
  std::vector<uint8_t> saved_symbol(num_strings, 0);
  std::vector<NodeId> binding, derived;
  for (NodeId x : saved_sym_nodes) {
    const StrId s = g.binds_symbol(x, raw);
    if (s != 0) {
      saved_symbol[s] = 1;
      binding.push_back(x);
    } else {
      derived.push_back(x);
    }
  }
  // find_symbol_binding_fx_nodes: the first binder of each symbol.
  std::vector<NodeId> binder(num_strings, kNoNode);
  for (NodeId id = 0; id < g.size(); ++id) {
    if (g.node(id).extra == kNoExtra) continue;
    const StrId s = g.binds_symbol(id, raw);
    if (s != 0 && binder[s] == kNoNode) binder[s] = id;
  }
  std::vector<StrId> fresh;
  for (const std::vector<NodeId>* list :
       std::initializer_list<const std::vector<NodeId>*>{&derived, &saved_values, &tangents}) {
    for (NodeId x : *list) {
      if (g.node(x).value == ValueKind::kMissing) continue;
      if (g.node(x).has(kFlagNonScalarConstant)) {
        // torch's free_symbols asserts on such a value (in 2.11 an Enum
        // member saved by default_partition, 2.12 on any constant it does
        // not count opaque).
        throw Error(ErrorCode::kInvalidGraph,
                    fmt::format("node '{}': cannot extract sympy expressions from its value {} "
                                "(a saved constant that is no int, float or bool)",
                                g.name(x), g.str(g.extra(x).repr)));
      }
      fresh.clear();
      for (StrId s : g.free_symbols(x)) {
        if (!saved_symbol[s]) fresh.push_back(s);
      }
      if (raw) {
        for (StrId s : g.unreplaced_symbols(x)) {
          if (!saved_symbol[s]) fresh.push_back(s);
        }
      }
      std::sort(fresh.begin(), fresh.end(),
                [&](StrId a, StrId b) { return g.str(a) < g.str(b); });
      fresh.erase(std::unique(fresh.begin(), fresh.end()), fresh.end());
      for (StrId s : fresh) {
        if (binder[s] != kNoNode) binding.push_back(binder[s]);
      }
      for (StrId s : fresh) saved_symbol[s] = 1;
    }
  }
  saved_sym_nodes = std::move(binding);
  saved_sym_nodes.insert(saved_sym_nodes.end(), derived.begin(), derived.end());
}

}  // namespace

Extracted extract_fwd_bwd(const Graph& g, SavedSets saved, int num_fwd_outputs,
                          const PartitionOptions& options) {
  const OutputLeaves leaves = split_outputs(g, num_fwd_outputs);
  const std::vector<NodeId>& fwd_outputs = leaves.fwd;
  const std::vector<NodeId>& bwd_outputs = leaves.bwd;

  std::vector<NodeId> primals, tangents, fwd_seeds, bwd_seeds, backward_states;
  for (NodeId id = 0; id < g.size(); ++id) {
    if (g.node(id).kind != NodeKind::kPlaceholder) continue;
    if (is_primal(g, id)) primals.push_back(id);
    if (is_tangent(g, id)) tangents.push_back(id);
    if (is_fwd_seed_offset(g, id)) fwd_seeds.push_back(id);
    if (is_bwd_seed_offset(g, id)) bwd_seeds.push_back(id);
    if (is_backward_state(g, id)) backward_states.push_back(id);
  }

  prune_saved(g, saved, tangents, bwd_seeds, bwd_outputs, backward_states, options);
  bind_symbols(g, saved.saved_sym_nodes, saved.saved_values, tangents, options.torch);

  Extracted e;
  // Step 3: vc-checked tensors, then no-vc-check ones (stable); script
  // objects apart.
  std::vector<NodeId> no_vc_check;
  for (NodeId x : saved.saved_values) {
    const Node& node = g.node(x);
    if (node.value == ValueKind::kScriptObject) {
      e.saved_script_objects.push_back(x);
    } else if (node.has(kFlagNoVcCheck)) {
      no_vc_check.push_back(x);
    } else {
      e.saved_values.push_back(x);
    }
  }
  e.saved_values.insert(e.saved_values.end(), no_vc_check.begin(), no_vc_check.end());
  e.saved_opaque_nodes = std::move(saved.saved_opaque_nodes);
  e.saved_sym_nodes = std::move(saved.saved_sym_nodes);

  // Step 4: the graphs. Saved values leave the forward as
  // (tensors, script objects, opaque nodes, sym nodes); the backward takes
  // the sym nodes first.
  const std::vector<NodeId> fw_inputs = concat({&primals, &fwd_seeds});
  const std::vector<NodeId> fw_outputs =
      concat({&fwd_outputs, &e.saved_values, &e.saved_script_objects, &e.saved_opaque_nodes,
              &e.saved_sym_nodes});
  // The forward's outputs start with the joint's forward leaves, so their
  // pass-through items line up; saved values are all nodes.
  const bool control_deps = options.torch.control_deps_extraction;
  Built fw = build(g, select_subgraph(g, fw_inputs, fw_outputs, Subgraph::kForward,
                                      impurity(options.dce_impure_random, options.torch),
                                      false, control_deps),
                   leaves.fwd_args, options.torch);
  const std::vector<NodeId> bw_inputs =
      concat({&e.saved_sym_nodes, &e.saved_values, &e.saved_script_objects,
              &e.saved_opaque_nodes, &tangents, &bwd_seeds, &backward_states});
  Built bw = build(g, select_subgraph(g, bw_inputs, bwd_outputs, Subgraph::kBackward,
                                      impurity(options.dce_impure_random, options.torch),
                                      false, control_deps),
                   leaves.bwd_args, options.torch);
  e.forward = std::move(fw.graph);
  e.forward_names = std::move(fw.names);
  e.backward = std::move(bw.graph);
  e.backward_names = std::move(bw.names);
  return e;
}

}  // namespace remat
