// optimize/space.h — the plans the peak-memory optimizer chooses among, what
// each costs in recomputation, and a lower bound of its simulated peak.
//
// Contract:
//  * A plan is a saved set: the forward-computable nodes of the prepared
//    graph (not derived from a tangent or a backward seed, not the output)
//    whose values the forward hands to the backward. Everything else the
//    backward reads from the forward is recomputed, as the pipeline's
//    extraction does for any saved set; so a saved set decides the plan.
//  * Variables: one per forward-computable node, with
//      can_save       false for nodes a checkpoint policy marks MUST_ or
//                     PREFER_RECOMPUTE (torch's must_recompute), values that are not a
//                     tensor, SymInt or opaque (tuples of a multi-output op:
//                     their getitems are saved instead), SymFloat/SymBool,
//                     views under recompute_views, inputs the 2.15 epilogue
//                     overwrites, and values found hazardous (forbid_save);
//      can_recompute  false for placeholders, MUST_SAVE nodes (collectives
//                     and effectful ops are forced there by prepare), random
//                     ops (their outputs are saved: replaying them exactly
//                     needs the RNG rewrite, which only recompute-tagged
//                     graphs get), impure or mutable ops, higher-order ops;
//      needed         a backward node reads it, or the backward returns it;
//      cost           what measure_plan adds when it is recomputed
//                     (memory/plan.h recompute_cost), for nodes a forward
//                     output needs; 0 for the others (measure_plan counts
//                     them only when a saved value makes the forward
//                     compute them: the model's cost is a lower bound, and
//                     exact checks each plan's measured cost);
//      bytes          the storage it allocates (see below).
//    torch's ban heuristics (allowlist, fusion, distance, reductions) are
//    not constraints here: they are why torch cannot reach these plans.
//  * Validity: saved ⊆ can_save; every needed node is saved or recomputed;
//    a recomputed node's forward inputs are saved or recomputed; recomputed
//    ⊆ can_recompute. implied_recompute gives the least recompute set of a
//    saved set (nullopt when it is invalid).
//  * The memory model is a lower bound of simulate_memory's peak for every
//    valid plan (a proof obligation checked on every built plan by the
//    optimizer, `model_peak <= simulated`, and by tests on the corpus). Its
//    rows are instants of the step:
//      - after each forward call_function: the inputs, the forward values
//        alive there in every plan (from their node to their last forward
//        use; the caller's outputs to the end), and each saved value
//        computed by then whose forward life has ended (saved values live
//        on to the backward);
//      - when the forward returns: the inputs, the caller's outputs and
//        every saved value;
//      - after each backward call_function derived from a tangent (only
//        when those run in the prepared graph's relative order, which the
//        extraction keeps and so does reorder_to_mimic_autograd_engine:
//        it moves only nodes its walk pulls in, and a tangent-derived node
//        is pulled in only by a later one, after every earlier one ran):
//        the inputs, the caller's outputs, gradients and backward values
//        alive there, tangents until their last use, each forward value
//        a tangent-derived node reads while it lies between its first and
//        last such reader (saved or recomputed, it is alive then), and
//        from the first reader of a chain of users recomputed for it on
//        (kEarlyDepth long at most: the chain runs before its reader and
//        needs it), and each saved value
//        before its first backward reader (or, in a plan's evaluation,
//        before the batch that recomputes a user of it or of a saved view
//        of it, where its readers' rows do not count it already:
//        row_values; the MILP, a relaxation, leaves that out). A
//        recomputed node is made by the batch before its first reader,
//        before a recomputed user's, or, lying after the backward's first
//        node in the graph, at its own place (placed_row);
//      - just before each such backward node runs (after the
//        recomputations run for it): what the row after it holds, less
//        what the node allocates, plus each var it is the first reader of,
//        saved or recomputed (the peak of a plan often lies there).
//    A saved var no forward output needs is computed by the forward at its
//    place: what it reads (through views too) lives in the forward rows
//    until then (row_values; the MILP adds it lazily with the rest).
//    Storage bytes: a node's fresh storages (not shared with an input of
//    the node: views, in-place ops and aliases are free, but saving one
//    keeps its root's storage as saving the root would; a view, or a
//    mutable op with one result, whose storage id is none of its inputs'
//    holds its first argument's storage all the same, as simulate_memory
//    counts it); a multi-output
//    op's storages are attributed to the getitems that take them out (the
//    op itself is 0), each storage once, alive from the op's row on; a
//    getitem taking out a view of the op's input (split, unbind) is an
//    alias of that input's storage. Storages without an identity (-1)
//    count 0. Forward outputs count in their constant rows only.
//    Under inductor's memory model (options.memory_model, memory/fusion.h)
//    a value inductor inlines gets no buffer unless saved. Per pass, a var
//    is inlined (`inlined_fw`, `inlined_bw`) when memory::inductor_inlined
//    says so counting only the readers that pass has in every plan (the
//    required forward nodes; the tangent-derived nodes): fewer readers,
//    fewer buffers, so the rows stay a lower bound. An inlined var counts
//    0 in that pass's constant rows; inlined_bw also drops its "recomputed
//    just before its first reader" term and its early chains. Longer lives
//    of what inlined values read and layout copies only raise the
//    simulated peak. A kernel may write its result into an input whose
//    last read it is (inplace_buffers): the row after such a node
//    (inductor_may_write_in_place, with an input of its size dying there
//    in that pass) leaves out the node's own bytes, and when the forward's
//    only such input is a var, adds them back as an `extra` term of the
//    row, counted when that var is saved (a saved input does not die).
//    And what an inlined value reads is read by the kernel it is inlined
//    into: a var the backward reads only through a chain of vars that
//    inductor inlines wherever they run (fused in the joint graph, so in
//    any backward that recomputes them) is alive at the row of the
//    tangent-derived node that reads the chain's last var, when the whole
//    chain is recomputed (MemoryRow::chained; after and just before),
//    unless the row's node may write its result into that var (same size)
//    and its row does not leave the node's bytes out already.
//  * Fidelity switches the rows off when the pipeline would change memory
//    in ways the model does not follow (activation offloading or FP8
//    quantization): then only the exact check by simulation remains and
//    the optimizer reports no proof (model_is_bound() false).
// All ids are ids of the prepared graph (DecideContext::graph).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "decide/decide.h"
#include "remat/result.h"

