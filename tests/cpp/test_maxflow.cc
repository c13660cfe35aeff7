// tests/cpp/test_maxflow.cc — decide/maxflow.h: the flow value against a
// plain Edmonds-Karp, both minimum cuts against brute force over every cut
// of small random graphs, infinite edges, and long/wide graphs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <random>

#include "decide/maxflow.h"
#include "remat/error.h"

namespace remat {
namespace {

struct E {
  uint32_t u, v;
  int64_t c;
};

// Edmonds-Karp on an adjacency matrix (n small), infinity as a big number.
int64_t edmonds_karp(uint32_t n, const std::vector<E>& es, uint32_t s, uint32_t t) {
  const int64_t big = int64_t(1) << 40;
  std::vector<std::vector<int64_t>> r(n, std::vector<int64_t>(n, 0));
  for (auto& e : es)
    if (e.u != e.v) r[e.u][e.v] += e.c == MaxFlow::kInfinite ? big : e.c;
  int64_t flow = 0;
  for (;;) {
    std::vector<int> par(n, -1);
    par[s] = s;
    std::deque<uint32_t> q{s};
    while (!q.empty() && par[t] < 0) {
      uint32_t u = q.front();
      q.pop_front();
      for (uint32_t v = 0; v < n; ++v)
        if (par[v] < 0 && r[u][v] > 0) par[v] = u, q.push_back(v);
    }
    if (par[t] < 0) return flow;
    int64_t aug = big;
    for (uint32_t v = t; v != s; v = par[v]) aug = std::min(aug, r[par[v]][v]);
    for (uint32_t v = t; v != s; v = par[v]) r[par[v]][v] -= aug, r[v][par[v]] += aug;
    flow += aug;
  }
}

// All minimum cuts by enumeration; returns the minimal source side
// (intersection) and the minimal sink side (intersection of sink sides).
struct Brute {
  int64_t value;
  std::vector<uint8_t> sink_minimal_src;    // source side of the sink-nearest cut
  std::vector<uint8_t> source_minimal_src;  // source side of the source-nearest cut
};
Brute brute_force(uint32_t n, const std::vector<E>& es, uint32_t s, uint32_t t) {
  Brute b{std::numeric_limits<int64_t>::max(), {}, {}};
  std::vector<uint32_t> cuts;
  std::vector<uint32_t> others;
  for (uint32_t v = 0; v < n; ++v)
    if (v != s && v != t) others.push_back(v);
  for (uint32_t mask = 0; mask < (1u << others.size()); ++mask) {
    uint32_t side = 1u << s;
    for (size_t i = 0; i < others.size(); ++i)
      if (mask >> i & 1) side |= 1u << others[i];
    int64_t value = 0;
    bool inf = false;
    for (auto& e : es)
      if ((side >> e.u & 1) && !(side >> e.v & 1)) {
        if (e.c == MaxFlow::kInfinite) inf = true;
        else value += e.c;
      }
    if (inf) continue;
    if (value < b.value) {
      b.value = value;
      cuts.clear();
    }
    if (value == b.value) cuts.push_back(side);
  }
  uint32_t all = ~0u, any = 0;
  for (uint32_t c : cuts) all &= c, any |= c;
  b.sink_minimal_src.assign(n, 0);
  b.source_minimal_src.assign(n, 0);
  for (uint32_t v = 0; v < n; ++v) {
    b.sink_minimal_src[v] = any >> v & 1;  // union of source sides
    b.source_minimal_src[v] = all >> v & 1;
  }
  return b;
}

TEST(MaxFlow, SimpleChain) {
  MaxFlow f(4);
  f.add_edge(0, 1, 5);
  f.add_edge(1, 2, 3);
  f.add_edge(2, 3, 7);
  ASSERT_TRUE(f.run(0, 3));
  EXPECT_EQ(f.flow_value(), 3);
  auto src = f.source_side(CutSide::kSinkMinimal);
  EXPECT_EQ(src, (std::vector<uint8_t>{1, 1, 0, 0}));
}

TEST(MaxFlow, InfinitePathIsUnbounded) {
  MaxFlow f(3);
  f.add_edge(0, 1, MaxFlow::kInfinite);
  f.add_edge(1, 2, MaxFlow::kInfinite);
  f.add_edge(0, 2, 4);
  EXPECT_FALSE(f.run(0, 2));
  EXPECT_FALSE(f.bounded());
}

TEST(MaxFlow, InfiniteEdgesNeverCut) {
  // s -inf-> a -1-> b -inf-> t, and s -inf-> b would be unbounded; here
  // a -inf-> c -2-> t: the cut must take the finite edges.
  MaxFlow f(5);
  f.add_edge(0, 1, MaxFlow::kInfinite);
  f.add_edge(1, 2, 1);
  f.add_edge(2, 4, MaxFlow::kInfinite);
  f.add_edge(1, 3, MaxFlow::kInfinite);
  f.add_edge(3, 4, 2);
  ASSERT_TRUE(f.run(0, 4));
  EXPECT_EQ(f.flow_value(), 3);
}

TEST(MaxFlow, TwoEqualCutsSides) {
  // s -2-> a -2-> t: two minimum cuts of value 2.
  MaxFlow f(3);
  f.add_edge(0, 1, 2);
  f.add_edge(1, 2, 2);
  ASSERT_TRUE(f.run(0, 2));
  EXPECT_EQ(f.source_side(CutSide::kSinkMinimal), (std::vector<uint8_t>{1, 1, 0}));
  EXPECT_EQ(f.source_side(CutSide::kSourceMinimal), (std::vector<uint8_t>{1, 0, 0}));
}

TEST(MaxFlow, RandomAgainstBruteForce) {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 400; ++iter) {
    uint32_t n = 2 + rng() % 9;
    uint32_t m = rng() % (3 * n);
    std::vector<E> es;
    for (uint32_t i = 0; i < m; ++i) {
      E e{static_cast<uint32_t>(rng() % n), static_cast<uint32_t>(rng() % n), 0};
      uint32_t kind = rng() % 10;
      e.c = kind == 0 ? MaxFlow::kInfinite : kind == 1 ? 0 : static_cast<int64_t>(rng() % 6);
      es.push_back(e);
    }
    MaxFlow f(n);
    for (auto& e : es) f.add_edge(e.u, e.v, e.c);
    Brute b = brute_force(n, es, 0, n - 1);
    bool bounded = f.run(0, n - 1);
    ASSERT_EQ(bounded, b.value != std::numeric_limits<int64_t>::max()) << "iter " << iter;
    if (!bounded) continue;
    EXPECT_EQ(f.flow_value(), b.value) << "iter " << iter;
    EXPECT_EQ(f.flow_value(), edmonds_karp(n, es, 0, n - 1)) << "iter " << iter;
    EXPECT_EQ(f.source_side(CutSide::kSinkMinimal), b.sink_minimal_src) << "iter " << iter;
    EXPECT_EQ(f.source_side(CutSide::kSourceMinimal), b.source_minimal_src) << "iter " << iter;
  }
}

// set_capacities reuses one network for many cuts (the optimizer's priced
// cuts): each run with new capacities answers as the brute force does on
// those capacities, bounded or not, whatever the run before it found
// (capacities drawn anew each time, infinite ones included, so runs go from
// unbounded to bounded and back).
TEST(MaxFlow, ARerunWithNewCapacitiesAnswersAsAFreshNetwork) {
  std::mt19937 rng(2026);
  int bounded_after_unbounded = 0, reruns = 0;
  for (int iter = 0; iter < 150; ++iter) {
    const uint32_t n = 2 + rng() % 9;
    const uint32_t m = 1 + rng() % (3 * n);
    std::vector<E> es;
    for (uint32_t i = 0; i < m; ++i)
      es.push_back({static_cast<uint32_t>(rng() % n), static_cast<uint32_t>(rng() % n), 0});
    MaxFlow f(n);
    bool was_bounded = true;
    for (int run = 0; run < 4; ++run) {
      std::vector<int64_t> caps;
      for (E& e : es) {
        const uint32_t kind = rng() % 10;
        e.c = kind == 0 ? MaxFlow::kInfinite : kind == 1 ? 0 : static_cast<int64_t>(rng() % 6);
        caps.push_back(e.c);
      }
      if (run == 0) {
        for (const E& e : es) f.add_edge(e.u, e.v, e.c);
      } else {
        f.set_capacities(caps);
        ++reruns;
      }
      const Brute b = brute_force(n, es, 0, n - 1);
      const bool bounded = f.run(0, n - 1);
      ASSERT_EQ(bounded, b.value != std::numeric_limits<int64_t>::max()) << "iter " << iter << " run " << run;
      if (bounded && !was_bounded) ++bounded_after_unbounded;
      was_bounded = bounded;
      if (!bounded) continue;
      EXPECT_EQ(f.flow_value(), b.value) << "iter " << iter << " run " << run;
      EXPECT_EQ(f.source_side(CutSide::kSinkMinimal), b.sink_minimal_src) << "iter " << iter << " run " << run;
      EXPECT_EQ(f.source_side(CutSide::kSourceMinimal), b.source_minimal_src) << "iter " << iter << " run " << run;
    }
  }
  EXPECT_GT(reruns, 400);
  EXPECT_GT(bounded_after_unbounded, 10) << "the runs never went from unbounded to bounded";
  MaxFlow f(2);
  f.add_edge(0, 1, 3);
  EXPECT_THROW(f.set_capacities(std::vector<int64_t>{1, 2}), Error) << "one capacity per edge";
  EXPECT_THROW(f.set_capacities(std::vector<int64_t>{-1}), Error);
}

TEST(MaxFlow, RandomMediumAgainstEdmondsKarp) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 40; ++iter) {
    uint32_t n = 20 + rng() % 60;
    std::vector<E> es;
    for (uint32_t i = 0; i < 4 * n; ++i) {
      uint32_t u = rng() % n, v = rng() % n;
      if (u > v) std::swap(u, v);  // a DAG, like the partitioner's graphs
      int64_t c = rng() % 8 == 0 ? MaxFlow::kInfinite : static_cast<int64_t>(rng() % 1000);
      es.push_back({u, v, c});
    }
    MaxFlow f(n);
    for (auto& e : es) f.add_edge(e.u, e.v, e.c);
    if (!f.run(0, n - 1)) continue;
    EXPECT_EQ(f.flow_value(), edmonds_karp(n, es, 0, n - 1)) << "iter " << iter;
  }
}

