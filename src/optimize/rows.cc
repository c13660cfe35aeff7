// optimize/rows.cc — a plan's model rows under small changes.
// Contract: optimize/rows.h.
#include "optimize/rows.h"

#include <algorithm>
#include <limits>

namespace remat::optimize {
namespace {

// Leaves that are no row of a tree (padding; forward rows of the tree of
// instants just before backward nodes): far below any excess, and far
// enough from the int64 limits that spans added to them cannot overflow.
constexpr int64_t kNoLeaf = std::numeric_limits<int64_t>::min() / 4;

bool same_spans(const VarSpans& a, const VarSpans& b) {
  if (a.count != b.count) return false;
  for (int i = 0; i < a.count; ++i)
    if (a.spans[i].from != b.spans[i].from || a.spans[i].to != b.spans[i].to ||
        a.spans[i].before_only != b.spans[i].before_only)
      return false;
  return true;
}

}  // namespace

void PlanRows::MaxTree::init(std::vector<int64_t> leaves) {
  n_ = static_cast<uint32_t>(leaves.size());
  size_ = 1;
  while (size_ < n_) size_ *= 2;
  max_.assign(2 * size_, kNoLeaf);
  pending_.assign(2 * size_, 0);
  std::copy(leaves.begin(), leaves.end(), max_.begin() + size_);
  for (size_t i = size_; i-- > 1;) max_[i] = std::max(max_[2 * i], max_[2 * i + 1]);
}

// Bottom up: the nodes covering [from, to) take the add (a leaf in its
// value, an inner node in its value and its pending add), then the
// ancestors of both ends take their children's new maximum.
void PlanRows::MaxTree::add(uint32_t from, uint32_t to, int64_t delta) {
  if (from >= to || delta == 0) return;
  size_t l = size_ + from, r = size_ + to;
  const size_t first = l, last = r - 1;
  auto apply = [&](size_t node) {
    max_[node] += delta;
    if (node < size_) pending_[node] += delta;
  };
  for (; l < r; l /= 2, r /= 2) {
    if (l & 1) apply(l++);
    if (r & 1) apply(--r);
  }
  for (size_t node : {first, last})
    for (node /= 2; node >= 1; node /= 2) max_[node] = std::max(max_[2 * node], max_[2 * node + 1]) + pending_[node];
}

int64_t PlanRows::MaxTree::leaf(uint32_t i) const {
  size_t node = size_ + i;
  int64_t value = max_[node];
  while (node > 1) {
    node /= 2;
    value += pending_[node];
  }
  return value;
}

PlanRows::PlanRows(const PlanSpace& space, std::span<const uint8_t> requested, std::span<const int64_t> targets,
                   int64_t limit)
    : space_(space), between_(space.between()), requested_(requested.begin(), requested.end()) {
  const auto& vars = space.vars();
  const auto& rows = space.rows();
  const uint32_t n = static_cast<uint32_t>(vars.size());
  const uint32_t bw0 = between_ + 1;
  // The closure implied_recompute finds, from the latest var back: a var's
  // count is final once every var after it has taken its side.
  saved_.assign(n, 0);
  recomputed_.assign(n, 0);
  count_.assign(n, 0);
  for (uint32_t k = 0; k < n; ++k) count_[k] = vars[k].needed ? 1 : 0;
  for (uint32_t k = n; k-- > 0;) {
    saved_[k] = requested_[k] && count_[k] > 0;
    recomputed_[k] = !requested_[k] && count_[k] > 0;
    invalid_ += (requested_[k] && !vars[k].can_save) + (recomputed_[k] && !vars[k].can_recompute);
    if (recomputed_[k])
      for (uint32_t d : space.deps()[k]) ++count_[d];
  }
  made_by_ = space.made_by(recomputed_, /*all_chains=*/false);
  spans_.resize(n);
  extra_of_.resize(n);
  chained_of_.resize(n);
  alias_roots_.resize(n);
  early_of_.resize(n);
  chain_owners_.resize(n);
  changed_at_.assign(n, 0);
  queued_at_.assign(n, 0);
  settled_at_.assign(n, 0);
  refreshed_at_.assign(n, 0);
  // Both trees start from the rows' constants and the spans summed as
  // values() sums them (a difference array), then take their owned terms.
  std::vector<int64_t> after(rows.size() + 1, 0), before(rows.size() + 1, 0);
  for (uint32_t k = 0; k < n; ++k) {
    spans_[k] = space.var_spans(k, saved_, recomputed_, made_by_, false);
    for (int i = 0; i < spans_[k].count; ++i) {
      const VarSpans::Span& s = spans_[k].spans[i];
      if (!s.before_only) {
        after[s.from] += vars[k].bytes;
        after[s.to] -= vars[k].bytes;
      }
      before[s.from] += vars[k].bytes;
      before[s.to] -= vars[k].bytes;
    }
    for (uint32_t al : vars[k].aliases) alias_roots_[al].push_back(k);
    for (const EarlyUse& e : vars[k].early)
      for (uint32_t u : e.path) early_of_[u].push_back(k);
  }
  std::vector<int64_t> after_leaves(rows.size()), before_leaves(rows.size(), kNoLeaf);
  int64_t run_after = 0, run_before = 0;
  for (uint32_t r = 0; r < rows.size(); ++r) {
    run_after += after[r];
    run_before += before[r];
    after_leaves[r] = rows[r].constant - targets[r] + run_after;
    if (r >= bw0) before_leaves[r] = rows[r].before - limit + run_before;
    for (uint32_t i = 0; i < rows[r].extra.size(); ++i) {
      const RowTerm& t = rows[r].extra[i];
      const int64_t counted = space.holds_storage(saved_, t.var) ? t.bytes : 0;
      extra_of_[t.var].push_back({r, i, counted});
      after_leaves[r] += counted;
    }
    for (uint32_t i = 0; i < rows[r].chained.size(); ++i) {
      const MemoryRow::Chained& c = rows[r].chained[i];
      const int64_t counted =
          PlanSpace::chained_counts(c, r, recomputed_, spans_[c.var].extended) ? c.bytes : 0;
      chained_of_[c.var].push_back({r, i, counted});
      for (uint32_t u : c.path) chain_owners_[u].push_back(c.var);
      after_leaves[r] += counted;
      if (r >= bw0) before_leaves[r] += counted;
    }
  }
  after_.init(std::move(after_leaves));
  before_.init(std::move(before_leaves));
}

template <class F>
void PlanRows::readers_of(uint32_t j, F&& visit) const {
  // var_spans(k) reads the flags of k, of k's aliases (whether k's storage
  // is held), of the users of k and of its aliases with their "made by"
  // rows, and of its early chains' vars; its owned terms read its storage's
  // holders and its chained terms' paths.
  visit(j);
  for (uint32_t k : alias_roots_[j]) visit(k);
  for (uint32_t d : space_.deps()[j]) {
    visit(d);
    for (uint32_t k : alias_roots_[d]) visit(k);
  }
  for (uint32_t k : early_of_[j]) visit(k);
  for (uint32_t k : chain_owners_[j]) visit(k);
}

void PlanRows::add_spans(const VarSpans& s, int64_t bytes) {
  for (int i = 0; i < s.count; ++i) {
    const VarSpans::Span& sp = s.spans[i];
    if (!sp.before_only) after_.add(sp.from, sp.to, bytes);
    before_.add(std::max(sp.from, between_ + 1), sp.to, bytes);
  }
}

void PlanRows::refresh(uint32_t k) {
  const auto& vars = space_.vars();
  const auto& rows = space_.rows();
  // Most vars a change reaches keep their spans (a reader of a var that
  // changed sides is often alive over the same rows): nothing to move then.
  const VarSpans fresh = space_.var_spans(k, saved_, recomputed_, made_by_, false);
  if (!same_spans(fresh, spans_[k])) {
    add_spans(spans_[k], -vars[k].bytes);
    spans_[k] = fresh;
    add_spans(spans_[k], vars[k].bytes);
  } else {
    spans_[k].extended = fresh.extended;
  }
  for (Owned& o : extra_of_[k]) {
    const RowTerm& t = rows[o.row].extra[o.index];
    const int64_t now = space_.holds_storage(saved_, t.var) ? t.bytes : 0;
    after_.add(o.row, o.row + 1, now - o.counted);
    o.counted = now;
  }
  for (Owned& o : chained_of_[k]) {
    const MemoryRow::Chained& c = rows[o.row].chained[o.index];
    const int64_t now = PlanSpace::chained_counts(c, o.row, recomputed_, spans_[k].extended) ? c.bytes : 0;
    after_.add(o.row, o.row + 1, now - o.counted);
    if (o.row > between_) before_.add(o.row, o.row + 1, now - o.counted);
    o.counted = now;
  }
}

double PlanRows::move(std::span<const uint32_t> vars, std::span<const uint8_t> flags) {
  ++epoch_;
  const auto& all = space_.vars();
  std::vector<uint32_t> heap;  // vars whose side may change, latest first
  auto queue = [&](uint32_t k) {
    if (queued_at_[k] == epoch_) return;
    queued_at_[k] = epoch_;
    heap.push_back(k);
    std::push_heap(heap.begin(), heap.end());
  };
  for (size_t i = 0; i < vars.size(); ++i) {
    const uint32_t k = vars[i];
    const uint8_t flag = flags[i] ? 1 : 0;
    if (requested_[k] == flag) continue;
    requested_[k] = flag;
    invalid_ += all[k].can_save ? 0 : (flag ? 1 : -1);
    queue(k);
  }
  // A var's count changes only with the vars reading it, which come after
  // it: taken latest first, each var's count is final when it is taken.
  std::vector<uint32_t> changed;  // vars that changed sides
  double delta = 0;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const uint32_t k = heap.back();
    heap.pop_back();
    const uint8_t now_saved = requested_[k] && count_[k] > 0;
    const uint8_t now_recomputed = !requested_[k] && count_[k] > 0;
    if (now_saved == saved_[k] && now_recomputed == recomputed_[k]) continue;
    changed_at_[k] = epoch_;
    changed.push_back(k);
    saved_[k] = now_saved;
    if (now_recomputed == recomputed_[k]) continue;
    recomputed_[k] = now_recomputed;
    const int step = now_recomputed ? 1 : -1;
    invalid_ += all[k].can_recompute ? 0 : step;
    delta += step * all[k].cost;
    for (uint32_t d : space_.deps()[k]) {
      count_[d] += step;
      queue(d);
    }
  }
  update_rows(changed);
  return delta;
}

