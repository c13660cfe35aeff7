// sync/canonical.h — helpers of the cross-rank agreement that mirror how
// Python prints things (torch hashes and logs Python's strings).
//
// Contract: py_repr(s) is Python's repr() of a str whose characters are
// printable or ASCII control characters; python_targets(g, group,
// spelling)[id] is how torch prints every node's target when it hashes the
// graph: Python's str(node.target) (kStr; see RankGroup::target_repr for
// Python callables) or torch 2.14's `_stable_target_str` (kQualified; see
// RankGroup::target_qualified_name); `group` may be null.
// default_target_repr and default_qualified_name are RankGroup's default
// spellings of a Python callable.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "remat/graph.h"
#include "remat/sync.h"

namespace remat {

std::string py_repr(std::string_view s);
std::string default_target_repr(std::string_view qualified);
std::string default_qualified_name(std::string_view qualified);
std::vector<std::string> python_targets(const Graph& g, const RankGroup* group,
                                        TargetSpelling spelling);

}  // namespace remat
