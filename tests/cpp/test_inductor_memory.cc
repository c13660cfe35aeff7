// tests/cpp/test_inductor_memory.cc — the liveness simulator under
// MemoryModel::kInductor (remat/memory.h, memory/fusion.h) on hand-written
// pairs: what inductor inlines has no buffer and keeps its inputs alive
// until the kernel it is inlined into, reductions and what extern kernels
// read are buffers, a pointwise kernel writes in place of a dying input of
// its size, and CPU convolutions read channels-last copies of their
// placeholders (the forward saves the copy). A [4] float32 tensor is 16
// bytes. Each pair runs in its graph's order (kGraphOrder: the kernel orders
// of inductor's reorder pass, tests/cpp/test_kernel_order.cc, left out).
// tests/python/test_inductor_memory.py checks the model against
// inductor-compiled steps.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "graph_fixture.h"
#include "remat/memory.h"
#include "remat/options.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;

struct Pair {
  Graph fw, bw;
};

// simulate_memory's kernel_orders: the graphs' own order only.
constexpr bool kGraphOrder = false;

// A backward that only returns its tangent: the forward is under test.
Graph trivial_backward() {
  TestGraph g;
  Ref t = g.placeholder("tangents_1", {4});
  g.output({A::tuple({t})});
  return g.build();
}

// An int64 placeholder: a scatter's or a gather's index.
Ref index_placeholder(TestGraph& f, const std::string& name, std::vector<int64_t> shape) {
  Ref idx = f.placeholder(name, std::move(shape));
  f[idx].tensors[0].dtype = "int64";
  f[idx].tensors[0].itemsize = 8;
  return idx;
}

// The scatter tests' forward up to the scatter's zeros: x, w, an index of
// `index_shape`, m = x @ w, its row sum r and (4, 4) zeros.
struct ScatterPrelude {
  TestGraph f;
  Ref x, w, idx, m, r, zeros;
};

ScatterPrelude scatter_prelude(std::vector<int64_t> index_shape) {
  ScatterPrelude p;
  TestGraph& f = p.f;
  p.x = f.placeholder("primals_1", {4, 4});
  p.w = f.placeholder("primals_2", {4, 4});
  p.idx = index_placeholder(f, "primals_3", std::move(index_shape));
  p.m = f.call("aten.mm.default", {p.x, p.w}, {4, 4});
  p.r = f.call("aten.sum.dim_IntList", {p.m, A::list({1}), true}, {4, 1});
  p.zeros = f.call("aten.full.default", {A::list({4, 4}), 0}, {4, 4});
  return p;
}

// forward: x -> a = sin(x) -> b = cos(a) -> c = exp(b); returns c.
Pair pointwise_chain() {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  Ref a = f.call("aten.sin.default", {x}, {4});
  Ref b = f.call("aten.cos.default", {a}, {4});
  Ref c = f.call("aten.exp.default", {b}, {4});
  f.output({A::tuple({c})});
  return {f.build(), trivial_backward()};
}

TEST(InductorMemory, IntermediatesOnlyPointwiseOpsReadGetNoBuffer) {
  Pair p = pointwise_chain();
  const MemoryProfile aten = simulate_memory(p.fw, p.bw, 1, MemoryModel::kAten);
  const MemoryProfile ind = simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder);
  // aten: x | a | b (a still alive) | c (b still alive) | output
  EXPECT_EQ(aten.forward_timeline, (std::vector<int64_t>{16, 32, 48, 48, 32}));
  // inductor: a and b are inlined into c's kernel, which writes c.
  EXPECT_EQ(ind.forward_timeline, (std::vector<int64_t>{16, 16, 16, 32, 32}));
  EXPECT_EQ(ind.forward_peak_bytes, 32);
  EXPECT_EQ(ind.model, MemoryModel::kInductor);
  EXPECT_EQ(aten.model, MemoryModel::kAten);
}

// forward: x -> m = mm(x, w) -> r = relu(m) -> o = mm(r, w); returns o.
TEST(InductorMemory, WhatAnExternKernelReadsIsABufferWrittenInPlaceOfADyingInput) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4, 4});
  Ref w = f.placeholder("primals_2", {4, 4});
  Ref m = f.call("aten.mm.default", {x, w}, {4, 4});
  Ref r = f.call("aten.relu.default", {m}, {4, 4});
  Ref o = f.call("aten.mm.default", {r, w}, {4, 4});
  f.output({A::tuple({o})});
  Pair p{f.build(), trivial_backward()};
  const MemoryProfile ind = simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder);
  // x, w 128 | m +64 | r takes m's buffer (m dies there) | o +64 | output
  EXPECT_EQ(ind.forward_timeline, (std::vector<int64_t>{64, 128, 192, 192, 256, 192}));
  const MemoryProfile aten = simulate_memory(p.fw, p.bw, 1, MemoryModel::kAten);
  EXPECT_EQ(aten.forward_timeline, (std::vector<int64_t>{64, 128, 192, 256, 256, 192}));
}

