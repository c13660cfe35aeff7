// remat/explain.h — the words remat uses about one node's fate: `remat
// partition --explain NODE` prints them, the HTML report shows them per node.
//
// Contract: pure functions of the graph, the node's NodeDecision and the
// options; deterministic text, no trailing newline.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "remat/graph.h"
#include "remat/options.h"
#include "remat/result.h"

namespace remat::report {

// "512 B", "1.5 KiB", ... (binary units, one decimal).
std::string human_bytes(int64_t bytes);

// "float32[4, s0]" for a tensor, else the value kind ("symint", "none", ...).
std::string describe_value(const Graph& g, NodeId id);

// Bytes of a node, or -1 when size_of refuses it (no "val", unknown kind).
int64_t bytes_of(const Graph& g, NodeId id, const PartitionOptions& options);

// One sentence per fate: "computed in the forward and saved for the backward".
const char* where_text(NodeDecision::Where where);

// The inverse of where_name(); nullopt for an unknown name.
std::optional<NodeDecision::Where> where_from_name(std::string_view name);

// The sentence for a reason, with placeholders the caller fills:
// {ban} (NodeDecision::ban_reason), {detail}, {merged} (the merged-into
// node's name) and {cap} (" (capacity N)" when the capacity is known, in
// words when it is the cut's infinity, else ""). The report's page fills the same templates, so the words live here
// only. "" for kUnknown.
const char* why_template(NodeDecision::Why why);

// The inverse of why_name(); nullopt for an unknown name.
std::optional<NodeDecision::Why> why_from_name(std::string_view name);

// why_template(d.why) filled for `d` (of node-graph `g`).
std::string why_text(const Graph& g, const NodeDecision& d);

// Why `id` ended where it did, one fact per line:
//   node 'relu' (call_function aten.relu.default, float32[4, 8])
//     saved: computed in the forward and saved for the backward
//     why: recomputation is banned (...) and the backward needs it, so ...
//     recomputation banned: ...
//     checkpoint policy: ...
//     size: 128 B
std::string explain_node(const Graph& g, NodeId id, const NodeDecision& decision,
                         const PartitionOptions& options);

}  // namespace remat::report
