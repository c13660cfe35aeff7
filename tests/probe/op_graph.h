// tests/probe/op_graph.h — test-only: builds a one-op Graph from a line of
// tokens, so the flop tests (C++) and the parity probe (driven from Python)
// describe op calls the same way.
//
//   aten.mm.default t:4x8 t:8x16
//
// Tokens after the op name are its positional arguments; `name=TOKEN` is a
// keyword argument. TOKEN is one of
//   t:2x3x4   a tensor placeholder with that shape (`t:` is 0-d); a dim `?`
//             is an unbacked symbol without a hint, `7s` a symbol hinted 7
//   i:5  f:0.5  b:1  n (None)  l:1,2 (int list)  bl:1,0 (bool list)
//   si:7 / si:?   a SymInt placeholder with hint 7 / without a hint
//   sb            a SymBool placeholder
//   ga            a get_attr node without "val" metadata (a HOP body, say)
// The op node is named "op"; find it with Graph::find("op").
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "remat/error.h"
#include "remat/graph.h"

namespace remat::testing {

class OpGraphParser {
 public:
  Graph parse(std::string_view line) {
    std::istringstream in{std::string(line)};
    std::string op;
    in >> op;
    if (op.empty()) throw Error(ErrorCode::kParse, "op line: no op name");
    std::vector<std::pair<std::string, std::string>> tokens;  // (keyword, token)
    for (std::string tok; in >> tok;) {
      const size_t eq = tok.find('=');
      if (eq != std::string::npos && tok.find(':') > eq) {
        tokens.emplace_back(tok.substr(0, eq), tok.substr(eq + 1));
      } else {
        tokens.emplace_back("", tok);
      }
    }
    // Placeholders first (they must precede their user).
    std::vector<NodeId> node_of(tokens.size(), kNoNode);
    for (size_t i = 0; i < tokens.size(); ++i) node_of[i] = placeholder(i, tokens[i].second);

    Node call;
    call.name = b_.intern("op");
    call.kind = NodeKind::kCallFunction;
    call.target = b_.intern(op);
    call.op = b_.add_op_by_name(op);
    call.args = b_.begin(ArgKind::kTuple);
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i].first.empty()) leaf_of(tokens[i].second, node_of[i]);
    }
    b_.end(call.args);
    call.kwargs = b_.begin(ArgKind::kDict);
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i].first.empty()) continue;
      Arg key;
      key.kind = ArgKind::kStr;
      key.id = b_.intern(tokens[i].first);
      b_.leaf(key);
      leaf_of(tokens[i].second, node_of[i]);
    }
    b_.end(call.kwargs);
    const NodeId op_id = b_.add_node(call);

    Node out;
    out.name = b_.intern("output");
    out.kind = NodeKind::kOutput;
    out.target = b_.intern("output");
    out.args = b_.begin(ArgKind::kTuple);
    Arg ref;
    ref.kind = ArgKind::kNode;
    ref.id = op_id;
    b_.leaf(ref);
    b_.end(out.args);
    b_.add_node(out);
    return b_.finish();
  }

 private:
  static std::vector<std::string> split(std::string_view s, char sep) {
    std::vector<std::string> out;
    if (s.empty()) return out;
    size_t start = 0;
    while (true) {
      const size_t at = s.find(sep, start);
      out.emplace_back(s.substr(start, at - start));
      if (at == std::string_view::npos) break;
      start = at + 1;
    }
    return out;
  }

  NodeId placeholder(size_t index, const std::string& tok) {
    const bool tensor = tok.rfind("t:", 0) == 0;
    const bool symint = tok.rfind("si:", 0) == 0;
    const bool symbool = tok == "sb";
    const bool get_attr = tok == "ga";
    if (!tensor && !symint && !symbool && !get_attr) return kNoNode;
    Node n;
    NodeExtra x;
    // fmt::format, not "arg" + std::to_string(...): GCC 12 at -O3 warns there
    // (-Wrestrict, wrongly), and CI builds with warnings as errors.
    n.name = b_.intern(fmt::format("arg{}", index));
    n.kind = get_attr ? NodeKind::kGetAttr : NodeKind::kPlaceholder;
    n.target = n.name;
    if (get_attr) {
      n.value = ValueKind::kMissing;
    } else if (tensor) {
      n.value = ValueKind::kTensor;
      TensorMeta t;
      t.dtype = b_.intern("float32");
      t.itemsize = 4;
      t.device = b_.intern("meta");
      const std::vector<std::string> dims = split(tok.substr(2), 'x');
      t.rank = static_cast<uint32_t>(dims.size());
      t.shape_begin = static_cast<uint32_t>(b_.dim_count());
      int64_t numel = 1;
      for (const std::string& d : dims) {
        Dim dim;
        if (d == "?") {
          dim.has_hint = false;
          dim.expr = b_.intern(fmt::format("u{}", index));
        } else if (!d.empty() && d.back() == 's') {
          dim.value = std::stoll(d.substr(0, d.size() - 1));
          dim.expr = b_.intern(fmt::format("s{}", index));
        } else {
          dim.value = std::stoll(d);
        }
        numel *= dim.has_hint ? dim.value : 4096;
        b_.add_dim(dim);
      }
      t.numel_hint = numel;
      n.tensors_begin = b_.add_tensor(t);
      n.tensors_count = 1;
    } else if (symint) {
      n.value = ValueKind::kSymInt;
      x.sym_expr = b_.intern(fmt::format("s{}", index));
      const std::string hint = tok.substr(3);
      x.has_sym_hint = hint != "?";
      if (x.has_sym_hint) x.sym_hint = std::stoll(hint);
    } else {
      n.value = ValueKind::kSymBool;
      x.sym_expr = b_.intern(fmt::format("b{}", index));
    }
    return b_.add_node(n, x);
  }

  void int_leaf(ArgKind kind, const std::string& text) {
    Arg a;
    a.kind = kind;
    a.i = std::stoll(text);
    b_.leaf(a);
  }

  void leaf_of(const std::string& tok, NodeId node) {
    Arg a;
    if (node != kNoNode) {
      a.kind = ArgKind::kNode;
      a.id = node;
      b_.leaf(a);
    } else if (tok == "n") {
      b_.leaf(a);
    } else if (tok.rfind("i:", 0) == 0) {
      int_leaf(ArgKind::kInt, tok.substr(2));
    } else if (tok.rfind("b:", 0) == 0) {
      int_leaf(ArgKind::kBool, tok.substr(2));
    } else if (tok.rfind("f:", 0) == 0) {
      a.kind = ArgKind::kFloat;
      a.f = std::stod(tok.substr(2));
      b_.leaf(a);
    } else if (tok.rfind("l:", 0) == 0 || tok.rfind("bl:", 0) == 0) {
      const bool bools = tok[0] == 'b';
      const ArgId list = b_.begin(ArgKind::kList);
      for (const std::string& v : split(tok.substr(bools ? 3 : 2), ',')) {
        int_leaf(bools ? ArgKind::kBool : ArgKind::kInt, v);
      }
      b_.end(list);
    } else {
      throw Error(ErrorCode::kParse, "op line: bad token '" + tok + "'");
    }
  }

  GraphBuilder b_;
};

inline Graph op_graph(std::string_view line) { return OpGraphParser().parse(line); }

}  // namespace remat::testing