namespace remat::optimize {

// A chain of users of a var (path[0] uses it, each next uses the one
// before, the last is read by the backward at `row`): when all of them are
// recomputed, the var is alive from `row` on.
struct EarlyUse {
  uint32_t row = 0;
  std::vector<uint32_t> path;  // var indices
};

inline constexpr int kEarlyDepth = 4;  // the longest chain followed
inline constexpr int kEarlyUses = 8;   // per var, the earliest kept

struct Var {
  NodeId node = kNoNode;
  bool can_save = false;
  bool can_recompute = false;
  bool needed = false;
  // No forward output needs it: the forward computes it only when it is
  // saved, at its place (row saved_from), and what it reads lives until then.
  bool optional_fw = false;
  double cost = 0;    // estimated runtime when recomputed
  int64_t bytes = 0;  // storage bytes while saved (0 when pinned or aliasing)
  // When saved, its bytes count in rows [saved_from, between] and
  // [between + 1, saved_to) (PlanSpace::rows indices).
  uint32_t saved_from = 0;
  uint32_t saved_to = 0;
  // Rows [saved_to, read_to) already count its bytes in every plan (it is
  // read by the backward there: the rows' constant); read_to == saved_to
  // when they do not (no tangent-derived reader, or inlined_bw). A saved
  // value kept alive longer by a recomputed user counts only past it.
  uint32_t read_to = 0;
  // The backward row whose node first reads it; kNoRow when no
  // tangent-derived node reads it (or there are no backward rows).
  static constexpr uint32_t kNoRow = 0xFFFFFFFFu;
  uint32_t first_row = kNoRow;
  // A var whose node lies after the backward's first node in the graph is,
  // when recomputed, made at its own place, by this row at the latest
  // (reordering_to_mimic_autograd_engine walks the backward in graph order,
  // computing each node with what it reads); kNoRow for the others.
  uint32_t placed_row = kNoRow;
  // Chains of users recomputed for a backward reader before this var's own
  // first reader (at most kEarlyUses, the earliest): when one is entirely
  // recomputed, the var lives from its row to saved_to too (saved or
  // recomputed alike). Sorted by row.
  std::vector<EarlyUse> early;
  // Saveable vars whose storage is this var's (views, aliases): saving one
  // keeps this var's storage as saving this var would.
  std::vector<uint32_t> aliases;
  // Under inductor's model: no buffer in that pass unless saved (see the
  // contract).
  bool inlined_fw = false;
  bool inlined_bw = false;
};

// One term of a row: var k's bytes count when it or one of its aliases is
// saved (segment -1), or, at segment j >= 0, when that holds or any of its
// first j + 1 early chains is entirely recomputed.
struct RowTerm {
  uint32_t var = 0;
  int64_t bytes = 0;
  int segment = -1;
};

// One instant of the step: `constant` plus the bytes of each saved var
// whose saved range covers it (PlanSpace::row_terms).
struct MemoryRow {
  int64_t constant = 0;
  // Backward rows: what is alive in every plan just before the row's node
  // runs (after the recomputations run for it): `constant` less what that
  // node allocates; 0 elsewhere.
  int64_t before = 0;
  NodeId node = kNoNode;  // the prepared node after which it is taken
  enum class Pass : uint8_t { kForward, kBetween, kBackward } pass = Pass::kForward;
  // Terms beyond the vars' saved ranges (inductor's in-place rule).
  std::vector<RowTerm> extra;
  // Under inductor: `bytes` alive at this row, after and just before its
  // node, when every var of `path` is recomputed (see the contract).
  struct Chained {
    std::vector<uint32_t> path;
    int64_t bytes = 0;
    uint32_t var = 0;  // whose storage: counted once at a row that counts it already
  };
  std::vector<Chained> chained;
};

// What one var adds to a plan's rows (PlanSpace::values): its bytes over
// at most four row ranges [from, to), those `before_only` only in the
// instants just before backward nodes; and `extended`, the backward rows
// past its first reader that something recomputed keeps it alive over (a
// row's chained term of its storage is counted there already).
struct VarSpans {
  struct Span {
    uint32_t from = 0;
    uint32_t to = 0;
    bool before_only = false;
  };
  std::array<Span, 4> spans;
  int count = 0;
  std::pair<uint32_t, uint32_t> extended{0, 0};
};

// The least recompute set of a saved set.
struct Assignment {
  std::vector<uint8_t> saved;       // per var, those something reads (the plan's)
  std::vector<uint8_t> recomputed;  // per var
  double cost = 0;                  // sum of recomputed costs
};

class PlanSpace {
 public:
  // `joint_order_backward`: tangent-derived nodes run in the prepared
  // graph's relative order (true for every backward the pipeline builds;
  // false drops the backward rows). `model_rows`: false under offloading
  // or quantization.
  PlanSpace(const DecideContext& ctx, int num_fwd_outputs, bool joint_order_backward,
            bool model_rows);

