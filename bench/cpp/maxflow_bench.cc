// bench/cpp/maxflow_bench.cc — remat's max-flow against LEMON and Boost.Graph
// on partitioner-shaped capacity graphs (Google Benchmark).
//
// Why: the performance issue asks to pick the max-flow by measurement. Every
// solver here does the same work the partitioner needs, from the same edge
// list: the check for a source-sink path of infinite edges, the finite
// stand-in for infinity, building its graph, the max-flow, and the
// sink-minimal minimum cut (networkx's, so torch's) by a BFS over the
// residual network towards the sink. Solvers:
//   remat        remat::MaxFlow: run() + source_side(kSinkMinimal)
//   lemon        lemon::Preflow on a SmartDigraph, first phase only
//                (runMinCut), then the residual BFS (Preflow's own minCut()
//                is not always the sink-minimal cut; counted at startup)
//   boost_pr     boost::push_relabel_max_flow (both phases; the API has no
//                first-phase-only mode) on a compressed_sparse_row_graph
//   boost_bk     boost::boykov_kolmogorov_max_flow on the same graph
// Before timing, each instance is solved by all four and the flow values
// and cuts are compared; a mismatch aborts. At startup, small random
// networks are also checked against a brute-force enumeration of all cuts.
// See docs/performance_maxflow.md for results and how to run.
#include <benchmark/benchmark.h>

#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <boost/property_map/property_map.hpp>
#include <boost/range/iterator_range.hpp>
#include <cstdio>
#include <cstdlib>
#include <lemon/preflow.h>
#include <lemon/smart_graph.h>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "capacity_families.h"
#include "decide/maxflow.h"

namespace {

using remat_bench::Family;
using remat_bench::Network;
constexpr uint32_t kS = 0, kT = 1;
static_assert(Network::kInf == remat::MaxFlow::kInfinite);

struct Cut {
  bool bounded = false;
  int64_t flow = 0;
  std::vector<uint8_t> source_side;  // 1: source side of the sink-minimal cut
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "\nremat_maxflow_bench: MISMATCH: %s\n", what.c_str());
  std::abort();
}

// --- shared by the library solvers: what remat's run() does before the flow --

// True when t is reachable from s over infinite edges (no finite cut).
bool has_infinite_path(const Network& g) {
  std::vector<uint32_t> off(g.n + 1, 0);
  for (size_t e = 0; e < g.num_edges(); ++e)
    if (g.cap[e] == Network::kInf) ++off[g.tail[e] + 1];
  for (uint32_t v = 0; v < g.n; ++v) off[v + 1] += off[v];
  std::vector<uint32_t> adj(off[g.n]), pos(off.begin(), off.end() - 1);
  for (size_t e = 0; e < g.num_edges(); ++e)
    if (g.cap[e] == Network::kInf) adj[pos[g.tail[e]]++] = g.head[e];
  std::vector<uint8_t> seen(g.n, 0);
  std::vector<uint32_t> queue{kS};
  seen[kS] = 1;
  for (size_t i = 0; i < queue.size(); ++i)
    for (uint32_t k = off[queue[i]]; k < off[queue[i] + 1]; ++k) {
      uint32_t w = adj[k];
      if (w == kT) return true;
      if (!seen[w]) seen[w] = 1, queue.push_back(w);
    }
  return false;
}

// The value that replaces infinity: more than any finite cut.
int64_t finite_stand_in(const Network& g) {
  int64_t sum = 0;
  for (int64_t c : g.cap)
    if (c != Network::kInf) sum += c;
  return sum + 1;
}

// --- the solvers ---------------------------------------------------------------

Cut solve_remat(const Network& g) {
  remat::MaxFlow mf(g.n);
  for (size_t e = 0; e < g.num_edges(); ++e) mf.add_edge(g.tail[e], g.head[e], g.cap[e]);
  Cut c;
  c.bounded = mf.run(kS, kT);
  if (!c.bounded) return c;
  c.flow = mf.flow_value();
  c.source_side = mf.source_side(remat::CutSide::kSinkMinimal);
  return c;
}

