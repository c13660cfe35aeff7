// optimize/fast.cc — fast's priced min-cuts, local search and corrections.
// Contract: optimize/fast.h.
#include "optimize/fast.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "decide/maxflow.h"
#include "optimize/checkpoint.h"
#include "optimize/rows.h"
#include "optimize/torch_plans.h"

namespace remat::optimize {
namespace {

// One fast search: the cuts' network, built by the first cut, and the
// effort the space's size gets.
class Fast {
 public:
  explicit Fast(Search& s)
      : s_(s), space_(s.space()), limit_(s.limit()),
        effort_(space_.vars().size() <= static_cast<size_t>(kPolishVars)       ? kSmallSpaceEffort
                : space_.vars().size() <= static_cast<size_t>(kLargeSpaceVars) ? kMidSpaceEffort
                                                                               : kLargeSpaceEffort),
        kept_(kept_bytes(space_)), unit_(byte_price(space_)), torch_candidates_(s.ctx()) {}

 private:
  // The min-cut over the space where recomputing var k costs its estimate
  // and saving it costs save_cost[k] (both in estimator units): the plan
  // minimizing their sum (space.h's validity as infinite edges).
  std::optional<std::vector<uint8_t>> priced_cut(const std::vector<double>& save_cost) const {
    const auto& vars = space_.vars();
    const auto& deps = space_.deps();
    const size_t n = vars.size();
    double total = 0;
    for (size_t k = 0; k < n; ++k) total += vars[k].cost + save_cost[k];
    // Capacities stay far below 2^62 whatever the units; the +1 on each
    // finite edge breaks ties toward fewer recomputations and saves.
    const double unit = total > 0 ? 1e12 / total : 0;
    const uint32_t src = 0, snk = 1;
    auto in = [](size_t k) { return static_cast<uint32_t>(2 + 2 * k); };
    auto out = [](size_t k) { return static_cast<uint32_t>(3 + 2 * k); };
    // The network's edges are the same for every cut of the search (a
    // value no longer saveable or recomputable only turns its edge
    // infinite; the sink edge of a value not needed is there, at 0): built
    // once, in one add_edges call, and given each cut's capacities (on
    // 10^4-node graphs building it cost about a fifth of a cut).
    std::vector<int64_t>& cap = priced_cap_;
    cap.clear();
    for (size_t k = 0; k < n; ++k) {
      const Var& v = vars[k];
      cap.push_back(v.can_recompute ? std::llround(v.cost * unit) + 1 : MaxFlow::kInfinite);
      cap.push_back(v.can_save ? std::llround(save_cost[k] * unit) + 1 : MaxFlow::kInfinite);
      cap.push_back(v.needed ? MaxFlow::kInfinite : 0);
      cap.insert(cap.end(), deps[k].size(), MaxFlow::kInfinite);
    }
    if (!priced_net_) {
      std::vector<uint32_t> tail, head;
      for (size_t k = 0; k < n; ++k) {
        for (uint32_t u : {src, in(k), out(k)}) tail.push_back(u);
        for (uint32_t w : {in(k), out(k), snk}) head.push_back(w);
        for (uint32_t u : deps[k]) {
          tail.push_back(out(u));
          head.push_back(in(k));
        }
      }
      priced_net_.emplace(static_cast<uint32_t>(2 + 2 * n));
      priced_net_->add_edges(tail, head, cap);
    } else {
      priced_net_->set_capacities(cap);
    }
    MaxFlow& flow = *priced_net_;
    s_.count_cut();
    if (!flow.run(src, snk)) return std::nullopt;  // nothing valid exists
    const std::vector<uint8_t> side = flow.source_side(CutSide::kSinkMinimal);
    std::vector<uint8_t> saved(n, 0);
    for (size_t k = 0; k < n; ++k) saved[k] = side[in(k)] && !side[out(k)];
    return saved;
  }

  // Per var, the bytes saving it keeps: its own, or for a view or alias
  // (0 bytes of its own) its root's storage, which saving it keeps alive
  // as saving the root would. The cut counts a root saved with its views
  // more than once: it then prefers saving one of them, as memory does.
  // (Bytes and aliases never change during a search: computed once.)
  static std::vector<int64_t> kept_bytes(const PlanSpace& space) {
    const auto& vars = space.vars();
    std::vector<int64_t> kept(vars.size());
    for (size_t k = 0; k < vars.size(); ++k) kept[k] = vars[k].bytes;
    for (size_t k = 0; k < vars.size(); ++k)
      for (uint32_t a : vars[k].aliases) kept[a] = std::max(kept[a], vars[k].bytes);
    return kept;
  }