  const Graph& graph() const { return g_; }
  const std::vector<Var>& vars() const { return vars_; }
  // Per var: the var indices of its forward-computable inputs.
  const std::vector<std::vector<uint32_t>>& deps() const { return deps_; }
  // Per var: the vars reading it (deps reversed).
  const std::vector<std::vector<uint32_t>>& users() const { return users_; }
  // Forward rows, then the return (index between()), then backward rows.
  const std::vector<MemoryRow>& rows() const { return rows_; }
  uint32_t between() const { return between_; }
  // Row r's plan-dependent terms, its `extra` terms last. The MILP relaxes
  // two terms of row_values: a saved value (or what its views hold) kept
  // alive past its saved range by a recomputed user made later, and a value
  // kept alive in the forward by a saved optional_fw user (exact.cc adds
  // them back lazily).
  std::vector<RowTerm> row_terms(uint32_t r) const;
  int var_of(NodeId n) const { return n < var_of_.size() ? var_of_[n] : -1; }
  bool model_is_bound() const { return model_rows_; }

  // The saved set never saves this var again (a mutation hazard, or the
  // fast search's repairs); never recomputes it.
  void forbid_save(uint32_t var) {
    vars_[var].can_save = false;
    ++generation_;
  }
  void forbid_recompute(uint32_t var) {
    vars_[var].can_recompute = false;
    ++generation_;
  }
  // Puts back vars taken from vars() (same space).
  void restore(const std::vector<Var>& vars) {
    vars_ = vars;
    ++generation_;
  }
  // Counts the calls above: what was computed from vars() at one
  // generation (a cut, a plan's model) holds while it stays the same.
  uint64_t generation() const { return generation_; }

  // The least recompute set of `saved` (per var), and the saved values the
  // plan really hands over (those a backward node or a recomputation reads:
  // the extraction prunes the rest); nullopt when some needed value can be
  // neither saved nor recomputed under it.
  std::optional<Assignment> implied_recompute(std::span<const uint8_t> saved) const;
  // The model's lower bound of the plan's peak (with its least recompute
  // set): the largest row.
  int64_t model_peak(std::span<const uint8_t> saved) const;
  static bool chain_recomputed(std::span<const uint32_t> path, std::span<const uint8_t> recomputed);
  // Whether saving `saved` keeps var k's storage: k or an alias is saved.
  bool holds_storage(std::span<const uint8_t> saved, uint32_t k) const;
  // Per row, its value with these saved and recomputed vars (recomputed
  // may be empty: no early uses count).
  std::vector<int64_t> row_values(std::span<const uint8_t> saved,
                                  std::span<const uint8_t> recomputed) const;
  // The same just before each backward row's node (forward rows and the
  // return read 0 + terms: ignore them): the row's terms, plus each var
  // that node reads first, saved or recomputed.
  std::vector<int64_t> values(std::span<const uint8_t> saved, std::span<const uint8_t> recomputed,
                              bool before) const;
  // The largest row after a node (model_peak without the instants just
  // before backward nodes) with every chain of recomputed users followed
  // however long (the rows' early chains stop at kEarlyDepth, for the
  // MILP's sake): a recomputed var lives from the row its first recomputed
  // user is made by to its own first reader's (through views and aliases:
  // chains follow each var's first tangent-derived reader, whatever its
  // bytes). Also a lower bound of the simulated peak, far tighter on deep
  // graphs; fast screens torch's plans with it before building them. 0 when
  // the plan is invalid or the model is off.
  int64_t chained_peak(std::span<const uint8_t> saved) const;
  // chained_peak's rows (row_values' shape; empty where it is 0).
  std::vector<int64_t> chained_rows(std::span<const uint8_t> saved) const;

