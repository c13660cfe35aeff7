// graph/string_pool.cc — StringPool: interning for a graph family.
//
// Contract (graph.h): intern() returns the id of a string, adding it when new;
// ids are dense, in interning order, and never change; views stay valid for
// the pool's life. Loading a 10^6-node graph interns a few million strings,
// so the table is a flat open-addressing array of 8-byte slots rather than a
// node-based map: a lookup is one probe sequence in one array, and a string is
// only compared when the upper half of its hash matches. A layer's table holds
// only its own strings; a lookup tries the parents first, with the same hash.
#include <algorithm>
#include <cstring>
#include <functional>

#include "remat/graph.h"

namespace remat {
namespace {

constexpr uint32_t kEmpty = std::numeric_limits<uint32_t>::max();
constexpr size_t kFirstChunk = 4 * 1024;
constexpr size_t kLastChunk = 256 * 1024;

uint64_t hash_of(std::string_view s) { return std::hash<std::string_view>{}(s); }
uint32_t tag_of(uint64_t hash) { return static_cast<uint32_t>(hash >> 32); }

}  // namespace

StringPool::StringPool(std::shared_ptr<const StringPool> parent)
    : parent_(std::move(parent)), base_(static_cast<StrId>(parent_->size())) {}

size_t StringPool::probe(std::string_view s, uint64_t hash) const {
  const size_t mask = table_.size() - 1;
  const uint32_t tag = tag_of(hash);
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = table_[i];
    if (slot.index == kEmpty || (slot.tag == tag && views_[slot.index] == s)) return i;
  }
}

void StringPool::grow() {
  std::vector<Slot> old = std::move(table_);
  table_.assign(std::max<size_t>(64, 2 * old.size()), Slot{});
  const size_t mask = table_.size() - 1;
  for (const Slot& s : old) {
    if (s.index == kEmpty) continue;
    size_t i = hash_of(views_[s.index]) & mask;
    while (table_[i].index != kEmpty) i = (i + 1) & mask;
    table_[i] = s;
  }
}

StrId StringPool::find_hashed(std::string_view s, uint64_t hash) const {
  if (parent_ != nullptr) {
    // An id the parent gave out after this layer was made is not ours.
    const StrId in_parent = parent_->find_hashed(s, hash);
    if (in_parent != 0 && in_parent < base_) return in_parent;
  }
  if (table_.empty()) return 0;
  const Slot& found = table_[probe(s, hash)];
  return found.index == kEmpty ? 0 : base_ + found.index;
}

StrId StringPool::intern(std::string_view s) {
  const uint64_t hash = hash_of(s);
  if (parent_ != nullptr) {
    // "" is the root's id 0; any other string the parents hold keeps its id.
    if (s.empty()) return 0;
    const StrId in_parent = parent_->find_hashed(s, hash);
    if (in_parent != 0 && in_parent < base_) return in_parent;
  }
  if (2 * (views_.size() + 1) > table_.size()) grow();
  Slot& found = table_[probe(s, hash)];
  if (found.index != kEmpty) return base_ + found.index;

  if (s.size() > chunk_left_) {
    // Chunks double from 4 KiB to 256 KiB, uninitialized: a small graph's
    // pools (several per call) each zeroed 256 KiB before, a tenth of its
    // engine time.
    const size_t next = chunks_.empty() ? kFirstChunk : std::min(kLastChunk, 2 * chunk_size_);
    const size_t size = std::max(s.size(), next);
    chunk_size_ = next;
    chunks_.push_back(std::make_unique_for_overwrite<char[]>(size));
    chunk_next_ = chunks_.back().get();
    chunk_left_ = size;
  }
  if (!s.empty()) std::memcpy(chunk_next_, s.data(), s.size());
  views_.emplace_back(chunk_next_, s.size());
  chunk_next_ += s.size();
  chunk_left_ -= s.size();
  found.tag = tag_of(hash);
  found.index = static_cast<uint32_t>(views_.size() - 1);
  return base_ + found.index;
}

StrId StringPool::find(std::string_view s) const { return find_hashed(s, hash_of(s)); }

}  // namespace remat
