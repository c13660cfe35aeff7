// tests/cpp/test_flops.cc — FlopCounterMode's formulas over the IR and the
// runtime estimators. Expected counts are worked out by hand from
// torch/utils/flop_counter.py; tests/python compares against FlopCounterMode
// itself, live.
#include <gtest/gtest.h>

#include <vector>

#include "../probe/op_graph.h"
#include "budget/flops.h"
#include "remat/error.h"

namespace remat {
namespace {

double flops(const std::string& line) {
  const Graph g = testing::op_graph(line);
  return count_flops(g, g.find("op"));
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

TEST(FlopsMatmul, MismatchNamesTheNode) {
  try {
    flops("aten.mm.default t:4x8 t:9x16");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidGraph);
    EXPECT_NE(std::string(e.what()).find("'op'"), std::string::npos) << e.what();
  }
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

TEST(FlopsAttention, GroupedQueryHeads) {
  EXPECT_EQ(flops("aten._scaled_dot_product_cudnn_attention.default t:1x8x16x8 t:1x2x16x8 "
                  "t:1x2x16x8"),
            2 * (8.0 * 16 * 16 * 2 * 8));
  EXPECT_THROW(flops("aten._scaled_dot_product_cudnn_attention.default t:1x3x16x8 "
                     "t:1x2x16x8 t:1x2x16x8"),
               Error);
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
  EXPECT_EQ(flops("aten._flash_attention_forward.default t:2x4x16x8 t:2x4x32x8 t:2x4x32x8 n "
                  "n i:16 i:32 f:0 b:0 b:0"),
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
  EXPECT_FALSE(has_flop_formula("aten.add"));
  EXPECT_TRUE(has_flop_formula("aten.convolution_backward"));
}

TEST(FlopsEstimators, FlopsTestingProfileCustom) {
  const Graph g = testing::op_graph("aten.mm.default t:4x8 t:8x16");
  const Graph add = testing::op_graph("aten.add.Tensor t:4x8 t:4x8");
  const NodeId op = g.find("op");
  EXPECT_EQ(estimate_runtime(g, op, "flops"), 1024);
  EXPECT_EQ(estimate_runtime(add, add.find("op"), "flops"), 1);  // max(flops, 1)
  EXPECT_EQ(estimate_runtime(g, op, "testing"), 1);
  EXPECT_THROW(estimate_runtime(g, op, "profile"), Error);
  std::vector<double> ms(g.size(), 0.0);
  ms[op] = 0.25;
  EXPECT_EQ(estimate_runtime(g, op, "profile", ms), 0.25);

  register_runtime_estimator("rank_times_ten", [](const Graph& gr, NodeId n) {
    return 10.0 * gr.inputs(n).size();
  });
  const std::vector<NodeId> nodes{op, op};
  EXPECT_EQ(estimate_runtimes(g, nodes, "rank_times_ten"), (std::vector<double>{20, 20}));
  EXPECT_THROW(register_runtime_estimator("flops", nullptr), Error);
}

TEST(FlopsEstimators, UnknownEstimatorNamesIt) {
  const Graph g = testing::op_graph("aten.mm.default t:4x8 t:8x16");
  try {
    estimate_runtime(g, g.find("op"), "stopwatch");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidOption);
    EXPECT_NE(std::string(e.what()).find("stopwatch"), std::string::npos);
  }
}

}  // namespace
}  // namespace remat