// A reduction's result is a buffer (other kernels load it); what it
// reads pointwise is inlined into it.
TEST(InductorMemory, ReductionsAreBuffersAndInlineWhatTheyRead) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4, 4});
  Ref s = f.call("aten.sin.default", {x}, {4, 4});
  Ref sum = f.call("aten.sum.dim_IntList", {s, A::list({1})}, {4});
  Ref e = f.call("aten.exp.default", {sum}, {4});
  f.output({A::tuple({e})});
  Pair p{f.build(), trivial_backward()};
  const MemoryProfile ind = simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder);
  // x 64 | sin inlined | sum +16 | exp writes in place of sum | output
  EXPECT_EQ(ind.forward_timeline, (std::vector<int64_t>{64, 64, 80, 80, 80}));
}

// What an inlined value reads lives until the kernel it is inlined into:
// a = sin(m) is inlined into b = mul(a, k), so m lives past k.
TEST(InductorMemory, AnInlinedValueKeepsItsInputsAliveUntilItsKernelRuns) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4, 4});
  Ref w = f.placeholder("primals_2", {4, 4});
  Ref m = f.call("aten.mm.default", {x, w}, {4, 4});
  Ref a = f.call("aten.sin.default", {m}, {4, 4});      // inlined into b
  Ref k = f.call("aten.mm.default", {x, x}, {4, 4});    // m must still be alive here
  Ref b = f.call("aten.mul.Tensor", {a, k}, {4, 4});
  Ref o = f.call("aten.mm.default", {b, w}, {4, 4});
  f.output({A::tuple({o})});
  Pair p{f.build(), trivial_backward()};
  const MemoryProfile ind = simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder);
  // x, w 128 | m +64 | a: nothing | k +64 (m alive) | b in place of m,
  // then k goes | o +64, then b goes | output
  EXPECT_EQ(ind.forward_timeline, (std::vector<int64_t>{64, 128, 192, 192, 256, 256, 256, 192}));
  const MemoryProfile aten = simulate_memory(p.fw, p.bw, 1, MemoryModel::kAten);
  // aten: m dies at a; k comes after it.
  EXPECT_EQ(aten.forward_timeline[4], 256);  // x, w, a, k
}

// conv(x, w) on CPU: inductor copies x and w channels-last first; the
// forward saves x, so it saves the copy, which lives to the backward's
// last use of it. x [2, 3, 4, 4] float32 = 384 bytes; w [4, 3, 3, 3] =
// 432; y [2, 4, 4, 4] = 512.
TEST(InductorMemory, ConvolutionsReadChannelsLastCopiesOfTheirPlaceholdersOnCpu) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {2, 3, 4, 4});
  Ref w = f.placeholder("primals_2", {4, 3, 3, 3});
  Ref y = f.call("aten.convolution.default",
                 {x, w, nullptr, A::list({1, 1}), A::list({1, 1}), A::list({1, 1}), false,
                  A::list({0, 0}), 1},
                 {2, 4, 4, 4});
  f.output({A::tuple({y, x})});
  TestGraph g;
  Ref sx = g.placeholder("primals_1", {2, 3, 4, 4});
  Ref t = g.placeholder("tangents_1", {2, 4, 4, 4});
  Ref d = g.call("aten.sin.default", {sx}, {2, 3, 4, 4});
  g.output({A::tuple({d, t})});
  Pair p{f.build(), g.build()};
  const MemoryProfile ind = simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder);
  const MemoryProfile aten = simulate_memory(p.fw, p.bw, 1, MemoryModel::kAten);
  // Forward: the inputs, both copies and y at the convolution; w's copy
  // goes after it, x's is saved.
  EXPECT_EQ(aten.forward_peak_bytes, 384 + 432 + 512);
  EXPECT_EQ(ind.forward_peak_bytes, 2 * (384 + 432) + 512);
  EXPECT_EQ(ind.between_bytes, aten.between_bytes + 384);
  // The copy is read by sin and released there: sin's result takes it.
  EXPECT_EQ(ind.backward_peak_bytes, aten.backward_peak_bytes);
}

TEST(InductorMemory, NoCopyForChannelsLastOrOneChannelInputs) {
  for (const std::vector<int64_t>& stride : {std::vector<int64_t>{48, 1, 12, 3}, std::vector<int64_t>{}}) {
    TestGraph f;
    const std::vector<int64_t> shape =
        stride.empty() ? std::vector<int64_t>{2, 1, 4, 4} : std::vector<int64_t>{2, 3, 4, 4};
    Ref x = f.placeholder("primals_1", shape);
    if (!stride.empty()) f[x].tensors[0].stride = stride;
    Ref w = f.placeholder("primals_2", {4, shape[1], 1, 1});
    f[w].tensors[0].stride = {shape[1], 1, shape[1], shape[1]};
    Ref y = f.call("aten.convolution.default",
                   {x, w, nullptr, A::list({1, 1}), A::list({0, 0}), A::list({1, 1}), false,
                    A::list({0, 0}), 1},
                   {2, 4, 4, 4});
    f.output({A::tuple({y})});
    Pair p{f.build(), trivial_backward()};
    EXPECT_EQ(simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder).peak_bytes,
              simulate_memory(p.fw, p.bw, 1, MemoryModel::kAten).peak_bytes)
        << (stride.empty() ? "one channel" : "channels-last");
  }
}

