// graph/fx_names.h — FX's node-naming rule, so that nodes remat creates get
// the names torch.fx would give them.
//
// Contract: mirrors torch.fx.graph._Namespace.create_name for candidates
// that are already valid identifiers: a name "base_N" or "base" is taken as
// is when free; otherwise the next free "base_K" after the last number used
// for that base. Every name a graph ever held counts as used, including
// nodes that dead-code elimination later removed, as in FX.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace remat {

class FxNamespace {
 public:
  // Records a name created with an explicit name (node_copy, placeholder).
  // Returns the name FX would actually give (equal unless taken).
  std::string create_name(std::string_view candidate);

 private:
  std::unordered_set<std::string> used_;
  std::unordered_map<std::string, long> base_count_;
};

}  // namespace remat
