// tests/cpp/random_mlp.h — random MLP-shaped joint graphs, for tests that
// check a rule over many graphs (the peak budget, the optimizer).
//
// Contract: random_mlp(seed) is a deterministic function of the seed: an
// MLP training step of 2-4 layers (mm then a chain of 1-3 pointwise ops),
// with its hand-written backward; widths, depths and ops drawn from `seed`.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "graph_fixture.h"
#include "remat/partition.h"

namespace remat::testing {

// The joint graph of a training step whose output is (forward output,
// input gradient, weight gradients...): one forward output.
inline JointGraph mlp_step(TestGraph& t, Ref out, Ref input_grad, const std::vector<Ref>& weight_grads) {
  std::vector<A> outs{out, input_grad};
  for (Ref r : weight_grads) outs.push_back(r);
  t.output({A::tuple(outs)});
  JointGraph j;
  j.graph = t.build();
  j.num_fwd_outputs = 1;
  return j;
}

// A random MLP training step: layers of mm then a chain of 1-3 pointwise
// ops, their hand-written backward (each pointwise op's derivative reads its
// forward input, each mm's weight gradient reads the layer input), widths
// and depths drawn from `seed`.
inline JointGraph random_mlp(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  static const char* kOps[] = {"aten.sin.default", "aten.relu.default", "aten.sigmoid.default",
                               "aten.exp.default", "aten.tanh.default"};
  const int64_t batch = 16 << pick(3);
  const int layers = 2 + pick(3);
  std::vector<int64_t> width{8 << pick(3)};
  for (int i = 0; i < layers; ++i) width.push_back(4 << pick(4));

  TestGraph t;
  std::vector<Ref> weights;
  Ref x = t.placeholder("primals_1", {batch, width[0]});
  for (int i = 0; i < layers; ++i)
    weights.push_back(t.placeholder("primals_" + std::to_string(i + 2), {width[i], width[i + 1]}));
  struct Layer {
    Ref input;               // h_i
    std::vector<Ref> chain;  // inputs of the pointwise ops
  };
  std::vector<Layer> fw;
  Ref h = x;
  for (int i = 0; i < layers; ++i) {
    Layer l{h, {}};
    Ref v = t.call("aten.mm.default", {h, weights[i]}, {batch, width[i + 1]});
    const int n = 1 + pick(3);
    for (int k = 0; k < n; ++k) {
      l.chain.push_back(v);
      v = t.call(kOps[pick(5)], {v}, {batch, width[i + 1]});
    }
    fw.push_back(l);
    h = v;
  }
  Ref tangent = t.placeholder("tangents_1", {batch, width[layers]});
  Ref g = tangent;
  std::vector<Ref> grads(layers);
  for (int i = layers - 1; i >= 0; --i) {
    for (auto it = fw[i].chain.rbegin(); it != fw[i].chain.rend(); ++it) {
      Ref d = t.call("aten.cos.default", {*it}, {batch, width[i + 1]});
      g = t.call("aten.mul.Tensor", {g, d}, {batch, width[i + 1]});
    }
    Ref ht = t.call("aten.t.default", {fw[i].input}, {width[i], batch});
    t.alias(ht, fw[i].input);
    grads[i] = t.call("aten.mm.default", {ht, g}, {width[i], width[i + 1]});
    Ref wt = t.call("aten.t.default", {weights[i]}, {width[i + 1], width[i]});
    t.alias(wt, weights[i]);
    g = t.call("aten.mm.default", {g, wt}, {batch, width[i]});
  }
  return mlp_step(t, h, g, grads);
}

}  // namespace remat::testing
