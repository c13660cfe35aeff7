// decide/capacity_graph.h — the flow network solve_min_cut cuts, with the
// bookkeeping torch keeps in its networkx DiGraph.
//
// Contract:
//  * Vertices are "source", "sink" and the halves "<name>_in" / "<name>_out"
//    of FX nodes. As in networkx, a vertex exists from the first edge that
//    touches it, and vertex ids are given in that order (it is the DOT order).
//  * Edges keep insertion order per tail (networkx successor order, which the
//    infinite-path search follows). Adding an edge that exists replaces its
//    capacity and reason in place, as DiGraph.add_edge does; only edges out of
//    the source are ever re-added by the partitioner, so only those are
//    looked up.
//  * Capacities: kInf is math.inf. kIntInf is torch's INT_INF (1e6): a finite
//    capacity for networkx, which the diagnosis of torch before 2.15 walks as
//    if infinite (TorchBehavior::infinite_path_exact_inf).
//  * cut() returns the FX nodes whose X_in -> X_out edge crosses the minimum
//    cut (graph order), or throws NoFiniteCutError with torch's diagnosis.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "decide/maxflow.h"
#include "remat/graph.h"
#include "remat/cut_side.h"
#include "remat/torch_release.h"

namespace remat {

class CapacityGraph {
 public:
  static constexpr int64_t kInf = MaxFlow::kInfinite;
  static constexpr int64_t kIntInf = 1000000;
  static constexpr uint32_t kNoVertex = std::numeric_limits<uint32_t>::max();

  // `torch` picks the release's diagnosis; it must outlive the graph.
  CapacityGraph(const Graph& g, const TorchBehavior& torch);

  uint32_t source();
  uint32_t sink();
  uint32_t in(NodeId n);
  uint32_t out(NodeId n);

  // Adds (or, from the source, updates) u -> v. An empty reason is none.
  // `float_weight` marks a capacity torch computes as a Python float (sym
  // sizes, 0.0 for opaque values); it only changes how DOT prints it.
  void add_edge(uint32_t u, uint32_t v, int64_t capacity, std::string_view reason = {},
                bool float_weight = false);

  size_t num_vertices() const { return key_.size(); }
  size_t num_edges() const { return tail_.size(); }
  std::string vertex_name(uint32_t v) const;

  // Runs the max-flow and returns the saved nodes in graph order. Throws
  // NoFiniteCutError when a path of infinite edges joins source and sink,
  // and Error(kUnsupported) when source or sink is missing (networkx raises).
  std::vector<NodeId> cut(CutSide side) const;

  // torch's diagnosis of an infinite path: "  <node>:\n    - <reason>" lines,
  // and the raw vertex path "source -> ... -> sink". Empty when none.
  struct Diagnosis {
    std::string constraints;
    std::string raw_path;
  };
  Diagnosis diagnose() const;

  // The graph in Graphviz DOT: capacities as labels, infinite edges red.
  std::string dot() const;
  // The graph as networkx's generate_edgelist(G) prints it: per vertex in
  // vertex order, its out-edges in insertion order, "u v {'capacity': c,
  // 'reason': '...'}" (Python reprs), lines joined by "\n".
  std::string edge_list() const;

 private:
  static constexpr uint32_t kSourceKey = 0xFFFFFFFEu, kSinkKey = 0xFFFFFFFDu;
  uint32_t vertex(uint32_t key);
  uint32_t intern_reason(std::string_view r);

  const Graph& g_;
  const TorchBehavior& torch_;
  std::vector<uint32_t> vertex_of_;  // 2 * node + (0 in, 1 out) -> vertex
  std::vector<uint32_t> key_;        // vertex -> key
  uint32_t source_ = kNoVertex, sink_ = kNoVertex;

  std::vector<uint32_t> tail_, head_;
  std::vector<int64_t> cap_;
  std::vector<uint32_t> reason_;     // index into reasons_; 0: none
  std::vector<uint8_t> float_;
  std::vector<std::string> reasons_{""};
  std::unordered_map<std::string, uint32_t> reason_ids_;
  std::vector<uint32_t> source_edge_;  // by node: the edge source -> X_in, or kNoVertex
};

}  // namespace remat
