// optimize/exact.cc — the MILP with lazy rows and no-good cuts, and the
// smallest-peak search. Contract: optimize/exact.h.
#include "optimize/exact.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace remat::optimize {
namespace {

// The MILP searches over one Search's space.
class Exact {
 public:
  Exact(Search& s, MemoryRows rows) : s_(s), space_(s.space()), limit_(s.limit()), rows_(rows) {}

 private:
  struct Program {
    Milp milp;
    std::vector<int> s, r;  // per var
    // Columns made once and shared by the rows that need them (-1: none
    // yet): per var its held storage (holds) and early-chain segments
    // (alive), per row its chained terms, per row and var made_late.
    std::vector<int> held;
    std::vector<std::vector<int>> z;
    std::vector<std::vector<int>> chained;
    std::map<uint32_t, std::vector<int>> made_late;
    std::vector<int> finite;  // per var, made_finite
    // The saved sets cut_by_model cut off (flags_key).
    std::set<std::string> lazily_cut;
    // Per backward row, the vars with bytes its node reads first.
    std::vector<std::vector<uint32_t>> first_reads;
    // Lazy memory rows: per instant (memory_rows' index), whether its row
    // was asked for (added, or found unable to exceed); `lazy` while some
    // are held back.
    std::vector<uint8_t> present;
    bool lazy = false;

    const std::vector<uint32_t>& first_read(const PlanSpace& space, uint32_t row) {
      if (first_reads.empty()) {
        first_reads.resize(space.rows().size());
        for (uint32_t k = 0; k < space.vars().size(); ++k) {
          const Var& v = space.vars()[k];
          if (v.bytes > 0 && v.first_row != Var::kNoRow) first_reads[v.first_row].push_back(k);
        }
      }
      return first_reads[row];
    }
  };

  // The whole tie-break toward fewer saved bytes: kTieBreak of the cheapest
  // recomputation, so it decides only between plans of equal recompute
  // whatever the estimator's unit (flops, or measured milliseconds).
  double tie_break() const {
    double cheapest = 0;
    for (const Var& v : space_.vars()) {
      if (v.cost > 0 && (cheapest == 0 || v.cost < cheapest)) cheapest = v.cost;
    }
    return kTieBreak * (cheapest > 0 ? cheapest : 1);
  }

  // The validity rules (space.h) over s and r.
  Program validity() const {
    Program p;
    const auto& vars = space_.vars();
    p.held.assign(vars.size(), -1);
    p.z.resize(vars.size());
    p.chained.resize(space_.rows().size());
    double total_bytes = 0;
    for (const Var& v : vars) total_bytes += static_cast<double>(v.bytes);
    const double tie = total_bytes > 0 ? tie_break() / total_bytes : 0;
    for (const Var& v : vars) {
      p.s.push_back(p.milp.add_binary(tie * static_cast<double>(v.bytes)));
      p.r.push_back(p.milp.add_binary(v.cost));
      if (!v.can_save) p.milp.fix(p.s.back(), 0);
      if (!v.can_recompute) p.milp.fix(p.r.back(), 0);
    }
    for (size_t k = 0; k < vars.size(); ++k) {
      if (vars[k].needed) {
        const int idx[] = {p.s[k], p.r[k]};
        const double one[] = {1, 1};
        p.milp.add_row(idx, one, 1, Milp::kInfinity);
      }
      for (uint32_t u : space_.deps()[k]) {  // r_k <= s_u + r_u
        const int idx[] = {p.r[k], p.s[u], p.r[u]};
        const double c[] = {1, -1, -1};
        p.milp.add_row(idx, c, -Milp::kInfinity, 0);
      }
    }
    // Only what something reads is saved (the extraction prunes the rest):
    // s_k <= sum(r over k's users) for a var nothing needs directly.
    std::vector<std::vector<int>> readers(vars.size());
    for (size_t k = 0; k < vars.size(); ++k)
      for (uint32_t u : space_.deps()[k]) readers[u].push_back(p.r[k]);
    // Likewise only what something needs is recomputed, and nothing is both
    // saved and recomputed: then r is the least recompute set of s
    // (space.h's implied_recompute), each solution one plan.
    for (size_t k = 0; k < vars.size(); ++k) {
      {
        const int idx[] = {p.s[k], p.r[k]};
        const double c[] = {1, 1};
        p.milp.add_row(idx, c, -Milp::kInfinity, 1);
      }
      if (vars[k].needed) continue;
      for (int col : {p.s[k], p.r[k]}) {
        std::vector<int> idx{col};
        std::vector<double> c{1};
        for (int r : readers[k]) {
          idx.push_back(r);
          c.push_back(-1);
        }
        p.milp.add_row(idx, c, -Milp::kInfinity, 0);
      }
    }
    return p;
  }