// inductor's fan-out realization: d = p1 + ... + p5, read by two kernels
// that would each inline it, loads five buffers (more than
// realize_reads_threshold, 4), so inductor stores it once, whether c sums
// d's rows or is cos(d) (then c fuses with sin, which loads d too, so c is
// not written in d's place). With one addend fewer it stays inlined. (Where
// both readers fuse with d's own kernel inductor removes d's buffer; the
// model keeps it.)
Pair fan_out(int addends, bool row_sum) {
  TestGraph f;
  std::vector<Ref> p;
  for (int i = 0; i < addends; ++i) p.push_back(f.placeholder("primals_" + std::to_string(i + 1), {4, 4}));
  Ref d = p[0];
  for (int i = 1; i < addends; ++i) d = f.call("aten.add.Tensor", {d, p[i]}, {4, 4});
  Ref s = f.call("aten.sin.default", {d}, {4, 4});
  Ref c = row_sum ? f.call("aten.sum.dim_IntList", {d, A::list({1})}, {4}) : f.call("aten.cos.default", {d}, {4, 4});
  Ref o = f.call("aten.mm.default", {s, s}, {4, 4});
  f.output({A::tuple({o, c})});
  return {f.build(), trivial_backward()};
}

TEST(InductorMemory, AValueTwoKernelsReadIsStoredWhenInliningItLoadsMoreThanFourBuffers) {
  Pair five = fan_out(5, true);
  // p1..p5 320 | three adds inlined | d stored +64 | sin +64 | c +16 | d
  // goes, mm +64 | output, sin goes
  EXPECT_EQ(simulate_memory(five.fw, five.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline,
            (std::vector<int64_t>{64, 128, 192, 256, 320, 320, 320, 320, 384, 448, 464, 464, 400}));
  Pair both_pointwise = fan_out(5, false);
  // d stored +64 | sin +64 | cos +64 | d goes, mm +64 | output, sin goes
  EXPECT_EQ(simulate_memory(both_pointwise.fw, both_pointwise.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline,
            (std::vector<int64_t>{64, 128, 192, 256, 320, 320, 320, 320, 384, 448, 512, 512, 448}));
  Pair four = fan_out(4, true);
  // p1..p4 256 | d inlined into sin and the sum: no buffer | sin +64 | c
  // +16 | mm +64 | output, sin goes
  EXPECT_EQ(simulate_memory(four.fw, four.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline,
            (std::vector<int64_t>{64, 128, 192, 256, 256, 256, 256, 320, 336, 400, 336}));
}

// On CPU a value that computes a heavy op (exp, log, sigmoid, tanh, ...)
// and that two kernels of different loop nests read is stored once,
// whatever it loads.
TEST(InductorMemory, OnCpuAValueTwoKernelsReadIsStoredWhenItComputesAHeavyOp) {
  for (const char* op : {"aten.exp.default", "aten.sin.default"}) {
    TestGraph f;
    Ref x = f.placeholder("primals_1", {4, 4});
    Ref e = f.call(op, {x}, {4, 4});
    Ref s = f.call("aten.sin.default", {e}, {4, 4});
    Ref c = f.call("aten.sum.dim_IntList", {e, A::list({1})}, {4});
    Ref o = f.call("aten.mm.default", {s, s}, {4, 4});
    f.output({A::tuple({o, c})});
    Pair p{f.build(), trivial_backward()};
    const MemoryProfile ind = simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder);
    EXPECT_EQ(ind.forward_timeline[1], std::string(op) == "aten.exp.default" ? 128 : 64) << op;
  }
}

// scatter_add(full, ...): inductor evaluates the zeros into the copy the
// scatter mutates (no buffer of their own), and no later kernel writes in
// place of a mutated buffer: relu(s) gets a buffer of its own.
TEST(InductorMemory, AScatterWritesIntoACopyOfItsInputThatNoKernelOverwrites) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4, 4});
  Ref idx = index_placeholder(f, "primals_2", {4, 4});
  Ref z = f.call("aten.full.default", {A::list({4, 4}), 0}, {4, 4});
  Ref s = f.call("aten.scatter_add.default", {z, 1, idx, x}, {4, 4});
  Ref r = f.call("aten.relu.default", {s}, {4, 4});
  f.output({A::tuple({r})});
  Pair p{f.build(), trivial_backward()};
  const MemoryProfile ind = simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder);
  // x 64 | idx 128 | zeros: in the copy | s +64 | relu +64, then s goes
  EXPECT_EQ(ind.forward_timeline, (std::vector<int64_t>{64, 192, 192, 256, 320, 256}));
}

// What generated kernels read last goes after a scatter (its kernel
// joins those before it), unless a fused kernel that reads it runs on past
// the scatter: max_min_dim's backward is one kernel with both its
// scatters, and the tangent read before them lives to its end. Here m,
// read by the row sum a, lives across the scatter when b = sc * a fuses
// with a (a pointwise op over a reduction's rows), and goes at the
// scatter when b = sc * sc does not.
TEST(InductorMemory, WhatAFusedKernelReadsLivesAcrossAScatterInsideIt) {
  for (const bool fused : {false, true}) {
    ScatterPrelude s = scatter_prelude({4, 4});
    TestGraph& f = s.f;
    Ref sc = f.call("aten.scatter_add.default", {s.zeros, 1, s.idx, s.x}, {4, 4});
    Ref b = f.call("aten.mul.Tensor", {sc, fused ? s.r : sc}, {4, 4});
    Ref o = f.call("aten.mm.default", {b, s.w}, {4, 4});
    f.output({A::tuple({o, s.r})});
    Pair p{f.build(), trivial_backward()};
    const auto timeline = simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline;
    // x, w, idx 256 | m +64 | a +16 | zeros: in the copy | sc +64 | b +64,
    // with m alive or gone at the scatter
    EXPECT_EQ(timeline[7], fused ? 464 : 400) << "fused " << fused;
  }
}

