// memory/fusion.h — which values of a graph inductor's generated code keeps
// in memory, and until when it reads their inputs (src/memory and the
// stages built on it: simulate_memory's MemoryModel::kInductor, and the
// optimizer's rows under it, optimize/space.h).
//
// Contract: inductor lowers pointwise ops, views and reductions to loop
// bodies that it inlines into the kernels of their users, so an
// intermediate that only such ops read never gets a buffer; what it calls
// out to (matmuls, convolutions, fallback kernels) reads and writes real
// buffers. InductorFusion models that, per node of one graph (forward or
// backward, as the partitioner hands it to inductor):
//  * fused[n]: n allocates nothing. True when n is fusible (kCatFusible in
//    torch's default op lists, pointwise-tagged packets included,
//    select_scatter and slice_scatter, which inductor lowers to a where,
//    embedding, a gather, and the random values of inductor's replace_random
//    pass: inductor_random, inductor_randint and inductor_lookup_seed, or in
//    a graph captured before that pass the float32 rand and randn and the
//    randint.low it replaces), has one tensor, is not smaller than its
//    largest tensor input (inductor realizes reductions: their results are
//    read by other kernels; a gather is none), and nothing that needs a
//    buffer reads it: not the output node, not a non-fusible op, not a node
//    with several tensors (a scatter's copied first argument excepted: it is
//    evaluated into the copy; and on CPU the values an _unsafe_index_put or
//    _unsafe_masked_index_put_accumulate adds, which its Scatter loop
//    evaluates). A view is fused exactly when its base is (it only renames
//    its base's indices). A CPU cat is never fused (a ConcatKernel: its own
//    buffer) but fuses what it reads (its inputs' kernels write into its
//    slices). And inductor's fan-out rule: a value more than one node reads
//    is stored once when its inlined expression loads more than 4 buffers
//    (realize_reads_threshold) or, on CPU, computes exp, log, log10, log1p,
//    log2, sigmoid or tanh; then it is not fused, unless a cat reads it (it
//    lives in the cat's slice). inductor_random's lowering realizes it at
//    once (so is a rand or randn it replaces), and the scheduler drops that
//    buffer only when the one kernel that reads it is the one it fuses into:
//    it is fused only when it has one reader, and each fused reader on the
//    way to a materialized one has one too (dropout's mask source, read by
//    its comparison alone, gets no buffer). Last, inductor's post-grad addmm
//    pattern: an mm that only an add.Tensor reads, with a tensor of its dtype
//    that broadcasts to it (on a GPU not a bias-like one: a graph input, or
//    broadcast along a dimension), becomes addmm at the add: the mm is fused
//    (no buffer, its inputs live until the add) and the add is an extern
//    kernel (external below) whose inputs need buffers.
//  * runs_at[n]: the node at which what n computes is last evaluated: n
//    itself when it is materialized (unless its fused kernel runs later:
//    kernel_at below); for a fused node, the latest runs_at of its users
//    (inlined into each consumer's kernel, it is recomputed there). A
//    value's inputs must live until then.
//  * last_read[v]: the node after which v's buffers may be released: the
//    latest runs_at of its users (kNoNode when nothing uses it).
//  * inplace[n]: n is a fusible materialized op whose kernel may write its
//    result into a buffer it reads that dies there (inductor's
//    inplace_buffers): the simulator gives it that buffer when it has the
//    same byte size.
//  * copy_from[p], copy_until[p] for a placeholder p: inductor runs every
//    convolution of a CPU graph channels-last (its layout optimization is
//    always on there, with mkldnn); a 4-d CPU placeholder that a
//    convolution reads (input or weight) laid out otherwise is copied
//    before the first such reader (copy_from) and read by the last
//    (copy_until); when the forward saves p, it saves the copy. kNoNode:
//    no copy. (On CUDA, inductor decides the layout by heuristics this
//    does not follow.)
//  * view_copy[v]: on CPU, where the graph convolves (inductor keeps the
//    activations channels-last), a view folding a 4-d activation's
//    channels into its batch ((N, C, H, W) to (N*C, H*W), as max-pool's
//    backward does) is a copy of its own: a fresh buffer, its base read
//    there. The layout inductor picks is not in the graph (the backward's
//    inputs take the strides the compiled forward gave them), so this is
//    the conservative side: it may count a copy of a tensor inductor left
//    contiguous.
//  * in_kernel[n]: n is materialized and computed by a generated kernel
//    (a pointwise op, a reduction, a view copy, an embedding's gather);
//    external[n]: by an extern or fallback kernel (matmul, convolution,
//    scatter). inductor fuses the generated nodes between two extern
//    kernels into kernels that allocate all their outputs before the
//    wrapper frees what they read, so the simulator releases the values
//    such nodes read last only at the next extern kernel (or the graph's
//    end), or at a scatter (a kernel apart) unless the fused group that
//    reads them has members after it. Where inductor splits them into
//    several kernels this holds inputs a little longer: the safe side.
//  * group[n], kernel_at[n], runs_at[n] of a member of a fused group:
//    inductor's scheduler fuses generated kernels with loop nests its CPU
//    backend fuses (the same nest; a pointwise op over a reduction's input
//    when the reduction keeps leading dimensions; a pointwise op over a
//    reduction's rows that reads it) when one reads the other (at any
//    distance) or both load a buffer (within 64 kernels), up to 64 in a
//    group and never into a cycle (but for one through a scatter that
//    reads a member: inductor fuses that scatter into the group's kernel),
//    and runs the group once all it loads is
//    written: at its first member, or else at its first member after the
//    last write it waits for (its place). group[m] is the group's first
//    member (n for a kernel in no group). A member before the place runs
//    late: runs_at[m] is the place, so what it reads lives until then (its
//    result is still allocated at its own node, the safe side). A member
//    after the place that needs none of the extern kernels between them
//    runs before them: kernel_at[m] is the place, and the simulator
//    allocates its buffer there; what else it reads is released no earlier
//    than before (inductor frees it after the fused kernel): the safe side,
//    which keeps every simulated peak at or above the optimizer's bound
//    (optimize/space.h). kernel_at[n] is n otherwise. A member writes its
//    result in place of a buffer of its size that it reads last only when
//    inductor's decide_inplace_update would: the member is the buffer's one
//    remaining reader (every other member of the group that loads it, and
//    every kernel outside the group between the group's first member and
//    it that does, is its ancestor, an op of several results through each
//    of them; simulate.cc inplace_rule).
//  * loads[n]: for a generated kernel n, the buffers it loads (each named
//    by the node that writes it: a view's base, a getitem's multi-output
//    op), its materialized inputs' and what its inlined inputs load; at
//    most 16, and loads_partial[n] when that cut the list short (such a
//    kernel then joins no group).
// Not modelled: the fan-out rule's large-body case (an inlined expression
// of more than 50 ops on CPU, 30 elsewhere), a stored value's buffer that
// inductor removes when its fused kernel is its only reader (but for
// inductor_random's, above), the buffers a fused kernel of several loop
// nests keeps for what crosses them (freed right after it), the
// scheduler's reordering of kernels for peak memory (simulate_memory runs
// the orders it may keep apart: memory/kernel_order.h),
// its reuse of a freed buffer for a later one of the same size (the freed
// one lives until then), and workspaces of extern kernels; and what a
// member of a fused group that runs early reads is held to the member's
// own node, past the kernel inductor frees it after (the safe side the
// optimizer's rows need).
// docs/memory.md measures what that leaves (tests/python/
// test_inductor_memory.py and bench/bench_inductor_memory.py --limits
// check it against compiled steps). Linear in the graph's size, times
// the 5 reads kept per inlined value.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "remat/graph.h"

