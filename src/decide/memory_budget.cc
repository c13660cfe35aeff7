// decide/memory_budget.cc — resolve_memory_budget: which activation memory
// budget the min-cut applies to one joint graph (see decide.h).
//
// Contract: torch's precedence and messages, per release (the region
// annotation's errors quote torch's text, with the budgets as Python prints
// them); a per-graph budget out of range fails through ops/memory_budget.h,
// naming the node it came from. Region annotations exist from 2.13
// (TorchBehavior::region_memory_budget); 2.15 lets a partial annotation
// apply to the whole graph under
// activation_memory_budget_require_full_coverage=False, with a new text for
// the coverage error (region_budget_full_coverage_flag).
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "decide/decide.h"
#include "ops/memory_budget.h"
#include "remat/error.h"

namespace remat {

namespace {

// The region_activation_memory_budget annotations of a joint graph and its
// bodies.
struct Regions {
  std::vector<double> budgets;  // distinct, in first-seen order (an OrderedSet)
  std::string from;             // where the first one was found, for the range error
  std::vector<std::string_view> unannotated;  // names of the ops they must cover
};

Regions collect_regions(const Graph& g, const std::vector<NestedGraph>& nested,
                        const NodeInfo& info) {
  Regions r;
  auto add = [&](double b) {
    if (std::find(r.budgets.begin(), r.budgets.end(), b) == r.budgets.end())
      r.budgets.push_back(b);  // at most a few distinct values
  };
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& node = g.node(id);
    if (node.has(kFlagRegionBudget)) {
      if (r.from.empty()) r.from = fmt::format("node '{}': meta region_memory_budget", g.name(id));
      add(g.extra(id).region_memory_budget);
    } else if (node.kind == NodeKind::kCallFunction && info.is_required_fw(id)) {
      r.unannotated.push_back(g.name(id));
    }
  }
  // A body is not split into forward and backward: every op counts.
  for (const NestedGraph& body : nested) {
    const Graph& b = body.graph;
    for (NodeId id = 0; id < b.size(); ++id) {
      if (b.node(id).has(kFlagRegionBudget)) {
        if (r.from.empty()) {
          r.from = fmt::format("subgraph '{}': node '{}': meta region_memory_budget", body.name,
                               b.name(id));
        }
        add(b.extra(id).region_memory_budget);
      } else if (b.node(id).kind == NodeKind::kCallFunction) {
        r.unannotated.push_back(b.name(id));
      }
    }
  }
  return r;
}

// torch's two checks of the annotations: one budget, covering every op
// (2.15: unless the options waive the coverage).
void check_regions(const Regions& r, const PartitionOptions& options) {
  if (r.budgets.size() > 1) {
    std::vector<double> sorted = r.budgets;
    std::sort(sorted.begin(), sorted.end());
    std::string list;
    for (double b : sorted) list += (list.empty() ? "" : ", ") + python_float(b);
    throw Error(ErrorCode::kInvalidGraph,
                fmt::format("torch.autograd.graph.region_activation_memory_budget: conflicting "
                            "budgets within a single joint graph (including nested subgraphs): "
                            "[{}]. Use a graph break to separate regions that need different "
                            "budgets.",
                            list));
  }
  if (r.budgets.empty() || r.unannotated.empty()) return;
  const bool flag = options.torch.region_budget_full_coverage_flag;
  if (flag && !options.activation_memory_budget_require_full_coverage) return;
  std::string names;
  for (std::string_view name : r.unannotated)
    names += fmt::format("{}'{}'", names.empty() ? "" : ", ", name);
  // 2.15 names the flag that lifts the requirement; 2.13 and 2.14 have none.
  const std::string_view advice =
      flag ? "Wrap the whole forward in a single region, or set "
             "torch._functorch.config.activation_memory_budget_require_full_coverage=False to "
             "apply the budget to the entire graph."
           : "Wrap the whole forward in a single region; use a graph break to scope different "
             "budgets to different graphs. Note that a graph break inside the annotated region "
             "can also cause unannotated ops here.";
  throw Error(ErrorCode::kInvalidGraph,
              fmt::format("torch.autograd.graph.region_activation_memory_budget: must cover the "
                          "entire forward of a graph (including HOP bodies), but {} forward "
                          "op(s) are unannotated. {} Unannotated ops: [{}].",
                          r.unannotated.size(), advice, names));
}

}  // namespace

double resolve_memory_budget(const Graph& g, const std::vector<NestedGraph>& nested,
                             const NodeInfo& info, const PartitionOptions& options) {
  double budget = options.activation_memory_budget;
  std::string from;  // the node a per-graph budget came from, for the range error
  for (NodeId id = 0; id < g.size(); ++id) {
    if (g.node(id).has(kFlagMemoryBudget)) {
      budget = g.extra(id).memory_budget;
      from = fmt::format("node '{}': meta memory_budget", g.name(id));
      break;
    }
  }
  // Before 2.13 there are no region budgets: the annotation is not read.
  if (!options.torch.region_memory_budget) {
    if (!from.empty()) check_memory_budget(budget, from, ErrorCode::kInvalidGraph);
    return budget;
  }
  const Regions regions = collect_regions(g, nested, info);
  check_regions(regions, options);
  if (!regions.budgets.empty()) {
    budget = regions.budgets[0];
    from = regions.from;
  }
  if (!from.empty()) check_memory_budget(budget, from, ErrorCode::kInvalidGraph);
  return budget;
}

}  // namespace remat