void PlanRows::update_rows(std::vector<uint32_t>& changed) {
  if (changed.empty()) return;
  // A var's "made by" row reads its recomputed users' rows: settle them
  // from the latest var back (users come after what they read), each once.
  std::vector<uint32_t> heap(changed);  // vars whose "made by" row may move, latest first
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const uint32_t k = heap.back();
    heap.pop_back();
    if (settled_at_[k] == epoch_) continue;
    settled_at_[k] = epoch_;
    const uint32_t row = recomputed_[k] ? space_.made_by_row(k, recomputed_, made_by_, false) : Var::kNoRow;
    if (row == made_by_[k]) continue;
    made_by_[k] = row;
    if (changed_at_[k] != epoch_) {
      changed_at_[k] = epoch_;
      changed.push_back(k);
    }
    // What k reads takes its row from k's only while recomputed.
    for (uint32_t d : space_.deps()[k]) {
      if (!recomputed_[d] || settled_at_[d] == epoch_) continue;
      heap.push_back(d);
      std::push_heap(heap.begin(), heap.end());
    }
  }
  for (uint32_t j : changed)
    readers_of(j, [&](uint32_t k) {
      if (refreshed_at_[k] == epoch_) return;
      refreshed_at_[k] = epoch_;
      refresh(k);
    });
}

}  // namespace remat::optimize
