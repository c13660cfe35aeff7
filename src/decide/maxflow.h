// decide/maxflow.h — an exact maximum flow / minimum cut on int64 capacities.
//
// Contract (in the manner of LEMON's Preflow):
//  * Build: MaxFlow(n) then add_edge(u, v, c) any number of times. Capacities
//    are non-negative int64; kInfinite marks an edge no cut may cross. Parallel
//    and antiparallel edges are allowed and kept apart. Self-loops are ignored
//    for the flow (they never cross a cut).
//  * Rerun: set_capacities(c) replaces every edge's capacity (the edges'
//    count and order as added) and the next run starts from no flow, as a
//    new MaxFlow with those edges would, with the same result; it keeps the
//    residual network's arcs, so a series of cuts over one network with
//    other capacities (the optimizer's priced cuts) builds them once.
//  * run(s, t) first looks for an s-t path made of infinite edges only. If one
//    exists the flow is unbounded: run returns false and no cut exists. This is
//    networkx's NetworkXUnbounded, which torch turns into its "no finite cut"
//    error. Otherwise every infinite capacity is replaced by (sum of finite
//    capacities + 1), which exceeds the value of any finite cut, so the set of
//    minimum cuts is unchanged, and run returns true.
//  * The algorithm is highest-label push-relabel with the gap heuristic and
//    periodic global relabeling, first phase only: it ends with a maximum
//    preflow. That is enough for the cut: the vertices that can still reach
//    the sink in the residual network of a maximum preflow are exactly those
//    that can reach it for any maximum flow (the second phase would only move
//    excess among vertices that cannot reach the sink).
//  * Queries after a bounded run: flow_value(), and source_side(side) — the
//    minimum cut as a per-vertex flag, 1 on the source side:
//      kSinkMinimal   the sink side is the set of vertices that can reach the
//                     sink in the residual network. This is the minimum cut
//                     nearest the sink; it is unique for a graph, whatever
//                     maximum flow produced it. networkx.minimum_cut returns
//                     it (it drops saturated edges and takes as sink side
//                     the vertices that still reach the sink), so torch does.
//      kSourceMinimal the source side is the set of vertices reachable from
//                     the source in the residual network of a maximum flow:
//                     the cut nearest the source. Computed as the sink-minimal
//                     cut of the reversed graph (source and sink swapped).
//  * Cost: O(n^2 sqrt(m)) worst case; near linear on the split-node DAGs the
//    partitioner builds. Memory: 16 bytes per edge direction.
//  * Errors: Error(kUnsupported) when the finite capacities sum past 2^62.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "remat/cut_side.h"

namespace remat {

class MaxFlow {
 public:
  static constexpr int64_t kInfinite = std::numeric_limits<int64_t>::max();

  explicit MaxFlow(uint32_t num_vertices) : n_(num_vertices) {}

  uint32_t num_vertices() const { return n_; }
  size_t num_edges() const { return tail_.size(); }

  // Adds u -> v with capacity c (>= 0, or kInfinite). Returns the edge id.
  uint32_t add_edge(uint32_t u, uint32_t v, int64_t capacity);
  // Adds tail[e] -> head[e] with capacity cap[e] for every e, in order.
  void add_edges(std::span<const uint32_t> tail, std::span<const uint32_t> head,
                 std::span<const int64_t> cap);

  // Replaces the capacities of all edges, in the order they were added
  // (cap.size() == num_edges(); each >= 0 or kInfinite).
  void set_capacities(std::span<const int64_t> cap);

  // Computes a maximum preflow from s to t. Returns false when an s-t path of
  // infinite edges exists (the flow is unbounded); true otherwise.
  bool run(uint32_t s, uint32_t t);

  // Valid after a run that returned true.
  bool bounded() const { return bounded_; }
  int64_t flow_value() const { return flow_value_; }
  // Per vertex: 1 when on the source side of the chosen minimum cut.
  std::vector<uint8_t> source_side(CutSide side) const;

 private:
  // Returns true when t is reachable from s over infinite edges only.
  bool has_infinite_path(uint32_t s, uint32_t t);
  // The arcs (first_, arc_head_, arc_rev_, arc_edge_), once per edge list.
  void build_arcs();
  // Residual capacities from cap_, infinity as inf_value.
  void fill_residuals(int64_t inf_value);
  void global_relabel();
  void discharge(uint32_t v);
  void bucket_insert(uint32_t v, int32_t label);
  void bucket_remove(uint32_t v, int32_t label);
  void push_active(uint32_t v, int32_t label);
  // Per vertex: 1 when it can reach t in the residual network.
  std::vector<uint8_t> reaches_sink() const;

  uint32_t n_;
  uint32_t s_ = 0, t_ = 0;
  bool ran_ = false;
  bool bounded_ = false;
  int64_t flow_value_ = 0;

  // The edges as given.
  std::vector<uint32_t> tail_, head_;
  std::vector<int64_t> cap_;

  // Residual network in CSR form: the arcs of vertex v are
  // [first_[v], first_[v + 1]); each edge gives a forward and a reverse arc.
  // arc_edge_: the edge of a forward arc, kNoEdge for a reverse one.
  static constexpr uint32_t kNoEdge = std::numeric_limits<uint32_t>::max();
  bool arcs_built_ = false;
  std::vector<uint32_t> first_;
  std::vector<uint32_t> arc_head_;
  std::vector<uint32_t> arc_rev_;
  std::vector<uint32_t> arc_edge_;
  std::vector<int64_t> res_;
  std::vector<uint32_t> queue_;  // the BFSes' queue, kept between them

  // Push-relabel state. Excess can exceed int64 when many infinite edges
  // meet, so it is kept in 128 bits; a single push never does.
  std::vector<__int128> excess_;
  std::vector<int32_t> label_;
  std::vector<uint32_t> current_;      // current arc
  std::vector<uint32_t> active_head_;  // per label: stack of active vertices
  std::vector<uint32_t> active_next_;
  std::vector<uint32_t> all_head_;     // per label: every live vertex (for gaps)
  std::vector<uint32_t> all_next_, all_prev_;
  int32_t max_active_ = -1;
  int32_t max_all_ = -1;
  uint64_t work_ = 0;
  uint64_t relabel_threshold_ = 0;
};

}  // namespace remat
