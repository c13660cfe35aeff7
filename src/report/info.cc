// report/info.cc — graph_info (remat/info.h).
//
// Contract: see the header. The counts use the library's own answers
// (OpRegistry::classify, classify_nodes, size_of through bytes_of), so
// `remat info` never re-derives what a partitioner would see.
#include "remat/info.h"

#include <cstdint>

#include "analyze/analyze.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/options.h"
#include "remat/explain.h"

namespace remat {
namespace {

void count_categories(const Graph& g, const PartitionOptions& options, GraphInfo& info) {
  const std::vector<uint8_t> cats = options.ops.classify(g, options.torch);
  for (NodeId id = 0; id < g.size(); ++id) {
    const OpId op = g.node(id).op;
    if (op == kNoOp || op >= cats.size()) continue;
    if (cats[op] == 0) ++info.uncategorized;
    for (size_t i = 0; i < info.by_category.size(); ++i) {
      info.by_category[i] += (cats[op] & kOpCategoryNames[i].bit) ? 1 : 0;
    }
  }
}

void count_split(const JointGraph& joint, const PartitionOptions& options, GraphInfo& info) {
  const Graph& g = joint.graph;
  try {
    const NodeInfo split = classify_nodes(g, joint.static_lifetime_input_indices,
                                          joint.num_fwd_outputs, options);
    for (NodeId id = 0; id < g.size(); ++id) {
      info.forward += split.required_fw.size() > id && split.required_fw[id];
      info.backward += split.required_bw.size() > id && split.required_bw[id];
      info.unclaimed += split.unclaimed.size() > id && split.unclaimed[id];
    }
  } catch (const Error& e) {
    info.split_error = e.what();
  }
}

void count_bytes(const Graph& g, const PartitionOptions& options, GraphInfo& info) {
  for (NodeId id = 0; id < g.size(); ++id) {
    if (g.node(id).kind != NodeKind::kCallFunction) continue;
    const int64_t b = report::bytes_of(g, id, options);
    if (b < 0) {
      ++info.unsized;
      continue;
    }
    if (__builtin_add_overflow(info.activation_bytes, b, &info.activation_bytes)) {
      info.activation_bytes = INT64_MAX;
    }
    ++info.sized;
  }
}

}  // namespace

GraphInfo graph_info(const JointGraph& joint) {
  const Graph& g = joint.graph;
  // The categories of the release the graph records; a graph of a release
  // remat does not reproduce is still described, as the newest one sees it.
  PartitionOptions options;
  try {
    options = default_options(joint);
  } catch (const Error&) {
  }
  for (const auto& [key, cats] : joint.op_overrides) options.ops.set(key, cats);

  GraphInfo info;
  info.nodes = g.size();
  for (const Node& n : g.nodes()) {
    ++info.by_kind[static_cast<size_t>(n.kind)];
    info.tensors += n.tensors_count;
  }
  info.ops = g.ops().size();
  info.num_fwd_outputs = joint.num_fwd_outputs;
  info.static_lifetime_inputs = joint.static_lifetime_input_indices.size();
  info.op_overrides = joint.op_overrides.size();
  count_categories(g, options, info);
  count_split(joint, options, info);
  count_bytes(g, options, info);
  return info;
}

}  // namespace remat
