// decide/maxflow.cc — highest-label push-relabel (first phase), gap heuristic,
// global relabeling; the minimum cut by residual reachability. See maxflow.h.
#include "decide/maxflow.h"

#include <algorithm>

#include "remat/error.h"

namespace remat {
namespace {
constexpr uint32_t kNil = std::numeric_limits<uint32_t>::max();
// Capacities past this could overflow a residual once infinity is replaced.
constexpr __int128 kMaxFiniteSum = (static_cast<__int128>(1) << 62);
}  // namespace

void MaxFlow::add_edges(std::span<const uint32_t> tail, std::span<const uint32_t> head,
                        std::span<const int64_t> cap) {
  if (head.size() != tail.size() || cap.size() != tail.size())
    throw Error(ErrorCode::kInternal, "MaxFlow::add_edges: lists of different lengths");
  for (size_t e = 0; e < tail.size(); ++e) {
    if (tail[e] >= n_ || head[e] >= n_ || cap[e] < 0)
      throw Error(ErrorCode::kInternal, "MaxFlow: an edge with a bad vertex or a negative capacity");
  }
  tail_.insert(tail_.end(), tail.begin(), tail.end());
  head_.insert(head_.end(), head.begin(), head.end());
  cap_.insert(cap_.end(), cap.begin(), cap.end());
  arcs_built_ = false;
}

void MaxFlow::set_capacities(std::span<const int64_t> cap) {
  if (cap.size() != cap_.size())
    throw Error(ErrorCode::kInternal, "MaxFlow::set_capacities: not one capacity per edge");
  for (int64_t c : cap)
    if (c < 0) throw Error(ErrorCode::kInternal, "MaxFlow: a negative capacity");
  cap_.assign(cap.begin(), cap.end());
  ran_ = false;
}

uint32_t MaxFlow::add_edge(uint32_t u, uint32_t v, int64_t capacity) {
  add_edges({&u, 1}, {&v, 1}, {&capacity, 1});
  return static_cast<uint32_t>(tail_.size() - 1);
}

bool MaxFlow::has_infinite_path(uint32_t s, uint32_t t) {
  // Over the forward arcs of infinite edges only.
  std::vector<uint8_t> seen(n_, 0);
  queue_.clear();
  queue_.push_back(s);
  seen[s] = 1;
  for (size_t i = 0; i < queue_.size(); ++i) {
    uint32_t u = queue_[i];
    for (uint32_t a = first_[u]; a < first_[u + 1]; ++a) {
      const uint32_t e = arc_edge_[a];
      if (e == kNoEdge || cap_[e] != kInfinite) continue;
      uint32_t w = arc_head_[a];
      if (w == t) return true;
      if (!seen[w]) {
        seen[w] = 1;
        queue_.push_back(w);
      }
    }
  }
  return false;
}

void MaxFlow::build_arcs() {
  first_.assign(n_ + 1, 0);
  for (size_t e = 0; e < tail_.size(); ++e) {
    if (tail_[e] == head_[e]) continue;
    ++first_[tail_[e] + 1];
    ++first_[head_[e] + 1];
  }
  for (uint32_t v = 0; v < n_; ++v) first_[v + 1] += first_[v];
  size_t m = first_[n_];
  arc_head_.assign(m, 0);
  arc_rev_.assign(m, 0);
  arc_edge_.assign(m, kNoEdge);
  std::vector<uint32_t> pos(first_.begin(), first_.end() - 1);
  for (size_t e = 0; e < tail_.size(); ++e) {
    uint32_t u = tail_[e], v = head_[e];
    if (u == v) continue;
    uint32_t a = pos[u]++, b = pos[v]++;
    arc_head_[a] = v;
    arc_head_[b] = u;
    arc_rev_[a] = b;
    arc_rev_[b] = a;
    arc_edge_[a] = static_cast<uint32_t>(e);
  }
  arcs_built_ = true;
}

void MaxFlow::fill_residuals(int64_t inf_value) {
  res_.resize(arc_head_.size());
  for (size_t a = 0; a < res_.size(); ++a) {
    const uint32_t e = arc_edge_[a];
    res_[a] = e == kNoEdge ? 0 : cap_[e] == kInfinite ? inf_value : cap_[e];
  }
}

bool MaxFlow::run(uint32_t s, uint32_t t) {
  if (s >= n_ || t >= n_ || s == t)
    throw Error(ErrorCode::kInternal, "MaxFlow::run: bad source or sink");
  s_ = s;
  t_ = t;
  ran_ = true;
  flow_value_ = 0;
  if (tail_.size() >= kNoEdge) throw Error(ErrorCode::kUnsupported, "MaxFlow: more than 2^32 - 1 edges");
  if (!arcs_built_) build_arcs();
  if (has_infinite_path(s, t)) {
    bounded_ = false;
    return false;
  }
  bounded_ = true;

  __int128 finite_sum = 0;
  for (size_t e = 0; e < cap_.size(); ++e)
    if (cap_[e] != kInfinite) finite_sum += cap_[e];
  if (finite_sum >= kMaxFiniteSum)
    throw Error(ErrorCode::kUnsupported,
                "min-cut capacities too large: their sum exceeds 2^62");
  fill_residuals(static_cast<int64_t>(finite_sum) + 1);

  excess_.assign(n_, 0);
  label_.assign(n_, 0);
  current_.assign(first_.begin(), first_.end() - 1);
  active_head_.assign(n_ + 1, kNil);
  active_next_.assign(n_, kNil);
  all_head_.assign(n_ + 1, kNil);
  all_next_.assign(n_, kNil);
  all_prev_.assign(n_, kNil);
  // Global relabeling after about twice the relabel work one BFS costs.
  // Measured (docs/performance_maxflow.md): at 6n + m/2, half of this, the
  // BFSes dominated the optimizer's priced networks (up to 55 ms a cut on
  // 12k vertices, at most 4.3 ms now), and every partition family ran
  // 0-40% slower.
  relabel_threshold_ = 12ull * n_ + first_[n_];
  work_ = 0;

  // Saturate every arc out of the source.
  for (uint32_t a = first_[s]; a < first_[s + 1]; ++a) {
    int64_t r = res_[a];
    if (r == 0) continue;
    res_[a] = 0;
    res_[arc_rev_[a]] += r;
    excess_[arc_head_[a]] += r;
    excess_[s] -= r;
  }
  global_relabel();

  while (max_active_ >= 1) {
    uint32_t v = active_head_[max_active_];
    if (v == kNil) {
      --max_active_;
      continue;
    }
    active_head_[max_active_] = active_next_[v];
    // Stale entries: vertices a gap relabeled to n stay in the stacks.
    if (label_[v] != max_active_ || excess_[v] == 0) continue;
    discharge(v);
    if (work_ > relabel_threshold_) {
      work_ = 0;
      global_relabel();
    }
  }
  flow_value_ = static_cast<int64_t>(excess_[t]);
  return true;
}

void MaxFlow::bucket_insert(uint32_t v, int32_t label) {
  uint32_t h = all_head_[label];
  all_next_[v] = h;
  all_prev_[v] = kNil;
  if (h != kNil) all_prev_[h] = v;
  all_head_[label] = v;
  if (label > max_all_) max_all_ = label;
}

void MaxFlow::bucket_remove(uint32_t v, int32_t label) {
  uint32_t p = all_prev_[v], x = all_next_[v];
  if (p != kNil) all_next_[p] = x; else all_head_[label] = x;
  if (x != kNil) all_prev_[x] = p;
}

void MaxFlow::push_active(uint32_t v, int32_t label) {
  active_next_[v] = active_head_[label];
  active_head_[label] = v;
  if (label > max_active_) max_active_ = label;
}

void MaxFlow::global_relabel() {
  // Exact distances to t in the residual network; unreachable vertices get n
  // and leave the first phase for good.
  const int32_t n = static_cast<int32_t>(n_);
  std::fill(label_.begin(), label_.end(), n);
  std::fill(active_head_.begin(), active_head_.end(), kNil);
  std::fill(all_head_.begin(), all_head_.end(), kNil);
  max_active_ = -1;
  max_all_ = -1;
  queue_.clear();
  label_[t_] = 0;
  queue_.push_back(t_);
  for (size_t i = 0; i < queue_.size(); ++i) {
    uint32_t u = queue_[i];
    int32_t next = label_[u] + 1;
    for (uint32_t a = first_[u]; a < first_[u + 1]; ++a) {
      uint32_t w = arc_head_[a];
      if (label_[w] != n || w == s_ || res_[arc_rev_[a]] == 0) continue;
      label_[w] = next;
      queue_.push_back(w);
      current_[w] = first_[w];
      bucket_insert(w, next);
      if (excess_[w] > 0) push_active(w, next);
    }
  }
}

void MaxFlow::discharge(uint32_t v) {
  const int32_t n = static_cast<int32_t>(n_);
  int32_t dv = label_[v];
  for (;;) {
    uint32_t end = first_[v + 1];
    uint32_t a = current_[v];
    for (; a < end; ++a) {
      if (res_[a] == 0) continue;
      uint32_t w = arc_head_[a];
      if (label_[w] != dv - 1) continue;
      int64_t delta = excess_[v] < res_[a] ? static_cast<int64_t>(excess_[v]) : res_[a];
      res_[a] -= delta;
      res_[arc_rev_[a]] += delta;
      bool was_idle = excess_[w] == 0;
      excess_[w] += delta;
      excess_[v] -= delta;
      if (was_idle && w != t_) push_active(w, label_[w]);
      if (excess_[v] == 0) break;
    }
    if (excess_[v] == 0) {
      current_[v] = a;
      return;
    }
    // Relabel. If v was the last vertex with its label, nothing above that
    // label can reach t any more (gap): drop all of them, v included.
    bucket_remove(v, dv);
    if (all_head_[dv] == kNil) {
      for (int32_t k = dv + 1; k <= max_all_; ++k) {
        for (uint32_t u = all_head_[k]; u != kNil; u = all_next_[u]) label_[u] = n;
        all_head_[k] = kNil;
      }
      max_all_ = dv - 1;
      label_[v] = n;
      return;
    }
    int32_t best = n;
    for (uint32_t b = first_[v]; b < end; ++b)
      if (res_[b] > 0 && label_[arc_head_[b]] < best) best = label_[arc_head_[b]];
    work_ += 12 + (end - first_[v]);
    if (best + 1 >= n) {
      label_[v] = n;
      return;
    }
    dv = best + 1;
    label_[v] = dv;
    current_[v] = first_[v];
    bucket_insert(v, dv);
  }
}

std::vector<uint8_t> MaxFlow::reaches_sink() const {
  std::vector<uint8_t> reach(n_, 0);
  std::vector<uint32_t> queue{t_};
  reach[t_] = 1;
  for (size_t i = 0; i < queue.size(); ++i) {
    uint32_t u = queue[i];
    for (uint32_t a = first_[u]; a < first_[u + 1]; ++a) {
      uint32_t w = arc_head_[a];
      if (!reach[w] && res_[arc_rev_[a]] > 0) {
        reach[w] = 1;
        queue.push_back(w);
      }
    }
  }
  return reach;
}

std::vector<uint8_t> MaxFlow::source_side(CutSide side) const {
  if (!ran_ || !bounded_)
    throw Error(ErrorCode::kInternal, "MaxFlow::source_side: no bounded flow computed");
  if (side == CutSide::kSinkMinimal) {
    std::vector<uint8_t> out = reaches_sink();
    for (auto& x : out) x = !x;
    return out;
  }
  // The source-minimal cut of G is the sink-minimal cut of G reversed (with s
  // and t swapped): vertices reachable from s in G's residual network are
  // those that reach s in the reversed one.
  MaxFlow rev(n_);
  rev.tail_ = head_;
  rev.head_ = tail_;
  rev.cap_ = cap_;
  rev.run(t_, s_);
  return rev.reaches_sink();
}

}  // namespace remat
