// report/html.cc — html_report (remat/report.h): one partition as one
// self-contained HTML page.
//
// The page is built from the joint graph and the result *document* rather
// than a PartitionResult, so fields later stages add to the document (the
// simulator's "memory") reach the report without this file knowing their
// producer. Pictures are inline SVG (Pareto: remat/pareto.h's writer;
// timeline: timeline_svg.h; the cut: Graphviz through graphviz.h). The node
// table's rows travel as JSON in a <script type="application/json"> block
// and a small script renders, sorts and filters them, so a big graph does
// not become a multi-megabyte DOM up front.
#include <simdjson.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "io/json_writer.h"
#include "remat/error.h"
#include "remat/report.h"
#include "report/escape.h"
#include "remat/explain.h"
#include "remat/pareto.h"
#include "remat/graphviz.h"
#include "report/timeline_svg.h"

namespace remat {
namespace {

using report::MemoryStep;

// --- the result document ----------------------------------------------------

[[noreturn]] void bad_result(std::string_view field, std::string_view why) {
  throw Error(ErrorCode::kParse, fmt::format("report: result field '{}': {}", field, why));
}

// One storage alive at the peak (memory.at_peak), with the joint node its
// producer comes from ("" for nodes a rewrite created) and when it goes.
struct PeakStorage {
  std::string graph, node, origin;
  int64_t bytes = 0;
  std::string released_graph, released_after;  // "" when it lives the whole step
};

// What the report reads from the result document.
struct ResultView {
  std::string partitioner;
  std::vector<NodeId> saved_values, saved_sym_nodes, saved_opaque_nodes;
  std::vector<NodeDecision> decisions;  // by joint id
  size_t forward_nodes = 0, backward_nodes = 0;
  double seconds = 0;
  std::vector<std::pair<std::string, double>> stages;
  bool has_budget = false;
  double memory_budget = 1;
  std::string budget_step;
  bool has_memory = false;
  int64_t peak_bytes = -1;
  std::vector<MemoryStep> timeline;
  std::vector<PeakStorage> at_peak;  // largest first, as the simulator lists them
};

std::vector<NodeId> node_list(const Graph& g, simdjson::dom::object root, const char* field) {
  std::vector<NodeId> out;
  simdjson::dom::array list;
  if (root[field].get(list)) return out;
  for (auto item : list) {
    std::string_view name;
    if (item.get(name)) bad_result(field, "expected node names");
    const NodeId id = g.find(name);
    if (id == kNoNode) bad_result(field, fmt::format("'{}' is not in the joint graph", name));
    out.push_back(id);
  }
  return out;
}

size_t graph_size(simdjson::dom::object root, const char* field) {
  simdjson::dom::array nodes;
  if (root[field]["nodes"].get(nodes)) return 0;
  return nodes.size();
}

// The names of a result graph's nodes, in order ("" for a nameless entry).
std::vector<std::string> graph_names(simdjson::dom::object root, const char* field) {
  std::vector<std::string> out;
  simdjson::dom::array nodes;
  if (root[field]["nodes"].get(nodes)) return out;
  for (auto node : nodes) {
    std::string_view name;
    out.emplace_back(node["name"].get(name) ? std::string_view{} : name);
  }
  return out;
}

// A result graph's node name -> the joint node it comes from ("origin").
std::unordered_map<std::string, std::string> graph_origins(simdjson::dom::object root, const char* field) {
  std::unordered_map<std::string, std::string> out;
  simdjson::dom::array nodes;
  if (root[field]["nodes"].get(nodes)) return out;
  for (auto node : nodes) {
    std::string_view name, origin;
    if (!node["name"].get(name) && !node["origin"].get(origin)) out.emplace(name, origin);
  }
  return out;
}

// memory.at_peak: what fills the peak.
void read_at_peak(simdjson::dom::object root, simdjson::dom::array entries, ResultView& v) {
  const auto fw = graph_origins(root, "forward"), bw = graph_origins(root, "backward");
  for (auto entry : entries) {
    PeakStorage p;
    std::string_view graph, node;
    int64_t bytes;
    if (entry["graph"].get(graph) || entry["bytes"].get(bytes))
      bad_result("memory.at_peak", "expected {\"graph\", \"node\", \"bytes\"} entries");
    p.graph = std::string(graph);
    if (!entry["node"].get(node)) p.node = std::string(node);
    p.bytes = bytes;
    const auto& origins = graph == "forward" ? fw : bw;
    if (auto it = origins.find(p.node); it != origins.end()) p.origin = it->second;
    simdjson::dom::object released;
    if (!entry["released_after"].get(released)) {
      if (!released["graph"].get(graph)) p.released_graph = std::string(graph);
      if (!released["node"].get(node)) p.released_after = std::string(node);
    }
    v.at_peak.push_back(std::move(p));
  }
}

// The simulator's "memory" object (docs/format.md, "Memory"): one timeline
// per graph, one entry per node in node order, labelled with that node.
void read_memory(simdjson::dom::object root, simdjson::dom::object memory, ResultView& v) {
  v.has_memory = true;
  int64_t peak;
  if (memory["peak_bytes"].get(peak)) bad_result("memory.peak_bytes", "expected an integer");
  v.peak_bytes = peak;
  simdjson::dom::array at_peak;
  if (!memory["at_peak"].get(at_peak)) read_at_peak(root, at_peak, v);
  simdjson::dom::object timeline;
  if (memory["timeline"].get(timeline)) return;
  for (const char* phase : {"forward", "backward"}) {
    simdjson::dom::array steps;
    if (timeline[phase].get(steps)) continue;
    const std::vector<std::string> names = graph_names(root, phase);
    size_t i = 0;
    for (auto entry : steps) {
      int64_t bytes;
      if (entry.get(bytes)) bad_result(fmt::format("memory.timeline.{}", phase), "expected byte counts");
      v.timeline.push_back({bytes, i < names.size() ? names[i] : std::string(), phase});
      ++i;
    }
  }
}

ResultView read_result(const Graph& g, std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc))
    throw Error(ErrorCode::kParse, std::string("report: result: ") + simdjson::error_message(err));
  simdjson::dom::object root;
  if (doc.get(root)) bad_result("<root>", "expected a JSON object");
  std::string_view format;
  if (root["format"].get(format) || format != "remat.partition_result")
    bad_result("format", "expected \"remat.partition_result\"");
  ResultView v;
  std::string_view partitioner;
  if (!root["partitioner"].get(partitioner)) v.partitioner = std::string(partitioner);
  v.saved_values = node_list(g, root, "saved_values");
  v.saved_sym_nodes = node_list(g, root, "saved_sym_nodes");
  v.saved_opaque_nodes = node_list(g, root, "saved_opaque_nodes");
  v.forward_nodes = graph_size(root, "forward");
  v.backward_nodes = graph_size(root, "backward");