  // Estimator units per byte that make all bytes weigh as much as all costs
  // (costs and bytes never change during a search: computed once).
  static double byte_price(const PlanSpace& space) {
    double cost = 0, bytes = 0;
    for (const Var& v : space.vars()) {
      cost += v.cost;
      bytes += static_cast<double>(v.bytes);
    }
    return bytes > 0 ? std::max(cost, 1.0) / bytes : 0;
  }

  // How far a plan's model rows exceed their targets (<= 0: it fits).
  static int64_t excess(const std::vector<int64_t>& values, const Targets& targets) {
    int64_t worst = std::numeric_limits<int64_t>::min();
    for (size_t r = 0; r < values.size(); ++r) worst = std::max(worst, values[r] - targets[r]);
    return values.empty() ? 0 : worst;
  }

  // A cut's plan and what the model says of it, whatever the targets.
  struct Cut {
    std::vector<uint8_t> saved;   // the cut's saved flags
    double cost = 0;              // the plan's least recompute (implied_recompute)
    std::vector<int64_t> values;  // its model rows (row_values)
  };

  // The cut at `save_cost` with its model; nullopt when no valid plan exists
  // or the cut's is invalid.
  std::optional<Cut> model_cut(const std::vector<double>& save_cost) const {
    std::optional<std::vector<uint8_t>> s = priced_cut(save_cost);
    if (!s) return std::nullopt;
    std::optional<Assignment> a = space_.implied_recompute(*s);
    if (!a) return std::nullopt;
    std::vector<int64_t> values = space_.row_values(a->saved, a->recomputed);
    return Cut{std::move(*s), a->cost, std::move(values)};
  }

  // What the cuts found: the cheapest plan whose model fits the targets,
  // and the plan exceeding them least.
  struct Found {
    std::optional<std::vector<uint8_t>> fitting;
    double fitting_cost = 0;
    std::optional<std::vector<uint8_t>> closest;
    int64_t closest_excess = 0;
    // The valid plan exceeding the targets least (the cuts' nearest plan
    // on the other side of the limit), and the cheapest valid plan: what
    // mix() takes parts of.
    std::optional<std::vector<uint8_t>> nearest_over;
    int64_t nearest_over_excess = 0;
    std::optional<std::vector<uint8_t>> cheapest;
    double cheapest_cost = 0;
    // Whether the cut's model fits the targets.
    bool offer(const Cut& cut, const Targets& targets) {
      const int64_t e = excess(cut.values, targets);
      if (!closest || e < closest_excess) {
        closest = cut.saved;
        closest_excess = e;
      }
      if (e <= 0 && (!fitting || cut.cost < fitting_cost)) {
        fitting = cut.saved;
        fitting_cost = cut.cost;
      }
      if (e > 0 && (!nearest_over || e < nearest_over_excess)) {
        nearest_over = cut.saved;
        nearest_over_excess = e;
      }
      if (!cheapest || cut.cost < cheapest_cost) {
        cheapest = cut.saved;
        cheapest_cost = cut.cost;
      }
      return e <= 0;
    }
  };

  // The uniform pricing's cut at `price`, kept for the space's generation:
  // a round after one whose plan only corrected the targets (the vars
  // unchanged) asks the same prices again, and the cuts and their models
  // do not depend on the targets.
  const std::optional<Cut>& uniform_cut(double price) const {
    if (uniform_generation_ != space_.generation()) {
      uniform_cuts_.clear();
      uniform_generation_ = space_.generation();
    }
    auto it = uniform_cuts_.find(price);
    if (it != uniform_cuts_.end()) return it->second;
    std::vector<double> save_cost(space_.vars().size());
    for (size_t k = 0; k < save_cost.size(); ++k) save_cost[k] = price * unit_ * static_cast<double>(kept_[k]);
    return uniform_cuts_.emplace(price, model_cut(save_cost)).first->second;
  }

