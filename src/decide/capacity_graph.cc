// decide/capacity_graph.cc — the network of solve_min_cut, its cut, and the
// diagnosis torch prints when no finite cut exists. See capacity_graph.h.
#include "decide/capacity_graph.h"

#include <algorithm>

#include <fmt/format.h>

#include "remat/error.h"

namespace remat {

CapacityGraph::CapacityGraph(const Graph& g, const TorchBehavior& torch)
    : g_(g), torch_(torch), vertex_of_(2 * g.size(), kNoVertex), source_edge_(g.size(), kNoVertex) {
  key_.reserve(2 * g.size() + 2);
  tail_.reserve(4 * g.size());
  head_.reserve(4 * g.size());
  cap_.reserve(4 * g.size());
  reason_.reserve(4 * g.size());
  float_.reserve(4 * g.size());
}

uint32_t CapacityGraph::vertex(uint32_t key) {
  key_.push_back(key);
  return static_cast<uint32_t>(key_.size() - 1);
}

uint32_t CapacityGraph::source() {
  if (source_ == kNoVertex) source_ = vertex(kSourceKey);
  return source_;
}
uint32_t CapacityGraph::sink() {
  if (sink_ == kNoVertex) sink_ = vertex(kSinkKey);
  return sink_;
}
uint32_t CapacityGraph::in(NodeId n) {
  uint32_t& v = vertex_of_[2 * n];
  if (v == kNoVertex) v = vertex(2 * n);
  return v;
}
uint32_t CapacityGraph::out(NodeId n) {
  uint32_t& v = vertex_of_[2 * n + 1];
  if (v == kNoVertex) v = vertex(2 * n + 1);
  return v;
}

uint32_t CapacityGraph::intern_reason(std::string_view r) {
  if (r.empty()) return 0;
  // A graph has a handful of distinct reasons: scanning them beats hashing.
  if (reasons_.size() <= 16) {
    for (uint32_t k = 1; k < reasons_.size(); ++k) {
      if (reasons_[k] == r) return k;
    }
  }
  auto [it, fresh] = reason_ids_.try_emplace(std::string(r), static_cast<uint32_t>(reasons_.size()));
  if (fresh) reasons_.emplace_back(r);
  return it->second;
}

void CapacityGraph::add_edge(uint32_t u, uint32_t v, int64_t capacity, std::string_view reason,
                             bool float_weight) {
  uint32_t rid = intern_reason(reason);
  if (u == source_ && u != kNoVertex) {
    uint32_t key = key_[v];
    if (key < kSinkKey && (key & 1) == 0) {
      uint32_t& slot = source_edge_[key / 2];
      if (slot != kNoVertex) {  // networkx: update the attributes in place
        cap_[slot] = capacity;
        reason_[slot] = rid;
        float_[slot] = float_weight;
        return;
      }
      slot = static_cast<uint32_t>(tail_.size());
    }
  }
  tail_.push_back(u);
  head_.push_back(v);
  cap_.push_back(capacity);
  reason_.push_back(rid);
  float_.push_back(float_weight);
}

std::string CapacityGraph::vertex_name(uint32_t v) const {
  uint32_t key = key_[v];
  if (key == kSourceKey) return "source";
  if (key == kSinkKey) return "sink";
  std::string name(g_.name(key / 2));
  name += (key & 1) ? "_out" : "_in";
  return name;
}

namespace {
// Python's str() of a capacity: "inf", an int, or a float with ".0".
std::string capacity_text(int64_t cap, bool is_float) {
  if (cap == CapacityGraph::kInf) return "inf";
  std::string s = std::to_string(cap);
  if (is_float) s += ".0";
  return s;
}

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}
}  // namespace

CapacityGraph::Diagnosis CapacityGraph::diagnose() const {
  Diagnosis d;
  if (source_ == kNoVertex || sink_ == kNoVertex) return d;
  const size_t n = key_.size();
  // Successor lists in insertion order.
  std::vector<uint32_t> off(n + 1, 0);
  for (uint32_t u : tail_) ++off[u + 1];
  for (size_t v = 0; v < n; ++v) off[v + 1] += off[v];
  std::vector<uint32_t> adj(tail_.size());
  std::vector<uint32_t> pos(off.begin(), off.end() - 1);
  for (size_t e = 0; e < tail_.size(); ++e) adj[pos[tail_[e]]++] = static_cast<uint32_t>(e);

  // Breadth-first over the edges torch considers infinite: math.inf ones,
  // and before 2.15 also INT_INF ones (a SymFloat's finite weight), so an
  // older release may report a path no flow is actually unbounded on.
  auto infinite = [&](int64_t cap) {
    return cap == kInf || (!torch_.infinite_path_exact_inf && cap == kIntInf);
  };
  std::vector<uint32_t> parent_edge(n, kNoVertex);
  std::vector<uint8_t> visited(n, 0);
  std::vector<uint32_t> queue{source_};
  visited[source_] = 1;
  uint32_t last_edge = kNoVertex;
  for (size_t i = 0; i < queue.size() && last_edge == kNoVertex; ++i) {
    uint32_t u = queue[i];
    for (uint32_t k = off[u]; k < off[u + 1]; ++k) {
      uint32_t e = adj[k], v = head_[e];
      if (visited[v]) continue;
      if (!infinite(cap_[e])) continue;
      if (v == sink_) {
        last_edge = e;
        break;
      }
      visited[v] = 1;
      parent_edge[v] = e;
      queue.push_back(v);
    }
  }
  if (last_edge == kNoVertex) return d;
  std::vector<uint32_t> path;
  for (uint32_t e = last_edge;;) {
    path.push_back(e);
    uint32_t u = tail_[e];
    if (u == source_) break;
    e = parent_edge[u];
  }
  std::reverse(path.begin(), path.end());

  // Group the constraints by FX node, in order of first mention.
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  auto add = [&](const std::string& base, std::string text) {
    for (auto& [name, list] : groups)
      if (name == base) {
        list.push_back(std::move(text));
        return;
      }
    groups.push_back({base, {std::move(text)}});
  };
  auto base_of = [&](uint32_t v) { return std::string(g_.name(key_[v] / 2)); };
  auto reason_of = [&](uint32_t e) {
    return reason_[e] ? reasons_[reason_[e]] : std::string("unknown");
  };
  d.raw_path = "source";
  for (uint32_t e : path) {
    uint32_t u = tail_[e], v = head_[e];
    d.raw_path += " -> " + vertex_name(v);
    if (u == source_) {
      add(base_of(v), reason_of(e));
    } else if (v == sink_) {
      add(base_of(u), reason_of(e));
    } else if (key_[u] / 2 == key_[v] / 2) {
      add(base_of(u), reason_of(e));
    } else {
      add(base_of(v), "depends on " + base_of(u));
    }
  }
  for (auto& [name, list] : groups) {
    if (!d.constraints.empty()) d.constraints += '\n';
    d.constraints += "  " + name + ":";
    for (auto& c : list) d.constraints += "\n    - " + c;
  }
  return d;
}