// inductor lowers embedding to a gather loop: its result, read by a
// reduction only, is inlined into it (no (4, 3, 8) buffer).
TEST(InductorMemory, AnEmbeddingIsAGatherInlinedIntoItsReader) {
  TestGraph f;
  Ref w = f.placeholder("primals_1", {20, 8});
  Ref idx = index_placeholder(f, "primals_2", {4, 3});
  Ref e = f.call("aten.embedding.default", {w, idx}, {4, 3, 8});
  Ref m = f.call("aten.sum.dim_IntList", {e, A::list({1})}, {4, 8});
  f.output({A::tuple({m})});
  Pair p{f.build(), trivial_backward()};
  // w 640 | idx +96 | embedding: inlined | mean +128 | output
  EXPECT_EQ(simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline,
            (std::vector<int64_t>{640, 736, 736, 864, 864}));
}

// dropout's mask as inductor's replace_random pass writes it: r =
// inductor_random(seed), read by gt and, when `also` names a reduction, by
// twice = r * 2, which that reduction reads. gt is returned (saved), so it
// is a buffer. `source`: what makes r, the
// pass's inductor_random, or the aten.rand it replaces (in a joint graph
// captured before inductor's passes), into pinned memory or not.
enum class RandomSource { kInductorRandom, kAtenRand, kPinnedAtenRand };

std::vector<int64_t> random_mask(const char* also, RandomSource source = RandomSource::kInductorRandom) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4, 4});
  Ref seed = index_placeholder(f, "primals_2", {});
  Ref r = source == RandomSource::kInductorRandom
              ? f.call("prims.inductor_random.default", {A::list({4, 4}), seed, "rand"}, {4, 4})
              : f.call("aten.rand.default", {A::list({4, 4})}, {4, 4});
  if (source == RandomSource::kPinnedAtenRand) f[r].kwargs = {{"pin_memory", true}};
  Ref gt = f.call("aten.gt.Scalar", {r, 0.3}, {4, 4});
  Ref m = f.call("aten.mul.Tensor", {gt, x}, {4, 4});
  std::vector<A> outs{m, gt};
  if (also != nullptr) {
    Ref twice = f.call("aten.mul.Tensor", {r, 2.0}, {4, 4});
    outs.push_back(f.call(also, {twice, A::list({1})}, {4}));
  }
  f.output({A::tuple(outs)});
  Pair p{f.build(), trivial_backward()};
  return simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline;
}

// inductor lowers inductor_random to a loop it realizes at once, and drops
// that buffer when the one kernel reading it is the one it fuses into: no
// buffer where gt alone reads it; a buffer where another kernel (a row
// sum, through an inlined mul) evaluates it too.
TEST(InductorMemory, ARandomValueOneKernelReadsIsInlinedIntoIt) {
  // x 64 | seed +8 | r: inlined | gt +64 | mul +64 | output
  EXPECT_EQ(random_mask(nullptr), (std::vector<int64_t>{64, 72, 72, 136, 200, 200}));
  // x 64 | seed +8 | r +64 | gt +64 | mul +64 | twice: inlined into the
  // sum | sum +16 | output, r goes
  EXPECT_EQ(random_mask("aten.sum.dim_IntList"), (std::vector<int64_t>{64, 72, 136, 200, 264, 264, 280, 216}));
}

// A captured joint graph holds the aten.rand inductor's replace_random pass
// turns into inductor_random: the same buffers. Into pinned memory the
// pass leaves it alone (a fallback: r +64, gt written in place of it).
TEST(InductorMemory, ACapturedRandIsCountedAsTheInductorRandomItBecomes) {
  EXPECT_EQ(random_mask(nullptr, RandomSource::kAtenRand), random_mask(nullptr));
  EXPECT_EQ(random_mask("aten.sum.dim_IntList", RandomSource::kAtenRand), random_mask("aten.sum.dim_IntList"));
  EXPECT_EQ(random_mask(nullptr, RandomSource::kPinnedAtenRand), (std::vector<int64_t>{64, 72, 136, 136, 200, 200}));
}

// On CPU the values an accumulating index_put adds (embedding's backward:
// _unsafe_masked_index_put_accumulate) are evaluated in the scatter's own
// loop, no buffer of their own; on a GPU they may be a fallback's argument
// and keep theirs.
std::vector<int64_t> index_put_values(const std::string& device) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4, 8});
  Ref idx = index_placeholder(f, "primals_2", {4});
  Ref mask = f.placeholder("primals_3", {4});
  f[mask].tensors[0].dtype = "bool";
  f[mask].tensors[0].itemsize = 1;
  Ref v = f.call("aten.mul.Tensor", {x, x}, {4, 8});
  Ref z = f.call("aten.full.default", {A::list({20, 8}), 0}, {20, 8});
  Ref put = f.call("aten._unsafe_masked_index_put_accumulate.default", {z, mask, A::list({idx}), v}, {20, 8});
  for (Ref r : {x, v, z, put}) f[r].tensors[0].device = device;
  f.output({A::tuple({put})});
  Pair p{f.build(), trivial_backward()};
  return simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline;
}

