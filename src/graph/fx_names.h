// graph/fx_names.h — FX's node-naming rule, so that nodes remat creates get
// the names torch.fx would give them.
//
// Contract: mirrors torch.fx.graph._Namespace.create_name for candidates
// that are already valid identifiers: a name "base_N" or "base" is taken as
// is when free; otherwise the next free "base_K" after the last number used
// for that base. Every name a graph ever held counts as used, including
// nodes that dead-code elimination later removed, as in FX.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace remat {

class FxNamespace {
 public:
  // Records a name created with an explicit name (node_copy, placeholder).
  // Returns the name FX would actually give (equal unless taken). The view
  // stays valid as long as this namespace (moves included).
  std::string_view create_name(std::string_view candidate);

 private:
  // One entry per string seen as a used name and/or as a base. Open
  // addressing over a flat array: extraction names every node it copies, and
  // node-based std containers cost two allocations per name.
  struct Slot {
    std::string_view key;  // empty: free slot
    uint64_t hash = 0;
    long base_count = 0;
    bool used = false;     // a name FX handed out
    bool is_base = false;  // base_count is set
  };
  Slot& slot(std::string_view key);              // finds or inserts (key kept)
  const Slot* find(std::string_view key) const;  // nullptr when absent
  std::string_view keep(std::string_view s);

  std::vector<Slot> table_;
  size_t filled_ = 0;
  std::vector<std::unique_ptr<char[]>> chunks_;  // the arena for kept strings
  size_t chunk_left_ = 0;
  char* chunk_next_ = nullptr;
};

}  // namespace remat
