// tests/cpp/test_flops.cc — FlopCounterMode's formulas over the IR and the
// runtime estimators. Expected counts are worked out by hand from
// torch/utils/flop_counter.py; tests/python compares against FlopCounterMode
// itself, live.
#include <gtest/gtest.h>

#include <vector>

#include "../probe/op_graph.h"
#include "budget/flops.h"
#include "remat/error.h"
#include "remat/torch_release.h"

namespace remat {
namespace {

double flops(const std::string& line, const TorchBehavior& torch = TorchBehavior{}) {
  const Graph g = testing::op_graph(line);
  return count_flops(g, g.find("op"), torch);
}

TorchBehavior release(int minor) { return TorchBehavior::of({2, minor}); }

// The TorchError a formula raises: torch's exception type and text.
std::pair<std::string, std::string> raised(const std::string& line, const TorchBehavior& torch) {
  try {
    flops(line, torch);
  } catch (const TorchError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidGraph);
    EXPECT_NE(std::string(e.what()).find("'op'"), std::string::npos) << e.what();
    return {e.python_type(), e.torch_message()};
  }
  ADD_FAILURE() << "expected a TorchError: " << line;
  return {};
}

constexpr const char* kConvTail = " l:1,1 l:1,1 l:1,1 b:0 l:0,0 i:1";

TEST(FlopsMatmul, MmAddmmBmmBaddbmm) {
  EXPECT_EQ(flops("aten.mm.default t:4x8 t:8x16"), 4 * 16 * 2 * 8);
  EXPECT_EQ(flops("aten.addmm.default t:16 t:4x8 t:8x16"), 4 * 16 * 2 * 8);
  EXPECT_EQ(flops("aten.bmm.default t:3x4x8 t:3x8x16"), 3 * 4 * 16 * 2 * 8);
  EXPECT_EQ(flops("aten.baddbmm.default t:3x4x16 t:3x4x8 t:3x8x16"), 3 * 4 * 16 * 2 * 8);
  EXPECT_EQ(flops("aten._scaled_mm.default t:4x8 t:8x16 t: t:"), 4 * 16 * 2 * 8);
}

TEST(FlopsMatmul, KeywordArguments) {
  EXPECT_EQ(flops("aten.mm.default t:4x8 mat2=t:8x16"), 1024);
}

TEST(FlopsMatmul, SymbolicDimsUseHintsOr4096) {
  EXPECT_EQ(flops("aten.mm.default t:4sx8 t:8x16s"), 4 * 16 * 2 * 8);
  EXPECT_EQ(flops("aten.mm.default t:?x8 t:8x16"), 4096.0 * 16 * 2 * 8);
}

TEST(FlopsMatmul, MismatchIsTorchsAssertionNamingTheNode) {
  EXPECT_EQ(raised("aten.mm.default t:4x8 t:9x16", TorchBehavior{}),
            std::make_pair(std::string("AssertionError"),
                           std::string("matmul: inner dimensions must match (k == k2), got 8 and 9")));
  EXPECT_EQ(raised("aten.bmm.default t:3x4x8 t:2x8x16", TorchBehavior{}).second,
            "bmm: batch dimensions must match (b == b2), got 3 and 2");
}

// Before 2.14, addmm_flop / bmm_flop / baddbmm_flop bind an extra positional
// argument (a .dtype overload's out_dtype) to out_shape, which
// FlopCounterMode also passes by keyword: a TypeError.
TEST(FlopsReleases, MmFamilyExtraArgumentIsATypeErrorBefore214) {
  const std::string bmm = "aten.bmm.dtype t:3x4x8 t:3x8x16 i:6";
  EXPECT_EQ(flops(bmm, release(14)), 3 * 4 * 16 * 2 * 8);
  EXPECT_EQ(raised(bmm, release(13)),
            std::make_pair(std::string("TypeError"),
                           std::string("bmm_flop() got multiple values for argument 'out_shape'")));
  EXPECT_EQ(raised("aten.addmm.dtype t:16 t:4x8 t:8x16 i:6", release(13)).second,
            "addmm_flop() got multiple values for argument 'out_shape'");
  EXPECT_EQ(raised("aten.baddbmm.dtype t:3x4x16 t:3x4x8 t:3x8x16 i:6", release(13)).second,
            "baddbmm_flop() got multiple values for argument 'out_shape'");
  // The plain overloads pass nothing extra; mm_flop always took *args.
  EXPECT_EQ(flops("aten.bmm.default t:3x4x8 t:3x8x16", release(13)), 3 * 4 * 16 * 2 * 8);
  EXPECT_EQ(flops("aten.mm.dtype t:4x8 t:8x16 i:6", release(13)), 1024);
  TorchBehavior flipped = release(15);
  flipped.flops_mm_family_extra_args = false;
  EXPECT_EQ(raised(bmm, flipped).first, "TypeError");
}

TEST(FlopsMatmul, LargeCountsAreExactIntegersRoundedOnce) {
  // 2 * 2^20 * 2^20 * 2^20 = 2^61: beyond int53 but exact in __int128.
  EXPECT_EQ(flops("aten.mm.default t:1048576x1048576 t:1048576x1048576"), 0x1p61);
}

TEST(FlopsConv, ForwardUsesOutputSpatialDims) {
  // 3x3 kernel, stride 1, padding 1: output 32x32.
  EXPECT_EQ(flops(std::string("aten.convolution.default t:2x3x32x32 t:8x3x3x3 n") + kConvTail),
            32.0 * 32 * 9 * 2 * 8 * 3 * 2);
  // Stride 2, no padding: output floor((32 - 3) / 2) + 1 = 15.
  EXPECT_EQ(flops("aten.convolution.default t:2x3x32x32 t:8x3x3x3 n l:2 l:0 l:1 b:0 l:0 i:1"),
            15.0 * 15 * 9 * 2 * 8 * 3 * 2);
  // _convolution shares the formula.
  EXPECT_EQ(flops("aten._convolution.default t:2x3x32x32 t:8x3x3x3 n l:2,2 l:0,0 l:1,1 b:0 "
                  "l:0,0 i:1 b:0 b:0 b:1 b:1"),
            15.0 * 15 * 9 * 2 * 8 * 3 * 2);
}

TEST(FlopsConv, TransposedUsesInputSpatialDims) {
  EXPECT_EQ(flops("aten.convolution.default t:2x8x15x15 t:8x3x3x3 n l:2,2 l:0,0 l:1,1 b:1 "
                  "l:0,0 i:1"),
            15.0 * 15 * 9 * 2 * 8 * 3 * 2);
}

TEST(FlopsConv, Backward) {
  const std::string args = " t:2x8x15x15 t:2x3x32x32 t:8x3x3x3 l:8 l:2,2 l:0,0 l:1,1 ";
  // grad_input: a transposed conv over grad_out's 15x15; grad_weight: a conv
  // with batch and channels swapped whose output is the 3x3 filter.
  const double grad_input = 15.0 * 15 * 9 * 2 * 8 * 3 * 2;
  const double grad_weight = 9.0 * 15 * 15 * 3 * 8 * 2 * 2;
  EXPECT_EQ(flops("aten.convolution_backward.default" + args + "b:0 l:0,0 i:1 bl:1,1,0"),
            grad_input + grad_weight);
  EXPECT_EQ(flops("aten.convolution_backward.default" + args + "b:0 l:0,0 i:1 bl:1,0,1"),
            grad_input);
  EXPECT_EQ(flops("aten.convolution_backward.default" + args + "b:0 l:0,0 i:1 bl:0,1,1"),
            grad_weight);
}

TEST(FlopsAttention, SdpaForwardAndBackward) {
  // b*h = 8 batches of (16 x 8) @ (8 x 32) and (16 x 32) @ (32 x 8).
  const double fwd = 2 * (8.0 * 16 * 32 * 2 * 8);
  EXPECT_EQ(flops("aten._scaled_dot_product_flash_attention.default t:2x4x16x8 t:2x4x32x8 "
                  "t:2x4x32x8 f:0 b:0"),
            fwd);
  EXPECT_EQ(flops("aten._scaled_dot_product_efficient_attention.default t:2x4x16x8 "
                  "t:2x4x32x8 t:2x4x32x8 n b:0"),
            fwd);
  EXPECT_EQ(flops("aten._scaled_dot_product_flash_attention_backward.default t:2x4x16x8 "
                  "t:2x4x16x8 t:2x4x32x8 t:2x4x32x8"),
            5 * (8.0 * 16 * 32 * 2 * 8));
}

// 2.12 counts grouped-query attention over the query heads; 2.11 requires
// one head count and raises its own AssertionError otherwise.
TEST(FlopsReleases, GroupedQueryHeadsFrom212) {
  const std::string gqa =
      "aten._scaled_dot_product_cudnn_attention.default t:1x8x16x8 t:1x2x16x8 t:1x2x16x8";
  EXPECT_EQ(flops(gqa, release(12)), 2 * (8.0 * 16 * 16 * 2 * 8));
  EXPECT_EQ(raised(gqa, release(11)),
            std::make_pair(std::string("AssertionError"),
                           std::string("sdpa_flop_count: query/key/value shapes are incompatible")));
  EXPECT_EQ(raised("aten._scaled_dot_product_cudnn_attention.default t:1x3x16x8 t:1x2x16x8 "
                   "t:1x2x16x8",
                   release(12))
                .second,
            "sdpa_flop_count: query heads (3) must be a multiple of key/value heads (2)");
  EXPECT_EQ(raised("aten._scaled_dot_product_cudnn_attention.default t:1x8x16x8 t:1x2x16x8 "
                   "t:1x4x16x8",
                   release(12))
                .second,
            "sdpa_flop_count: query/key/value shapes are incompatible: q=torch.Size([1, 8, 16, "
            "8]), k=torch.Size([1, 2, 16, 8]), v=torch.Size([1, 4, 16, 8])");
  const std::string bwd =
      "aten._scaled_dot_product_flash_attention_backward.default t:2x8x16x8 t:2x8x16x8 "
      "t:2x2x32x8 t:2x2x32x8";
  EXPECT_EQ(flops(bwd, release(12)), 5 * (16.0 * 16 * 32 * 2 * 8));
  EXPECT_EQ(raised(bwd, release(11)).second,
            "sdpa_backward_flop_count: batch/heads/dimension mismatch among tensors");
  TorchBehavior flipped = release(15);
  flipped.sdpa_flops_gqa = false;
  EXPECT_EQ(raised(gqa, flipped).first, "AssertionError");
}

// 2.14 reads the raw flash kernels' 4-D inputs as (batch, seq, heads, dim);
// 2.13 as (batch, heads, seq, dim). Efficient attention is unchanged.
TEST(FlopsReleases, FlashAttentionReadsBshdFrom214) {
  const std::string fwd = "aten._flash_attention_forward.default t:2x128x4x64 t:2x128x4x64 "
                          "t:2x128x4x64 n n i:128 i:128 f:0 b:0 b:0";
  EXPECT_EQ(flops(fwd, release(14)), 33554432);
  EXPECT_EQ(flops(fwd, release(13)), 1048576);
  const std::string bwd = "aten._flash_attention_backward.default t:2x128x4x64 t:2x128x4x64 "
                          "t:2x128x4x64 t:2x128x4x64 t:2x128x4x64 t:2x4x128 n n i:128 i:128 "
                          "f:0 b:0 t:2 t:2";
  EXPECT_EQ(flops(bwd, release(14)), 83886080);
  EXPECT_EQ(flops(bwd, release(13)), 2621440);
  const std::string efficient = "aten._efficient_attention_forward.default t:2x16x4x8 "
                                "t:2x16x4x8 t:2x16x4x8 n n n n n f:0 i:0 b:0";
  EXPECT_EQ(flops(efficient, release(14)), flops(efficient, release(13)));
}

// 2.15 registered the CPU flash kernels with the SDPA formulas; before they
// count 0.
TEST(FlopsReleases, SdpaForCpuCountedFrom215) {
  const std::string fwd = "aten._scaled_dot_product_flash_attention_for_cpu.default t:2x4x16x8 "
                          "t:2x4x16x8 t:2x4x16x8 f:0 b:0";
  EXPECT_EQ(flops(fwd, release(15)), 2 * (8.0 * 16 * 16 * 2 * 8));
  EXPECT_EQ(flops(fwd, release(14)), 0);
  const std::string bwd = "aten._scaled_dot_product_flash_attention_for_cpu_backward.default "
                          "t:2x4x16x8 t:2x4x16x8 t:2x4x16x8 t:2x4x16x8 t:2x4x16x8 t:2x4x16 "
                          "f:0 b:0";
  EXPECT_EQ(flops(bwd, release(15)), 5 * (8.0 * 16 * 16 * 2 * 8));
  EXPECT_EQ(flops(bwd, release(14)), 0);
  EXPECT_TRUE(has_flop_formula("aten._scaled_dot_product_flash_attention_for_cpu", release(15)));
  EXPECT_FALSE(has_flop_formula("aten._scaled_dot_product_flash_attention_for_cpu", release(14)));
}

// 2.15's FlopCounterMode runs a HOP with a registered formula
// (flex_attention: the SDPA counts); before, the dispatch is a TypeError.
TEST(FlopsReleases, FlexAttentionCountedFrom215) {
  const std::string fwd = "higher_order.flex_attention t:1x2x128x8 t:1x2x128x8 t:1x2x128x8 n n "
                          "f:0.35";
  EXPECT_EQ(flops(fwd, release(15)), 1048576);
  const auto [type, text] = raised(fwd, release(14));
  EXPECT_EQ(type, "TypeError");
  EXPECT_EQ(text, "no implementation found for 'torch.ops.higher_order.flex_attention' on types "
                  "that implement __torch_function__: []");
  // The backward's grad_out falls back to the output when None.
  const std::string bwd = "higher_order.flex_attention_backward t:1x2x128x8 t:1x2x128x8 "
                          "t:1x2x128x8 t:1x2x128x8 t:1x2x128 n";
  EXPECT_EQ(flops(bwd, release(15)), 5 * (2.0 * 128 * 128 * 2 * 8));
  EXPECT_TRUE(has_flop_formula("higher_order.flex_attention", release(15)));
  EXPECT_FALSE(has_flop_formula("higher_order.flex_attention", release(14)));
}

// 2.15: a jagged backward's grad_out has the value head size; 2.14 requires
// the query's shape.
TEST(FlopsReleases, NestedAttentionValueHeadSizeFrom215) {
  // q/k (total, 4, 8), v and grad_out (total, 4, 16), 4 sequences.
  const std::string bwd = "aten._flash_attention_backward.default t:100x4x16 t:100x4x8 "
                          "t:120x4x8 t:120x4x16 t:100x4x16 t:4x100 t:5 t:5 i:30 i:40 f:0 b:0 "
                          "t:2 t:2";
  // Per sequence: scores 2*4*30*40*8, grad_scores and grad_v 2*4*30*40*16
  // each, grad_q and grad_k 2*4*30*40*8 each.
  EXPECT_EQ(flops(bwd, release(15)), 4 * (3 * (4.0 * 30 * 40 * 2 * 8) + 2 * (4.0 * 30 * 40 * 2 * 16)));
  EXPECT_EQ(raised(bwd, release(14)).second,
            "sdpa_flop_count: grad_out.shape must match query.shape when provided");
  EXPECT_EQ(raised("aten._flash_attention_backward.default t:100x4x8 t:100x4x8 t:120x4x8 "
                   "t:120x4x16 t:100x4x16 t:4x100 t:5 t:5 i:30 i:40 f:0 b:0 t:2 t:2",
                   release(15))
                .second,
            "sdpa_flop_count: grad_out has shape (100, 4, 8), expected (100, 4, 16)");
  EXPECT_EQ(raised("aten._efficient_attention_backward.default t:1x50x4x16 t:1x50x4x8 "
                   "t:1x60x4x8 t:1x60x4x16 n t:1x50x4x16 t:4 t:4 i:20 i:25 t:1x4x50 f:0 t: t: "
                   "i:0 b:0",
                   release(14))
                .second,
            "_unpack_efficient_attention_nested_shapes: grad_out.shape must match query.shape "
            "when provided");
}

// estimate_runtime("flops") materializes every node argument's meta["val"]
// first: an argument without one is torch's KeyError, in every release.
TEST(FlopsEstimators, ArgumentWithoutValIsTorchsKeyError) {
  const Graph g = testing::op_graph("higher_order.flex_attention t:1x2x128x8 t:1x2x128x8 "
                                    "t:1x2x128x8 ga n f:0.35");
  for (int minor : {11, 15}) {
    try {
      estimate_runtime(g, g.find("op"), "flops", release(minor));
      ADD_FAILURE() << "expected a KeyError";
    } catch (const TorchError& e) {
      EXPECT_EQ(e.python_type(), "KeyError");
      EXPECT_EQ(e.torch_message(), "val");
      EXPECT_NE(e.context().find("'arg3'"), std::string::npos) << e.context();
    }
  }
  EXPECT_EQ(estimate_runtime(g, g.find("op"), "testing", release(15)), 1);
}

TEST(FlopsAttention, JaggedFlashCountsEverySequenceAtMaxLength) {
  // 4 sequences (5 offsets), each counted as (1, 4, 30, 8) x (1, 4, 40, 8).
  const double one = 2 * (4.0 * 30 * 40 * 2 * 8);
  EXPECT_EQ(flops("aten._flash_attention_forward.default t:100x4x8 t:120x4x8 t:120x4x8 t:5 "
                  "t:5 i:30 i:40 f:0 b:0 b:0"),
            4 * one);
  EXPECT_EQ(flops("aten._flash_attention_forward.default t:100x4x8 t:120x4x8 t:120x4x8 t:5 "
                  "t:5 si:30 si:? f:0 b:0 b:0"),
            4 * 2 * (4.0 * 30 * 4096 * 2 * 8));
  // Without offsets the inputs are read as given (before 2.14: batch, heads,
  // seq, dim; FlashAttentionReadsBshdFrom214 has what 2.14 reads).
  EXPECT_EQ(flops("aten._flash_attention_forward.default t:2x4x16x8 t:2x4x32x8 t:2x4x32x8 n "
                  "n i:16 i:32 f:0 b:0 b:0",
                  release(13)),
            2 * (8.0 * 16 * 32 * 2 * 8));
}

TEST(FlopsAttention, EfficientAttentionTakesShapesAsGiven) {
  // torch's formula reads (batch, seq, heads, dim) as (batch, heads, seq, dim).
  EXPECT_EQ(flops("aten._efficient_attention_forward.default t:2x16x4x8 t:2x16x4x8 "
                  "t:2x16x4x8 n n n n n f:0 i:0 b:0"),
            2 * (32.0 * 4 * 4 * 2 * 8));
  // Jagged: (1, total, heads, dim) with offsets of 3 sequences.
  EXPECT_EQ(flops("aten._efficient_attention_forward.default t:1x50x4x8 t:1x60x4x8 "
                  "t:1x60x4x8 n t:4 t:4 i:20 i:25 f:0 i:0 b:0"),
            3 * 2 * (4.0 * 20 * 25 * 2 * 8));
  EXPECT_EQ(flops("aten._efficient_attention_backward.default t:1x50x4x8 t:1x50x4x8 "
                  "t:1x60x4x8 t:1x60x4x8 n t:1x50x4x8 t:4 t:4 i:20 i:25 t:1x4x50 f:0 t: t: "
                  "i:0 b:0"),
            3 * 5 * (4.0 * 20 * 25 * 2 * 8));
}

TEST(FlopsUncounted, OtherOpsCountZero) {
  EXPECT_EQ(flops("aten.add.Tensor t:4x8 t:4x8"), 0);
  EXPECT_FALSE(has_flop_formula("aten.add", TorchBehavior{}));
  EXPECT_TRUE(has_flop_formula("aten.convolution_backward", TorchBehavior{}));
}

TEST(FlopsEstimators, FlopsTestingProfileCustom) {
  const Graph g = testing::op_graph("aten.mm.default t:4x8 t:8x16");
  const Graph add = testing::op_graph("aten.add.Tensor t:4x8 t:4x8");
  const NodeId op = g.find("op");
  const TorchBehavior torch;
  EXPECT_EQ(estimate_runtime(g, op, "flops", torch), 1024);
  EXPECT_EQ(estimate_runtime(add, add.find("op"), "flops", torch), 1);  // max(flops, 1)
  EXPECT_EQ(estimate_runtime(g, op, "testing", torch), 1);
  EXPECT_THROW(estimate_runtime(g, op, "profile", torch), Error);
  std::vector<double> ms(g.size(), 0.0);
  ms[op] = 0.25;
  EXPECT_EQ(estimate_runtime(g, op, "profile", torch, ms), 0.25);

  register_runtime_estimator("rank_times_ten", [](const Graph& gr, NodeId n) {
    return 10.0 * gr.inputs(n).size();
  });
  const std::vector<NodeId> nodes{op, op};
  EXPECT_EQ(estimate_runtimes(g, nodes, "rank_times_ten", torch), (std::vector<double>{20, 20}));
  EXPECT_THROW(register_runtime_estimator("flops", nullptr), Error);
}

TEST(FlopsEstimators, UnknownEstimatorNamesIt) {
  const Graph g = testing::op_graph("aten.mm.default t:4x8 t:8x16");
  try {
    estimate_runtime(g, g.find("op"), "stopwatch", TorchBehavior{});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidOption);
    EXPECT_NE(std::string(e.what()).find("stopwatch"), std::string::npos);
  }
}

}  // namespace
}  // namespace remat
