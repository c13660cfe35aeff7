// bench/cpp/capacity_families.h — deterministic synthetic flow networks shaped
// like the capacity graphs solve_min_cut builds (src/decide/min_cut.cc).
//
// Why synthetic: the engine hands out the DOT of its capacity graph only when
// the cut fails, so real dumps of large graphs are not available; these
// generators reproduce the partitioner's building blocks instead:
//  * every forward node X is split into X_in -> X_out with a finite weight
//    (its saving cost; ties are common since many tensors have one size),
//  * X_out -> user_in is infinite (data dependency),
//  * source -> X_in is infinite for banned nodes (primals, weights, rules),
//  * backward-required values reach the sink over infinite edges, either
//    straight (X_out -> sink) or through a backward node's Y_in -> sink.
// Banned nodes always keep a finite X_in -> X_out edge, so every network is
// bounded (no source-sink path of infinite edges), as on a real graph that
// has a cut.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace remat_bench {

// An edge list; vertex 0 is the source and 1 the sink.
struct Network {
  static constexpr int64_t kInf = INT64_MAX;  // == remat::MaxFlow::kInfinite
  uint32_t n = 2;
  std::vector<uint32_t> tail, head;
  std::vector<int64_t> cap;

  uint32_t vertex() { return n++; }
  void edge(uint32_t u, uint32_t v, int64_t c) {
    tail.push_back(u);
    head.push_back(v);
    cap.push_back(c);
  }
  size_t num_edges() const { return tail.size(); }
};

enum class Family { kChain, kWideSkip, kParallelChains };
const char* family_name(Family f);

// A network of the family with about `target_vertices` vertices (the first
// layer that reaches it ends the graph). Same arguments, same network.
Network make_family(Family f, uint32_t target_vertices, uint64_t seed = 1);

// A tiny random split-node network (at most `max_vertices`, <= 20), for the
// brute-force cross-check. May be unbounded (a banned node with an infinite
// split edge): callers check.
Network make_small_random(uint64_t seed, uint32_t max_vertices);

}  // namespace remat_bench