// `raw_cut`, when given, receives Preflow::minCut() as it comes.
Cut solve_lemon(const Network& net, std::vector<uint8_t>* raw_cut = nullptr) {
  using G = lemon::SmartDigraph;
  Cut c;
  if (has_infinite_path(net)) return c;
  c.bounded = true;
  const int64_t inf = finite_stand_in(net);
  G g;
  g.reserveNode(net.n);
  g.reserveArc(static_cast<int>(net.num_edges()));
  for (uint32_t v = 0; v < net.n; ++v) g.addNode();
  for (size_t e = 0; e < net.num_edges(); ++e)
    g.addArc(g.nodeFromId(net.tail[e]), g.nodeFromId(net.head[e]));
  G::ArcMap<int64_t> cap(g);
  for (size_t e = 0; e < net.num_edges(); ++e)  // SmartDigraph ids are insertion order
    cap[g.arcFromId(static_cast<int>(e))] = net.cap[e] == Network::kInf ? inf : net.cap[e];
  lemon::Preflow<G, G::ArcMap<int64_t>> pf(g, cap, g.nodeFromId(kS), g.nodeFromId(kT));
  pf.runMinCut();  // first phase: a maximum preflow, enough for the cut
  c.flow = pf.flowValue();
  if (raw_cut) {
    raw_cut->assign(net.n, 0);
    for (uint32_t v = 0; v < net.n; ++v) (*raw_cut)[v] = pf.minCut(g.nodeFromId(v));
  }
  // Residual BFS towards the sink: w reaches u over w->u with spare capacity
  // or over u->w carrying flow.
  const auto& flow = pf.flowMap();
  std::vector<uint8_t> reach(net.n, 0);
  std::vector<uint32_t> queue{kT};
  reach[kT] = 1;
  for (size_t i = 0; i < queue.size(); ++i) {
    G::Node u = g.nodeFromId(queue[i]);
    for (G::InArcIt a(g, u); a != lemon::INVALID; ++a) {
      int w = g.id(g.source(a));
      if (!reach[w] && cap[a] - flow[a] > 0) reach[w] = 1, queue.push_back(w);
    }
    for (G::OutArcIt a(g, u); a != lemon::INVALID; ++a) {
      int w = g.id(g.target(a));
      if (!reach[w] && flow[a] > 0) reach[w] = 1, queue.push_back(w);
    }
  }
  c.source_side.resize(net.n);
  for (uint32_t v = 0; v < net.n; ++v) c.source_side[v] = !reach[v];
  return c;
}

// Boost: a CSR graph holding each edge and its reverse (capacity 0), with
// exterior property maps indexed by edge index — the fast way to use BGL.
struct BoostArc {
  uint32_t arc;  // 2e: edge e forward, 2e+1: its reverse
};
using Csr = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, BoostArc,
                                               boost::no_property, uint32_t, uint32_t>;
using CsrEdge = boost::graph_traits<Csr>::edge_descriptor;

template <bool kBk>
Cut solve_boost(const Network& net) {
  Cut c;
  if (has_infinite_path(net)) return c;
  c.bounded = true;
  const int64_t inf = finite_stand_in(net);
  const size_t m = net.num_edges();
  std::vector<std::pair<uint32_t, uint32_t>> arcs(2 * m);
  std::vector<BoostArc> props(2 * m);
  for (size_t e = 0; e < m; ++e) {
    arcs[2 * e] = {net.tail[e], net.head[e]};
    arcs[2 * e + 1] = {net.head[e], net.tail[e]};
    props[2 * e] = {static_cast<uint32_t>(2 * e)};
    props[2 * e + 1] = {static_cast<uint32_t>(2 * e + 1)};
  }
  Csr g(boost::edges_are_unsorted_multi_pass, arcs.begin(), arcs.end(), props.begin(), net.n);
  auto eidx = get(boost::edge_index, g);
  std::vector<CsrEdge> by_arc(2 * m), rev(2 * m);
  for (auto e : boost::make_iterator_range(edges(g))) by_arc[g[e].arc] = e;
  std::vector<int64_t> cap(2 * m), res(2 * m);
  for (auto e : boost::make_iterator_range(edges(g))) {
    uint32_t a = g[e].arc, i = get(eidx, e);
    rev[i] = by_arc[a ^ 1];
    int64_t given = net.cap[a / 2] == Network::kInf ? inf : net.cap[a / 2];
    cap[i] = (a & 1) ? 0 : given;
  }
  auto capm = boost::make_iterator_property_map(cap.begin(), eidx);
  auto resm = boost::make_iterator_property_map(res.begin(), eidx);
  auto revm = boost::make_iterator_property_map(rev.begin(), eidx);
  auto vidx = get(boost::vertex_index, g);
  if constexpr (kBk) {
    std::vector<CsrEdge> pred(net.n);
    std::vector<boost::default_color_type> color(net.n);
    std::vector<int64_t> dist(net.n);
    c.flow = boost::boykov_kolmogorov_max_flow(
        g, capm, resm, revm, boost::make_iterator_property_map(pred.begin(), vidx),
        boost::make_iterator_property_map(color.begin(), vidx),
        boost::make_iterator_property_map(dist.begin(), vidx), vidx, kS, kT);
  } else {
    c.flow = boost::push_relabel_max_flow(g, kS, kT, capm, resm, revm, vidx);
  }
  // Residual BFS towards the sink: w reaches u when the arc w->u (the
  // reverse of u->w) has residual capacity.
  std::vector<uint8_t> reach(net.n, 0);
  std::vector<uint32_t> queue{kT};
  reach[kT] = 1;
  for (size_t i = 0; i < queue.size(); ++i)
    for (auto e : boost::make_iterator_range(out_edges(queue[i], g))) {
      uint32_t w = static_cast<uint32_t>(target(e, g));
      if (!reach[w] && res[get(eidx, rev[get(eidx, e)])] > 0) reach[w] = 1, queue.push_back(w);
    }
  c.source_side.resize(net.n);
  for (uint32_t v = 0; v < net.n; ++v) c.source_side[v] = !reach[v];
  return c;
}