  v.decisions.assign(g.size(), NodeDecision{});
  simdjson::dom::object decisions;
  if (root["decisions"].get(decisions)) bad_result("decisions", "missing or not an object");
  for (auto [name, value] : decisions) {
    const NodeId id = g.find(name);
    if (id == kNoNode) bad_result("decisions", fmt::format("'{}' is not in the joint graph", name));
    std::string_view text;
    if (value["where"].get(text)) bad_result("decisions", fmt::format("'{}' has no 'where'", name));
    const auto where = report::where_from_name(text);
    if (!where) bad_result("decisions", fmt::format("'{}': unknown 'where' '{}'", name, text));
    NodeDecision& d = v.decisions[id];
    d.where = *where;
    if (!value["ban"].get(text)) d.ban_reason = std::string(text);
    if (!value["merged_into"].get(text)) d.merged_into = g.find(text);
  }
  double seconds;
  if (!root["seconds"].get(seconds)) v.seconds = seconds;
  simdjson::dom::object stages;
  if (!root["stages"].get(stages))
    for (auto [stage, t] : stages) {
      double s;
      if (!t.get(s)) v.stages.emplace_back(std::string(stage), s);
    }
  simdjson::dom::object trace;
  if (!root["trace"].get(trace)) {
    std::string_view step;
    if (!trace["budget_step"].get(step) && !step.empty()) {
      v.has_budget = true;
      v.budget_step = std::string(step);
      double b;
      if (!trace["memory_budget"].get(b)) v.memory_budget = b;
    }
  }
  simdjson::dom::object memory;
  if (!root["memory"].get(memory)) read_memory(root, memory, v);
  return v;
}

