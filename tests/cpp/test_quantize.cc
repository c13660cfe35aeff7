// tests/cpp/test_quantize.cc — quantize_activations (FP8 activation
// quantization), the value metadata of the nodes it creates, and its options,
// one rule per test. Expected graphs are what torch 2.13's
// enable_activation_quantization gives on the same graphs; the Python parity
// suite (tests/python/test_fp8_quantization.py) checks the same live.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "extract/extract.h"
#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/options.h"
#include "rewrite/quantize.h"
#include "rewrite/value_meta.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;
using Names = std::vector<std::string>;

Names names(const Graph& g) { return testing::node_names(g); }
Names outputs(const Graph& g) { return testing::output_names(g); }
Names args(const Graph& g, NodeId id) { return testing::arg_texts(g, id); }

std::string dtype(const Graph& g, std::string_view node) {
  return std::string(g.str(g.tensors(g.find(node))[0].dtype));
}

std::vector<int64_t> shape(const Graph& g, std::string_view node) {
  std::vector<int64_t> out;
  for (const Dim& d : g.shape(g.tensors(g.find(node))[0])) out.push_back(d.value);
  return out;
}

std::vector<int64_t> stride(const Graph& g, std::string_view node) {
  std::vector<int64_t> out;
  for (const Dim& d : g.stride(g.tensors(g.find(node))[0])) out.push_back(d.value);
  return out;
}

// x = primals_1 * primals_2 -> relu, bf16 [4, 8]; the backward multiplies
// the tangent by relu and the primals. Saved: relu, primals_1, primals_2.
struct Case {
  Graph g;
  Ref p1, p2, relu;
  std::vector<uint8_t> static_lifetime;
};

// With `symbolic_relu`, relu's batch size is the symbol s0 (hint 4).
Case bf16_case(bool symbolic_relu = false) {
  TestGraph t;
  Case c;
  c.p1 = t.placeholder("primals_1", {4, 8});
  c.p2 = t.placeholder("primals_2", {4, 8});
  Ref t1 = t.placeholder("tangents_1", {4, 8});
  Ref mul = t.call("aten.mul.Tensor", {c.p1, c.p2}, {4, 8});
  c.relu = t.call("aten.relu.default", {mul}, {4, 8});
  Ref m1 = t.call("aten.mul.Tensor", {t1, c.relu}, {4, 8});
  Ref m2 = t.call("aten.mul.Tensor", {m1, c.p2}, {4, 8});
  Ref m3 = t.call("aten.mul.Tensor", {m1, c.p1}, {4, 8});
  t.output({A::tuple({c.relu, m2, m3})});
  if (symbolic_relu) t[c.relu].tensors[0].dim_exprs = {"s0", ""};
  for (Ref r : {c.p1, c.p2, t1, mul, c.relu, m1, m2, m3}) {
    t[r].tensors[0].dtype = "bfloat16";
    t[r].tensors[0].itemsize = 2;
  }
  c.g = t.build();
  c.static_lifetime.assign(c.g.size(), 0);
  return c;
}

Extracted extract(const Case& c) { return testing::extract_saving(c.g, {c.relu.id, c.p1.id, c.p2.id}); }

ActivationQuantizationOptions small_bf16() {
  ActivationQuantizationOptions o;
  o.enabled = true;
  o.size_in_mb = 0;
  return o;
}

const Names kChain1 = {"abs_default", "amax_default", "convert_element_type_default",
                       "clamp_min_default", "reciprocal_default", "mul_tensor",
                       "fp8_scale_pos_1_relu", "convert_element_type_default_1", "mul_tensor_1",
                       "clamp_min_default_1", "clamp_max_default", "fp8_quant_pos_1_relu"};