  // One price per byte for every saved value, bisected in log space.
  void uniform_prices(const Targets& targets, Found& found) const {
    auto at = [&](double price) {
      const std::optional<Cut>& cut = uniform_cut(price);
      return cut && found.offer(*cut, targets);
    };
    // The model's peak is not monotone in the price: the dearest saves
    // recompute long chains whose values the backward rows hold. So a
    // grid of prices first, then the bisection between the cheapest price
    // that fits and the grid point below it.
    if (at(kLowPrice)) return;
    const double first = std::log(kLowPrice);
    const double step_size = (std::log(kHighPrice) - first) / kPriceGrid;
    int i = 1;
    while (i <= kPriceGrid && !at(std::exp(first + step_size * i))) ++i;
    if (i > kPriceGrid) return;  // nothing on the grid fits
    double lo = first + step_size * (i - 1), hi = first + step_size * i;
    for (int step = 0; step < effort_.bisect_steps; ++step) {
      const double mid = 0.5 * (lo + hi);
      (at(std::exp(mid)) ? hi : lo) = mid;
    }
  }

  // A price per memory row (Lagrange multipliers of the rows), raised where
  // a row exceeds its target and lowered where it has room (a projected
  // subgradient step); a saved value pays the prices of the rows it is
  // alive in. Each step is one cut.
  void row_prices(const Targets& targets, Found& found) const {
    const auto& rows = space_.rows();
    const auto& vars = space_.vars();
    const double unit = unit_;
    if (rows.empty() || unit == 0 || limit_ <= 0) return;
    std::vector<double> mu(rows.size(), 0), prefix(rows.size() + 1, 0);
    const uint32_t between = space_.between();
    for (int step = 0; step < effort_.price_steps; ++step) {
      for (size_t r = 0; r < rows.size(); ++r) prefix[r + 1] = prefix[r] + mu[r];
      std::vector<double> save_cost(vars.size());
      for (size_t k = 0; k < vars.size(); ++k) {
        const Var& v = vars[k];
        const double fw = prefix[between + 1] - prefix[v.saved_from];
        const double bw = v.saved_to > between + 1 ? prefix[v.saved_to] - prefix[between + 1] : 0;
        save_cost[k] = static_cast<double>(kept_[k]) * (fw + bw);
      }
      const std::optional<Cut> cut = model_cut(save_cost);
      if (!cut) return;
      found.offer(*cut, targets);
      const std::vector<int64_t>& values = cut->values;
      if (values.empty()) return;
      const double size = 2.0 * std::pow(0.93, step);
      for (size_t r = 0; r < rows.size(); ++r) {
        const double e = static_cast<double>(values[r] - targets[r]) / static_cast<double>(limit_);
        mu[r] = std::max(0.0, mu[r] + size * unit * e);
      }
    }
  }

  // Local search from a fitting plan: each of the effort's greedy_saves
  // costliest recomputed values is saved instead if the model still fits;
  // if it does not, with the one saved value recomputed instead (among the
  // swap_candidates largest) that makes it fit at the least cost, when
  // that still costs less. Each try is a move of a kept plan (rows.h), its
  // cost compared by the change it makes, and taken back unless kept.
  std::vector<uint8_t> greedy_saves(std::vector<uint8_t> saved, const Targets& targets) const {
    std::optional<Assignment> a = space_.implied_recompute(saved);
    if (!a) return saved;
    saved = a->saved;
    const auto& vars = space_.vars();
    std::vector<uint32_t> order;
    for (uint32_t k = 0; k < a->recomputed.size(); ++k)
      if (a->recomputed[k] && vars[k].can_save && vars[k].cost > 1) order.push_back(k);
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t x, uint32_t y) { return vars[x].cost > vars[y].cost; });
    if (order.size() > static_cast<size_t>(effort_.greedy_saves)) order.resize(effort_.greedy_saves);
    PlanRows rows(space_, saved, targets, limit_);
    auto fits = [&] { return rows.valid() && rows.excess() <= 0 && rows.excess_before() <= 0; };
    auto set = [&](uint32_t k, uint8_t flag) {
      const uint32_t var[] = {k};
      const uint8_t to[] = {flag};
      return rows.move(var, to);
    };
    for (uint32_t k : order) {
      if (saved[k]) continue;
      const double with_k = set(k, 1);  // the cost's change: < 0 is cheaper
      if (!rows.valid() || with_k >= 0) {
        set(k, 0);
        continue;
      }
      if (fits()) {
        saved[k] = 1;
        continue;
      }
      std::vector<uint32_t> drops;
      for (uint32_t d = 0; d < saved.size(); ++d)
        if (saved[d] && d != k && vars[d].can_recompute && vars[d].bytes > 0) drops.push_back(d);
      std::stable_sort(drops.begin(), drops.end(),
                       [&](uint32_t x, uint32_t y) { return vars[x].bytes > vars[y].bytes; });
      if (drops.size() > static_cast<size_t>(effort_.swap_candidates)) drops.resize(effort_.swap_candidates);
      std::optional<uint32_t> best;
      double best_change = 0;  // against the plan without k
      for (uint32_t d : drops) {
        // Recomputing a saved (so needed) value adds at least its own cost
        // (move() only adds costs here: nothing stops being recomputed), so
        // a drop whose own cost cannot beat the best change is not tried.
        if (rows.saved()[d] && with_k + vars[d].cost >= best_change) continue;
        const double change = with_k + set(d, 0);
        if (change < best_change && fits()) {
          best = d;
          best_change = change;
        }
        set(d, 1);
      }
      set(k, 0);
      if (best) {
        set(k, 1);
        set(*best, 0);
        saved[k] = 1;
        saved[*best] = 0;
      }
    }
    return saved;
  }