TEST(InductorMemory, OnCpuTheValuesAnIndexPutAccumulatesAreInlinedIntoIt) {
  // x 128 | idx +32 | mask +4 | values: inlined (cpu) or +128 | zeros: in
  // the copy | the put +640 (the values go after it) | output
  EXPECT_EQ(index_put_values("cpu"), (std::vector<int64_t>{128, 160, 164, 164, 164, 804, 804}));
  EXPECT_EQ(index_put_values("cuda:0"), (std::vector<int64_t>{128, 160, 164, 292, 292, 932, 804}));
}

// A scatter of a fused kernel's row sum joins that kernel in inductor, so
// a reader of both the sum and the scatter fuses with the sum too (no
// cycle through the scatter: max_min_dim's backward is one kernel), and
// what the kernel read lives across the scatter: m, read last by the row
// sum r, is alive while q = x * r + scatter(r) runs.
TEST(InductorMemory, AScatterOfAFusedKernelsResultJoinsThatKernel) {
  ScatterPrelude s = scatter_prelude({4, 1});
  TestGraph& f = s.f;
  Ref sc = f.call("aten.scatter.src", {s.zeros, 1, s.idx, s.r}, {4, 4});
  Ref xr = f.call("aten.mul.Tensor", {s.x, s.r}, {4, 4});
  Ref q = f.call("aten.add.Tensor", {xr, sc}, {4, 4});
  Ref o = f.call("aten.mm.default", {q, s.w}, {4, 4});
  f.output({A::tuple({o})});
  Pair g{f.build(), trivial_backward()};
  const auto timeline = simulate_memory(g.fw, g.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline;
  // x, w, idx 160 | m +64 | r +16 | zeros: in the copy | sc +64 | x * r:
  // inlined | q +64, m alive (gone at the scatter were q apart from r)
  EXPECT_EQ(timeline[8], 368);
}

// inductor fuses the generated nodes between two extern kernels and frees
// what they read after its kernels run: m, read last by the sum, lives
// while t is computed and goes when the second matmul comes.
TEST(InductorMemory, WhatGeneratedKernelsReadLastIsFreedAtTheNextExternKernel) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4, 4});
  Ref w = f.placeholder("primals_2", {4, 4});
  Ref m = f.call("aten.mm.default", {x, w}, {4, 4});
  Ref s = f.call("aten.sum.dim_IntList", {m, A::list({1})}, {4});
  Ref t = f.call("aten.mul.Tensor", {x, x}, {4, 4});
  Ref o = f.call("aten.mm.default", {t, w}, {4, 4});
  f.output({A::tuple({o, s})});
  Pair p{f.build(), trivial_backward()};
  const MemoryProfile ind = simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder);
  // x, w 128 | m +64 | s +16 | t +64 (m alive) | m goes, o +64, t goes | output
  EXPECT_EQ(ind.forward_timeline, (std::vector<int64_t>{64, 128, 192, 208, 272, 272, 208}));
  const MemoryProfile aten = simulate_memory(p.fw, p.bw, 1, MemoryModel::kAten);
  EXPECT_EQ(aten.forward_timeline[4], 208);  // op by op, m went after the sum
}

// inductor's scheduler fuses generated kernels that share a buffer and a
// loop nest and runs the fused kernel where its first member was: b loads
// x and w as a does and needs nothing of the matmul o between them, so it
// is written with a, before o. (Placeholders: nothing is written in place.)
TEST(InductorMemory, AGeneratedKernelFusedWithAnEarlierOneRunsBeforeTheExternKernelsBetweenThem) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4, 4});
  Ref w = f.placeholder("primals_2", {4, 4});
  Ref m = f.call("aten.mm.default", {x, w}, {4, 4});
  Ref a = f.call("aten.mul.Tensor", {x, w}, {4, 4});
  Ref o = f.call("aten.mm.default", {a, m}, {4, 4});
  Ref b = f.call("aten.add.Tensor", {x, w}, {4, 4});
  f.output({A::tuple({o, b})});
  Pair p{f.build(), trivial_backward()};
  const MemoryProfile ind = simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder);
  // x, w 128 | m +64 | a and b +128 | o +64, then a and m go | b: written
  // (b's reads are released where b was: none here but placeholders)
  EXPECT_EQ(ind.forward_timeline, (std::vector<int64_t>{64, 128, 192, 320, 384, 256, 256}));
  EXPECT_EQ(ind.forward_peak_bytes, 384);
}