TEST(QuantizeTest, ChainsFollowTheirSavedValueAndAreNamedInOutputOrder) {
  Case c = bf16_case();
  Extracted e = extract(c);
  const std::vector<NodeId> q =
      quantize_activations(c.g, e, c.static_lifetime, 1, small_bf16(), nullptr);
  EXPECT_EQ(q, (std::vector<NodeId>{c.relu.id, c.p1.id, c.p2.id}));

  const Graph& fw = e.forward;
  // Position 1 (relu) is named first, though primals_1's chain comes first
  // in the graph: each chain sits right after its node.
  Names expected = {"primals_1"};
  for (const char* n : {"abs_default_1", "amax_default_1", "convert_element_type_default_2",
                        "clamp_min_default_2", "reciprocal_default_1", "mul_tensor_2",
                        "fp8_scale_pos_2_primals_1", "convert_element_type_default_3",
                        "mul_tensor_3", "clamp_min_default_3", "clamp_max_default_1",
                        "fp8_quant_pos_2_primals_1"}) {
    expected.push_back(n);
  }
  expected.push_back("primals_2");
  EXPECT_EQ(names(fw)[0], "primals_1");
  EXPECT_EQ(outputs(fw), (Names{"relu", "fp8_quant_pos_1_relu", "fp8_quant_pos_2_primals_1",
                                "fp8_quant_pos_3_primals_2", "fp8_scale_pos_1_relu",
                                "fp8_scale_pos_2_primals_1", "fp8_scale_pos_3_primals_2"}));
  const Names all = names(fw);
  EXPECT_EQ(Names(all.begin(), all.begin() + 14), expected);
  const auto relu_at = std::find(all.begin(), all.end(), "relu") - all.begin();
  EXPECT_EQ(Names(all.begin() + relu_at + 1, all.begin() + relu_at + 13), kChain1);

  EXPECT_EQ(args(fw, fw.find("amax_default")), (Names{"abs_default", "[-1]", "True"}));
  EXPECT_EQ(args(fw, fw.find("convert_element_type_default")),
            (Names{"amax_default", "torch.float64"}));
  EXPECT_EQ(args(fw, fw.find("clamp_min_default")),
            (Names{"convert_element_type_default", "1e-12"}));
  EXPECT_EQ(args(fw, fw.find("mul_tensor")), (Names{"reciprocal_default", "57344"}));
  EXPECT_EQ(args(fw, fw.find("fp8_scale_pos_1_relu")), (Names{"mul_tensor", "torch.float32"}));
  EXPECT_EQ(args(fw, fw.find("mul_tensor_1")),
            (Names{"convert_element_type_default_1", "fp8_scale_pos_1_relu"}));
  EXPECT_EQ(args(fw, fw.find("clamp_min_default_1")), (Names{"mul_tensor_1", "-57344"}));
  EXPECT_EQ(args(fw, fw.find("fp8_quant_pos_1_relu")),
            (Names{"clamp_max_default", "torch.float8_e5m2"}));
  EXPECT_EQ(fw.node(fw.find("abs_default")).origin, kCreatedNode);
}

TEST(QuantizeTest, DefaultScalingAddsScaleInputsButDequantizesWithoutThem) {
  // torch reads use_scaling with default True in the forward, False in the
  // backward's dequantization.
  Case c = bf16_case();
  Extracted e = extract(c);
  ActivationQuantizationOptions o = small_bf16();
  c.static_lifetime[c.p2.id] = 1;  // a parameter: never quantized
  quantize_activations(c.g, e, c.static_lifetime, 1, o, nullptr);
  const Graph& bw = e.backward;
  EXPECT_EQ(names(bw),
            (Names{"fp8_quant_pos_1_relu", "dequant_fp8_quant_pos_1_relu",
                   "fp8_quant_pos_2_primals_1", "dequant_fp8_quant_pos_2_primals_1", "primals_2",
                   "fp8_scale_pos_1_relu", "fp8_scale_pos_2_primals_1", "tangents_1", "mul_1",
                   "mul_2", "mul_3", "output"}));
  EXPECT_EQ(args(bw, bw.find("dequant_fp8_quant_pos_1_relu")),
            (Names{"fp8_quant_pos_1_relu", "torch.bfloat16"}));
  EXPECT_EQ(args(bw, bw.find("mul_1")), (Names{"tangents_1", "dequant_fp8_quant_pos_1_relu"}));
  EXPECT_EQ(args(bw, bw.find("mul_3")), (Names{"mul_1", "dequant_fp8_quant_pos_2_primals_1"}));
  const NodeId ph = bw.find("fp8_quant_pos_1_relu");
  EXPECT_EQ(bw.node(ph).kind, NodeKind::kPlaceholder);
  EXPECT_EQ(bw.str(bw.node(ph).target), "fp8_quant_pos_1_relu");
  EXPECT_EQ(dtype(bw, "fp8_quant_pos_1_relu"), "float8_e5m2");
  EXPECT_TRUE(bw.users(bw.find("fp8_scale_pos_1_relu")).empty());
}