  // values()'s parts, which optimize/rows.h (the same rows kept up to date
  // under small changes to a plan) shares, so both say the same:
  //  * the row by which the backward has made recomputed var k (the batch
  //    before its first reader, or before a recomputed user's, or its own
  //    place), from its users' rows (users come later in vars());
  //    Var::kNoRow for a var not recomputed;
  //  * var k's spans given those rows;
  //  * whether row r counts chained term c, given its var's extended rows.
  // all_chains: chained_peak's variant (every chain of recomputed users).
  uint32_t made_by_row(uint32_t k, std::span<const uint8_t> recomputed, std::span<const uint32_t> made_by,
                       bool all_chains) const;
  std::vector<uint32_t> made_by(std::span<const uint8_t> recomputed, bool all_chains) const;
  VarSpans var_spans(uint32_t k, std::span<const uint8_t> saved, std::span<const uint8_t> recomputed,
                     std::span<const uint32_t> made_by, bool all_chains) const;
  static bool chained_counts(const MemoryRow::Chained& c, uint32_t r, std::span<const uint8_t> recomputed,
                             std::pair<uint32_t, uint32_t> extended);

  // The prepared node a node of a built plan came from (its origin, a
  // joint id); kNoNode for none.
  NodeId prepared_of(NodeId joint) const {
    return joint < prepared_of_joint_.size() ? prepared_of_joint_[joint] : kNoNode;
  }
  // Per row, the live bytes the simulation of a plan built over this space
  // shows at its instant: the most after any node since the pass's previous
  // row (nodes without a row of the pass run for the next one: recomputations,
  // the backward's placeholders of saved values, and values of the backward
  // region the forward computes to save them, which after the forward's last
  // row count toward the return's, where the model makes them). Where it
  // exceeds row_values, fast lowers that row's target (fast.h correct).
  std::vector<int64_t> simulated_rows(const PartitionResult& r) const;

  // The saved set of a plan as the pipeline takes it (prepared ids, graph
  // order), and back.
  std::vector<NodeId> saved_nodes(std::span<const uint8_t> saved) const;
  std::vector<uint8_t> saved_flags(std::span<const NodeId> nodes) const;

 private:
  std::vector<int64_t> values(std::span<const uint8_t> saved, std::span<const uint8_t> recomputed,
                              bool before, bool all_chains) const;
  void make_vars(const DecideContext& ctx);
  void make_rows(const DecideContext& ctx, int num_fwd_outputs, bool joint_order_backward);
  // own_read_row[n]: the row of the first tangent-derived reader of n's
  // own storage (n its own root), Var::kNoRow otherwise.
  void early_uses(size_t k, uint32_t saved_to, const std::vector<uint32_t>& own_read_row);
  void read_through_inlined(const std::vector<NodeId>& root, const std::vector<NodeId>& bw_first,
                            const std::vector<NodeId>& bw_pos, uint32_t bw0,
                            const std::vector<uint8_t>& reduced);
  std::vector<uint8_t> allow_in_place(const std::vector<NodeId>& root, const std::vector<uint8_t>& pinned,
                                      const std::vector<NodeId>& fw_last, const std::vector<NodeId>& last_use,
                                      const std::vector<int64_t>& counted);

  const Graph& g_;
  int num_fwd_outputs_;
  std::vector<Var> vars_;
  uint64_t generation_ = 0;
  std::vector<std::vector<uint32_t>> deps_;
  std::vector<std::vector<uint32_t>> users_;  // per var: the vars reading it
  std::vector<int> var_of_;
  std::vector<MemoryRow> rows_;
  std::vector<uint32_t> read_row_;  // per var: its first tangent-derived reader's row
  std::vector<int> row_of_;          // per prepared node: its row, -1 for none
  std::vector<NodeId> prepared_of_joint_;
  uint32_t between_ = 0;
  bool model_rows_;
};

}  // namespace remat::optimize