  // Takes parts of a cheaper plan into a fitting one. The vars where the
  // two plans differ (saved or recomputed) fall into components, joined
  // where one reads another; each component is a move of its own: the
  // plan with that component as `cheaper` has it. Moves go cheapest per
  // byte first; each one the model still fits is kept, and the plan after
  // it appended to `steps` (which starts with the fitting plan).
  //
  // Why: one price per byte gives the same trade in every repeated layer
  // (every layer recomputes its attention, or none does), so between two
  // prices lies a limit that half the layers' trade reaches, and the cut
  // cannot make it; nor can the local search's single values, when a
  // multi-output op's getitems must all be saved for it not to be
  // recomputed. A component is such a layer's trade.
  void mix(std::vector<std::vector<uint8_t>>& steps, const std::vector<uint8_t>& cheaper,
           const Targets& targets) const {
    std::optional<Assignment> f = space_.implied_recompute(steps.back());
    std::optional<Assignment> c = space_.implied_recompute(cheaper);
    if (!f || !c || c->cost >= f->cost) return;
    const auto& vars = space_.vars();
    const size_t n = vars.size();
    std::vector<uint32_t> parent(n);
    for (uint32_t k = 0; k < n; ++k) parent[k] = k;
    auto root = [&](uint32_t k) {
      while (parent[k] != k) k = parent[k] = parent[parent[k]];
      return k;
    };
    auto differs = [&](uint32_t k) { return f->saved[k] != c->saved[k] || f->recomputed[k] != c->recomputed[k]; };
    for (uint32_t k = 0; k < n; ++k) {
      if (!differs(k)) continue;
      for (uint32_t d : space_.deps()[k])
        if (differs(d)) parent[root(d)] = root(k);
    }
    // Per component: its vars, and what the move would gain (recompute
    // saved) and cost (bytes newly saved), from the vars' own figures.
    struct Move {
      std::vector<uint32_t> vars;
      double gain = 0;
      int64_t bytes = 0;
    };
    std::vector<Move> moves;
    std::vector<int> move_of(n, -1);
    for (uint32_t k = 0; k < n; ++k) {
      if (!differs(k)) continue;
      const uint32_t r = root(k);
      if (move_of[r] < 0) {
        move_of[r] = static_cast<int>(moves.size());
        moves.emplace_back();
      }
      Move& m = moves[move_of[r]];
      m.vars.push_back(k);
      m.gain += (f->recomputed[k] ? vars[k].cost : 0) - (c->recomputed[k] ? vars[k].cost : 0);
      m.bytes += (c->saved[k] ? vars[k].bytes : 0) - (f->saved[k] ? vars[k].bytes : 0);
    }
    if (moves.size() < 2) return;  // the one move is the cheaper plan, which does not fit
    std::erase_if(moves, [](const Move& m) { return m.gain <= 0; });
    auto per_byte = [](const Move& m) { return m.gain / static_cast<double>(std::max<int64_t>(m.bytes, 1)); };
    std::stable_sort(moves.begin(), moves.end(),
                     [&](const Move& x, const Move& y) { return per_byte(x) > per_byte(y); });
    if (moves.size() > static_cast<size_t>(kMixMoves)) moves.resize(kMixMoves);
    // Each move is judged by the plan it implies (cheaper, its rows within
    // the targets, the instants before backward nodes within the limit),
    // on a plan and rows kept up to date rather than found anew: a move
    // changes a few vars of thousands.
    std::vector<uint8_t> plan = f->saved;
    PlanRows rows(space_, plan, targets, limit_);
    std::vector<uint8_t> to, back;
    for (const Move& m : moves) {
      to.clear();
      back.clear();
      for (uint32_t k : m.vars) {
        to.push_back(c->saved[k]);
        back.push_back(plan[k]);
      }
      const double delta = rows.move(m.vars, to);
      if (rows.valid() && delta < 0 && rows.excess() <= 0 && rows.excess_before() <= 0) {
        for (uint32_t k : m.vars) plan[k] = c->saved[k];
        steps.push_back(plan);
      } else {
        rows.move(m.vars, back);
      }
    }
  }

