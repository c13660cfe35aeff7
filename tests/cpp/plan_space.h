// tests/cpp/plan_space.h — the peak optimizer's plan space of a joint graph,
// for tests of the optimizer and its model (test_optimize.cc, test_rows.cc).
//
// Contract: SpaceOf(j, o) is the PlanSpace the optimizer searches for j
// under o (the plan's prepared graph, its min-cut inputs, backward rows in
// the joint order, the model's rows on), built as minimize_recompute's
// caller builds it, with what the space refers to kept alive beside it: it
// is neither copied nor moved.
#pragma once

#include "analyze/analyze.h"
#include "decide/decide.h"
#include "optimize/space.h"
#include "remat/partition.h"

namespace remat::testing {

struct SpaceOf {
  SpaceOf(const JointGraph& j, const PartitionOptions& o)
      : plan(plan_min_cut_rematerialization_partition(j, o)),
        graph(plan.prepared()),
        in(min_cut_inputs(graph, j, o)),
        space(in.context(graph, o), j.num_fwd_outputs, /*joint_order_backward=*/true, /*model_rows=*/true) {}
  SpaceOf(const SpaceOf&) = delete;
  SpaceOf& operator=(const SpaceOf&) = delete;

  PartitionPlan plan;
  const Graph& graph;  // the prepared graph the space's ids refer to
  MinCutInputs in;
  optimize::PlanSpace space;
};

}  // namespace remat::testing