// A generated kernel that reads an extern kernel's result runs after it,
// and one the earlier kernel's loop nest does not fit stays where it is:
// c reads o; d sums x's columns (a row of 4 per column, not a's nest).
TEST(InductorMemory, AGeneratedKernelStaysAfterTheExternKernelsItReadsOrWhenItsLoopsDiffer) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4, 4});
  Ref w = f.placeholder("primals_2", {4, 4});
  Ref a = f.call("aten.mul.Tensor", {x, w}, {4, 4});
  Ref o = f.call("aten.mm.default", {a, w}, {4, 4});
  Ref c = f.call("aten.mul.Tensor", {o, x}, {4, 4});  // (o + x: an addmm)
  Ref d = f.call("aten.sum.dim_IntList", {x, A::list({0})}, {4});
  f.output({A::tuple({c, d})});
  Pair p{f.build(), trivial_backward()};
  const MemoryProfile ind = simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder);
  // x, w 128 | a +64 | o +64, a goes | c in place of o | d +16
  EXPECT_EQ(ind.forward_timeline, (std::vector<int64_t>{64, 128, 192, 256, 192, 208, 208}));
}

// A member of a fused kernel writes in place of a buffer that its
// ancestors in the kernel read too (inductor's decide_inplace_update counts
// them done: their loop nests run first): var_mean's backward writes the
// normalized gradient over the matmul its row reductions read. Here
// p = m - sum(m) takes m's buffer; with q = m * x, fused with them but no
// ancestor of p, still to read m, p gets a buffer of its own.
TEST(InductorMemory, AMemberWritesInPlaceOfABufferItsAncestorsInTheKernelRead) {
  for (const bool sibling : {false, true}) {
    TestGraph f;
    Ref x = f.placeholder("primals_1", {4, 4});
    Ref w = f.placeholder("primals_2", {4, 4});
    Ref m = f.call("aten.mm.default", {x, w}, {4, 4});
    Ref r = f.call("aten.sum.dim_IntList", {m, A::list({1}), true}, {4, 1});
    Ref p = f.call("aten.sub.Tensor", {m, r}, {4, 4});
    std::vector<A> outs;
    if (sibling) outs.push_back(f.call("aten.mul.Tensor", {m, x}, {4, 4}));
    outs.push_back(f.call("aten.mm.default", {p, w}, {4, 4}));
    f.output({A::tuple(outs)});
    Pair g{f.build(), trivial_backward()};
    const auto timeline = simulate_memory(g.fw, g.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline;
    // x, w 128 | m +64 | r +16 | p: in place of m, or +64 with q to come
    EXPECT_EQ(timeline[4], sibling ? 272 : 208) << "sibling " << sibling;
  }
}

// inductor lowers each result of an op of several results as a node of its
// own (max.dim's values and indices): p = m - values is no descendant of
// the indices' node, which still reads m, so p gets a buffer of its own;
// p = (m - values) + indices descends from both and writes over m.
TEST(InductorMemory, AnOpOfSeveralResultsIsAnAncestorThroughEachOfThem) {
  for (const bool both : {false, true}) {
    TestGraph f;
    Ref x = f.placeholder("primals_1", {4, 4});
    Ref w = f.placeholder("primals_2", {4, 4});
    Ref m = f.call("aten.mm.default", {x, w}, {4, 4});
    Ref r = f.call_multi("aten.max.dim", {m, 1, true}, {{4, 1}, {4, 1}});
    Ref values = f.getitem(r, 0, {4, 1});
    Ref indices = f.getitem(r, 1, {4, 1});
    Ref d = f.call("aten.sub.Tensor", {m, values}, {4, 4});
    Ref p = both ? f.call("aten.add.Tensor", {d, indices}, {4, 4}) : d;
    Ref o = f.call("aten.mm.default", {p, w}, {4, 4});
    f.output({A::tuple({o, indices})});
    Pair g{f.build(), trivial_backward()};
    const auto timeline = simulate_memory(g.fw, g.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline;
    // x, w 128 | m +64 | values, indices +32 | p: over m, or +64
    EXPECT_EQ(timeline[both ? 7 : 6], both ? 224 : 288) << "both " << both;
  }
}

// A generated kernel fused into an earlier one writes its result in place
// of a buffer of its size that it reads last, at the fused kernel, when it
// is that buffer's one remaining reader (inductor's decide_inplace_update):
// no other kernel of the group loads it and no kernel between them does.
// b = m * x joins a's kernel (they share x) before the matmul o (m + x
// would be an addmm: AnAddOfAMatmulIsOneExternKernel). The GELU
// MLP's backward writes each layer's GELU gradient over the matmul it
// reads this way. a_reads_m: a = m * w instead of x * w; o_reads_m:
// o = mm(a, m) instead of mm(a, w).
std::vector<int64_t> fused_member(bool a_reads_m, bool o_reads_m) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4, 4});
  Ref w = f.placeholder("primals_2", {4, 4});
  Ref m = f.call("aten.mm.default", {x, w}, {4, 4});
  Ref a = f.call("aten.mul.Tensor", {a_reads_m ? m : x, w}, {4, 4});
  Ref o = f.call("aten.mm.default", {a, o_reads_m ? m : w}, {4, 4});
  Ref b = f.call("aten.mul.Tensor", {m, x}, {4, 4});
  f.output({A::tuple({o, b})});
  Pair p{f.build(), trivial_backward()};
  return simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline;
}