  // The last of mix()'s steps that fits when built: the model is a lower
  // bound and mix() trusts it, so the steps are searched by builds (at
  // most kMixBuilds, and no more after kSettleMisses in a row that did not
  // fit), the first step taken to fit. The cheapest step is built first,
  // then the steps are halved until a build fits; from then on each build
  // is the last step left that the chained model puts within the limit
  // less the gap the fitting build showed (its simulated peak less its
  // chained peak), and the search ends when no step left is: along one
  // mix's steps past a fitting one the gap holds nearly constant (the same
  // recomputations' intermediates, layer after layer), so this finds in
  // one or two builds what halving found in three or four. A step so
  // chosen that does not fit shows the gap is not constant there: from
  // then on the steps are halved. (The cheapest step's own gap is no
  // guide: on transformer_1995 it read four times the others'.) Past the
  // polish's spaces a step the chained model puts over the limit is a miss
  // without its build (fast.h): most misses were such steps (2 to 6 of the
  // builds at each limit fast was slowest at), and halving takes the same
  // path while that model is a lower bound.
  std::vector<uint8_t> settle(const std::vector<std::vector<uint8_t>>& steps) {
    const bool screen = space_.vars().size() > static_cast<size_t>(kPolishVars);
    size_t lo = 0, hi = steps.size();  // steps[lo] taken to fit; steps[hi..] do not
    int misses = 0;  // steps in a row that did not fit
    std::optional<int64_t> gap;  // steps[lo]'s simulated less chained peak, once built here
    bool guided = true;          // whether the gap chooses the next step
    std::vector<std::optional<int64_t>> chained(steps.size());
    auto predicted_fit = [&](size_t i) {
      if (!chained[i]) {
        std::optional<Assignment> a = space_.implied_recompute(steps[i]);
        chained[i] = space_.chained_peak(a ? a->saved : steps[i]);
      }
      return *chained[i] + *gap <= limit_;
    };
    for (int build = 0; build < kMixBuilds && hi - lo > 1 && misses < kSettleMisses; ++build) {
      size_t mid = build == 0 ? hi - 1 : lo + (hi - lo) / 2;
      const bool by_gap = guided && gap.has_value();
      if (by_gap) {
        // The last step predicted to fit, halving over (lo, hi): the
        // chained peaks rise along the steps (each saves more).
        size_t a = lo, b = hi;
        while (b - a > 1) {
          const size_t m = a + (b - a) / 2;
          (predicted_fit(m) ? a : b) = m;
        }
        if (a == lo) break;  // no step left is predicted to fit
        mid = a;
      }
      Verdict v;
      if (!(screen && s_.over_by_chained_model(steps[mid]))) v = s_.evaluate(steps[mid]);
      if (v.fits) gap = v.peak - v.chained;
      if (by_gap && !v.fits) guided = false;
      (v.fits ? lo : hi) = mid;
      misses = v.fits ? 0 : misses + 1;
    }
    return steps[lo];
  }

