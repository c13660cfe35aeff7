// graph/fx_names.h — FX's node-naming rule, so that nodes remat creates get
// the names torch.fx would give them.
//
// Contract: mirrors torch.fx.graph._Namespace.create_name: a candidate that
// is not an identifier is sanitized first; a name "base_N" or a legal "base"
// is taken as is when free; otherwise the next free "base_K" after the last
// number used for that base (torch 2.12 on; 2.11 looks the number up under
// the whole taken candidate "base_N", which normally has none, so it takes
// the smallest free "base_K"). Every name a graph ever held counts as used,
// including nodes that dead-code elimination later removed, as in FX.
//
// Names live in a StringPool, normally the one the graphs share, so that
// extraction can name a million copies by StrId: the common case (a free
// name that is already an identifier) costs a byte lookup, and the base
// counts FX keeps are only built when a name collides.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "remat/graph.h"

namespace remat {

// An ASCII word character ([0-9a-zA-Z_]), as Python's regex `\w` and `\b`
// see the names FX handles; shared by FX naming and prepare's mutation-name
// match.
constexpr bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

class FxNamespace {
 public:
  FxNamespace();  // over a string pool of its own, the newest release's rule
  // `count_by_base`: the release's rule for a taken "base_N"
  // (TorchBehavior::fx_name_count_by_base).
  FxNamespace(std::shared_ptr<StringPool> pool, bool count_by_base);

  // The name FX gives a node created with this candidate name (equal to it
  // unless taken or not an identifier), as an id in the pool.
  StrId create(StrId candidate);
  // The same for a candidate not yet interned. The view lives in the pool.
  std::string_view create_name(std::string_view candidate);

 private:
  bool used(StrId s) const { return s < used_.size() && used_[s] != 0; }
  bool used(std::string_view s) const { return used(pool_->find(s)); }
  StrId take(StrId s);  // marks s used and returns it
  StrId create_slow(std::string candidate);
  void apply_pending_counts();

  std::shared_ptr<StringPool> pool_;
  std::vector<uint8_t> used_;  // by StrId
  // FX's _base_count. Names "base_N" taken on the fast path only queue here
  // (in order); the map is brought up to date before a collision reads it.
  std::vector<StrId> pending_counts_;
  std::unordered_map<std::string, long> base_count_;
  bool count_by_base_ = true;
};

}  // namespace remat
