// io/write_memory.cc — the memory profile and mutation hazards as JSON.
//
// Contract: io/memory_json.h and remat/io.h (write_memory). The timelines are
// written one graph per line: they are as long as the graphs.
#include "io/memory_json.h"
#include "remat/io.h"

namespace remat::io {
namespace {

const Graph& graph_of(Pass p, const Graph& fw, const Graph& bw) {
  return p == Pass::kForward ? fw : bw;
}

void node_ref(JsonWriter& w, Pass p, NodeId n, const Graph& fw, const Graph& bw) {
  w.begin_object();
  w.key("graph");
  w.string(pass_name(p));
  w.key("node");
  const Graph& g = graph_of(p, fw, bw);
  if (n < g.size()) w.string(g.name(n));
  else w.null();
  w.end_object();
}

void name_or_null(JsonWriter& w, const Graph& g, NodeId n) {
  if (n < g.size()) w.string(g.name(n));
  else w.null();
}

}  // namespace

void write_memory_json(JsonWriter& w, const Graph& fw, const Graph& bw, const MemoryProfile& m,
                       int indent) {
  w.begin_object();
  auto field = [&](const char* k) {
    w.newline(indent + 2);
    w.key(k);
  };
  field("peak_bytes");
  w.integer(m.peak_bytes);
  field("peak_at");
  if (m.peak_node == kNoNode) w.null();
  else node_ref(w, m.peak_pass, m.peak_node, fw, bw);
  field("forward_peak_bytes");
  w.integer(m.forward_peak_bytes);
  field("backward_peak_bytes");
  w.integer(m.backward_peak_bytes);
  field("inputs_bytes");
  w.integer(m.inputs_bytes);
  field("between_bytes");
  w.integer(m.between_bytes);
  // Only when not the default, so aten results stay as they were.
  if (m.model != MemoryModel::kAten) {
    field("model");
    w.string(memory_model_name(m.model));
  }
  if (!m.forward_orders.empty() || !m.backward_orders.empty()) {
    field("kernel_orders");
    w.begin_object();
    auto orders = [&](const char* graph, const std::vector<std::string>& simulated, const std::string& profile) {
      w.key(graph);
      w.begin_object();
      w.key("simulated");
      w.begin_array();
      for (const std::string& o : simulated) w.string(o);
      w.end_array();
      w.key("profile");
      w.string(profile);
      w.end_object();
    };
    orders("forward", m.forward_orders, m.forward_order);
    orders("backward", m.backward_orders, m.backward_order);
    w.end_object();
  }
  field("at_peak");
  w.begin_array();
  for (const LiveStorage& s : m.at_peak) {
    w.newline(indent + 4);
    w.begin_object();
    w.key("graph");
    w.string(pass_name(s.pass));
    w.key("node");
    name_or_null(w, graph_of(s.pass, fw, bw), s.node);
    w.key("bytes");
    w.integer(s.bytes);
    w.key("released_after");
    if (s.released_after == kNoNode) w.null();
    else node_ref(w, s.released_pass, s.released_after, fw, bw);
    w.end_object();
  }
  if (!m.at_peak.empty()) w.break_line(indent + 2);
  w.end_array();
  field("timeline");
  w.begin_object();
  w.newline(indent + 4);
  w.key("forward");
  w.begin_array();
  for (int64_t b : m.forward_timeline) w.integer(b);
  w.end_array();
  w.newline(indent + 4);
  w.key("backward");
  w.begin_array();
  for (int64_t b : m.backward_timeline) w.integer(b);
  w.end_array();
  w.break_line(indent + 2);
  w.end_object();
  w.break_line(indent);
  w.end_object();
}

void write_hazards_json(JsonWriter& w, const Graph& fw, const Graph& bw,
                        const std::vector<MutationHazard>& hazards, int indent) {
  w.begin_array();
  for (const MutationHazard& h : hazards) {
    w.newline(indent + 2);
    w.begin_object();
    w.key("input");
    name_or_null(w, fw, h.input);
    w.key("mutated_by");
    name_or_null(w, fw, h.mutated_by);
    w.key("saved");
    name_or_null(w, fw, h.saved);
    w.key("readers");
    w.begin_array();
    for (NodeId r : h.readers) name_or_null(w, bw, r);
    w.end_array();
    w.end_object();
  }
  if (!hazards.empty()) w.break_line(indent);
  w.end_array();
}

}  // namespace remat::io

namespace remat {

std::string write_memory(const Graph& forward, const Graph& backward, const MemoryProfile& m,
                         const std::vector<MutationHazard>& hazards) {
  std::string out;
  io::JsonWriter w(out);
  w.begin_object();
  w.newline(2);
  w.key("memory");
  io::write_memory_json(w, forward, backward, m, 2);
  w.newline(2);
  w.key("hazards");
  io::write_hazards_json(w, forward, backward, hazards, 2);
  w.break_line(0);
  w.end_object();
  out += '\n';
  return out;
}

}  // namespace remat
