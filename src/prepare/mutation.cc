// prepare/mutation.cc — inductor's is_mutation_op.
//
// Contract: mutation.h.
#include "prepare/mutation.h"

#include <string_view>

#include "graph/fx_names.h"
#include "graph/query.h"

namespace remat {
namespace {

// The name Python reports as `target.__name__`: an OpOverload's is
// "op.overload", a HigherOrderOperator's its name, a packet's its op name, a
// function's the last part of its qualname.
std::string_view python_name(const Graph& g, const OpInfo& op) {
  std::string_view name = g.str(op.name);
  switch (op.kind) {
    case OpKind::kOverload: {
      const size_t dot = name.find('.');
      return dot == std::string_view::npos ? name : name.substr(dot + 1);
    }
    case OpKind::kHigherOrder:
    case OpKind::kFunction:
    case OpKind::kPacket: {
      const size_t dot = name.rfind('.');
      return dot == std::string_view::npos ? name : name.substr(dot + 1);
    }
  }
  return name;
}

// Whether kwargs has an "out" entry that is not None.
bool has_out_kwarg(const Graph& g, const Node& n) {
  const ArgId out = dict_lookup(g, n.kwargs, "out");
  return out != kNoArg && g.arg(out).kind != ArgKind::kNone;
}

}  // namespace

bool mutation_name_match(std::string_view s) {
  const size_t n = s.size();
  static constexpr std::string_view kWords[] = {"set", "enter", "exit", "seed"};
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && s[i - 1] == '_') continue;  // (?<!_)
    if (s[i] == '_') {
      if (i + 1 == n) return true;                                          // _$
      if (s[i + 1] == '.' && (i + 2 == n || s[i + 2] != '_')) return true;  // _[.](?!_)
    }
    // (\b|_) then a word: either a boundary before s[i] (a letter) or a '_'.
    for (size_t start : {i, i + 1}) {
      if (start == i + 1 && s[i] != '_') continue;
      if (start == i && !(i == 0 || !is_word_char(s[i - 1]))) continue;  // \b before a letter
      for (std::string_view w : kWords) {
        if (s.substr(start, w.size()) != w) continue;
        const size_t j = start + w.size();
        // (\b|_)(?!_): end of word at a non-word char or the end; or one '_'
        // not followed by another.
        if (j == n || !is_word_char(s[j])) return true;
        if (s[j] == '_' && (j + 1 == n || s[j + 1] != '_')) return true;
      }
    }
  }
  return false;
}

int op_mutation(const Graph& g, const OpInfo& op) {
  // inductor.resize_storage_bytes_ has a schema that hides its mutation;
  // torch falls through to the name check for it.
  if (op.kind == OpKind::kOverload && g.str(op.name) != "inductor.resize_storage_bytes_.default") {
    return op.is_mutable ? 1 : 0;
  }
  return -1;
}

bool is_mutation_op(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  const OpInfo* op = g.op(id);
  if (op != nullptr) {
    if (const int decided = op_mutation(g, *op); decided >= 0) return decided == 1;
    const std::string_view name = g.str(op->name);
    // Only v1 is an AutoFunctionalized instance; v2 goes through the name
    // check (which it does not match).
    if (name == "higher_order.auto_functionalized") return false;
    if (n.kind == NodeKind::kCallFunction && mutation_name_match(python_name(g, *op))) {
      return true;
    }
  }
  return has_out_kwarg(g, n);
}

}  // namespace remat