TEST(QuantizeTest, BackwardScalingDividesByTheScaleRightAfterIt) {
  Case c = bf16_case();
  Extracted e = extract(c);
  ActivationQuantizationOptions o = small_bf16();
  o.use_scaling = true;
  o.exclude_primals = true;
  quantize_activations(c.g, e, c.static_lifetime, 1, o, nullptr);
  const Graph& bw = e.backward;
  EXPECT_EQ(names(bw), (Names{"fp8_quant_pos_1_relu", "primals_1", "primals_2",
                              "fp8_scale_pos_1_relu", "convert_element_type_default",
                              "div_tensor", "convert_element_type_default_1", "tangents_1", "mul_1",
                              "mul_2", "mul_3", "output"}));
  EXPECT_EQ(args(bw, bw.find("div_tensor")),
            (Names{"convert_element_type_default", "fp8_scale_pos_1_relu"}));
  EXPECT_EQ(args(bw, bw.find("mul_1")), (Names{"tangents_1", "convert_element_type_default_1"}));
  EXPECT_EQ(dtype(bw, "div_tensor"), "float32");  // bf16 / f32 promotes
  EXPECT_EQ(dtype(bw, "convert_element_type_default_1"), "bfloat16");
}

TEST(QuantizeTest, WithoutScalingOneConvertEachWay) {
  Case c = bf16_case();
  Extracted e = extract(c);
  ActivationQuantizationOptions o = small_bf16();
  o.use_scaling = false;
  o.quant_type = "float8_e4m3fn";
  quantize_activations(c.g, e, c.static_lifetime, 1, o, nullptr);
  const Graph& fw = e.forward;
  EXPECT_EQ(names(fw), (Names{"primals_1", "fp8_quant_pos_2_primals_1", "primals_2",
                              "fp8_quant_pos_3_primals_2", "mul", "relu", "fp8_quant_pos_1_relu",
                              "output"}));
  EXPECT_EQ(args(fw, fw.find("fp8_quant_pos_1_relu")), (Names{"relu", "torch.float8_e4m3fn"}));
  EXPECT_EQ(outputs(fw), (Names{"relu", "fp8_quant_pos_1_relu", "fp8_quant_pos_2_primals_1",
                                "fp8_quant_pos_3_primals_2"}));
  const Graph& bw = e.backward;
  EXPECT_EQ(names(bw)[1], "dequant_fp8_quant_pos_1_relu");
}

TEST(QuantizeTest, SizeThresholdIsInclusiveAndDtypeMustBeAllowed) {
  // 4 * 8 bf16 = 64 bytes.
  for (const auto& [size, allowed, quantized] :
       {std::tuple{64.0 / (1 << 20), "bfloat16", true}, std::tuple{65.0 / (1 << 20), "bfloat16", false},
        std::tuple{0.0, "float32", false}}) {
    Case c = bf16_case();
    Extracted e = extract(c);
    ActivationQuantizationOptions o = small_bf16();
    o.size_in_mb = size;
    o.allowed_dtypes = {allowed};
    const Graph before = e.forward;
    const auto q = quantize_activations(c.g, e, c.static_lifetime, 1, o, nullptr);
    EXPECT_EQ(!q.empty(), quantized) << size << " " << allowed;
    if (!quantized) {
      EXPECT_EQ(names(e.forward), names(before));
    }
  }
}

TEST(QuantizeTest, SymbolicSizesAskTheHookTheWayTorchAsks) {
  Case c = bf16_case(/*symbolic_relu=*/true);
  Extracted e = extract(c);

  std::vector<std::pair<NodeId, SizeQuery>> asked;
  for (const auto& [skip, dynamic, answer, expect] :
       {std::tuple{false, false, std::optional<bool>(false), false},
        std::tuple{false, false, std::optional<bool>(true), true},
        std::tuple{true, false, std::optional<bool>(), false},
        std::tuple{true, true, std::optional<bool>(), true},
        std::tuple{true, true, std::optional<bool>(false), false}}) {
    Extracted copy = e;
    ActivationQuantizationOptions o = small_bf16();
    o.exclude_primals = true;
    o.skip_dynamo_guards = skip;
    o.quantize_dynamic_shape = dynamic;
    asked.clear();
    o.symbolic_size = [&, answer = answer](NodeId joint, SizeQuery how) {
      asked.emplace_back(joint, how);
      return answer;
    };
    const auto q = quantize_activations(c.g, copy, c.static_lifetime, 1, o, nullptr);
    EXPECT_EQ(!q.empty(), expect) << skip << dynamic;
    // relu only (the primals are excluded), once per forward output that
    // holds it: torch tests the user output at position 0 and the saved
    // value at position 1 alike.
    ASSERT_EQ(asked.size(), 2u);
    for (const auto& [joint, how] : asked) {
      EXPECT_EQ(joint, c.relu.id);
      EXPECT_EQ(how, skip ? SizeQuery::kStatic : SizeQuery::kGuard);
    }
  }
  // Without a hook: hints with a guard, nothing known statically.
  Extracted copy = e;
  ActivationQuantizationOptions o = small_bf16();
  o.exclude_primals = true;
  EXPECT_FALSE(quantize_activations(c.g, copy, c.static_lifetime, 1, o, nullptr).empty());
  copy = e;
  o.skip_dynamo_guards = true;
  EXPECT_TRUE(quantize_activations(c.g, copy, c.static_lifetime, 1, o, nullptr).empty());
}

