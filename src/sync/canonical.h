// sync/canonical.h — helpers of the cross-rank agreement that mirror how
// Python prints things (torch hashes and logs Python's strings).
//
// Contract: py_repr(s) is Python's repr() of a str whose characters are
// printable or ASCII control characters; python_targets(g)[id] is Python's
// str(node.target) for every node (see RankGroup::target_repr for Python
// callables; `group` may be null); default_target_repr is RankGroup's
// default spelling of a Python callable.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "remat/graph.h"
#include "remat/sync.h"

namespace remat {

std::string py_repr(std::string_view s);
std::string default_target_repr(std::string_view qualified);
std::vector<std::string> python_targets(const Graph& g, const RankGroup* group);

}  // namespace remat