// --- HTML pieces --------------------------------------------------------------

using report::html_escape;

// Graphviz's SVG starts with an XML declaration and a DOCTYPE; inline SVG
// in HTML wants the <svg> element alone.
std::string inline_svg(std::string_view svg) {
  const size_t at = svg.find("<svg");
  return std::string(at == std::string_view::npos ? svg : svg.substr(at));
}

const char* fate_color(NodeDecision::Where w) {
  switch (w) {
    case NodeDecision::Where::kSaved: return "#ffbb78";
    case NodeDecision::Where::kRecomputed: return "#aec7e8";
    case NodeDecision::Where::kForwardOnly: return "#e7e7e7";
    case NodeDecision::Where::kBackwardOnly: return "#98df8a";
    default: return "#ffffff";
  }
}

std::string dot_quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// The saved values with their producers and consumers: the cut, drawn.
// Big cuts are clipped so the picture stays readable.
constexpr size_t kMaxCutNodes = 40, kMaxNeighbors = 6;

std::string cut_dot(const Graph& g, const ResultView& v) {
  std::vector<NodeId> saved = v.saved_values;
  saved.insert(saved.end(), v.saved_sym_nodes.begin(), v.saved_sym_nodes.end());
  saved.insert(saved.end(), v.saved_opaque_nodes.begin(), v.saved_opaque_nodes.end());
  std::sort(saved.begin(), saved.end());
  if (saved.size() > kMaxCutNodes) saved.resize(kMaxCutNodes);
  std::vector<NodeId> shown;
  std::unordered_set<NodeId> in_set;
  auto add = [&](NodeId id) {
    if (in_set.insert(id).second) shown.push_back(id);
  };
  for (NodeId s : saved) {
    add(s);
    size_t k = 0;
    for (NodeId in : g.inputs(s))
      if (k++ < kMaxNeighbors) add(in);
    k = 0;
    for (NodeId user : g.users(s))
      if (g.node(user).kind != NodeKind::kOutput && k++ < kMaxNeighbors) add(user);
  }
  std::sort(shown.begin(), shown.end());
  std::unordered_set<NodeId> saved_set(saved.begin(), saved.end());
  std::string dot =
      "digraph cut {\n  rankdir=LR;\n  node [shape=box, style=filled, fontname=\"sans-serif\", "
      "fontsize=10];\n  edge [color=\"#777777\"];\n";
  for (NodeId id : shown) {
    const NodeDecision& d = v.decisions[id];
    dot += fmt::format("  {} [label={}, fillcolor=\"{}\"{}, tooltip={}];\n", dot_quoted(g.name(id)),
                       dot_quoted(fmt::format("{}\n{}", g.name(id), report::describe_value(g, id))),
                       fate_color(d.where), saved_set.count(id) ? ", penwidth=2" : "",
                       dot_quoted(where_name(d.where)));
  }
  for (NodeId id : shown)
    for (NodeId user : g.users(id))
      if (in_set.count(user))
        dot += fmt::format("  {} -> {};\n", dot_quoted(g.name(id)), dot_quoted(g.name(user)));
  dot += "}\n";
  return dot;
}

// One JSON row per joint node: index, name, kind, target, value, bytes,
// fate, ban reason, explanation.
std::string node_rows(const JointGraph& joint, const ResultView& v,
                      const PartitionOptions& options) {
  const Graph& g = joint.graph;
  std::string out;
  io::JsonWriter w(out);
  w.begin_array();
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    const NodeDecision& d = v.decisions[id];
    w.newline(0);
    w.begin_array();
    w.integer(id);
    w.string(g.name(id));
    w.string(node_kind_name(n.kind));
    w.string(g.str(n.target));
    w.string(report::describe_value(g, id));
    w.integer(report::bytes_of(g, id, options));
    w.string(where_name(d.where));
    w.string(d.ban_reason);
    w.string(report::explain_node(g, id, d, options));
    w.end_array();
  }
  w.break_line(0);
  w.end_array();
  // Inside <script>, "</" could end the element: JSON may spell '<' as \u003c.
  std::string safe;
  safe.reserve(out.size());
  for (char c : out) {
    if (c == '<') safe += "\\u003c";
    else safe += c;
  }
  return safe;
}