TEST(InductorMemory, AFusedKernelsMemberWritesInPlaceOfABufferOnlyItStillReads) {
  // x, w 128 | m +64 | a +64, b in place of m | o +64 (then a goes) | b | output
  EXPECT_EQ(fused_member(false, false), (std::vector<int64_t>{64, 128, 192, 256, 320, 256, 256}));
  // o reads m between a and b: b gets a buffer of its own at a, m goes after b.
  EXPECT_EQ(fused_member(false, true), (std::vector<int64_t>{64, 128, 192, 320, 384, 320, 256}));
  // a loads m too, in the same kernel as b: neither writes over it.
  EXPECT_EQ(fused_member(true, false), (std::vector<int64_t>{64, 128, 192, 320, 384, 320, 256}));
}

// inductor's post-grad addmm pattern: add(mm(x, w), y), the mm read by
// nothing else, becomes one extern kernel at the add, addmm(y, x, w): the
// product gets no buffer. On a GPU a bias-like y (a graph input, or
// broadcast) keeps the mm and the add apart (should_prefer_unfused_addmm).
std::vector<int64_t> add_of_mm(bool mm_also_returned, bool y_is_input, const std::string& device) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4, 4});
  Ref w = f.placeholder("primals_2", {4, 4});
  Ref m = f.call("aten.mm.default", {x, w}, {4, 4});
  Ref y = y_is_input ? w : f.call("aten.mul.Tensor", {x, w}, {4, 4});
  Ref c = f.call("aten.add.Tensor", {m, y}, {4, 4});
  for (Ref r : {x, w, m, y, c}) f[r].tensors[0].device = device;
  std::vector<A> outs{c};
  if (mm_also_returned) outs.push_back(m);
  f.output({A::tuple(outs)});
  Pair p{f.build(), trivial_backward()};
  return simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline;
}

TEST(InductorMemory, AnAddOfAMatmulIsOneExternKernel) {
  // x, w 128 | no product | y +64 | c +64 (reading y), then y goes | output
  EXPECT_EQ(add_of_mm(false, false, "cpu"), (std::vector<int64_t>{64, 128, 128, 192, 256, 192}));
  // the product is returned too: a buffer at the mm, and the add a kernel
  // that inlines y
  EXPECT_EQ(add_of_mm(true, false, "cpu"), (std::vector<int64_t>{64, 128, 192, 192, 256, 256}));
  // on a GPU: fused for a computed y; apart for a graph input (the add
  // then writes in place of the product)
  EXPECT_EQ(add_of_mm(false, false, "cuda:0"), (std::vector<int64_t>{64, 128, 128, 192, 256, 192}));
  EXPECT_EQ(add_of_mm(false, true, "cuda:0"), (std::vector<int64_t>{64, 128, 192, 192, 192}));
  EXPECT_EQ(add_of_mm(false, true, "cpu"), (std::vector<int64_t>{64, 128, 128, 192, 192}));
}

// On CPU inductor lowers a cat to a buffer its inputs' kernels write into:
// a pointwise input gets no buffer of its own, even one two cats read (each
// cat stores it). On a GPU the cat stays a kernel that reads buffers here.
std::vector<int64_t> two_cats(const std::string& device) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  Ref a = f.call("aten.sin.default", {x}, {4});
  Ref b = f.call("aten.cos.default", {x}, {4});
  Ref c1 = f.call("aten.cat.default", {A::list({a, b}), 0}, {8});
  Ref c2 = f.call("aten.cat.default", {A::list({a, x}), 0}, {8});
  for (Ref r : {x, a, b, c1, c2}) f[r].tensors[0].device = device;
  f.output({A::tuple({c1, c2})});
  Pair p{f.build(), trivial_backward()};
  return simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline;
}

TEST(InductorMemory, OnCpuACatIsABufferItsPointwiseInputsAreWrittenInto) {
  // x 16 | a, b inlined | c1 +32 | c2 +32 | output
  EXPECT_EQ(two_cats("cpu"), (std::vector<int64_t>{16, 16, 16, 48, 80, 80}));
  // cuda: a and b are buffers the cats read
  EXPECT_EQ(two_cats("cuda:0"), (std::vector<int64_t>{16, 32, 48, 80, 96, 80}));
}

// inductor lowers select_scatter (and slice_scatter) to a pointwise loop, a
// where over the index, which the kernels reading it inline: no buffer.
TEST(InductorMemory, ASelectScatterIsInlinedLikeAPointwiseOp) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  Ref z = f.call("aten.full.default", {A::list({2, 4}), 0}, {2, 4});
  Ref y = f.call("aten.select_scatter.default", {z, x, 0, 0}, {2, 4});
  Ref o = f.call("aten.mul.Tensor", {y, y}, {2, 4});
  f.output({A::tuple({o})});
  Pair p{f.build(), trivial_backward()};
  // x 16 | z, y inlined | o +32 | output
  EXPECT_EQ(simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline,
            (std::vector<int64_t>{16, 16, 16, 48, 48}));
}