  // Rows constant + sum(bytes * alive) <= cap (cap: the limit, or the peak
  // variable when `peak_var` >= 0), where alive is s_k, or for a row after
  // var k's j-th early chain a continuous z_kj >= s_k, and >= each chain
  // 0..j's indicator of being entirely recomputed. A row's chained terms
  // (inductor's model: space.h) count through a continuous c >= that
  // indicator, one per term, shared by the row's two instants.
  void memory_rows(Program& p, int64_t cap, int peak_var) const {
    p.present.assign(instants(), 0);
    if (p.lazy) {  // the return's row at once: no lazy round asks for it (exceeding())
      add_row(p, space_.between(), cap, peak_var);
      return;
    }
    for (uint32_t i = 0; i < instants(); ++i)
      if (has_row(i)) add_row(p, i, cap, peak_var);
  }

  // The memory rows' instants, as memory_rows numbers them: i below the
  // number of rows is just after row i's node, rows + r just before
  // backward row r's (the forward's rows and the return's have no such
  // instant: has_row).
  struct Instant {
    uint32_t row;
    bool before;
  };
  uint32_t instants() const { return 2 * static_cast<uint32_t>(space_.rows().size()); }
  Instant instant(uint32_t i) const {
    const uint32_t rows = static_cast<uint32_t>(space_.rows().size());
    return i >= rows ? Instant{i - rows, true} : Instant{i, false};
  }
  bool has_row(uint32_t i) const {
    const Instant t = instant(i);
    return !(t.before && t.row <= space_.between());
  }

  // Instant i's row, marked present; false when it can never exceed `cap`
  // (memory_row then adds nothing).
  bool add_row(Program& p, uint32_t i, int64_t cap, int peak_var) const {
    p.present[i] = 1;
    const Instant t = instant(i);
    return memory_row(p, t.row, t.before, cap, peak_var, /*extended=*/false);
  }