constexpr const char* kStyle = R"CSS(
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; }
#summary td, #summary th { text-align: left; padding: 2px 12px 2px 0; }
#node-table { font-size: 12px; width: 100%; }
#node-table th { cursor: pointer; background: #f0f0f0; position: sticky; top: 0; text-align: left; padding: 3px 6px; user-select: none; }
#node-table th.sorted-asc::after { content: " \25b2"; } #node-table th.sorted-desc::after { content: " \25bc"; }
#node-table td { border-top: 1px solid #eee; padding: 2px 6px; vertical-align: top; }
#peak-table { font-size: 12px; } #peak-table th { background: #f0f0f0; text-align: left; padding: 3px 6px; }
#peak-table td { border-top: 1px solid #eee; padding: 2px 6px; }
#node-table td.why { white-space: pre-wrap; font-family: monospace; font-size: 11px; color: #444; }
tr.w-saved td:nth-child(6) { background: #ffbb78; } tr.w-recomputed td:nth-child(6) { background: #aec7e8; }
tr.w-backward_only td:nth-child(6) { background: #98df8a; } tr.w-removed { color: #999; }
.note { color: #666; font-style: italic; }
.picture { overflow: auto; max-width: 100%; border: 1px solid #ddd; }
#search { font-size: 14px; padding: 3px 6px; width: 20em; }
)CSS";

constexpr const char* kScript = R"JS(
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("node-data").textContent);
  var table = document.getElementById("node-table");
  var tbody = table.tBodies[0];
  var search = document.getElementById("search");
  var count = document.getElementById("count");
  var headers = table.tHead.rows[0].cells;
  var LIMIT = 2000;
  var sortCol = 0, sortDir = 1;
  function bytes(b) {
    if (b < 0) return "?";
    var units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], v = b, u = 0;
    while (v >= 1024 && u < 5) { v /= 1024; u++; }
    return u === 0 ? b + " B" : v.toFixed(1) + " " + units[u];
  }
  function compare(a, b) {
    var x = a[sortCol], y = b[sortCol];
    return (x < y ? -1 : x > y ? 1 : a[0] - b[0]) * sortDir;
  }
  function render() {
    var q = search.value.trim().toLowerCase();
    var rows = q ? data.filter(function (r) { return r[1].toLowerCase().indexOf(q) >= 0; })
                 : data.slice();
    rows.sort(compare);
    var frag = document.createDocumentFragment();
    rows.slice(0, LIMIT).forEach(function (r) {
      var tr = document.createElement("tr");
      tr.className = "w-" + r[6];
      for (var i = 0; i < 9; i++) {
        if (i === 5) continue;
        var td = document.createElement("td");
        td.textContent = i === 4 ? r[4] + (r[5] >= 0 ? " (" + bytes(r[5]) + ")" : "") :
                         i === 8 ? r[8].split("\n").slice(1).join("\n") : r[i];
        if (i === 8) td.className = "why";
        tr.appendChild(td);
      }
      frag.appendChild(tr);
    });
    tbody.replaceChildren(frag);
    count.textContent = rows.length + " of " + data.length + " nodes" +
        (rows.length > LIMIT ? " (the first " + LIMIT + " shown; search to narrow)" : "");
  }
  Array.prototype.forEach.call(headers, function (th) {
    th.addEventListener("click", function () {
      var col = Number(th.dataset.col);
      sortDir = col === sortCol ? -sortDir : 1;
      sortCol = col;
      Array.prototype.forEach.call(headers, function (h) { h.className = ""; });
      th.className = sortDir > 0 ? "sorted-asc" : "sorted-desc";
      render();
    });
  });
  search.addEventListener("input", render);
  var m = /^#search=(.*)$/.exec(window.location.hash);
  if (m) search.value = decodeURIComponent(m[1]);
  render();
})();
)JS";

// What fills the peak: the storages alive there, largest first, with the
// node that made each, the joint node it comes from and that node's fate,
// and the step after which it is released. The first question of anyone
// over a memory limit is which of these to get rid of.
constexpr size_t kMaxPeakRows = 50;