// quantize_skips_user_outputs (2.12): relu is user output 0 and saved value
// 1. 2.12 on, only position 1 is quantized (the tests above); 2.11 would
// quantize position 0 too and build broken graphs, which remat refuses.
TEST(QuantizeTest, Torch211RefusesAUserOutputThatIsAlsoAQuantizedSavedValue) {
  Case c = bf16_case();
  Extracted e = extract(c);
  try {
    quantize_activations(c.g, e, c.static_lifetime, 1, small_bf16(), nullptr, nullptr,
                         TorchBehavior::of({2, 11}));
    FAIL() << "expected a refusal";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kUnsupported);
    const std::string what = err.what();
    EXPECT_NE(what.find("node 'relu'"), std::string::npos) << what;
    EXPECT_NE(what.find("torch 2.11"), std::string::npos) << what;
    EXPECT_NE(what.find("user output 0"), std::string::npos) << what;
  }
  Extracted later = extract(c);
  EXPECT_FALSE(quantize_activations(c.g, later, c.static_lifetime, 1, small_bf16(), nullptr,
                                    nullptr, TorchBehavior::of({2, 12}))
                   .empty());
  EXPECT_EQ(outputs(later.forward)[0], "relu");
}

TEST(QuantizeTest, WithoutAnOverlapTorch211WalksTheUserOutputsToNoEffect) {
  // relu is a user output but not saved (the backward recomputes it): only
  // saved values are candidates, so starting the walk at 0 changes nothing.
  Case c = bf16_case();
  std::vector<Graph> fws, bws;
  for (TorchRelease release : {TorchRelease{2, 11}, TorchRelease{2, 12}}) {
    Extracted e = testing::extract_saving(c.g, {c.p1.id, c.p2.id});
    const auto q = quantize_activations(c.g, e, c.static_lifetime, 1, small_bf16(), nullptr,
                                        nullptr, TorchBehavior::of(release));
    EXPECT_EQ(q, (std::vector<NodeId>{c.p1.id, c.p2.id}));
    fws.push_back(e.forward);
    bws.push_back(e.backward);
  }
  EXPECT_EQ(names(fws[0]), names(fws[1]));
  EXPECT_EQ(outputs(fws[0]), outputs(fws[1]));
  EXPECT_EQ(outputs(fws[0])[0], "relu");
  EXPECT_EQ(names(bws[0]), names(bws[1]));
}

TEST(QuantizeTest, ANonNodeForwardOutputIsAnError) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1", {4, 8});
  Ref t1 = t.placeholder("tangents_1", {4, 8});
  Ref relu = t.call("aten.relu.default", {p1}, {4, 8});
  Ref m = t.call("aten.mul.Tensor", {t1, relu}, {4, 8});
  t.output({A::tuple({relu, nullptr, m})});
  const Graph g = t.build();
  Extracted e = testing::extract_saving(g, {relu.id}, 2);
  ActivationQuantizationOptions o = small_bf16();
  o.allowed_dtypes = {"float32"};
  std::vector<uint8_t> none(g.size(), 0);
  try {
    quantize_activations(g, e, none, 2, o, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kInvalidGraph);
    EXPECT_NE(std::string(err.what()).find("forward output 1"), std::string::npos);
  }
}

