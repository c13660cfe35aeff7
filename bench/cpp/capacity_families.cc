// bench/cpp/capacity_families.cc — the generators of capacity_families.h.
// Each family mirrors one graph shape the partitioner meets; the comments
// say which torch pattern each piece stands for.
#include "capacity_families.h"

#include <algorithm>
#include <cmath>

namespace remat_bench {
namespace {

constexpr uint32_t kSource = 0, kSink = 1;
// A 64x64 fp32 tensor: most activations of a layer share one size, which is
// what makes minimum cuts tie.
constexpr int64_t kB = 4 * 64 * 64;

// splitmix64: tiny, deterministic on every platform (std:: distributions are not).
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t k) { return static_cast<uint32_t>(next() % k); }
  bool chance(uint32_t num, uint32_t den) { return below(den) < num; }
};

struct Fw {
  uint32_t in, out;
};

struct Builder {
  Network net;
  // A forward node: X_in -> X_out, banned ones fed by the source.
  Fw node(int64_t weight, bool banned) {
    Fw f{net.vertex(), net.vertex()};
    if (banned) net.edge(kSource, f.in, Network::kInf);
    net.edge(f.in, f.out, weight);
    return f;
  }
  void use(Fw producer, Fw user) { net.edge(producer.out, user.in, Network::kInf); }
  // A value the backward reads directly (required_bw, not from tangents).
  void needed(Fw f) { net.edge(f.out, kSink, Network::kInf); }
  // A backward node from the tangents' closure: only Y_in, tied to the sink,
  // fed by the forward values it reads.
  void backward_node(std::initializer_list<Fw> inputs) {
    uint32_t y = net.vertex();
    for (Fw f : inputs) net.edge(f.out, y, Network::kInf);
    net.edge(y, kSink, Network::kInf);
  }
};

// (a) torch's sequential matmul/sin test shape: h = sin^3(h @ W_k). mm
// backward reads h and W_k (a tangent-closure node); each sin's backward
// needs cos(x), a recomputable backward node tied to the sink. All weights
// equal: long runs of tied cuts, many vertices next to the sink.
Network chain(uint32_t target) {
  Builder b;
  Fw h = b.node(kB, true);  // the input primal
  while (b.net.n < target) {
    Fw w = b.node(kB, true);  // the layer's weight primal
    Fw mm = b.node(kB, false);
    b.use(h, mm);
    b.use(w, mm);
    b.backward_node({h, w});
    Fw x = mm;
    for (int p = 0; p < 3; ++p) {
      Fw s = b.node(kB, false);
      b.use(x, s);
      Fw cos = b.node(kB, false);
      b.use(x, cos);
      b.needed(cos);
      x = s;
    }
    h = x;
  }
  return std::move(b.net);
}

// (b) transformer-like: layers of 8 nodes, each reading two nodes of the
// layer before, often a residual from 2 or 4 layers back, one a banned weight
// primal; mixed sizes (upcasts, halves, 1.1^k distance factors), sym ints
// (weight 1), opaque values (0), non-tensor outputs (infinite split edge,
// never banned), rule bans (reductions, RNG); backward nodes reading 1-3
// forward values, and recomputable backward nodes.
Network wide_skip(uint32_t target, uint64_t seed) {
  constexpr uint32_t kWidth = 8;
  Rng r{seed * 7919 + 17};
  Builder b;
  std::vector<std::vector<Fw>> layers;
  auto weight = [&]() -> int64_t {
    static constexpr int64_t kMul[] = {2, 2, 2, 4, 8, 1};  // in halves of kB
    double w = static_cast<double>(kB * kMul[r.below(6)] / 2) * std::pow(1.1, r.below(4));
    return static_cast<int64_t>(w);
  };
  layers.emplace_back();
  for (uint32_t j = 0; j < kWidth; ++j) layers.back().push_back(b.node(weight(), true));
  std::vector<Fw> pending;  // forward values waiting for a backward node
  while (b.net.n < target) {
    const auto& prev = layers.back();
    std::vector<Fw> cur;
    Fw wp = b.node(4 * kB, true);
    for (uint32_t j = 0; j < kWidth; ++j) {
      uint32_t kind = r.below(32);
      int64_t w = kind == 0 ? 1 : kind == 1 ? 0 : kind == 2 ? Network::kInf : weight();
      bool banned = w != Network::kInf && r.chance(1, 12);
      Fw f = b.node(w, banned);
      b.use(prev[r.below(kWidth)], f);
      b.use(prev[r.below(kWidth)], f);
      if (j == 0) b.use(wp, f);
      size_t l = layers.size();
      if (l >= 4 && r.chance(2, 5)) b.use(layers[l - (r.chance(1, 2) ? 2 : 4)][r.below(kWidth)], f);
      if (r.chance(2, 5)) pending.push_back(f);
      if (r.chance(3, 20)) {
        Fw g = b.node(weight(), false);
        b.use(f, g);
        b.use(prev[r.below(kWidth)], g);
        b.needed(g);
      }
      cur.push_back(f);
    }
    while (pending.size() >= 3 || (!pending.empty() && r.chance(1, 2))) {
      size_t k = std::min<size_t>(pending.size(), 1 + r.below(3));
      if (k == 1) b.backward_node({pending.back()});
      else if (k == 2) b.backward_node({pending.back(), pending[pending.size() - 2]});
      else b.backward_node({pending.back(), pending[pending.size() - 2], pending[pending.size() - 3]});
      pending.resize(pending.size() - k);
    }
    layers.push_back(std::move(cur));
  }
  return std::move(b.net);
}

