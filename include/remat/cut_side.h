// remat/cut_side.h — which of several equally cheap minimum cuts to take.
//
// Contract: one enum, shared by the options (PartitionOptions::cut_side)
// and the max-flow that computes the cut (src/decide/maxflow.h), which
// needs nothing else of the options.
#pragma once

#include <cstdint>

namespace remat {

// Which minimum cut to return when several have the same cost.
enum class CutSide : uint8_t {
  // The cut nearest the sink: the sink side is exactly the nodes that can
  // still reach the sink in the residual graph. networkx's minimum_cut,
  // which torch 2.13 calls, returns this one.
  kSinkMinimal,
  // The cut nearest the source: the source side is the nodes reachable
  // from the source in the residual graph.
  kSourceMinimal,
};

}  // namespace remat