// LEMON's Preflow has no periodic global relabeling; on the chain family it
// grows quadratically (about 36 s CPU for one run at 10^6 vertices), so it is
// checked and timed only up to 10^5 (+ the generators' overshoot).
constexpr uint32_t kLemonMaxVertices = 100100;

enum class Solver { kRemat, kLemon, kBoostPR, kBoostBK };
constexpr Solver kSolvers[] = {Solver::kRemat, Solver::kLemon, Solver::kBoostPR, Solver::kBoostBK};
const char* solver_name(Solver s) {
  switch (s) {
    case Solver::kRemat: return "remat";
    case Solver::kLemon: return "lemon";
    case Solver::kBoostPR: return "boost_pr";
    case Solver::kBoostBK: return "boost_bk";
  }
  return "?";
}

Cut solve(Solver s, const Network& g) {
  switch (s) {
    case Solver::kRemat: return solve_remat(g);
    case Solver::kLemon: return solve_lemon(g);
    case Solver::kBoostPR: return solve_boost<false>(g);
    case Solver::kBoostBK: return solve_boost<true>(g);
  }
  return {};
}

// --- cross-checks -------------------------------------------------------------

// How often LEMON's own first-phase minCut() is the sink-minimal cut.
struct LemonSideStats {
  int graphs = 0, sink_minimal = 0, source_minimal = 0;
} g_lemon_small, g_lemon_large;

void compare(const std::string& where, const Cut& want, const Cut& got, const char* who) {
  if (want.bounded != got.bounded) fail(where + ": " + who + " disagrees on boundedness");
  if (!want.bounded) return;
  if (want.flow != got.flow)
    fail(where + ": " + who + " flow " + std::to_string(got.flow) + " != " + std::to_string(want.flow));
  if (want.source_side != got.source_side) fail(where + ": " + who + " returns another cut");
}

// All four solvers on one network; remat's answer is the reference.
Cut check_all(const std::string& where, const Network& g, LemonSideStats& stats,
              const std::vector<uint8_t>* source_minimal = nullptr) {
  Cut ref = solve_remat(g);
  std::vector<uint8_t> raw;
  bool lemon = g.n <= kLemonMaxVertices;
  if (lemon) compare(where, ref, solve_lemon(g, &raw), "lemon");
  compare(where, ref, solve_boost<false>(g), "boost_pr");
  compare(where, ref, solve_boost<true>(g), "boost_bk");
  if (ref.bounded && lemon) {
    ++stats.graphs;
    stats.sink_minimal += raw == ref.source_side;
    if (source_minimal) stats.source_minimal += raw == *source_minimal;
  }
  return ref;
}