std::string peak_table(const Graph& g, const ResultView& v) {
  if (v.at_peak.empty()) return "<p class=\"note\">The result lists no storage alive at the peak.</p>\n";
  std::string h = fmt::format(
      "<p>The {} storages alive at the peak ({}), largest first. Fate is the joint node's: a "
      "saved value stays from the forward until its last backward user; an input, a gradient or "
      "an output the caller keeps lives the whole step.</p>\n<table id=\"peak-table\"><thead><tr>"
      "<th>#</th><th>storage of</th><th>from joint node</th><th>fate</th><th>size</th>"
      "<th>share</th><th>released after</th></tr></thead><tbody>\n",
      v.at_peak.size(), html_escape(report::human_bytes(v.peak_bytes)));
  int64_t rest = 0;
  for (size_t i = 0; i < v.at_peak.size(); ++i) {
    const PeakStorage& p = v.at_peak[i];
    if (i >= kMaxPeakRows) {
      rest += p.bytes;
      continue;
    }
    const NodeId joint = p.origin.empty() ? kNoNode : g.find(p.origin);
    const std::string fate = joint == kNoNode ? "created by a rewrite" : where_name(v.decisions[joint].where);
    const double share = v.peak_bytes > 0 ? 100.0 * static_cast<double>(p.bytes) / static_cast<double>(v.peak_bytes) : 0;
    h += fmt::format(
        "<tr><td>{}</td><td>{}: {}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}%</td><td>{}</td></tr>\n",
        i + 1, html_escape(p.graph), html_escape(p.node), html_escape(p.origin.empty() ? "-" : p.origin),
        html_escape(fate), html_escape(report::human_bytes(p.bytes)), share,
        html_escape(p.released_after.empty() ? "the end of the step"
                                             : fmt::format("{}: {}", p.released_graph, p.released_after)));
  }
  h += "</tbody></table>\n";
  if (rest > 0)
    h += fmt::format("<p class=\"note\">{} smaller storages ({}) are not listed.</p>\n",
                     v.at_peak.size() - kMaxPeakRows, html_escape(report::human_bytes(rest)));
  return h;
}

void summary_row(std::string& h, std::string_view label, std::string_view value) {
  h += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", html_escape(label), html_escape(value));
}

std::string summary(const JointGraph& joint, const ResultView& v, const ReportOptions& r) {
  const Graph& g = joint.graph;
  size_t recomputed = 0, banned = 0, removed = 0;
  for (const NodeDecision& d : v.decisions) {
    recomputed += d.where == NodeDecision::Where::kRecomputed;
    removed += d.where == NodeDecision::Where::kRemoved;
    banned += !d.ban_reason.empty();
  }
  int64_t saved_bytes = 0;
  for (NodeId id : v.saved_values) saved_bytes += std::max<int64_t>(0, report::bytes_of(g, id, r.options));
  std::string h = "<table id=\"summary\">\n";
  summary_row(h, "graph", r.title.empty() ? "(unnamed)" : r.title);
  summary_row(h, "partitioner", v.partitioner);
  summary_row(h, "joint graph", fmt::format("{} nodes ({} removed by DCE/CSE), {} forward outputs",
                                            g.size(), removed, joint.num_fwd_outputs));
  summary_row(h, "forward / backward", fmt::format("{} / {} nodes", v.forward_nodes, v.backward_nodes));
  std::string saved = fmt::format("{} values, {}", v.saved_values.size(), report::human_bytes(saved_bytes));
  if (!v.saved_sym_nodes.empty()) saved += fmt::format(", {} sym nodes", v.saved_sym_nodes.size());
  if (!v.saved_opaque_nodes.empty()) saved += fmt::format(", {} opaque values", v.saved_opaque_nodes.size());
  summary_row(h, "saved for the backward", saved);
  summary_row(h, "recomputed in the backward", fmt::format("{} nodes", recomputed));
  summary_row(h, "banned from recomputation", fmt::format("{} nodes", banned));
  if (v.has_budget)
    summary_row(h, "memory budget", fmt::format("{} (decided by: {})", v.memory_budget, v.budget_step));
  if (v.peak_bytes >= 0)
    summary_row(h, "simulated peak memory", fmt::format("{} ({} bytes)", report::human_bytes(v.peak_bytes), v.peak_bytes));
  std::string stages;
  for (const auto& [stage, s] : v.stages) stages += fmt::format(", {} {:.3f}", stage, s * 1e3);
  summary_row(h, "engine time", fmt::format("{:.3f} ms (ms per stage{})", v.seconds * 1e3, stages));
  h += "</table>\n";
  return h;
}

}  // namespace