std::string CapacityGraph::dot() const {
  std::string out = "strict digraph {\n";
  for (uint32_t v = 0; v < key_.size(); ++v) out += quoted(vertex_name(v)) + ";\n";
  for (size_t e = 0; e < tail_.size(); ++e) {
    std::string cap = capacity_text(cap_[e], float_[e]);
    out += quoted(vertex_name(tail_[e])) + " -> " + quoted(vertex_name(head_[e]));
    out += " [capacity=" + cap;
    if (reason_[e]) out += ", reason=" + quoted(reasons_[reason_[e]]);
    out += ", label=" + quoted(cap);
    if (cap_[e] == kInf) out += ", color=red";
    out += "];\n";
  }
  out += "}\n";
  return out;
}

namespace {
// Python's repr() of a str: single quotes unless the text has one and no
// double quote; backslashes, the chosen quote and control characters escaped.
std::string py_repr(std::string_view s) {
  const bool dq = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  out += q;
  return out;
}
}  // namespace

std::string CapacityGraph::edge_list() const {
  const size_t n = key_.size();
  std::vector<uint32_t> off(n + 1, 0);
  for (uint32_t u : tail_) ++off[u + 1];
  for (size_t v = 0; v < n; ++v) off[v + 1] += off[v];
  std::vector<uint32_t> by_tail(tail_.size());
  std::vector<uint32_t> pos(off.begin(), off.end() - 1);
  for (size_t e = 0; e < tail_.size(); ++e) by_tail[pos[tail_[e]]++] = static_cast<uint32_t>(e);
  std::string out;
  for (uint32_t e : by_tail) {
    if (!out.empty()) out += '\n';
    out += vertex_name(tail_[e]) + " " + vertex_name(head_[e]) + " {'capacity': " +
           capacity_text(cap_[e], float_[e]);
    if (reason_[e]) out += ", 'reason': " + py_repr(reasons_[reason_[e]]);
    out += "}";
  }
  return out;
}

std::vector<NodeId> CapacityGraph::cut(CutSide side) const {
  // networkx.minimum_cut raises when either terminal is not a vertex.
  if (source_ == kNoVertex || sink_ == kNoVertex)
    throw Error(ErrorCode::kUnsupported,
                std::string("min-cut graph has no '") + (source_ == kNoVertex ? "source" : "sink") +
                    "' vertex (networkx.minimum_cut would raise): nothing is " +
                    (source_ == kNoVertex ? "banned from recomputation" : "required by the backward"));
  MaxFlow flow(static_cast<uint32_t>(key_.size()));
  flow.add_edges(tail_, head_, cap_);
  if (!flow.run(source_, sink_)) {
    Diagnosis d = diagnose();
    std::string explanation = "Nodes involved in the conflict:\n" + d.constraints +
                              "\n\n[Debug: min-cut path] " + d.raw_path + "\n";
    std::string message =
        "AOT Autograd failed to partition the joint forward-backward graph.\n\n"
        "The partitioner determines which intermediate values to save from the forward pass "
        "vs recompute in the backward pass. This error means a value is required for "
        "backward, but cannot be saved AND cannot be recomputed.\n\n" +
        explanation;
    throw NoFiniteCutError(std::move(message), std::move(explanation), dot(), edge_list());
  }
  std::vector<uint8_t> src = flow.source_side(side);
  std::vector<uint8_t> saved(g_.size(), 0);
  for (size_t e = 0; e < tail_.size(); ++e) {
    uint32_t u = tail_[e], v = head_[e];
    if (!src[u] || src[v]) continue;
    uint32_t ku = key_[u], kv = key_[v];
    // Only X_in -> X_out edges are finite; torch asserts the same.
    if (ku >= kSinkKey || kv >= kSinkKey || (ku & 1) != 0 || kv != ku + 1)
      throw Error(ErrorCode::kInternal, "min cut crosses an infinite edge " + vertex_name(u) +
                                            " -> " + vertex_name(v));
    saved[ku / 2] = 1;
  }
  std::vector<NodeId> result;
  for (NodeId n = 0; n < g_.size(); ++n)
    if (saved[n]) result.push_back(n);
  return result;
}

}  // namespace remat