 public:
  // fast's search. After a plan that does not fit, two corrections for
  // what the model does not see (recomputations' own intermediates, values
  // alive until a recomputation reads them): each row's target drops by
  // the amount the simulation exceeded the model there, and the largest
  // storages alive at the simulated peak change sides for the rest of the
  // search (a value the backward recomputed is saved, a saved value
  // recomputed). Both narrow fast's search only; exact searches the whole
  // space afterwards.
  //
  // On spaces past kLargeSpaceVars torch's plans run first instead of last:
  // their builds give the targets the corrections a first round's build
  // would, for builds the search makes anyway, and one round of cuts
  // (kLargeSpaceEffort) then tries to beat the plan they found. When none
  // of torch's plans fits, the checkpointed plans (checkpoint.h)
  // before torch's repair path: on a deep stack only they reach far below
  // torch's plans, and the repair path costs a build per move.
  void run() {
    const std::vector<Var> whole = space_.vars();
    Targets targets(space_.rows().size(), limit_);
    const bool large = space_.vars().size() > static_cast<size_t>(kLargeSpaceVars);
    bool checkpointed = false;
    bool repaired = false;  // torch's repair path found the plan (large spaces)
    std::optional<std::vector<uint8_t>> cheapest;  // the rounds' cheapest cut
    int64_t overshoot = -1;  // the last model-fitting round's built peak (over the limit)
    if (large) {
      torch_plans(s_, &targets, /*repairs=*/false, &torch_candidates_);
      if (!s_.best() && s_.smallest_peak() < 0) torch_repair_start(s_, &targets, &torch_candidates_);
      if (!s_.best()) checkpointed = checkpoints(s_);
      if (!s_.best()) {
        torch_plans(s_, &targets, /*repairs=*/true, &torch_candidates_);
        repaired = s_.best().has_value();
      }
    }
    // A checkpointed plan is final: the round's cuts price what plans save,
    // not the long recomputed chains that set these plans' peaks, so what
    // they offer below the checkpointed plan's recompute overshoots.
    // A plan recomputing nothing (the plain plan at its own peak) is final
    // too: nothing recomputes less. So is, for the rounds, a plan only
    // torch's repair path reached: the limit lies below every plan of
    // torch's and every checkpointed one, and at the four limits of
    // docs/scale.md where that happened the rounds' cuts offered nothing
    // to build (their plans' model costs were no lower than the repaired
    // plan's recompute) for about a third of fast's time. The last mix
    // below still runs, from the cheapest cut alone.
    if (repaired)
      if (const std::optional<Cut>& cut = uniform_cut(kLowPrice)) cheapest = cut->saved;
    for (int round = 0; round < effort_.rounds && !checkpointed && !repaired && !s_.best_is_free(); ++round) {
      Found found;
      uniform_prices(targets, found);
      if (!found.fitting || found.fitting_cost > 0) row_prices(targets, found);
      std::optional<std::vector<uint8_t>> plan = found.closest;
      if (found.fitting) {
        std::vector<std::vector<uint8_t>> steps{*found.fitting};
        for (const auto* cheaper : {&found.nearest_over, &found.cheapest})
          if (*cheaper) mix(steps, **cheaper, targets);
        plan = greedy_saves(settle(steps), targets);
      }
      if (found.cheapest) cheapest = found.cheapest;
      if (!plan || !could_beat_best(*plan)) break;
      // A model-fitting plan the chained model puts over the limit cannot
      // fit: its build would only correct the targets, which that model's
      // rows do instead (fast.h).
      Verdict v;
      if (found.fitting && screens_round_plans(large) && s_.over_by_chained_model(*plan)) {
        v.rows = space_.chained_rows(*plan);
        v.peak = v.rows.empty() ? 0 : *std::max_element(v.rows.begin(), v.rows.end());
      } else {
        v = s_.evaluate(*plan);
        if (v.fits) break;
        if (v.hazards) continue;
      }
      // A model-fitting plan that built no lower than the last one: the
      // corrections are not closing in (a deeper stack's plans recompute
      // longer chains with each lower target, and the model misses more
      // of them each time: on resnet_1991 at its smallest peak the built
      // peaks rose 5.79, 5.92, 6.18 ... MB as the targets fell). No later
      // round would fit either.
      if (found.fitting && overshoot >= 0 && v.peak >= overshoot) break;
      if (found.fitting) overshoot = v.peak;
      correct(space_, *plan, v, limit_, targets);
      if (!found.fitting && !repair(*plan, v)) break;
    }
    space_.restore(whole);
    for (uint32_t k : s_.hazardous()) space_.forbid_save(k);
    // torch's plans, so fast is never worse than they are: the whole
    // search on the polish's spaces, or without a plan in hand. Past the
    // polish's spaces, with one, screened (the chained model, and fast's
    // recompute as a ceiling) and without their repair path: its moves
    // cost a build each and, on the ~2k-node stacks, found no plan cheaper
    // than fast's (the repair path was 40% of fast's time at
    // transformer_1995's tightest limit). The screen assumed the chained
    // model a lower bound; a build that showed otherwise may mean a torch
    // plan that fits went unbuilt: then the whole search runs.
    const bool polished = space_.vars().size() <= static_cast<size_t>(kPolishVars);
    if (s_.best_is_free()) return;
    if (!large && !polished && s_.best()) torch_plans(s_, nullptr, /*repairs=*/false, &torch_candidates_);
    else if (!large) torch_plans(s_, nullptr, /*repairs=*/true, &torch_candidates_);
    if (!s_.chained_bounds() && (large || !polished))
      torch_plans(s_, nullptr, /*repairs=*/true, &torch_candidates_);
    // The best plan, whichever search found it, takes parts of the
    // cheapest plan the cuts found: torch's plans, too, make one trade in
    // every layer. Judged against the corrected targets: what the builds
    // showed the model misses, it misses here too.
    if (s_.best() && cheapest) {
      std::vector<std::vector<uint8_t>> steps{space_.saved_flags(s_.best()->saved)};
      mix(steps, *cheapest, targets);
      if (steps.size() > 1) settle(steps);
    }
  }