// Every cut of a tiny network: the minimum value, and the sink-minimal
// (union of minimum source sides) and source-minimal (intersection) cuts.
struct Brute {
  bool bounded = false;
  int64_t value = 0;
  std::vector<uint8_t> sink_minimal, source_minimal;
};
Brute brute_force(const Network& g) {
  const uint32_t inner = g.n - 2;
  Brute b;
  uint32_t uni = 0, inter = 0;
  for (uint32_t mask = 0; mask < (1u << inner); ++mask) {
    auto in_s = [&](uint32_t v) { return v == kS || (v != kT && ((mask >> (v - 2)) & 1)); };
    int64_t cut = 0;
    bool infinite = false;
    for (size_t e = 0; e < g.num_edges() && !infinite; ++e)
      if (g.tail[e] != g.head[e] && in_s(g.tail[e]) && !in_s(g.head[e])) {
        if (g.cap[e] == Network::kInf) infinite = true;
        else cut += g.cap[e];
      }
    if (infinite) continue;
    if (!b.bounded || cut < b.value) b.bounded = true, b.value = cut, uni = inter = mask;
    else if (cut == b.value) uni |= mask, inter &= mask;
  }
  if (!b.bounded) return b;
  auto side_of = [&](uint32_t mask) {
    std::vector<uint8_t> side(g.n, 0);
    side[kS] = 1;
    for (uint32_t v = 2; v < g.n; ++v) side[v] = (mask >> (v - 2)) & 1;
    return side;
  };
  b.sink_minimal = side_of(uni);
  b.source_minimal = side_of(inter);
  return b;
}

void check_small_graphs() {
  int bounded = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    Network g = remat_bench::make_small_random(seed, 6 + seed % 11);
    Brute b = brute_force(g);
    std::string where = "small random graph seed " + std::to_string(seed);
    Cut want{b.bounded, b.value, b.sink_minimal};
    compare(where, want, solve_remat(g), "remat vs brute force");
    check_all(where, g, g_lemon_small, &b.source_minimal);
    bounded += b.bounded;
  }
  // One layer of the chain family (21 vertices) against brute force too.
  Network chain = remat_bench::make_family(Family::kChain, 3);
  Brute b = brute_force(chain);
  compare("chain, one layer", Cut{b.bounded, b.value, b.sink_minimal}, solve_remat(chain),
          "remat vs brute force");
  check_all("chain, one layer", chain, g_lemon_small, &b.source_minimal);
  std::fprintf(stderr,
               "cross-check: 400 small random networks (%d bounded) + one chain layer agree with "
               "brute force; LEMON's raw Preflow::minCut() after runMinCut() is the sink-minimal "
               "cut on %d/%d and the source-minimal cut on %d/%d\n",
               bounded, g_lemon_small.sink_minimal, g_lemon_small.graphs,
               g_lemon_small.source_minimal, g_lemon_small.graphs);
}

// Instances are built and cross-checked once, on first use (outside timing).
const Network& instance(Family f, uint32_t size) {
  static std::map<std::pair<int, uint32_t>, std::unique_ptr<Network>> cache;
  auto& slot = cache[{static_cast<int>(f), size}];
  if (!slot) {
    slot = std::make_unique<Network>(remat_bench::make_family(f, size));
    std::string where = std::string(remat_bench::family_name(f)) + " " + std::to_string(size);
    Cut ref = check_all(where, *slot, g_lemon_large);
    if (!ref.bounded) fail(where + ": generated network is unbounded");
  }
  return *slot;
}

void bm_maxflow(benchmark::State& state, Family f, uint32_t size, Solver s) {
  const Network& g = instance(f, size);
  for (auto _ : state) {
    Cut c = solve(s, g);
    benchmark::DoNotOptimize(c.flow);
    benchmark::DoNotOptimize(c.source_side.data());
  }
  state.SetLabel("V=" + std::to_string(g.n) + " E=" + std::to_string(g.num_edges()));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  check_small_graphs();
  for (Family f : {Family::kChain, Family::kWideSkip, Family::kParallelChains})
    for (uint32_t size : {1000u, 10000u, 100000u, 1000000u})
      for (Solver s : kSolvers) {
        if (s == Solver::kLemon && size > kLemonMaxVertices) continue;
        std::string name = std::string(remat_bench::family_name(f)) + "/" + std::to_string(size) +
                           "/" + solver_name(s);
        auto* b = benchmark::RegisterBenchmark(name.c_str(), bm_maxflow, f, size, s);
        // Medians of repetitions; the largest size runs one iteration per
        // repetition so the whole run stays within a few minutes.
        b->Unit(benchmark::kMillisecond)->ReportAggregatesOnly(true);
        if (size >= 1000000u) b->Iterations(1)->Repetitions(3);
        else b->MinTime(0.05)->Repetitions(5);
      }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (g_lemon_large.graphs)
    std::fprintf(stderr,
                 "LEMON's raw Preflow::minCut() was the sink-minimal cut on %d/%d benchmark "
                 "instances\n",
                 g_lemon_large.sink_minimal, g_lemon_large.graphs);
  return 0;
}
