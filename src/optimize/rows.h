// optimize/rows.h — a plan and its model rows kept up to date while the
// plan changes a little at a time (fast's mix() tries hundreds of moves,
// each a few vars of a 10^4-var plan).
//
// Contract:
//  * PlanRows holds a requested saved set S (as fast's searches hand plans
//    around: flags per var, before implied_recompute prunes them) and, after
//    every move(), exactly what PlanSpace::implied_recompute(S) gives:
//    valid() is whether it gives a plan; saved()/recomputed() its flags
//    (meaningful when valid). A var is recomputed when it is not in S and
//    something needs it: it is needed, or a recomputed var reads it (a count
//    per var of those, kept as vars change sides: the graph is acyclic, so
//    the counts settle to the one fixed point implied_recompute's closure
//    finds); it is saved when in S and so needed.
//  * move() returns the change of the plan's recompute cost (the costs of
//    the vars that changed sides, summed in the order they changed): the
//    plan is cheaper exactly when it is negative, up to rounding of sums
//    that implied_recompute adds in another order.
//  * Its rows equal what PlanSpace::values says of the plan: excess() is
//    the most any row (values(..., before=false)) exceeds its target,
//    excess_before() the most any backward row's instant just before its
//    node (values(..., before=true), rows past between()) exceeds the
//    limit. Exactly: the same VarSpans (PlanSpace::var_spans) and chained
//    terms are summed, not a second model; tests/cpp/test_rows.cc holds
//    every row and flag to implied_recompute and values() after random
//    moves on graphs with views, early chains, in-place and chained terms.
//  * A move costs what it touches, not the plan: the vars that change
//    sides, the recomputed vars whose "made by" row (PlanSpace::made_by_row)
//    changes with them, and the vars whose spans read any of those (their
//    storage's holders, what they read, the roots of views of what they
//    read, the vars whose early chains or chained terms pass through them),
//    each span added to and taken from two range-add / max trees over the
//    rows.
//  * Only the rows' model (all_chains false): chained_peak's variant is not
//    kept here.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "optimize/space.h"

namespace remat::optimize {

class PlanRows {
 public:
  // The plan of requested saved set `requested` (flags per var), its rows
  // against per-row `targets` (size rows()) and `limit` (the instants just
  // before backward nodes).
  PlanRows(const PlanSpace& space, std::span<const uint8_t> requested, std::span<const int64_t> targets,
           int64_t limit);

  // Sets the requested flag of each vars[i] to flags[i]; returns the change
  // of the recompute cost.
  double move(std::span<const uint32_t> vars, std::span<const uint8_t> flags);

  bool valid() const { return invalid_ == 0; }
  const std::vector<uint8_t>& saved() const { return saved_; }
  const std::vector<uint8_t>& recomputed() const { return recomputed_; }

  // The most a row exceeds its target (<= 0: every row fits); 0 without rows.
  int64_t excess() const { return after_.max(); }
  // The most an instant just before a backward node exceeds the limit; the
  // lowest int64 / 4 without backward rows.
  int64_t excess_before() const { return before_.max(); }
  // Row r's value less its target; just before row r's node, less the
  // limit (backward rows only). For tests, which hold them to values().
  int64_t after_row(uint32_t r) const { return after_.leaf(r); }
  int64_t before_row(uint32_t r) const { return before_.leaf(r); }

 private:
  // Range add, global max over [0, n): each node holds its subtree's max
  // including its own pending add (no push-down: only the root and single
  // leaves are read).
  class MaxTree {
   public:
    void init(std::vector<int64_t> leaves);
    void add(uint32_t from, uint32_t to, int64_t delta);
    int64_t max() const { return n_ == 0 ? 0 : max_[1]; }
    int64_t leaf(uint32_t i) const;

   private:
    uint32_t n_ = 0;
    uint32_t size_ = 0;  // leaves, a power of two
    std::vector<int64_t> max_;
    std::vector<int64_t> pending_;
  };

  // The "made by" rows and the spans after the vars in `changed` changed
  // sides.
  void update_rows(std::vector<uint32_t>& changed);
  // Brings var k's spans and owned terms up to the current flags.
  void refresh(uint32_t k);
  void add_spans(const VarSpans& s, int64_t bytes);
  // The vars whose spans or owned terms read var j's state.
  template <class F>
  void readers_of(uint32_t j, F&& visit) const;

  const PlanSpace& space_;
  uint32_t between_ = 0;
  std::vector<uint8_t> requested_, saved_, recomputed_;
  // Per var: 1 when needed, plus each recomputed var reading it (as often
  // as deps() lists it).
  std::vector<uint32_t> count_;
  // Vars breaking validity: requested but not saveable; recomputed but not
  // recomputable.
  int64_t invalid_ = 0;
  std::vector<uint32_t> made_by_;
  std::vector<VarSpans> spans_;  // per var, as last applied
  // Owned row terms: per var, the extra terms of its storage and the
  // chained terms of its var (row, index into that row's list), each with
  // the bytes it counts now.
  struct Owned {
    uint32_t row = 0;
    uint32_t index = 0;
    int64_t counted = 0;
  };
  std::vector<std::vector<Owned>> extra_of_, chained_of_;
  // Inverse indices: the vars whose aliases include j; whose early chains
  // pass through j; whose chained terms' paths pass through j.
  std::vector<std::vector<uint32_t>> alias_roots_, early_of_, chain_owners_;
  MaxTree after_, before_;
  // move()'s scratch: per var, the last move() (epoch) that queued it to
  // take its side, changed its flags or its "made by" row, settled that
  // row, and refreshed its spans.
  std::vector<uint32_t> queued_at_, changed_at_, settled_at_, refreshed_at_;
  uint32_t epoch_ = 0;
};

}  // namespace remat::optimize