  // Where plan a's model (space.h values) exceeds `cap`: (bytes, instant),
  // the most first. The return's instant is left out: its row is in every
  // program where it can exceed, and relaxes no term (extension_terms).
  std::vector<std::pair<int64_t, uint32_t>> exceeding(const Assignment& a, int64_t cap) const {
    const uint32_t rows = static_cast<uint32_t>(space_.rows().size());
    std::vector<std::pair<int64_t, uint32_t>> over;
    for (bool before : {false, true}) {
      const std::vector<int64_t> v = space_.values(a.saved, a.recomputed, before);
      for (uint32_t r = before ? space_.between() + 1 : 0; r < v.size(); ++r)
        if (r != space_.between() && v[r] > cap) over.push_back({v[r], before ? rows + r : r});
    }
    std::stable_sort(over.begin(), over.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    return over;
  }

  // Lazy memory rows: the rows that `saved`'s model exceeds `cap` at and
  // the program lacks, at most kLazyMemoryRows, the most exceeding first.
  // Any subset of the rows is a relaxation, so every bound stays proven.
  // True when a row was added. Without the model as a bound (cut_by_model
  // then proves nothing either), every row held back is added at once.
  bool add_missing_rows(Program& p, const std::vector<uint8_t>& saved, int64_t cap, int peak_var) const {
    if (!p.lazy) return false;
    const bool sound = space_.model_is_bound() && s_.model_bounds();
    const std::optional<Assignment> a = sound ? space_.implied_recompute(saved) : std::nullopt;
    std::vector<uint32_t> missing;
    if (a) {
      for (const auto& [value, i] : exceeding(*a, cap))
        if (!p.present[i] && missing.size() < static_cast<size_t>(kLazyMemoryRows)) missing.push_back(i);
    } else {
      p.lazy = false;
      for (uint32_t i = 0; i < instants(); ++i)
        if (has_row(i) && !p.present[i]) missing.push_back(i);
    }
    bool added = false;
    for (uint32_t i : missing) added |= add_row(p, i, cap, peak_var);
    return added;
  }

  // One instant's row before its columns exist: its constant, its terms
  // (row_terms, with the first reads of a backward row's node just before
  // it) and the most it can hold in any plan.
  struct RowSpec {
    int64_t constant = 0;
    std::vector<RowTerm> terms;
    int64_t most = 0;
  };

  RowSpec row_spec(Program& p, uint32_t row, bool before) const {
    const auto& vars = space_.vars();
    RowSpec spec;
    spec.constant = before ? space_.rows()[row].before : space_.rows()[row].constant;
    spec.terms = space_.row_terms(row);
    // The extra terms (last in row_terms) add back bytes the row's node
    // writes: not allocated yet just before it (as row_values counts).
    if (before) {
      spec.terms.resize(spec.terms.size() - space_.rows()[row].extra.size());
      for (uint32_t k : p.first_read(space_, row)) {  // saved (s) or recomputed (segment -2: r)
        spec.terms.push_back({k, vars[k].bytes, -1});
        if (!vars[k].inlined_bw) spec.terms.push_back({k, vars[k].bytes, -2});
      }
    }
    spec.most = spec.constant;
    for (const RowTerm& t : spec.terms) spec.most += t.segment == -2 ? 0 : t.bytes;  // s + r <= 1 in a plan
    for (const auto& c : space_.rows()[row].chained) spec.most += c.bytes;
    return spec;
  }

  // The row's bytes at a fractional point x of the relaxation, each
  // auxiliary column at the least value its rows allow (alive: max of its
  // lower bounds), so a row this counts above the limit cuts x off.
  double row_at(const Program& p, uint32_t row, const RowSpec& spec, const std::vector<double>& x) const {
    const auto& vars = space_.vars();
    auto all_recomputed = [&](const std::vector<uint32_t>& path) {
      double sum = 1.0 - static_cast<double>(path.size());
      for (uint32_t u : path) sum += x[p.r[u]];
      return std::max(0.0, sum);
    };
    auto held = [&](uint32_t k) {
      double h = x[p.s[k]];
      for (uint32_t a : vars[k].aliases) h = std::max(h, x[p.s[a]]);
      return h;
    };
    double total = static_cast<double>(spec.constant);
    for (const RowTerm& t : spec.terms) {
      double alive;
      if (t.segment == -2) {
        alive = x[p.r[t.var]];
      } else {
        alive = held(t.var);
        for (int j = 0; j <= t.segment; ++j)
          alive = std::max(alive, all_recomputed(vars[t.var].early[static_cast<size_t>(j)].path));
      }
      total += static_cast<double>(t.bytes) * alive;
    }
    for (const auto& c : space_.rows()[row].chained) total += static_cast<double>(c.bytes) * all_recomputed(c.path);
    return total;
  }

  // Lazy memory rows at the root: solves the relaxation and adds the
  // missing rows its solution exceeds most (kLazyMemoryRows a round), at
  // most kLazyLpRounds rounds or until it exceeds none, so the branch and
  // bound starts from nearly the full program's root bound with a fraction
  // of its rows. Against `cap`, or the peak variable's value.
  void separate_at_root(Program& p, int64_t cap, int peak_var) {
    if (!p.lazy) return;
    for (int round = 0; round < kLazyLpRounds && s_.time_allows(); ++round) {
      const Milp::Result lp = p.milp.relax();
      if (lp.values.empty()) return;
      const double at = peak_var >= 0 ? lp.values[static_cast<size_t>(peak_var)] : static_cast<double>(cap);
      std::vector<std::pair<double, uint32_t>> over;
      for (uint32_t i = 0; i < instants(); ++i) {
        if (p.present[i] || !has_row(i)) continue;  // the return's row is present
        const Instant t = instant(i);
        const RowSpec spec = row_spec(p, t.row, t.before);
        if (peak_var < 0 && spec.most <= cap) {
          p.present[i] = 1;  // can never exceed the limit
          continue;
        }
        const double excess = row_at(p, t.row, spec, lp.values) - at;
        if (excess > 0.5 + 1e-9 * at) over.push_back({excess, i});
      }
      if (over.empty()) return;
      std::stable_sort(over.begin(), over.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      if (over.size() > static_cast<size_t>(kLazyMemoryRows)) over.resize(kLazyMemoryRows);
      for (const auto& [excess, i] : over) add_row(p, i, cap, peak_var);
    }
  }

  // One instant's row (see memory_rows). `extended`: with the lives a
  // saved value's recomputed users extend (lazy rows: extension_terms); the
  // row is added even where it can never exceed `cap`. False when it can
  // never exceed `cap` and was not added.
  bool memory_row(Program& p, uint32_t row, bool before, int64_t cap, int peak_var, bool extended) const {
    const auto& vars = space_.vars();
    RowSpec spec = row_spec(p, row, before);
    const int64_t constant = spec.constant;
    const std::vector<RowTerm>& terms = spec.terms;
    const auto& chained_terms = space_.rows()[row].chained;
    const int64_t most = spec.most;
    if (!extended && peak_var < 0 && most <= cap) return false;  // can never exceed the limit
    std::vector<int> idx;
    std::vector<double> coef;
    for (const RowTerm& t : terms) {
      idx.push_back(alive(p, t));
      coef.push_back(static_cast<double>(t.bytes));
    }
    // A storage counted both by an extension term and by a chained term
    // (inductor) counts once: the extension's column also bounds the chain's.
    std::vector<int> extension(extended ? vars.size() : 0, -1);
    if (extended) extension_terms(p, row, idx, coef, extension);
    for (size_t j = 0; j < chained_terms.size(); ++j) {
      const int chain = chain_col(p, row, j);
      if (extended && extension[chained_terms[j].var] >= 0) {  // e >= chain
        const int i2[] = {extension[chained_terms[j].var], chain};
        const double c2[] = {1, -1};
        p.milp.add_row(i2, c2, 0, Milp::kInfinity);
        continue;
      }
      idx.push_back(chain);
      coef.push_back(static_cast<double>(chained_terms[j].bytes));
    }
    if (peak_var >= 0) {
      idx.push_back(peak_var);
      coef.push_back(-1);
      p.milp.add_row(idx, coef, -Milp::kInfinity, -static_cast<double>(constant));
    } else {
      p.milp.add_row(idx, coef, -Milp::kInfinity, static_cast<double>(cap - constant));
    }
    return true;
  }

  // A continuous h >= s of var k and of each alias (its storage is held);
  // s_k itself without aliases.
  int holds(Program& p, uint32_t k) const {
    const Var& v = space_.vars()[k];
    if (v.aliases.empty()) return p.s[k];
    if (p.held[k] < 0) {
      p.held[k] = p.milp.add_continuous(0, 1);
      std::vector<int> lower{p.s[k]};
      for (uint32_t a : v.aliases) lower.push_back(p.s[a]);
      for (int col : lower) {
        const int idx[] = {p.held[k], col};
        const double c[] = {1, -1};
        p.milp.add_row(idx, c, 0, Milp::kInfinity);
      }
    }
    return p.held[k];
  }

  // The column that is 1 when term t's bytes count.
  int alive(Program& p, const RowTerm& t) const {
    if (t.segment == -2) return p.r[t.var];
    if (t.segment < 0) return holds(p, t.var);
    std::vector<int>& zs = p.z[t.var];
    while (static_cast<int>(zs.size()) <= t.segment) {
      const size_t j = zs.size();
      const int col = p.milp.add_continuous(0, 1);
      const int prev = j == 0 ? holds(p, t.var) : zs.back();
      {  // z >= the previous segment's
        const int idx[] = {col, prev};
        const double c[] = {1, -1};
        p.milp.add_row(idx, c, 0, Milp::kInfinity);
      }
      // z >= sum(r over the chain) - (length - 1): 1 when all are recomputed.
      add_all_recomputed(p, col, space_.vars()[t.var].early[j].path);
      zs.push_back(col);
    }
    return zs[static_cast<size_t>(t.segment)];
  }

  // col >= sum(r over path) - (|path| - 1).
  static void add_all_recomputed(Program& p, int col, const std::vector<uint32_t>& path) {
    std::vector<int> idx{col};
    std::vector<double> c{1};
    for (uint32_t u : path) {
      idx.push_back(p.r[u]);
      c.push_back(-1);
    }
    p.milp.add_row(idx, c, 1.0 - static_cast<double>(path.size()), Milp::kInfinity);
  }

  int chain_col(Program& p, uint32_t row, size_t j) const {
    std::vector<int>& cols = p.chained[row];
    if (cols.empty()) cols.assign(space_.rows()[row].chained.size(), -1);
    if (cols[j] < 0) {
      cols[j] = p.milp.add_continuous(0, 1);
      add_all_recomputed(p, cols[j], space_.rows()[row].chained[j].path);
    }
    return cols[j];
  }

  // The terms of backward row `row` that space.h's row_values adds and the
  // MILP's rows leave out: var k's storage, its saved range ended before the
  // row, is alive there while a recomputed user u of a saved holder h of it
  // (k itself or a view of it, or a view a recomputed from saved k) is made
  // later (space.cc's made_by[u] > row, and finite). Per (k, row) a
  // continuous e >= s_h + late_u + finite_u - 2 for each such pair
  // (made_late, made_finite; s_k + r_a for the recomputed view). Exact for
  // integral plans.
  // `column`: per var, its e (-1 without one).
  void extension_terms(Program& p, uint32_t row, std::vector<int>& idx, std::vector<double>& coef,
                       std::vector<int>& column) const {
    const auto& vars = space_.vars();
    if (row < space_.between()) return forward_extension_terms(p, row, idx, coef);
    if (row == space_.between()) return;
    std::vector<int>& late = p.made_late[row];
    if (late.empty()) late.assign(vars.size(), kUnset);
    for (uint32_t k = 0; k < vars.size(); ++k) {
      const Var& v = vars[k];
      if (v.bytes == 0 || row < v.read_to) continue;  // read_to >= saved_to: counted already
      // e >= sum(cols) - (|cols| - 1): 1 when all are (finite kAlways: no column).
      std::vector<std::vector<int>> users;
      auto read_late = [&](uint32_t holder, std::vector<int> cols) {
        for (uint32_t u : space_.users()[holder]) {
          const int m = made_late(p, row, u, late);
          const int f = m >= 0 ? made_finite(p, u) : kNever;
          if (m < 0 || f == kNever) continue;
          std::vector<int> all = cols;
          all.push_back(m);
          if (f != kAlways) all.push_back(f);
          users.push_back(std::move(all));
        }
      };
      if (v.can_save) read_late(k, {p.s[k]});
      for (uint32_t a : v.aliases) {
        if (vars[a].can_save) read_late(a, {p.s[a]});
        // a view recomputed from the saved var (space.cc's row_values)
        if (v.can_save && vars[a].can_recompute) read_late(a, {p.s[k], p.r[a]});
      }
      if (users.empty()) continue;
      const int e = p.milp.add_continuous(0, 1);
      for (const std::vector<int>& cols : users) {
        std::vector<int> i{e};
        std::vector<double> c{1};
        for (int col : cols) {
          i.push_back(col);
          c.push_back(-1);
        }
        p.milp.add_row(i, c, 1.0 - static_cast<double>(cols.size()), Milp::kInfinity);
      }
      idx.push_back(e);
      coef.push_back(static_cast<double>(v.bytes));
      column[k] = e;
    }
  }

  // A forward row's terms that row_values adds and the MILP's rows leave
  // out: var k, past its own forward life (row_terms counts it there only
  // when held), is alive while a saved var the forward computes only to
  // save it reads it (or a view of it) later. Per k a continuous
  // e >= s_u - held_k for each such u: held_k + e is 1 exactly when k is
  // alive, for integral plans.
  void forward_extension_terms(Program& p, uint32_t row, std::vector<int>& idx, std::vector<double>& coef) const {
    const auto& vars = space_.vars();
    for (uint32_t k = 0; k < vars.size(); ++k) {
      const Var& v = vars[k];
      if (v.bytes == 0 || row < v.saved_from) continue;
      std::vector<uint32_t> late;
      auto read_in_forward = [&](uint32_t holder) {
        for (uint32_t u : space_.users()[holder])
          if (vars[u].optional_fw && vars[u].can_save && vars[u].saved_from > row) late.push_back(u);
      };
      read_in_forward(k);
      for (uint32_t a : v.aliases) read_in_forward(a);
      if (late.empty()) continue;
      const int e = p.milp.add_continuous(0, 1);
      const int held = holds(p, k);
      for (uint32_t u : late) {  // e >= s_u - held
        const int i3[] = {e, p.s[u], held};
        const double c3[] = {1, -1, 1};
        p.milp.add_row(i3, c3, 0, Milp::kInfinity);
      }
      idx.push_back(e);
      coef.push_back(static_cast<double>(v.bytes));
    }
  }

  static constexpr int kPending = -4;  // being built (build_order)
  static constexpr int kUnset = -3;   // not yet built
  static constexpr int kAlways = -2;  // 1 in every plan
  static constexpr int kNever = -1;   // 0 in every plan

  // The vars whose column `cols` needs before var `start`'s: those reached
  // from it through users that `follow` allows, each once, last var first
  // (a user comes after what it reads in the graph, so building in this
  // order finds every user's column built). Iterative: chains of users
  // are as deep as the graph.
  // Each var returned is marked kPending in `cols` until the caller builds it.
  template <class Follow>
  std::vector<uint32_t> build_order(uint32_t start, std::vector<int>& cols, Follow follow) const {
    std::vector<uint32_t> todo{start}, order;
    cols[start] = kPending;
    while (!todo.empty()) {
      const uint32_t u = todo.back();
      todo.pop_back();
      order.push_back(u);
      if (!follow(u)) continue;
      for (uint32_t x : space_.users()[u])
        if (cols[x] == kUnset && space_.vars()[x].can_recompute) {
          cols[x] = kPending;
          todo.push_back(x);
        }
    }
    std::sort(order.begin(), order.end(), std::greater<>());
    return order;
  }

  // The column late_u that is 1 when var u is recomputed and made after
  // `row` (space.cc's made_by[u] > row, no reader row counting as
  // infinitely late), or kNever: u is first read after the row and no
  // recomputed user of it is made by the row. late_u >= r_u - sum over
  // u's users x of (r_x - late_x).
  int made_late(Program& p, uint32_t row, uint32_t start, std::vector<int>& late) const {
    if (late[start] != kUnset) return late[start];
    auto late_possible = [&](uint32_t u) {
      const Var& v = space_.vars()[u];
      return v.can_recompute && (v.first_row == Var::kNoRow || v.first_row > row) &&
             (v.placed_row == Var::kNoRow || v.placed_row > row);
    };
    for (uint32_t u : build_order(start, late, late_possible)) {
      if (!late_possible(u)) {
        late[u] = kNever;
        continue;
      }
      std::vector<int> idx;
      std::vector<double> coef;
      for (uint32_t x : space_.users()[u]) {
        if (!space_.vars()[x].can_recompute) continue;
        idx.push_back(p.r[x]);
        coef.push_back(1);
        if (late[x] >= 0) {
          idx.push_back(late[x]);
          coef.push_back(-1);
        }
      }
      const int col = p.milp.add_continuous(0, 1);
      idx.push_back(col);
      coef.push_back(1);
      idx.push_back(p.r[u]);
      coef.push_back(-1);
      p.milp.add_row(idx, coef, 0, Milp::kInfinity);  // late_u - r_u + sum(r_x - late_x) >= 0
      late[u] = col;
    }
    return late[start];
  }

  // The column finite_u that is 1 when var u, recomputed, is made at some
  // backward row (space.cc's made_by[u] is not kNoRow): kAlways when a
  // tangent-derived node reads it or it lies in the backward (placed_row),
  // else finite_u >= r_x + finite_x - 1 per
  // user x (kNever when no user can be).
  int made_finite(Program& p, uint32_t start) const {
    if (p.finite.empty()) p.finite.assign(space_.vars().size(), kUnset);
    if (p.finite[start] != kUnset) return p.finite[start];
    auto unread = [&](uint32_t u) {
      return space_.vars()[u].first_row == Var::kNoRow && space_.vars()[u].placed_row == Var::kNoRow;
    };
    for (uint32_t u : build_order(start, p.finite, unread)) {
      if (!unread(u)) {
        p.finite[u] = kAlways;
        continue;
      }
      int col = kNever;
      for (uint32_t x : space_.users()[u]) {
        if (!space_.vars()[x].can_recompute) continue;
        const int f = p.finite[x];
        if (f == kNever) continue;
        if (col < 0) col = p.milp.add_continuous(0, 1);
        if (f == kAlways) {  // finite_u >= r_x
          const int i2[] = {col, p.r[x]};
          const double c2[] = {1, -1};
          p.milp.add_row(i2, c2, 0, Milp::kInfinity);
        } else {  // finite_u >= r_x + finite_x - 1
          const int i3[] = {col, p.r[x], f};
          const double c3[] = {1, -1, -1};
          p.milp.add_row(i3, c3, -1, Milp::kInfinity);
        }
      }
      p.finite[u] = col;
    }
    return p.finite[start];
  }

  // Where the model says a MILP solution does not fit `cap` (space.h's
  // row_values, which the MILP's rows relax): adds its exceeding rows,
  // at most kLazyRows, extended with the terms they left out, so this
  // solution and every plan exceeding there the same way are cut off
  // without a build. Rows bound `cap` itself, or with `peak_var` >= 0 that
  // variable (the smallest-peak search, whose solution's peak is `cap`).
  // False when the model fits (or proves nothing).
  bool cut_by_model(Program& p, const std::vector<uint8_t>& saved, int64_t cap, int peak_var = -1) const {
    if (!space_.model_is_bound() || !s_.model_bounds()) return false;
    std::optional<Assignment> a = space_.implied_recompute(saved);
    if (!a) return false;
    // The rows reproduce the model for integral plans, so the solution does
    // not come back; if it did (a model term they miss), it is built and
    // cut off by its no-good instead of looping.
    if (!p.lazily_cut.insert(flags_key(saved)).second) return false;
    std::vector<std::pair<int64_t, uint32_t>> over = exceeding(*a, cap);
    if (over.empty()) return false;
    if (over.size() > static_cast<size_t>(kLazyRows)) over.resize(kLazyRows);
    for (const auto& [value, i] : over) {
      const Instant t = instant(i);
      memory_row(p, t.row, t.before, cap, peak_var, /*extended=*/true);
    }
    return true;
  }

  // Whether the program starts without its memory rows (exact.h
  // MemoryRows). Only while the model is a bound: the rows held back are
  // added on the model's word (add_missing_rows).
  bool lazy_memory_rows() const {
    if (!space_.model_is_bound() || !s_.model_bounds() || rows_ == MemoryRows::kAll) return false;
    return rows_ == MemoryRows::kLazy || space_.vars().size() > static_cast<size_t>(kLazyMemoryVars);
  }

  // Excludes one saved set: at least one s differs.
  void no_good(Program& p, const std::vector<uint8_t>& saved) const {
    std::vector<int> idx;
    std::vector<double> coef;
    double rhs = 1;
    for (size_t k = 0; k < saved.size(); ++k) {
      if (!space_.vars()[k].can_save) continue;
      idx.push_back(p.s[k]);
      coef.push_back(saved[k] ? -1 : 1);
      if (saved[k]) rhs -= 1;
    }
    p.milp.add_row(idx, coef, rhs, Milp::kInfinity);
  }

  // Keeps the program's fixings in step with forbidden saves.
  void sync_forbidden(Program& p) const {
    for (size_t k = 0; k < space_.vars().size(); ++k)
      if (!space_.vars()[k].can_save) p.milp.fix(p.s[k], 0);
  }

  // One solver round of `p` with the saves forbidden so far fixed; nullopt
  // when the rounds, the solver nodes or the time safety net are spent.
  std::optional<Milp::Result> solve_next(Program& p) {
    sync_forbidden(p);
    return s_.solve(p.milp);
  }

  std::vector<uint8_t> saved_of(const Program& p, const Milp::Result& res) const {
    std::vector<uint8_t> saved(p.s.size(), 0);
    for (size_t k = 0; k < p.s.size(); ++k) saved[k] = res.values[p.s[k]] > 0.5;
    return saved;
  }

 public:
  // `stall`: stop after this many builds in a row found no cheaper plan
  // that fits (fast's polish; exact searches until proof, or until its
  // rounds or solver nodes are spent).
  Proof exact(int stall) {
    // A plan recomputing nothing is optimal whatever the model says: no
    // plan recomputes less (the plain plan at its own peak, often).
    if (s_.best_is_free()) return Proof{0, true};
    Proof proof;
    Program p = validity();
    p.lazy = lazy_memory_rows();
    memory_rows(p, limit_, -1);
    separate_at_root(p, limit_, -1);
    if (s_.best()) {  // only plans at least as good as the incumbent are of interest
      std::vector<int> idx;
      std::vector<double> coef;
      for (size_t k = 0; k < p.r.size(); ++k) {
        idx.push_back(p.r[k]);
        coef.push_back(space_.vars()[k].cost);
      }
      // The model's cost is at most the measured one: a plan whose model
      // cost exceeds the incumbent's measured cost cannot beat it.
      const double best = s_.best()->result.recompute_runtime;
      p.milp.add_row(idx, coef, -Milp::kInfinity, best + 1e-9 * std::max(1.0, best));
    }
    int stalled = 0;
    while (true) {
      const std::optional<Milp::Result> solved = solve_next(p);
      if (!solved) break;
      const Milp::Result& res = *solved;
      const bool sound = s_.model_bounds() && space_.model_is_bound();
      if (res.status == Milp::Status::kInfeasible) {
        // No valid plan beats the incumbent (or, without one, fits at all).
        if (sound && s_.best()) {
          proof.bound = s_.best()->result.recompute_runtime;
          proof.optimal = true;
        }
        break;
      }
      // The objective's tie-break adds at most tie_break(): the recompute is
      // at least the solver's bound minus that.
      if (sound) proof.bound = std::max(proof.bound, std::max(0.0, res.bound - tie_break()));
      if (res.values.empty()) break;  // a limit stopped it without a solution
      const std::vector<uint8_t> saved = saved_of(p, res);
      if (add_missing_rows(p, saved, limit_, -1)) continue;  // a row held back exceeds
      if (cut_by_model(p, saved, limit_)) continue;  // no build: the model already exceeds
      const double incumbent = s_.best() ? s_.best()->result.recompute_runtime : -1;
      const Verdict v = s_.evaluate(saved);
      // Stalls count from the first plan that fits: before it, each build
      // is a step toward one, bounded by the rounds and nodes alone.
      stalled = !s_.best() || s_.best()->result.recompute_runtime != incumbent ? 0 : stalled + 1;
      // Optimal when its measured recompute is the solver's bound (the
      // model's cost is a lower bound of the measured one; the tie-break
      // adds at most tie_break()); a plan that fits but costs more than the model
      // said stays the incumbent, is cut off, and the search goes on.
      const double measured = v.recompute;
      if (v.fits && res.status == Milp::Status::kOptimal &&
          measured <= res.bound + 1e-6 * std::max(1.0, measured)) {
        proof.optimal = s_.model_bounds() && space_.model_is_bound();
        if (!proof.optimal) proof.bound = -1;
        break;
      }
      if (!v.hazards) no_good(p, saved);  // hazards: the forbidden save cuts it off
      if (stalled >= stall) break;
    }
    if (!(s_.model_bounds() && space_.model_is_bound())) {
      proof.bound = -1;  // a built plan broke the model's bound: nothing is proven
      proof.optimal = false;
    }
    // A proven bound that reaches the incumbent's recompute proves it
    // optimal, though the solver ran out of nodes before its own proof (a
    // plan recomputing nothing, at resnet_9943's plain peak, is one).
    if (!proof.optimal && proof.bound >= 0 && s_.best()) {
      const double best = s_.best()->result.recompute_runtime;
      proof.optimal = best <= proof.bound + 1e-6 * std::max(1.0, best);
    }
    return proof;
  }

  // The smallest peak any valid plan reaches, bounded from below by the
  // MILP over the model's peak (verified the same way, within the node
  // budget).
  // `until_fits`: stop at the first plan that fits the limit (it is best()).
  // `stall`: stop after this many builds in a row found no smaller peak.
  int64_t smallest_peak_bound(bool until_fits, int stall) {
    if (!space_.model_is_bound() || !s_.model_bounds()) return s_.fast_peak_bound();
    Program p = validity();
    for (size_t k = 0; k < p.r.size(); ++k) p.milp.set_objective_coefficient(p.r[k], 0);
    for (size_t k = 0; k < p.s.size(); ++k) p.milp.set_objective_coefficient(p.s[k], 0);
    const int peak = p.milp.add_continuous(0, Milp::kInfinity, 1);
    p.lazy = lazy_memory_rows();
    memory_rows(p, 0, peak);
    separate_at_root(p, 0, peak);
    int64_t bound = s_.fast_peak_bound();
    int stalled = 0;
    while (true) {
      const std::optional<Milp::Result> solved = solve_next(p);
      if (!solved) break;
      const Milp::Result& res = *solved;
      if (res.status == Milp::Status::kInfeasible || res.values.empty()) {
        if (res.status != Milp::Status::kInfeasible)
          bound = std::max<int64_t>(bound, static_cast<int64_t>(std::ceil(res.bound - 0.5)));
        break;
      }
      if (res.status == Milp::Status::kOptimal)
        bound = std::max<int64_t>(bound, static_cast<int64_t>(std::ceil(res.bound - 0.5)));
      if (s_.smallest_peak() >= 0 && bound >= s_.smallest_peak()) break;  // proven smallest
      const std::vector<uint8_t> saved = saved_of(p, res);
      // The model's peak of this plan is above the MILP's: no build, the
      // rows it exceeds come back with the terms they relaxed.
      const int64_t at = static_cast<int64_t>(std::floor(res.values[peak] + 0.5));
      if (add_missing_rows(p, saved, at, peak)) continue;
      if (cut_by_model(p, saved, at, peak)) continue;
      const int64_t before = s_.smallest_peak();
      const Verdict v = s_.evaluate(saved);
      if (until_fits && s_.best()) break;
      stalled = s_.smallest_peak() == before ? stalled + 1 : 0;
      if (stalled == stall) break;  // the rest of the budget would likely buy nothing
      if (!s_.model_bounds()) return s_.fast_peak_bound();
      if (!v.hazards) no_good(p, saved);
    }
    return s_.smallest_peak() >= 0 ? std::min(bound, s_.smallest_peak()) : bound;
  }

 private:
  Search& s_;
  PlanSpace& space_;
  const int64_t limit_;
  const MemoryRows rows_;
};

}  // namespace

Proof exact(Search& s, int stall, MemoryRows rows) { return Exact(s, rows).exact(stall); }

int64_t smallest_peak_bound(Search& s, bool until_fits, int stall, MemoryRows rows) {
  return Exact(s, rows).smallest_peak_bound(until_fits, stall);
}

}  // namespace remat::optimize
