// graph/string_pool.cc — StringPool: interning for a graph family.
//
// Contract (graph.h): intern() returns the id of a string, adding it when new;
// ids are dense, in interning order, and never change; views stay valid for
// the pool's life. Loading a 10^6-node graph interns a few million strings,
// so the table is a flat open-addressing array of 8-byte slots rather than a
// node-based map: a lookup is one probe sequence in one array, and a string is
// only compared when the upper half of its hash matches.
#include <algorithm>
#include <cstring>
#include <functional>

#include "remat/graph.h"

namespace remat {
namespace {

constexpr StrId kEmpty = std::numeric_limits<StrId>::max();

uint64_t hash_of(std::string_view s) { return std::hash<std::string_view>{}(s); }
uint32_t tag_of(uint64_t hash) { return static_cast<uint32_t>(hash >> 32); }

}  // namespace

size_t StringPool::probe(std::string_view s, uint64_t hash) const {
  const size_t mask = table_.size() - 1;
  const uint32_t tag = tag_of(hash);
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = table_[i];
    if (slot.id == kEmpty || (slot.tag == tag && views_[slot.id] == s)) return i;
  }
}

void StringPool::grow() {
  std::vector<Slot> old = std::move(table_);
  table_.assign(std::max<size_t>(1024, 2 * old.size()), Slot{});
  const size_t mask = table_.size() - 1;
  for (const Slot& s : old) {
    if (s.id == kEmpty) continue;
    size_t i = hash_of(views_[s.id]) & mask;
    while (table_[i].id != kEmpty) i = (i + 1) & mask;
    table_[i] = s;
  }
}

StrId StringPool::intern(std::string_view s) {
  if (2 * (views_.size() + 1) > table_.size()) grow();
  const uint64_t hash = hash_of(s);
  Slot& found = table_[probe(s, hash)];
  if (found.id != kEmpty) return found.id;

  if (s.size() > chunk_left_) {
    const size_t size = std::max<size_t>(s.size(), 256 * 1024);
    chunks_.push_back(std::make_unique<char[]>(size));
    chunk_next_ = chunks_.back().get();
    chunk_left_ = size;
  }
  if (!s.empty()) std::memcpy(chunk_next_, s.data(), s.size());
  views_.emplace_back(chunk_next_, s.size());
  chunk_next_ += s.size();
  chunk_left_ -= s.size();
  found.tag = tag_of(hash);
  found.id = static_cast<StrId>(views_.size() - 1);
  return found.id;
}

StrId StringPool::find(std::string_view s) const {
  if (table_.empty()) return 0;
  const Slot& found = table_[probe(s, hash_of(s))];
  return found.id == kEmpty ? 0 : found.id;
}

}  // namespace remat