 private:
  // Whether a round's plan the chained model puts over the limit is taken
  // as over without its build: on large spaces, and on the others past the
  // polish's while that model has equalled every build's peak (fast.h).
  bool screens_round_plans(bool large) const {
    return large || (space_.vars().size() > static_cast<size_t>(kPolishVars) && s_.chained_gap() == 0);
  }

  // Whether building `saved` could give a plan recomputing less than the
  // best so far: the model's cost is a lower bound of the measured one.
  bool could_beat_best(const std::vector<uint8_t>& saved) const {
    if (!s_.best()) return true;
    std::optional<Assignment> a = space_.implied_recompute(saved);
    return a && a->cost < s_.best()->result.recompute_runtime;
  }

  // Moves the largest storages at the peak to the other side; false when
  // none can move.
  bool repair(const std::vector<uint8_t>& saved, const Verdict& v) {
    std::optional<Assignment> a = space_.implied_recompute(saved);
    if (!a) return false;
    int moved = 0;
    for (const auto& [k, backward] : v.at_peak) {
      if (moved == kFastRepairMoves) break;
      const Var& var = space_.vars()[k];
      if (backward && a->recomputed[k] && var.can_save && var.can_recompute) {
        space_.forbid_recompute(k);
        ++moved;
      } else if (!backward && a->saved[k] && var.can_recompute && var.can_save) {
        space_.forbid_save(k);
        ++moved;
      }
    }
    return moved > 0;
  }

  Search& s_;
  PlanSpace& space_;
  const int64_t limit_;
  const FastEffort effort_;
  const std::vector<int64_t> kept_;  // kept_bytes(space_)
  const double unit_;                // byte_price(space_)
  // priced_cut's network, built by its first cut, and its capacities.
  mutable std::optional<MaxFlow> priced_net_;
  mutable std::vector<int64_t> priced_cap_;
  // uniform_cut's cuts by price, made at the space's uniform_generation_.
  mutable std::map<double, std::optional<Cut>> uniform_cuts_;
  mutable uint64_t uniform_generation_ = std::numeric_limits<uint64_t>::max();
  // torch's candidates, cut once for every torch_plans pass of the search.
  PeakCandidates torch_candidates_;
};

}  // namespace

// Lowers each row's target by what the simulation of `saved` showed
// above the model there.
void correct(const PlanSpace& space, const std::vector<uint8_t>& saved, const Verdict& v, int64_t limit,
             Targets& targets) {
  std::optional<Assignment> a = space.implied_recompute(saved);
  if (!a) return;
  const std::vector<int64_t> model = space.row_values(a->saved, a->recomputed);
  for (size_t r = 0; r < targets.size(); ++r) {
    const int64_t sim = v.rows[r];
    if (sim > model[r]) targets[r] = std::min(targets[r], limit - (sim - model[r]));
  }
}

void fast(Search& s) { Fast(s).run(); }

}  // namespace remat::optimize
