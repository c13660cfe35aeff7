// remat/memory.h — what a partition costs in memory when it runs: the
// liveness simulation of one training step, and the in-place mutations that
// would make a plan read the wrong data.
//
// Contract: simulate_memory replays one training step of a forward/backward
// pair and counts the bytes of live tensor storages after every node, under
// this model of how AOTAutograd runs the two graphs (boxed calling
// convention, as inductor's compiled code and FX's _BoxedCodeGen run them):
//  * The forward's inputs (placeholders) and every get_attr constant of both
//    graphs are alive for the whole step: the caller holds them.
//  * Each graph runs its nodes in order. A node's storages are allocated
//    when it runs; a value is released after its last use, as FX-generated
//    code releases it (`x = None` after the last user; right after the node
//    itself when nothing uses it); a backward placeholder nothing uses stays
//    alive until the backward returns; returned values are not released.
//  * The forward's first `num_fwd_outputs` outputs stay alive until the end of
//    the step (the caller holds them while it runs the backward). The rest,
//    the saved values, stay alive until the backward's last use of them.
//  * The backward's inputs are the saved values (linked to forward outputs by
//    name, then, for the ones left such as RNG states, by position), and
//    tangents, which autograd allocates before the backward starts. Its
//    outputs (the gradients) stay alive until the end of the step.
//  * Views and aliases count once per storage. Within a graph, a tensor
//    shares a storage with an input of its node when their `storage` ids are
//    equal (a view, an in-place op, a getitem); otherwise it is a fresh
//    allocation of `extent` bytes: 1 + sum((size-1) * |stride|) elements
//    (numel when no stride is known, 0 for an empty tensor) times the item
//    size, with size hints for symbolic dims. A tensor without a storage id
//    (-1) is a fresh allocation, except the result of a view op, which
//    aliases its first input.
// Memory that the kernels of a node allocate and free internally (workspaces)
// is not modelled: the simulator's unit is the tensor storage, the same unit
// a TorchDispatchMode sees between two ops. The result is deterministic and
// takes time linear in the two graphs' sizes.
//
// That is MemoryModel::kAten: the graphs run op by op (eager FX code,
// aot_eager), every op's result a storage. MemoryModel::kInductor follows
// what inductor's generated code keeps instead: values that only pointwise
// ops, views and reductions read are inlined into their readers' kernels
// and get no buffer (their inputs live until those kernels run), and a
// pointwise kernel writes its result into a same-sized buffer it reads for
// the last time (src/memory/fusion.h gives the rules and what they leave
// out; docs/memory.md "Under inductor" measures them against compiled
// steps). inductor may run a graph's kernels in another order than the
// graph's (its reorder_for_peak_memory pass keeps the order its own
// estimate ranks lowest, which is not always the lowest when it runs), so
// each graph is also simulated in the orders that pass may keep
// (src/memory/kernel_order.h) and the highest peak is the profile's.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "remat/graph.h"

namespace remat {

// How the two graphs run (see above).
enum class MemoryModel : uint8_t { kAten, kInductor };

// Which graph of the pair a node is in.
enum class Pass : uint8_t { kForward, kBackward };

// A storage alive at the peak: the node that allocated it (or, for inputs,
// the placeholder that brought it in), its size, and the node after which it
// is released (its last user's; the forward's output node for what the
// forward's return releases). released_after is kNoNode for what lives the
// whole step: inputs, constants, the caller's outputs, gradients.
struct LiveStorage {
  Pass pass = Pass::kForward;
  NodeId node = kNoNode;  // in that pass's graph
  int64_t bytes = 0;
  Pass released_pass = Pass::kForward;
  NodeId released_after = kNoNode;  // in released_pass's graph
};

struct MemoryProfile {
  int64_t peak_bytes = 0;
  // Where the peak is first reached: the node whose allocation brings the
  // live bytes to peak_bytes (kNoNode when both graphs are empty).
  Pass peak_pass = Pass::kForward;
  NodeId peak_node = kNoNode;
  int64_t forward_peak_bytes = 0;   // the largest live count while the forward runs
  int64_t backward_peak_bytes = 0;  // ... while the backward runs
  int64_t inputs_bytes = 0;   // forward inputs and constants: alive all step
  int64_t between_bytes = 0;  // alive when the forward returns: inputs, outputs, saved values
  // Live bytes after each node ran (its storages allocated, nothing it
  // releases released yet), one entry per node of each graph, in node order.
  std::vector<int64_t> forward_timeline;
  std::vector<int64_t> backward_timeline;
  // The storages alive at the peak, largest first (ties: forward first, then
  // by node).
  std::vector<LiveStorage> at_peak;
  MemoryModel model = MemoryModel::kAten;  // the model simulated
  // Under MemoryModel::kInductor, per graph: the orders of its kernels
  // simulated ("graph", its own, first; then those of inductor's
  // reorder_for_peak_memory pass its estimate may keep: "lpmf", "bfs",
  // "dfs", src/memory/kernel_order.h), and the one the profile above comes
  // from: the highest peak of them (the graph's on a tie). Its timeline,
  // at_peak and peak_node name the graph's nodes; the timeline's entry for
  // a node is the live count after it ran in that order. Empty under kAten.
  std::vector<std::string> forward_orders, backward_orders;
  std::string forward_order, backward_order;
};

// Simulates one training step of `forward` then `backward` (see above).
// `num_fwd_outputs` is how many of the forward's outputs are the caller's;
// the rest are saved for the backward. Throws Error(kInvalidGraph) when it is
// out of range.
// `kernel_orders` false simulates each graph in its own order only under
// kInductor (as inductor runs it with its reorder_for_peak_memory pass off).
MemoryProfile simulate_memory(const Graph& forward, const Graph& backward, int num_fwd_outputs,
                              MemoryModel model = MemoryModel::kAten, bool kernel_orders = true);

// A saved value that aliases a forward input the step mutates in place
// before the backward reads it. The backward then reads the mutated data
// instead of what the joint graph's backward read; when the mutation happens
// after the forward returns (AOTAutograd applies input mutations that are
// not in the graph in its runtime wrapper, after saving tensors for the
// backward), autograd's version counter check fails in the backward with
// "one of the variables needed for gradient computation has been modified by
// an inplace operation".
struct MutationHazard {
  NodeId input = kNoNode;       // the forward placeholder that is mutated
  NodeId mutated_by = kNoNode;  // the forward node writing it; kNoNode: after the forward
  NodeId saved = kNoNode;       // the forward node saved for the backward
  std::vector<NodeId> readers;  // backward nodes reading the saved value
};

// The hazards of a forward/backward pair. A forward node mutates an input
// when its op is mutable and its first argument aliases the input's storage;
// `mutated_after_forward` lists forward placeholders the caller mutates after
// the forward returns. A saved value is hazardous when it aliases a mutated
// input and was computed before the mutation (a value computed from the
// mutation's result is what the backward expects). One entry per saved
// value, in forward-output order.
std::vector<MutationHazard> find_mutation_hazards(const Graph& forward, const Graph& backward,
                                                  int num_fwd_outputs,
                                                  std::span<const NodeId> mutated_after_forward = {});

// One sentence naming the saved value, the input, the mutation and the
// backward nodes reading it.
std::string describe_hazard(const Graph& forward, const Graph& backward, const MutationHazard& h);

const char* pass_name(Pass p);  // "forward" or "backward"

}  // namespace remat
