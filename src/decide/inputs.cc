// decide/inputs.cc — min_cut_inputs: the analysis the min-cut decides on.
//
// Contract (decide.h): classify_nodes on the prepared graph, then, when the
// backward needs something from the forward, dist_from_bw and the op
// categories of the options' registry. The min-cut partitioner and the
// Pareto frontier both start here, so they decide on the same facts.
#include "decide/decide.h"

namespace remat {

MinCutInputs min_cut_inputs(const Graph& g, const JointGraph& joint,
                            const PartitionOptions& options) {
  MinCutInputs in;
  in.info = classify_nodes(g, joint.static_lifetime_input_indices, joint.num_fwd_outputs, options);
  if (!in.has_cut()) return in;
  in.dist_from_bw = dist_from_bw(g, in.info);
  in.op_categories = options.ops.classify(g, options.torch);
  return in;
}

}  // namespace remat
