// graph/random_op.cc — see random_op.h.
//
// torch 2.14 decides "statically zero" with statically_known_true(dropout_p
// == 0.0) on the argument itself. In an FX graph that argument is a Python
// number (0, 0.0, -0.0, False compare equal to 0.0), a node (an fx.Node
// never equals a float, so it is random), or absent. The exporter records
// the schema's position and default of dropout_p per op (OpInfo), so the
// decision is made here from the graph alone, for any release and for
// stored graphs too; a graph whose ops lack that fact (older files, other
// producers) keeps the tag's answer.
#include "graph/random_op.h"

#include "graph/query.h"

namespace remat {
namespace {

bool is_zero_constant(const Arg& a) {
  switch (a.kind) {
    case ArgKind::kFloat: return a.f == 0.0;
    case ArgKind::kInt:
    case ArgKind::kBool: return a.i == 0;
    default: return false;  // a node, None, an opaque object
  }
}

}  // namespace

bool dropout_statically_zero(const Graph& g, NodeId id) {
  const OpInfo* op = g.op(id);
  if (op == nullptr || op->dropout_p_index < 0) return false;
  ArgId a = positional(g, id, static_cast<size_t>(op->dropout_p_index));
  if (a == kNoArg) a = dict_lookup(g, g.node(id).kwargs, "dropout_p");
  if (a == kNoArg) return op->dropout_p_has_default && op->dropout_p_default == 0.0;
  return is_zero_constant(g.arg(a));
}

bool is_rng_op(const Graph& g, NodeId id, const TorchBehavior& torch) {
  if (g.node(id).kind != NodeKind::kCallFunction) return false;
  const OpInfo* op = g.op(id);
  if (op == nullptr || (op->tags & kTagNondeterministicSeeded) == 0) return false;
  // torch 2.13 and older: the tag alone decides, so attention without
  // dropout is replayed like dropout. 2.14: not when dropout is statically 0.
  if (torch.sdpa_zero_dropout_not_random && op->dropout_p_index >= 0)
    return !dropout_statically_zero(g, id);
  return true;
}

}  // namespace remat