namespace remat::memory {

struct InductorFusion {
  std::vector<uint8_t> fused;
  std::vector<uint8_t> inplace;
  std::vector<NodeId> runs_at;
  std::vector<NodeId> last_read;
  std::vector<NodeId> copy_from;
  std::vector<NodeId> copy_until;
  std::vector<uint8_t> view_copy;
  std::vector<uint8_t> in_kernel;
  std::vector<uint8_t> external;
  std::vector<NodeId> kernel_at;
  std::vector<NodeId> group;
  std::vector<std::vector<NodeId>> loads;
  std::vector<uint8_t> loads_partial;
};

// `within`, when not empty: per node, an id its fused group's members
// share (the groups inductor formed before its reorder pass moved the
// kernels, memory/kernel_order.h): kernels fuse only within it.
InductorFusion inductor_fusion(const Graph& g, std::span<const NodeId> within = {});

// `fused` above, as if the graph's only readers were the nodes
// `reader_counts` accepts (and the output node): for callers reasoning on a
// joint graph about the forward or the backward cut from it.
std::vector<uint8_t> inductor_inlined(const Graph& g, const std::function<bool(NodeId)>& reader_counts);

// Whether inductor lowers n to a generated loop (the first condition of
// `fused` above: loop bodies it can inline, and a CPU cat, whose kernels
// write its slices), for callers reasoning on a joint graph.
bool inductor_fusible(const Graph& g, NodeId n);

// Whether inductor lowers n as a copy of its first argument that a scatter
// kernel (inductor's or a fallback) then mutates: scatter, scatter_add,
// scatter_reduce, index_put, as_strided_scatter. The copy is the result's
// buffer, so the copied tensor needs no buffer of its own; and a mutated
// buffer is never overwritten in place by a later kernel (inductor's
// inplace_buffers skips mutation outputs).
bool inductor_scatters_into_copy(const Graph& g, NodeId n);

// Whether n's kernel may write its result in place of an input (`inplace`
// above when materialized): fusible, not a view or getitem, one tensor,
// and an input tensor of the same allocation size.
bool inductor_may_write_in_place(const Graph& g, NodeId n);

}  // namespace remat::memory