TEST(QuantizeTest, SnapshotsAreTheGraphsAroundEachHalf) {
  Case c = bf16_case();
  Extracted e = extract(c);
  const Names fw_before = names(e.forward), bw_before = names(e.backward);
  std::vector<GraphSnapshot> snaps;
  quantize_activations(c.g, e, c.static_lifetime, 1, small_bf16(), &snaps);
  ASSERT_EQ(snaps.size(), 4u);
  EXPECT_EQ(snaps[0].name, "before_activation_quantization_fwd_aten_pass");
  EXPECT_EQ(names(snaps[0].graph), fw_before);
  EXPECT_EQ(snaps[1].name, "after_activation_quantization_fwd_aten_pass");
  EXPECT_EQ(names(snaps[1].graph), names(e.forward));
  EXPECT_EQ(snaps[2].name, "before_activation_quantization_bwd_aten_pass");
  EXPECT_EQ(names(snaps[2].graph), bw_before);
  EXPECT_EQ(snaps[3].name, "after_activation_quantization_bwd_aten_pass");
  EXPECT_EQ(names(snaps[3].graph), names(e.backward));
}

TEST(QuantizeTest, NewNodesCarryTheirFakeTensorValues) {
  Case c = bf16_case();
  Extracted e = extract(c);
  ActivationQuantizationOptions o = small_bf16();
  o.use_scaling = true;
  quantize_activations(c.g, e, c.static_lifetime, 1, o, nullptr);
  const Graph& fw = e.forward;
  EXPECT_EQ(dtype(fw, "abs_default"), "bfloat16");
  EXPECT_EQ(shape(fw, "amax_default"), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(stride(fw, "amax_default"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(dtype(fw, "convert_element_type_default"), "float64");
  EXPECT_EQ(dtype(fw, "mul_tensor"), "float64");
  EXPECT_EQ(dtype(fw, "fp8_scale_pos_1_relu"), "float32");
  EXPECT_EQ(shape(fw, "mul_tensor_1"), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(stride(fw, "mul_tensor_1"), (std::vector<int64_t>{8, 1}));
  EXPECT_EQ(dtype(fw, "fp8_quant_pos_1_relu"), "float8_e5m2");
  EXPECT_EQ(fw.tensors(fw.find("fp8_quant_pos_1_relu"))[0].itemsize, 1);
  EXPECT_TRUE(fw.node(fw.find("fp8_quant_pos_1_relu")).has(kFlagTensorMeta));
  // The backward placeholder shares the forward node's value.
  const Graph& bw = e.backward;
  EXPECT_EQ(shape(bw, "fp8_scale_pos_1_relu"), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(fw.tensors(fw.find("fp8_quant_pos_1_relu"))[0].storage,
            bw.tensors(bw.find("fp8_quant_pos_1_relu"))[0].storage);
}

// --- value metadata -----------------------------------------------------------

TensorValue value(StringPool& pool, std::vector<int64_t> shape, std::vector<int64_t> stride) {
  TensorValue v;
  v.dtype = pool.intern("float32");
  v.itemsize = 4;
  for (int64_t s : shape) v.shape.push_back(Dim{s, 0, true});
  for (int64_t s : stride) v.stride.push_back(Dim{s, 0, true});
  return v;
}

std::vector<int64_t> strides_of(const TensorValue& v) {
  std::vector<int64_t> out;
  for (const Dim& d : v.stride) out.push_back(d.value);
  return out;
}

TEST(ValueMetaTest, DenseInputsKeepTheirStridesOthersAreSortedByStride) {
  StringPool pool;
  const StrId f32 = pool.intern("float32");
  const TensorValue transposed = value(pool, {4, 8}, {1, 4});
  const TensorValue* one[] = {&transposed};
  EXPECT_EQ(strides_of(pointwise(pool, one, f32, 4)), (std::vector<int64_t>{1, 4}));
  // A slice [:, :4] of a [4, 8] tensor is not dense: compact, same order.
  const TensorValue sliced = value(pool, {4, 4}, {8, 1});
  const TensorValue* one_sliced[] = {&sliced};
  EXPECT_EQ(strides_of(pointwise(pool, one_sliced, f32, 4)), (std::vector<int64_t>{4, 1}));
  // permute(2, 0, 1) of a contiguous [2, 3, 4], sliced so that it is not dense.
  const TensorValue permuted = value(pool, {4, 2, 3}, {1, 24, 8});
  const TensorValue* one_permuted[] = {&permuted};
  EXPECT_EQ(strides_of(pointwise(pool, one_permuted, f32, 4)), (std::vector<int64_t>{1, 12, 4}));
  // An expanded input (stride 0) comes out contiguous.
  const TensorValue expanded = value(pool, {4, 8}, {0, 1});
  const TensorValue* one_expanded[] = {&expanded};
  EXPECT_EQ(strides_of(pointwise(pool, one_expanded, f32, 4)), (std::vector<int64_t>{8, 1}));
}

TEST(ValueMetaTest, BroadcastBinaryOpsFollowTheNonBroadcastOperand) {
  StringPool pool;
  const StrId f32 = pool.intern("float32");
  const TensorValue x = value(pool, {4, 8}, {1, 4});      // transposed
  const TensorValue scale = value(pool, {4, 1}, {1, 1});  // amax keepdim
  const TensorValue* both[] = {&x, &scale};
  const TensorValue r = pointwise(pool, both, f32, 4);
  EXPECT_EQ(r.shape.size(), 2u);
  EXPECT_EQ(r.shape[1].value, 8);
  EXPECT_EQ(strides_of(r), (std::vector<int64_t>{1, 4}));
  const TensorValue c = value(pool, {4, 8}, {8, 1});
  const TensorValue* contiguous[] = {&c, &scale};
  EXPECT_EQ(strides_of(pointwise(pool, contiguous, f32, 4)), (std::vector<int64_t>{8, 1}));
}

TEST(ValueMetaTest, AmaxKeepdimIsContiguousAndSymbolicStridesArePrinted) {
  StringPool pool;
  TensorValue x = value(pool, {4, 2, 3}, {1, 12, 4});
  EXPECT_EQ(strides_of(amax_keepdim_last(pool, x)), (std::vector<int64_t>{2, 1, 1}));
  TensorValue sym = value(pool, {5, 7, 3}, {21, 3, 1});
  sym.shape[1].expr = pool.intern("s1");
  const TensorValue r = amax_keepdim_last(pool, sym);
  EXPECT_EQ(pool.view(r.stride[0].expr), "s1");
  EXPECT_EQ(r.stride[0].value, 7);
  sym.shape[1].expr = pool.intern("s1 + 1");
  const TensorValue sliced = value(pool, {5, 7, 3}, {42, 6, 2});
  TensorValue s2 = sliced;
  s2.shape[1].expr = pool.intern("s1 + 1");
  const TensorValue* one[] = {&s2};
  const TensorValue p = pointwise(pool, one, pool.intern("float32"), 4);
  EXPECT_EQ(pool.view(p.stride[0].expr), "3*(s1 + 1)");
  EXPECT_EQ(p.stride[0].value, 21);
}

// --- options -------------------------------------------------------------------

TEST(QuantizationOptionsTest, TorchsDictParsesWithItsDtypeSpellings) {
  const auto o = ActivationQuantizationOptions::from_json(
      R"({"quant_type": "torch.float8_e4m3fn", "size_in_mb": 0, "use_scaling": true,
          "allowed_dtypes": "torch.bfloat16;torch.half;float", "exclude_primals": true,
          "skip_dynamo_guards": true, "quantize_dynamic_shape": true})");
  EXPECT_TRUE(o.enabled);
  EXPECT_EQ(o.quant_type, "float8_e4m3fn");
  EXPECT_EQ(o.size_in_mb, 0);
  EXPECT_EQ(o.allowed_dtypes, (std::vector<std::string>{"bfloat16", "float16", "float32"}));
  EXPECT_TRUE(o.scale_forward() && o.scale_backward());
  EXPECT_TRUE(o.exclude_primals && o.skip_dynamo_guards && o.quantize_dynamic_shape);
  const auto defaults = ActivationQuantizationOptions::from_json("{}");
  EXPECT_TRUE(defaults.enabled);
  EXPECT_EQ(defaults.size_in_mb, 100);
  EXPECT_TRUE(defaults.scale_forward());
  EXPECT_FALSE(defaults.scale_backward());
  EXPECT_FALSE(ActivationQuantizationOptions::from_json("null").enabled);
}

TEST(QuantizationOptionsTest, TyposAndUnknownDtypesNameTheKey) {
  for (const auto& [json, needle] :
       {std::pair{R"({"size_in_gb": 1})", "size_in_gb"},
        std::pair{R"({"quant_type": "torch.float9"})", "quant_type"},
        std::pair{R"({"allowed_dtypes": "torch.bfloat16;torch.nope"})", "allowed_dtypes"},
        std::pair{R"({"use_scaling": "yes"})", "use_scaling"}}) {
    try {
      ActivationQuantizationOptions::from_json(json);
      FAIL() << json;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidOption);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
  PartitionOptions p;
  p.activation_quantization.enabled = true;
  p.activation_quantization.quant_type = "int8";  // torch.finfo rejects it
  EXPECT_THROW(p.validate(), Error);
  p.activation_quantization.quant_type = "float8_e5m2";
  EXPECT_NO_THROW(p.validate());
}

}  // namespace
}  // namespace remat
