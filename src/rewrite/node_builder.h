// rewrite/node_builder.h — the pieces the rewrites build created nodes from:
// an op for the new graph, and one argument leaf or empty container at a
// time.
//
// Contract: each call appends to the GraphBuilder's current argument
// (between a begin() and its end(), or as a node's args/kwargs root) and
// returns the ArgId it appended. They only spell out Arg values, so every
// rewrite (RNG functionalization, graph-safe RNG through invoke_subgraph,
// activation offloading, FP8 quantization) writes the same leaf the same
// way. One home: a rewrite that needs another leaf kind adds it here.
#pragma once

#include <cstdint>
#include <string_view>

#include "graph/copy.h"
#include "remat/graph.h"

namespace remat::build {

// An op usable in `b`: the source graph's own facts when it has the op (its
// schema as the exporter recorded it), the registry's defaults otherwise.
inline OpId op_in(const Graph& src, NodeCopier& copier, GraphBuilder& b, std::string_view name) {
  const OpId o = src.find_op(name);
  return o != kNoOp ? copier.op(o) : b.add_op_by_name(name);
}

// An empty container (the `()` of no args, the `{}` of no kwargs).
inline ArgId empty(GraphBuilder& b, ArgKind kind) {
  const ArgId a = b.begin(kind);
  b.end(a);
  return a;
}

// One leaf whose value is the id of something: a node, an interned string.
inline ArgId leaf_id(GraphBuilder& b, ArgKind kind, uint32_t id) {
  Arg a;
  a.kind = kind;
  a.id = id;
  return b.leaf(a);
}

inline ArgId node(GraphBuilder& b, NodeId id) { return leaf_id(b, ArgKind::kNode, id); }
inline ArgId device(GraphBuilder& b, StrId d) { return leaf_id(b, ArgKind::kDevice, d); }
inline ArgId dtype(GraphBuilder& b, StrId d) { return leaf_id(b, ArgKind::kDtype, d); }
inline ArgId str(GraphBuilder& b, std::string_view s) {
  return leaf_id(b, ArgKind::kStr, b.intern(s));
}

inline ArgId integer(GraphBuilder& b, int64_t v) {
  Arg a;
  a.kind = ArgKind::kInt;
  a.i = v;
  return b.leaf(a);
}

inline ArgId boolean(GraphBuilder& b, bool v) {
  Arg a;
  a.kind = ArgKind::kBool;
  a.i = v ? 1 : 0;
  return b.leaf(a);
}

inline ArgId real(GraphBuilder& b, double v) {
  Arg a;
  a.kind = ArgKind::kFloat;
  a.f = v;
  return b.leaf(a);
}

}  // namespace remat::build
