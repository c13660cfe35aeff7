// report/html.cc — html_report and html_no_cut_report (remat/report.h): one
// partition, or one graph without a valid partition, as one self-contained
// HTML page.
//
// The page is built from the joint graph and the result *document* rather
// than a PartitionResult, so fields later stages add to the document (the
// simulator's "memory") reach the report without this file knowing their
// producer. Pictures are inline SVG (plans and Pareto: remat/pareto.h's
// writers; timeline: timeline_svg.h; the cut and the conflicting path:
// Graphviz through graphviz.h). The node table's rows travel as compact JSON
// in a <script type="application/json"> block (repeated strings and the
// reasons' templates once) and a small script renders, sorts and filters
// them, so a big graph becomes neither a multi-megabyte DOM nor a page of
// repeated sentences.
#include <simdjson.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

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
// producer comes from ("" for nodes a rewrite created), what produced it
// (its op, or "input of the forward" for a placeholder) and when it goes.
struct PeakStorage {
  std::string graph, node, origin, producer;
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
  double recompute_runtime = 0;
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

// What a result graph says of one of its nodes: the joint node it comes
// from ("origin", "" when none) and what produced it.
struct NodeSource {
  std::string origin, producer;
};

// The producer a group of storages is named by: a call's op; a placeholder
// is an input of its graph (the backward's are saved values and tangents).
std::string producer_of(std::string_view graph, std::string_view op, std::string_view target) {
  if (op == "call_function") return std::string(target);
  if (op == "placeholder") return fmt::format("input of the {} (placeholder)", graph);
  return fmt::format("{} {}", op, target);
}

// A result graph's node name -> its NodeSource.
std::unordered_map<std::string, NodeSource> graph_sources(simdjson::dom::object root, const char* field) {
  std::unordered_map<std::string, NodeSource> out;
  simdjson::dom::array nodes;
  if (root[field]["nodes"].get(nodes)) return out;
  for (auto node : nodes) {
    std::string_view name, origin, op, target;
    if (node["name"].get(name)) continue;
    NodeSource& src = out[std::string(name)];
    if (!node["origin"].get(origin)) src.origin = std::string(origin);
    if (node["op"].get(op)) op = "";
    if (node["target"].get(target)) target = "";
    src.producer = producer_of(field, op, target);
  }
  return out;
}

// memory.at_peak: what fills the peak.
void read_at_peak(simdjson::dom::object root, simdjson::dom::array entries, ResultView& v) {
  const auto fw = graph_sources(root, "forward"), bw = graph_sources(root, "backward");
  for (auto entry : entries) {
    PeakStorage p;
    std::string_view graph, node;
    int64_t bytes;
    if (entry["graph"].get(graph) || entry["bytes"].get(bytes))
      bad_result("memory.at_peak", "expected {\"graph\", \"node\", \"bytes\"} entries");
    p.graph = std::string(graph);
    if (!entry["node"].get(node)) p.node = std::string(node);
    p.bytes = bytes;
    const auto& sources = graph == "forward" ? fw : bw;
    if (auto it = sources.find(p.node); it != sources.end()) {
      p.origin = it->second.origin;
      p.producer = it->second.producer;
    } else {
      p.producer = "a storage no node names";
    }
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
    if (!value["ban_detail"].get(text)) d.ban_detail = std::string(text);
    if (!value["merged_into"].get(text)) d.merged_into = g.find(text);
    if (!value["why"].get(text)) {
      const auto why = report::why_from_name(text);
      if (!why) bad_result("decisions", fmt::format("'{}': unknown 'why' '{}'", name, text));
      d.why = *why;
    }
    int64_t capacity;
    if (!value["capacity"].get(capacity)) d.capacity = capacity;
    if (!value["detail"].get(text)) d.detail = std::string(text);
  }
  double seconds;
  if (!root["seconds"].get(seconds)) v.seconds = seconds;
  double recompute;
  if (!root["recompute_runtime"].get(recompute)) v.recompute_runtime = recompute;
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
//
// A drawing wider than the page shrinks to fit its frame, down to
// kMinScale of its size (Graphviz writes its size in points: 4/3 px); only
// one too wide even then scrolls in its frame.
constexpr double kMinScale = 0.6;

std::string inline_svg(std::string_view svg) {
  const size_t at = svg.find("<svg");
  std::string out(at == std::string_view::npos ? svg : svg.substr(at));
  const size_t tag_end = out.find('>');
  const size_t w = out.find(" width=\"");
  if (tag_end == std::string::npos || w == std::string::npos || w > tag_end) return out;
  const double points = std::strtod(out.c_str() + w + 8, nullptr);
  if (!(points > 0)) return out;
  const double px = points * 4 / 3;
  return out.insert(w, fmt::format(" style=\"width: max(min(100%, {:.0f}px), {:.0f}px)\"", px,
                                   px * kMinScale));
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

// The cut, drawn: the largest saved activations (saved values the forward
// computes; inputs, mostly parameters on real models, are saved as they
// are and would crowd the picture) with their producers and consumers.
// Big cuts are clipped so the picture stays readable.
constexpr size_t kMaxCutNodes = 30, kMaxNeighbors = 6;

struct CutPick {
  std::vector<NodeId> drawn;  // the activations drawn, largest first
  size_t activations = 0;     // saved activations in all
  size_t inputs = 0;          // saved inputs (not drawn)
};

CutPick pick_cut(const Graph& g, const ResultView& v, const PartitionOptions& options) {
  CutPick pick;
  std::vector<std::pair<int64_t, NodeId>> acts;
  for (const auto* list : {&v.saved_values, &v.saved_sym_nodes, &v.saved_opaque_nodes})
    for (NodeId id : *list) {
      if (g.node(id).kind == NodeKind::kPlaceholder) {
        ++pick.inputs;
        continue;
      }
      acts.emplace_back(report::bytes_of(g, id, options), id);
    }
  pick.activations = acts.size();
  // Largest first; equal sizes in graph order.
  std::sort(acts.begin(), acts.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (size_t i = 0; i < acts.size() && i < kMaxCutNodes; ++i) pick.drawn.push_back(acts[i].second);
  return pick;
}

// A label line of the cut picture: long names and values are cut to
// kLabelChars with an ellipsis (the tooltip has them whole), so one long
// name does not widen the picture past the page.
constexpr size_t kLabelChars = 26;
std::string clipped(std::string_view text) {
  if (text.size() <= kLabelChars) return std::string(text);
  size_t cut = kLabelChars - 1;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // UTF-8
  return std::string(text.substr(0, cut)) + "\u2026";
}

std::string cut_dot(const Graph& g, const ResultView& v, const std::vector<NodeId>& saved,
                    const PartitionOptions& options) {
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
  // Top to bottom, as the page scrolls: the cut's chains of ops grow
  // downwards, and what grows sideways is one rank's nodes, kept narrow.
  std::string dot =
      "digraph cut {\n  rankdir=TB;\n  nodesep=0.15;\n  ranksep=0.3;\n  node [shape=box, "
      "style=filled, fontname=\"sans-serif\", fontsize=10];\n  edge [color=\"#777777\"];\n";
  for (NodeId id : shown) {
    const NodeDecision& d = v.decisions[id];
    const bool is_saved = saved_set.count(id) != 0;
    const std::string name = clipped(g.name(id)), value = clipped(report::describe_value(g, id));
    // One format call (GCC 12 warns, falsely, on appending a temporary).
    const std::string label =
        is_saved ? fmt::format("{}\n{}\n{}", name, value,
                               report::human_bytes(std::max<int64_t>(0, report::bytes_of(g, id, options))))
                 : fmt::format("{}\n{}", name, value);
    dot += fmt::format("  {} [label={}, fillcolor=\"{}\"{}, tooltip={}];\n", dot_quoted(g.name(id)),
                       dot_quoted(label), fate_color(d.where), is_saved ? ", penwidth=2" : "",
                       dot_quoted(fmt::format("{}, {}: {}", g.name(id), where_name(d.where),
                                              report::why_text(g, d))));
  }
  for (NodeId id : shown)
    for (NodeId user : g.users(id))
      if (in_set.count(user))
        dot += fmt::format("  {} -> {};\n", dot_quoted(g.name(id)), dot_quoted(g.name(user)));
  dot += "}\n";
  return dot;
}

// The node table's data: {"s": strings, "t": why templates, "r": rows}.
// Repeated strings (kinds, targets, value types, fates, ban reasons,
// details) are written once in "s" and rows refer to them by index, so a
// 100k-node graph stays a few megabytes. A row: [index, name, kind, target,
// value, bytes, fate, ban, why, capacity, detail, merged into, ban detail]
// with the
// string columns as indices into "s" (but name and merged-into, which are
// unique), why as an index into "t" (explain.h's why_template), capacity -1
// when unknown.
class StringTable {
 public:
  int operator()(std::string_view s) {
    auto [it, fresh] = index_.try_emplace(std::string(s), static_cast<int>(strings_.size()));
    if (fresh) strings_.emplace_back(s);
    return it->second;
  }
  const std::vector<std::string>& strings() const { return strings_; }

 private:
  std::unordered_map<std::string, int> index_;
  std::vector<std::string> strings_;
};

constexpr NodeDecision::Why kLastWhy = NodeDecision::Why::kUnused;

std::string node_rows(const JointGraph& joint, const ResultView& v,
                      const PartitionOptions& options) {
  const Graph& g = joint.graph;
  StringTable strings;
  strings("");  // index 0: none
  std::string rows;
  io::JsonWriter w(rows);
  w.begin_array();
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    const NodeDecision& d = v.decisions[id];
    w.newline(0);
    w.begin_array();
    w.integer(id);
    w.string(g.name(id));
    w.integer(strings(node_kind_name(n.kind)));
    w.integer(strings(g.str(n.target)));
    w.integer(strings(report::describe_value(g, id)));
    w.integer(report::bytes_of(g, id, options));
    w.integer(strings(where_name(d.where)));
    w.integer(strings(d.ban_reason));
    w.integer(static_cast<int>(d.why));
    w.integer(d.capacity);
    w.integer(strings(d.detail));
    w.string(d.merged_into != kNoNode && d.merged_into < g.size() ? g.name(d.merged_into) : "");
    w.integer(strings(d.ban_detail));
    w.end_array();
  }
  w.break_line(0);
  w.end_array();

  std::string out;
  io::JsonWriter doc(out);
  doc.begin_object();
  doc.key("s");
  doc.begin_array();
  for (const std::string& str : strings.strings()) doc.string(str);
  doc.end_array();
  doc.key("t");
  doc.begin_array();
  for (int why = 0; why <= static_cast<int>(kLastWhy); ++why)
    doc.string(report::why_template(static_cast<NodeDecision::Why>(why)));
  doc.end_array();
  doc.key("r");
  doc.raw(rows);
  doc.end_object();
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
#node-table td { border-top: 1px solid #eee; padding: 2px 6px; vertical-align: top; overflow-wrap: break-word; }
#node-table td.word { white-space: nowrap; }
#peak-table, #peak-groups, #conflict-table { font-size: 12px; }
#peak-table th, #peak-groups th, #conflict-table th { background: #f0f0f0; text-align: left; padding: 3px 6px; }
#peak-table td, #peak-groups td, #conflict-table td { border-top: 1px solid #eee; padding: 2px 6px; }
details { margin-top: 1em; } summary { cursor: pointer; font-weight: bold; }
#plans-table { font-size: 12px; margin-top: 0.5em; } #plans-table th { background: #f0f0f0; text-align: left; padding: 3px 6px; }
#plans-table td { border-top: 1px solid #eee; padding: 2px 6px; } #plans-table tr.chosen td { color: #d62728; font-weight: bold; }
#node-table td.why { white-space: pre-wrap; font-family: monospace; font-size: 11px; color: #444; }
tr.w-saved td:nth-child(6) { background: #ffbb78; } tr.w-recomputed td:nth-child(6) { background: #aec7e8; }
tr.w-backward_only td:nth-child(6) { background: #98df8a; } tr.w-removed { color: #999; }
.note { color: #666; font-style: italic; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; }
.picture { overflow: auto; max-width: 100%; border: 1px solid #ddd; }
.picture > svg { height: auto; display: block; }
.picture.chart { width: fit-content; }  /* a chart's frame hugs it: no empty half */
#search { font-size: 14px; padding: 3px 6px; width: 20em; }
)CSS";

constexpr const char* kScript = R"JS(
(function () {
  "use strict";
  var doc = JSON.parse(document.getElementById("node-data").textContent);
  var S = doc.s, T = doc.t;
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
    return u === 0 ? b + "\u00a0B" : v.toFixed(1) + "\u00a0" + units[u];  // never split from its unit
  }
  // A row's why: its template (explain.h's why_template) filled in.
  function why(r) {
    return T[r[8]].replace(/\{(ban|detail|merged|cap)\}/g, function (_, k) {
      return k === "ban" ? S[r[7]] : k === "detail" ? S[r[10]] : k === "merged" ? r[11] :
             cap(r[9]);
    });
  }
  // {cap} as explain.cc's capacity_words: the cut's infinity (int64's
  // largest, which JSON.parse rounds up to 2^63) is said in words.
  function cap(c) {
    return c < 0 ? "" : c >= 9223372036854775807 ? " (infinite capacity: it cannot be saved)" :
           " (capacity " + c + ")";
  }
  // Columns as shown: #, name, kind, target, value, bytes, fate, ban, why.
  var data = doc.r.map(function (r) {
    var ban = S[r[7]] + (r[12] ? " (" + S[r[12]] + ")" : "");
    return [r[0], r[1], S[r[2]], S[r[3]], S[r[4]], r[5], S[r[6]], ban, why(r)];
  });
  // A name or target: it may break after a '.' or '_' (a <wbr>, which a
  // copy leaves out), never inside a word, so a long one wraps at its
  // parts and the table stays within the page.
  function identifier(td, text) {
    text.split(/(?<=[._])/).forEach(function (part, k) {
      if (k) td.appendChild(document.createElement("wbr"));
      td.appendChild(document.createTextNode(part));
    });
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
        if (i === 1 || i === 3) identifier(td, r[i]);
        else td.textContent = i === 4 ? r[4] + (r[5] >= 0 ? " (" + bytes(r[5]) + ")" : "") : r[i];
        if (i === 8) td.className = "why";
        else if (i === 0 || i === 2 || i === 6) td.className = "word";
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

// What fills the peak. On a big graph thousands of storages of one size
// from one op fill it, so it is told first by group: the storages alive
// there grouped by what produced them (their op; the format records no
// source location or module path) and their size, the largest group by
// bytes first, with their fates and a few names. Then the largest storages
// one by one, with the node that made each, the joint node it comes from
// and that node's fate, and the step after which it is released. The first
// question of anyone over a memory limit is which of these to get rid of.
constexpr size_t kMaxPeakRows = 50, kMaxPeakGroups = 25, kGroupExamples = 3;

struct PeakGroup {
  std::string producer;
  int64_t each = 0;
  size_t count = 0;
  int64_t total = 0;
  std::vector<std::pair<std::string, size_t>> fates;  // fate -> count, first seen first
  std::vector<std::string> examples;                   // the first few storages' nodes
};

std::string fate_of(const Graph& g, const ResultView& v, const PeakStorage& p) {
  const NodeId joint = p.origin.empty() ? kNoNode : g.find(p.origin);
  return joint == kNoNode ? "created by a rewrite" : where_name(v.decisions[joint].where);
}

// A share of the peak; a sliver is "<0.1%", not "0.0%".
std::string percent(int64_t part, int64_t whole) {
  const double p = whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
  return part > 0 && p < 0.05 ? std::string("&lt;0.1%") : fmt::format("{:.1f}%", p);
}

// The groups, largest total first (ties: more storages, then by producer
// and size, so the order is the same on every run).
std::vector<PeakGroup> peak_groups(const Graph& g, const ResultView& v) {
  std::vector<PeakGroup> groups;
  std::unordered_map<std::string, size_t> index;
  for (const PeakStorage& p : v.at_peak) {
    const std::string key = fmt::format("{}\n{}", p.producer, p.bytes);
    auto [it, fresh] = index.try_emplace(key, groups.size());
    if (fresh) groups.push_back(PeakGroup{p.producer, p.bytes, 0, 0, {}, {}});
    PeakGroup& grp = groups[it->second];
    ++grp.count;
    grp.total += p.bytes;
    const std::string fate = fate_of(g, v, p);
    auto f = std::find_if(grp.fates.begin(), grp.fates.end(), [&](const auto& e) { return e.first == fate; });
    if (f == grp.fates.end()) grp.fates.emplace_back(fate, 1);
    else ++f->second;
    if (grp.examples.size() < kGroupExamples) grp.examples.push_back(fmt::format("{}: {}", p.graph, p.node));
  }
  std::sort(groups.begin(), groups.end(), [](const PeakGroup& a, const PeakGroup& b) {
    if (a.total != b.total) return a.total > b.total;
    if (a.count != b.count) return a.count > b.count;
    if (a.producer != b.producer) return a.producer < b.producer;
    return a.each > b.each;
  });
  return groups;
}

std::string peak_groups_table(const Graph& g, const ResultView& v) {
  const std::vector<PeakGroup> groups = peak_groups(g, v);
  std::string h = fmt::format(
      "<p>The {} storages alive at the peak ({}), grouped by what produced them and their size, "
      "the largest group first. (The graph format records no source location or module path, "
      "so the op names the group.)</p>\n<table id=\"peak-groups\"><thead><tr><th>#</th>"
      "<th>produced by</th><th>size each</th><th>storages</th><th>total</th><th>share</th>"
      "<th>fates</th><th>for example</th></tr></thead><tbody>\n",
      v.at_peak.size(), html_escape(report::human_bytes(v.peak_bytes)));
  int64_t rest = 0;
  size_t rest_storages = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const PeakGroup& grp = groups[i];
    if (i >= kMaxPeakGroups) {
      rest += grp.total;
      rest_storages += grp.count;
      continue;
    }
    std::string fates;
    for (const auto& [fate, n] : grp.fates) fates += fmt::format("{}{} {}", fates.empty() ? "" : ", ", fate, n);
    std::string examples = fmt::format("{}", fmt::join(grp.examples, ", "));
    if (grp.count > grp.examples.size()) examples += ", ...";
    h += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        i + 1, html_escape(grp.producer), html_escape(report::human_bytes(grp.each)), grp.count,
        html_escape(report::human_bytes(grp.total)), percent(grp.total, v.peak_bytes),
        html_escape(fates), html_escape(examples));
  }
  h += "</tbody></table>\n";
  if (rest_storages > 0)
    h += fmt::format("<p class=\"note\">{} more groups ({} storages, {}, {} of the peak) are not "
                     "listed.</p>\n",
                     groups.size() - kMaxPeakGroups, rest_storages,
                     html_escape(report::human_bytes(rest)), percent(rest, v.peak_bytes));
  return h;
}

std::string peak_table(const Graph& g, const ResultView& v) {
  if (v.at_peak.empty()) return "<p class=\"note\">The result lists no storage alive at the peak.</p>\n";
  std::string h = peak_groups_table(g, v);
  // The list one by one is there to look up, folded: the groups answer.
  h += fmt::format(
      "<details id=\"peak-storages\"><summary>The largest storages one by one</summary>\n"
      "<p>The {} largest of them (ties in the "
      "simulator's order). Fate is the joint node's: a saved value stays from the forward until "
      "its last backward user; an input, a gradient or an output the caller keeps lives the whole "
      "step.</p>\n<table id=\"peak-table\"><thead><tr>"
      "<th>#</th><th>storage of</th><th>from joint node</th><th>fate</th><th>size</th>"
      "<th>share</th><th>released after</th></tr></thead><tbody>\n",
      std::min(v.at_peak.size(), kMaxPeakRows));
  int64_t rest = 0;
  for (size_t i = 0; i < v.at_peak.size(); ++i) {
    const PeakStorage& p = v.at_peak[i];
    if (i >= kMaxPeakRows) {
      rest += p.bytes;
      continue;
    }
    h += fmt::format(
        "<tr><td>{}</td><td>{}: {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        i + 1, html_escape(p.graph), html_escape(p.node), html_escape(p.origin.empty() ? "-" : p.origin),
        html_escape(fate_of(g, v, p)), html_escape(report::human_bytes(p.bytes)),
        percent(p.bytes, v.peak_bytes),
        html_escape(p.released_after.empty() ? "the end of the step"
                                             : fmt::format("{}: {}", p.released_graph, p.released_after)));
  }
  h += "</tbody></table>\n";
  if (v.at_peak.size() > kMaxPeakRows)
    h += fmt::format("<p class=\"note\">The other {} storages ({}, {} of the peak) are counted in "
                     "the groups above, not listed here.</p>\n",
                     v.at_peak.size() - kMaxPeakRows, html_escape(report::human_bytes(rest)),
                     percent(rest, v.peak_bytes));
  h += "</details>\n";
  return h;
}

// torch's budget plans against this partition's: the chart, then the
// same numbers as a table (exact values, any number of plans).
std::string plans_section(const ResultView& v, const std::vector<BudgetPlanPoint>& plans) {
  BudgetPlanPoint chosen;
  const bool has_chosen = v.peak_bytes >= 0;
  if (has_chosen) {
    chosen.label = v.has_budget ? fmt::format("activation budget {}, {}", v.memory_budget, v.budget_step)
                                : v.partitioner;
    chosen.peak_bytes = v.peak_bytes;
    chosen.recompute_runtime = v.recompute_runtime;
    chosen.saved_values = v.saved_values.size();
  }
  std::string h =
      "<p>Each plan torch's activation-memory-budget logic makes for this graph as the budget "
      "goes from 1 to 0, built and simulated: its peak memory against the estimated runtime of "
      "what it recomputes. The line joins the plans no other plan beats on both. This "
      "partition's own plan is the red ring.</p>\n<div class=\"picture chart\">" +
      plans_svg(plans, has_chosen ? &chosen : nullptr) +
      "</div>\n<table id=\"plans-table\"><thead><tr><th>plan</th><th>peak memory</th>"
      "<th>estimated recompute</th><th>saved values</th></tr></thead><tbody>\n";
  auto row = [&](const BudgetPlanPoint& p, const char* cls) {
    h += fmt::format("<tr{}><td>{}</td><td>{} ({} B)</td><td>{:.6g}</td><td>{}</td></tr>\n", cls,
                     html_escape(p.label), html_escape(report::human_bytes(p.peak_bytes)),
                     p.peak_bytes, p.recompute_runtime, p.saved_values);
  };
  for (const BudgetPlanPoint& p : plans) row(p, "");
  if (has_chosen) {
    chosen.label = "this partition: " + chosen.label;
    row(chosen, " class=\"chosen\"");
  }
  h += "</tbody></table>\n";
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

// The page's head and its first heading.
std::string page_start(const ReportOptions& r, std::string_view heading) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += fmt::format("<title>remat report: {}</title>\n", html_escape(r.title.empty() ? "partition" : r.title));
  h += "<style>";
  h += kStyle;
  h += fmt::format("</style>\n</head>\n<body>\n<h1>{}</h1>\n", html_escape(heading));
  return h;
}

// The vertices of the message's "[Debug: min-cut path] source -> a_in ->
// a_out -> ... -> sink" line, folded to FX node names in path order.
std::vector<std::string> conflict_path(std::string_view message) {
  std::vector<std::string> out;
  constexpr std::string_view kMark = "[Debug: min-cut path] ";
  const size_t at = message.find(kMark);
  if (at == std::string_view::npos) return out;
  std::string_view line = message.substr(at + kMark.size());
  line = line.substr(0, line.find('\n'));
  while (!line.empty()) {
    const size_t arrow = line.find(" -> ");
    std::string_view v = line.substr(0, arrow);
    for (std::string_view suffix : {"_in", "_out"})
      if (v.size() > suffix.size() && v.substr(v.size() - suffix.size()) == suffix) {
        v.remove_suffix(suffix.size());
        break;
      }
    if (out.empty() || out.back() != v) out.emplace_back(v);
    if (arrow == std::string_view::npos) break;
    line.remove_prefix(arrow + 4);
  }
  return out;
}

}  // namespace

std::string html_no_cut_report(const JointGraph& joint, const NoFiniteCutError& e,
                               const ReportOptions& r) {
  const Graph& g = joint.graph;
  std::string h = page_start(r, "remat partition report: no valid partition");
  h += "<section id=\"overview\">\n<table id=\"summary\">\n";
  summary_row(h, "graph", r.title.empty() ? "(unnamed)" : r.title);
  summary_row(h, "joint graph", fmt::format("{} nodes, {} forward outputs", g.size(), joint.num_fwd_outputs));
  summary_row(h, "result", "no finite min cut: some value the backward needs can be neither "
                           "saved nor recomputed");
  h += "</table>\n</section>\n";
  h += "<section id=\"diagnosis\">\n<h2>Why no partition exists</h2>\n<pre>" +
       html_escape(e.what()) + "</pre>\n</section>\n";

  const std::vector<std::string> path = conflict_path(e.what());
  h += "<section id=\"conflict\">\n<h2>The conflicting path</h2>\n";
  if (path.size() < 2) {
    h += "<p class=\"note\">The diagnosis names no path.</p>\n";
  } else {
    std::string dot = "digraph conflict {\n  rankdir=LR;\n  node [shape=box, style=filled, "
                      "fontname=\"sans-serif\", fontsize=10, fillcolor=\"#f7f7f7\"];\n"
                      "  edge [color=\"#d62728\", penwidth=2];\n";
    for (const std::string& v : path) {
      const NodeId id = g.find(v);
      const std::string label =
          id == kNoNode ? v : fmt::format("{}\n{}\n{}", v, g.str(g.node(id).target), report::describe_value(g, id));
      dot += fmt::format("  {} [label={}{}];\n", dot_quoted(v), dot_quoted(label),
                         id == kNoNode ? ", shape=ellipse, fillcolor=\"#ffffff\"" : "");
    }
    for (size_t i = 1; i < path.size(); ++i)
      dot += fmt::format("  {} -> {};\n", dot_quoted(path[i - 1]), dot_quoted(path[i]));
    dot += "}\n";
    if (auto svg = report::render_svg(dot)) {
      h += "<p>Every edge on this path is infinite: the source's side must compute it in the "
           "forward, the sink's side needs it in the backward, and no node on it can be saved "
           "or recomputed.</p>\n<div class=\"picture\">" + inline_svg(*svg) + "</div>\n";
    } else {
      h += "<p class=\"note\">Graphviz's dot command was not found (or failed), so the path is "
           "not drawn: " + html_escape(fmt::format("{}", fmt::join(path, " -> "))) + "</p>\n";
    }
    h += "<table id=\"conflict-table\"><thead><tr><th>node</th><th>kind</th><th>target</th>"
         "<th>value</th><th>size</th></tr></thead><tbody>\n";
    for (const std::string& v : path) {
      const NodeId id = g.find(v);
      if (id == kNoNode) continue;
      const int64_t b = report::bytes_of(g, id, r.options);
      h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                       html_escape(v), html_escape(node_kind_name(g.node(id).kind)),
                       html_escape(g.str(g.node(id).target)), html_escape(report::describe_value(g, id)),
                       b >= 0 ? html_escape(report::human_bytes(b)) : "?");
    }
    h += "</tbody></table>\n";
  }
  h += "</section>\n</body>\n</html>\n";
  return h;
}

std::string html_report(const JointGraph& joint, std::string_view result_json,
                        const ReportOptions& r) {
  const Graph& g = joint.graph;
  const ResultView v = read_result(g, result_json);
  std::string h = page_start(r, "remat partition report");
  h += "<section id=\"overview\">\n" + summary(joint, v, r) + "</section>\n";

  h += "<section id=\"memory\">\n<h2>Memory timeline</h2>\n";
  if (v.has_memory && !v.timeline.empty())
    h += "<div class=\"picture chart\">" + report::timeline_svg(v.timeline, v.peak_bytes) + "</div>\n";
  else if (v.has_memory)
    h += "<p class=\"note\">The result has a peak but no timeline.</p>\n";
  else
    h += "<p class=\"note\">The result carries no memory simulation.</p>\n";
  h += "</section>\n";
  if (v.has_memory) h += "<section id=\"peak\">\n<h2>What fills the peak</h2>\n" + peak_table(g, v) + "</section>\n";

  h += "<section id=\"pareto\">\n<h2>Peak memory against recompute</h2>\n";
  if (!r.plans.empty()) h += plans_section(v, r.plans);
  if (!r.pareto.empty())
    h += "<p>torch's memory-budget Pareto frontier (its visualize_memory_budget_pareto sweep): "
         "saved activation memory against recompute, by activation budget.</p>\n"
         "<div class=\"picture chart\">" + pareto_svg(r.pareto) + "</div>\n";
  if (r.plans.empty() && r.pareto.empty())
    h += fmt::format("<p class=\"note\">{}</p>\n",
                     html_escape(r.pareto_note.empty() ? "No frontier was computed." : r.pareto_note));
  h += "</section>\n";

  h += "<section id=\"cut\">\n<h2>The cut and its neighborhood</h2>\n";
  const CutPick pick = pick_cut(g, v, r.options);
  if (pick.activations == 0) {
    h += pick.inputs == 0 ? "<p class=\"note\">Nothing is saved for the backward.</p>\n"
                          : fmt::format("<p class=\"note\">The forward saves only inputs ({}), "
                                        "which it does not compute: there is no cut to draw.</p>\n",
                                        pick.inputs);
  } else if (auto svg = report::render_svg(cut_dot(g, v, pick.drawn, r.options))) {
    h += fmt::format(
        "<p>The {} saved activations (bold, with their sizes), their inputs and their users; "
        "colors are fates: saved (orange), recomputed (blue), forward only (grey), backward "
        "only (green). Hover a node for why.{}</p>\n",
        pick.drawn.size() == pick.activations ? fmt::format("{}", pick.activations)
                                              : fmt::format("largest {} of {}", pick.drawn.size(), pick.activations),
        pick.inputs ? fmt::format(" The {} saved inputs (parameters and other inputs, saved as "
                                  "they are) are not drawn.", pick.inputs)
                    : "");
    h += "<div class=\"picture\">" + inline_svg(*svg) + "</div>\n";
  } else {
    h += "<p class=\"note\">Graphviz's dot command was not found (or failed), so the cut is not "
         "drawn; the table below lists every saved value.</p>\n";
  }
  h += "</section>\n\n";
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