// The partitioner's shape: split nodes in a long chain, every node with a
// source edge (banned) and the far end tied to the sink. Checks the answer
// and that nothing recurses or degrades; prints the time.
TEST(MaxFlow, LongSplitChain) {
  const uint32_t k = 200000;
  MaxFlow f(2 * k + 2);
  const uint32_t s = 2 * k, t = 2 * k + 1;
  for (uint32_t i = 0; i < k; ++i) {
    f.add_edge(2 * i, 2 * i + 1, 100 + (i % 7));
    if (i + 1 < k) f.add_edge(2 * i + 1, 2 * (i + 1), MaxFlow::kInfinite);
    if (i % 3 == 0) f.add_edge(s, 2 * i, MaxFlow::kInfinite);
    if (i % 5 == 0) f.add_edge(2 * i + 1, t, MaxFlow::kInfinite);
  }
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(f.run(s, t));
  auto src = f.source_side(CutSide::kSinkMinimal);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ info ] long split chain, %u vertices: %.1f ms\n", 2 * k + 2, ms);
  // Each sink tie is fed by the nearest banned node at or before it; the
  // cheapest split edge on that stretch is cut.
  EXPECT_GT(f.flow_value(), 0);
  EXPECT_EQ(src[s], 1);
  EXPECT_EQ(src[t], 0);
}

TEST(MaxFlow, WideGraph) {
  // One source fanning out to many parallel split nodes joined at the sink.
  const uint32_t k = 300000;
  MaxFlow f(2 * k + 2);
  const uint32_t s = 2 * k, t = 2 * k + 1;
  int64_t expect = 0;
  for (uint32_t i = 0; i < k; ++i) {
    f.add_edge(s, 2 * i, MaxFlow::kInfinite);
    f.add_edge(2 * i, 2 * i + 1, 1 + i % 13);
    f.add_edge(2 * i + 1, t, MaxFlow::kInfinite);
    expect += 1 + i % 13;
  }
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(f.run(s, t));
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ info ] wide graph, %u vertices: %.1f ms\n", 2 * k + 2, ms);
  EXPECT_EQ(f.flow_value(), expect);
}

}  // namespace
}  // namespace remat
