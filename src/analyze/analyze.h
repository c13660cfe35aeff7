// analyze/analyze.h — stage 2: facts about each node that the decision reads.
//
// Contract: classify_nodes is torch's classify_nodes; dist_from_bw is the
// `node.dist_from_bw` loop of min_cut_rematerialization_partition; size_of is
// `_size_of` (bytes; numel hints with torch's 4096 fallback). The node
// predicates mirror the reference's helpers of the same names.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/query.h"  // must_be_in_forward/backward, which select_subgraph reads too
#include "remat/graph.h"
#include "remat/options.h"

namespace remat {

struct NodeInfo {
  std::vector<NodeId> inputs;            // primals then fwd seed offsets, graph order
  std::vector<uint8_t> required_fw;      // per node
  std::vector<uint8_t> required_bw;
  std::vector<uint8_t> tangents_closure;
  std::vector<uint8_t> unclaimed;
  std::vector<uint8_t> static_lifetime;  // primal inputs that are parameters
  std::vector<int32_t> fw_order;         // position among required_fw; -1 otherwise
  std::vector<NodeId> required_fw_nodes; // in fw order
  size_t num_required_bw = 0;

  bool is_required_fw(NodeId n) const { return required_fw[n] != 0; }
  bool is_required_bw(NodeId n) const { return required_bw[n] != 0; }
};

NodeInfo classify_nodes(const Graph& g, const std::vector<int>& static_lifetime_input_indices,
                        int num_fwd_outputs, const PartitionOptions& options);

// Per node: whether the forward cannot compute it (it is derived from a
// tangent or a backward seed).
std::vector<uint8_t> backward_only(const Graph& g, const NodeInfo& info);

// 1e9 for nodes that cannot reach the backward, as torch.
inline constexpr int64_t kFarFromBackward = 1000000000;
std::vector<int64_t> dist_from_bw(const Graph& g, const NodeInfo& info);

// `_size_of`: throws Error naming the node when torch would raise (what it
// sizes depends on the release: options.torch).
int64_t size_of(const Graph& g, NodeId n, const PartitionOptions& options);

// Placeholder roles, by FX target as in aot_autograd.utils.
bool is_primal(const Graph& g, NodeId n);
bool is_tangent(const Graph& g, NodeId n);
bool is_fwd_seed_offset(const Graph& g, NodeId n);
bool is_bwd_seed_offset(const Graph& g, NodeId n);
bool is_backward_state(const Graph& g, NodeId n);
bool is_sym_node(const Graph& g, NodeId n);          // val is SymInt/SymFloat/SymBool
// graph_compile.is_opaque_node: a script object or another opaque value, and
// from 2.13 on a generator (switches opaque_values_saved, generator_is_opaque;
// 2.11 has no such notion: false for every node).
bool is_opaque_node(const Graph& g, NodeId n, const TorchBehavior& torch);
bool is_assert_only_symbool(const Graph& g, NodeId n);
// A wait on a functional collective's result (_c10d_functional.wait_tensor;
// from 2.15 on, switch wait_tensors_like_wait_tensor, also the multi-tensor
// wait_tensors, an op 2.15 added): impure to FX, but safe to duplicate and
// reorder (SPMD), so default_partition does not count it impure and the
// extraction prunes a saved value only dead waits read.
bool is_collective_wait(const Graph& g, NodeId n, const TorchBehavior& torch);


}  // namespace remat