// (c) torch issue #145081, "parallel use chains": 16 chains stepping in
// lockstep, each step of chain c subtracting into the next step of chains
// c+1..c+3. Equal weights; a quarter of the values are read by backward
// nodes, and each chain's end is needed.
Network parallel_chains(uint32_t target, uint64_t seed) {
  constexpr uint32_t kChains = 16;
  Rng r{seed * 104729 + 3};
  Builder b;
  std::vector<Fw> prev;
  for (uint32_t c = 0; c < kChains; ++c) prev.push_back(b.node(kB, true));
  while (b.net.n < target) {
    std::vector<Fw> cur;
    for (uint32_t c = 0; c < kChains; ++c) {
      Fw f = b.node(kB, false);
      b.use(prev[c], f);
      for (uint32_t d = 1; d <= 3 && d <= c; ++d) b.use(prev[c - d], f);
      if (r.chance(1, 4)) b.backward_node({f});
      cur.push_back(f);
    }
    prev = std::move(cur);
  }
  for (Fw f : prev) b.needed(f);
  return std::move(b.net);
}

}  // namespace

const char* family_name(Family f) {
  switch (f) {
    case Family::kChain: return "chain";
    case Family::kWideSkip: return "wide_skip";
    case Family::kParallelChains: return "parallel_chains";
  }
  return "?";
}

Network make_family(Family f, uint32_t target_vertices, uint64_t seed) {
  switch (f) {
    case Family::kChain: return chain(target_vertices);
    case Family::kWideSkip: return wide_skip(target_vertices, seed);
    case Family::kParallelChains: return parallel_chains(target_vertices, seed);
  }
  return {};
}

Network make_small_random(uint64_t seed, uint32_t max_vertices) {
  Rng r{seed * 31337 + 5};
  Builder b;
  std::vector<Fw> fw;
  // Tiny weights {0..3} make ties (many minimum cuts) the common case.
  while (b.net.n + 2 <= max_vertices) {
    bool backward_only = !fw.empty() && r.chance(1, 5);
    if (backward_only) {
      uint32_t y = b.net.vertex();
      for (Fw f : fw)
        if (r.chance(1, 3)) b.net.edge(f.out, y, Network::kInf);
      b.net.edge(y, kSink, Network::kInf);
      continue;
    }
    uint32_t kind = r.below(10);
    int64_t w = kind == 0 ? Network::kInf : static_cast<int64_t>(r.below(4));
    Fw f = b.node(w, r.chance(3, 10));
    for (Fw g : fw)
      if (r.chance(7, 20)) b.use(g, f);
    if (r.chance(3, 10)) b.needed(f);
    if (r.chance(1, 20)) b.net.edge(f.in, kSink, Network::kInf);  // must-recompute
    if (r.chance(1, 10)) b.net.edge(f.in, f.out, 1 + r.below(3));  // a parallel edge
    fw.push_back(f);
  }
  return std::move(b.net);
}

}  // namespace remat_bench