std::string html_report(const JointGraph& joint, std::string_view result_json,
                        const ReportOptions& r) {
  const Graph& g = joint.graph;
  const ResultView v = read_result(g, result_json);
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += fmt::format("<title>remat report: {}</title>\n", html_escape(r.title.empty() ? "partition" : r.title));
  h += "<style>";
  h += kStyle;
  h += "</style>\n</head>\n<body>\n<h1>remat partition report</h1>\n";
  h += "<section id=\"overview\">\n" + summary(joint, v, r) + "</section>\n";

  h += "<section id=\"memory\">\n<h2>Memory timeline</h2>\n";
  if (v.has_memory && !v.timeline.empty())
    h += "<div class=\"picture\">" + report::timeline_svg(v.timeline, v.peak_bytes) + "</div>\n";
  else if (v.has_memory)
    h += "<p class=\"note\">The result has a peak but no timeline.</p>\n";
  else
    h += "<p class=\"note\">The result carries no memory simulation.</p>\n";
  h += "</section>\n";
  if (v.has_memory) h += "<section id=\"peak\">\n<h2>What fills the peak</h2>\n" + peak_table(g, v) + "</section>\n";

  h += "<section id=\"pareto\">\n<h2>Memory budget Pareto frontier</h2>\n";
  if (!r.pareto.empty()) {
    h += "<div class=\"picture\">" + pareto_svg(r.pareto) + "</div>\n";
  } else {
    h += fmt::format("<p class=\"note\">{}</p>\n",
                     html_escape(r.pareto_note.empty() ? "No frontier was computed." : r.pareto_note));
  }
  h += "</section>\n";

  h += "<section id=\"cut\">\n<h2>The cut and its neighborhood</h2>\n";
  const size_t cut_size = v.saved_values.size() + v.saved_sym_nodes.size() + v.saved_opaque_nodes.size();
  if (cut_size == 0) {
    h += "<p class=\"note\">Nothing is saved for the backward.</p>\n";
  } else if (auto svg = report::render_svg(cut_dot(g, v))) {
    h += "<p>Saved values (bold) with their inputs and users; colors are fates: saved "
         "(orange), recomputed (blue), forward only (grey), backward only (green).";
    if (cut_size > kMaxCutNodes) h += fmt::format(" The first {} of {} saved values are drawn.", kMaxCutNodes, cut_size);
    h += "</p>\n<div class=\"picture\">" + inline_svg(*svg) + "</div>\n";
  } else {
    h += "<p class=\"note\">Graphviz's dot command was not found (or failed), so the cut is not "
         "drawn; the table below lists every saved value.</p>\n";
  }
  h += "</section>\n";

  h += "<section id=\"nodes\">\n<h2>Nodes</h2>\n"
       "<p><input id=\"search\" type=\"search\" placeholder=\"search by name\" "
       "aria-label=\"search nodes by name\"> <span id=\"count\"></span></p>\n"
       "<table id=\"node-table\"><thead><tr><th data-col=\"0\">#</th><th data-col=\"1\">name</th>"
       "<th data-col=\"2\">kind</th><th data-col=\"3\">target</th><th data-col=\"5\">value (size)</th>"
       "<th data-col=\"6\">fate</th><th data-col=\"7\">banned because</th>"
       "<th data-col=\"8\">why</th></tr></thead><tbody></tbody></table>\n</section>\n";
  h += "<script type=\"application/json\" id=\"node-data\">" + node_rows(joint, v, r.options) + "</script>\n";
  h += "<script>";
  h += kScript;
  h += "</script>\n</body>\n</html>\n";
  return h;
}

}  // namespace remat