// A fused group runs once everything it loads is written (inductor's
// topological sort after fusing): t = s1 + s2 fuses with both column sums
// (a pointwise op over a reduction's rows that reads it, at any distance),
// and s2 reads b, written after s1, so s1 runs late, at s2: a, which only
// s1 reads after the matmul m, lives until then. The GRU's backward holds
// every step's gate gradients to its end this way, for the bias gradients.
// With s1_feeds_b, b depends on s1 (through an extern kernel): fusing s1
// with t would make a cycle, so only s2 and t fuse and a goes at m.
std::vector<int64_t> late_group(bool s1_feeds_b) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4, 4});
  Ref w = f.placeholder("primals_2", {4, 4});
  Ref a = f.call("aten.mul.Tensor", {x, w}, {4, 4});
  Ref s1 = f.call("aten.sum.dim_IntList", {a, A::list({0})}, {4});
  Ref m = f.call("aten.mm.default", {a, w}, {4, 4});
  Ref e = s1_feeds_b ? f.call("aten.mul.Tensor", {m, s1}, {4, 4}) : m;
  Ref m2 = f.call("aten.mm.default", {e, w}, {4, 4});
  Ref b = f.call("aten.mul.Tensor", {m2, x}, {4, 4});
  Ref s2 = f.call("aten.sum.dim_IntList", {b, A::list({0})}, {4});
  Ref t = f.call("aten.add.Tensor", {s1, s2}, {4});
  Ref o = f.call("aten.mm.default", {b, w}, {4, 4});
  f.output({A::tuple({t, o})});
  Pair p{f.build(), trivial_backward()};
  return simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline;
}

TEST(InductorMemory, AFusedGroupRunsOnceEverythingItLoadsIsWritten) {
  // x, w 128 | a +64 | s1 +16 | m +64 | m2 +64, then m goes | b in place
  // of m2 (a alive) | s2 +16, then a goes (at the next extern kernel) | t in
  // place of s1 | o +64, a and s2 go | output, b goes
  EXPECT_EQ(late_group(false), (std::vector<int64_t>{64, 128, 192, 208, 272, 336, 272, 288, 288, 272, 208}));
  // x, w 128 | a +64 | s1 +16 | m +64, then a goes | e in place of m | m2
  // +64, then e goes | b in place of m2 | s2 +16 | t in place of s1 | o +64
  // | output
  EXPECT_EQ(late_group(true), (std::vector<int64_t>{64, 128, 192, 208, 272, 208, 272, 208, 224, 224, 272, 208}));
}

// inductor's wrapper writes nothing in place of a graph input but the
// donated ones, and AOTAutograd donates the backward's saved values, not
// its tangents: d, reading the tangent last, gets a buffer of its own.
TEST(InductorMemory, NothingIsWrittenInPlaceOfATangent) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4, 4});
  Ref y = f.call("aten.mm.default", {x, x}, {4, 4});
  f.output({A::tuple({y})});
  TestGraph g;
  Ref t = g.placeholder("tangents_1", {4, 4});
  Ref d = g.call("aten.mul.Tensor", {t, t}, {4, 4});
  g.output({A::tuple({d})});
  Pair p{f.build(), g.build()};
  const MemoryProfile ind = simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder);
  // x and y 128 | the tangent +64 | d +64 | the tangent goes
  EXPECT_EQ(ind.backward_timeline, (std::vector<int64_t>{192, 256, 192}));
}

// On CPU inductor keeps a convolution's output channels-last, so a view
// folding its channels into its batch, (N, C, H, W) to (N*C, H*W), is a
// copy; one keeping the batch, (N, C*H*W), stays a view here. y [2, 4, 4,
// 4] float32 = 512 bytes.
std::vector<int64_t> conv_then_view(std::vector<int64_t> view_shape) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {2, 3, 4, 4});
  Ref w = f.placeholder("primals_2", {4, 3, 3, 3});
  Ref y = f.call("aten.convolution.default",
                 {x, w, nullptr, A::list({1, 1}), A::list({1, 1}), A::list({1, 1}), false, A::list({0, 0}), 1},
                 {2, 4, 4, 4});
  Ref v = f.call("aten.view.default", {y, A::list({view_shape[0], view_shape[1]})}, view_shape);
  f.output({A::tuple({v})});
  Pair p{f.build(), trivial_backward()};
  return simulate_memory(p.fw, p.bw, 1, MemoryModel::kInductor, kGraphOrder).forward_timeline;
}

TEST(InductorMemory, OnCpuAViewFoldingAConvolutionsChannelsIntoItsBatchIsACopy) {
  const std::vector<int64_t> folded = conv_then_view({8, 16}), kept = conv_then_view({2, 64});
  ASSERT_EQ(folded.size(), kept.size());
  // x, w | y | v | output: only the view differs.
  EXPECT_EQ(folded[3], kept[3] + 512);
  EXPECT_EQ(folded[2], kept[2]);
}

TEST(InductorMemory, TheModelHasANameInTheOptions) {
  EXPECT_STREQ(memory_model_name(MemoryModel::kAten), "aten");
  EXPECT_STREQ(memory_model_name(MemoryModel::kInductor), "inductor");
  EXPECT_EQ(memory_model_from_name("inductor"), MemoryModel::kInductor);
  EXPECT_FALSE(memory_model_from_name("triton").has_value());
  EXPECT_EQ(PartitionOptions{}.memory_model, MemoryModel::kAten);
}

}  // namespace
}  // namespace remat
