// tests/cpp/test_rows.cc — optimize/rows.h: a plan's model rows kept up to
// date under moves equal the rows PlanSpace::values sums anew, on every row,
// after every move, under both memory models (views and their roots, early
// chains, inductor's in-place and chained terms all among the examples'
// spaces, and counted so the test cannot pass without them).
// tests/data/transformer_stack_1.json is bench/scale_graphs.py's transformer
// family one block deep (`capture("transformer", 1)`, torch 2.15): the
// examples alone have no chained term whose path is longer than one var,
// nor a view of what a var reads that is not one of its users.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "decide/decide.h"
#include "optimize/rows.h"
#include "optimize/space.h"
#include "plan_space.h"
#include "remat/io.h"
#include "remat/partition.h"

namespace remat {
namespace {

using testing::SpaceOf;

struct Features {
  int aliases = 0, early = 0, extra = 0, chained = 0;
};

Features features(const optimize::PlanSpace& space) {
  Features f;
  for (const optimize::Var& v : space.vars()) {
    f.aliases += !v.aliases.empty();
    f.early += !v.early.empty();
  }
  for (const optimize::MemoryRow& r : space.rows()) {
    f.extra += static_cast<int>(r.extra.size());
    f.chained += static_cast<int>(r.chained.size());
  }
  return f;
}

// The plan `rows` holds against implied_recompute of its requested set,
// and every row against values() of that plan.
void expect_rows_equal(const optimize::PlanSpace& space, const optimize::PlanRows& rows,
                       const std::vector<uint8_t>& requested, const std::vector<int64_t>& targets,
                       int64_t limit, const std::string& where) {
  const std::optional<optimize::Assignment> a = space.implied_recompute(requested);
  ASSERT_EQ(rows.valid(), a.has_value()) << where;
  if (!a) return;
  ASSERT_EQ(rows.saved(), a->saved) << where;
  ASSERT_EQ(rows.recomputed(), a->recomputed) << where;
  const std::vector<int64_t> after = space.values(a->saved, a->recomputed, /*before=*/false);
  const std::vector<int64_t> before = space.values(a->saved, a->recomputed, /*before=*/true);
  int64_t worst = std::numeric_limits<int64_t>::min(), worst_before = worst;
  for (uint32_t r = 0; r < after.size(); ++r) {
    ASSERT_EQ(rows.after_row(r), after[r] - targets[r]) << where << " row " << r;
    worst = std::max(worst, after[r] - targets[r]);
    if (r <= space.between()) continue;
    ASSERT_EQ(rows.before_row(r), before[r] - limit) << where << " row " << r << " (before)";
    worst_before = std::max(worst_before, before[r] - limit);
  }
  EXPECT_EQ(rows.excess(), after.empty() ? 0 : worst) << where;
  if (after.size() > space.between() + 1) {
    EXPECT_EQ(rows.excess_before(), worst_before) << where;
  }
}

double cost_of(const optimize::PlanSpace& space, const std::vector<uint8_t>& requested) {
  const std::optional<optimize::Assignment> a = space.implied_recompute(requested);
  return a ? a->cost : 0;
}

TEST(PlanRows, KeptRowsEqualTheRowsSummedAnewAfterEveryMove) {
  Features seen;
  for (MemoryModel model : {MemoryModel::kAten, MemoryModel::kInductor})
    for (const std::string name : {"mlp", "cnn_batchnorm", "transformer_block", "checkpointed",
                                   "../tests/data/transformer_stack_1"}) {
      const JointGraph j = read_joint_graph_file(std::string(REMAT_EXAMPLES_DIR) + "/" + name + ".json");
      PartitionOptions o;
      o.memory_model = model;
      const SpaceOf s(j, o);
      const optimize::PlanSpace& space = s.space;
      const Features f = features(space);
      seen.aliases += f.aliases;
      seen.early += f.early;
      seen.extra += f.extra;
      seen.chained += f.chained;
      std::mt19937 rng(5);
      std::vector<uint32_t> saveable;
      for (uint32_t k = 0; k < space.vars().size(); ++k)
        if (space.vars()[k].can_save) saveable.push_back(k);
      ASSERT_FALSE(saveable.empty()) << name;
      // Half the flips fall on vars a term reaches through others: the
      // paths of chained terms and early chains, and views of a storage.
      std::vector<uint32_t> reached;
      for (const optimize::MemoryRow& r : space.rows())
        for (const optimize::MemoryRow::Chained& c : r.chained) reached.insert(reached.end(), c.path.begin(), c.path.end());
      for (const optimize::Var& v : space.vars()) {
        for (const optimize::EarlyUse& e : v.early) reached.insert(reached.end(), e.path.begin(), e.path.end());
        reached.insert(reached.end(), v.aliases.begin(), v.aliases.end());
      }
      std::erase_if(reached, [&](uint32_t k) { return !space.vars()[k].can_save; });
      std::vector<int64_t> targets(space.rows().size());
      for (int64_t& t : targets) t = static_cast<int64_t>(rng() % 100000);
      const int64_t limit = 50000;
      // Sparse plans too: a chained term counts only where its whole path
      // is recomputed.
      for (int density : {2, 8}) {
        // Start from a random plan, then move a few flags at a time, as
        // mix() does, sometimes moving back (mix()'s rejected moves), and
        // always from an invalid plan (a flag on a var that cannot be saved,
        // a needed var that cannot be recomputed), as mix() does.
        std::vector<uint8_t> requested(space.vars().size(), 0);
        for (int tries = 0; tries < 300; ++tries) {
          // Where sparse plans are rarely valid (chains reaching what can
          // be neither saved nor recomputed), denser ones.
          const int d = tries < 100 ? density : tries < 200 ? 4 : 2;
          for (uint32_t k : saveable) requested[k] = rng() % d == 0 || !space.vars()[k].can_recompute;
          if (space.implied_recompute(requested)) break;
        }
        ASSERT_TRUE(space.implied_recompute(requested)) << name << ": no valid plan to start from";
        optimize::PlanRows rows(space, requested, targets, limit);
        expect_rows_equal(space, rows, requested, targets, limit, name + " start");
        int valid = 0;
        for (int step = 0; step < 300; ++step) {
          std::vector<uint32_t> vars;
          std::vector<uint8_t> to, back;
          const int flips = 1 + static_cast<int>(rng() % 4);
          for (int i = 0; i < flips; ++i) {
            uint32_t k = !reached.empty() && rng() % 2 ? reached[rng() % reached.size()]
                                                     : saveable[rng() % saveable.size()];
            if (rng() % 50 == 0) k = static_cast<uint32_t>(rng() % space.vars().size());
            if (std::find(vars.begin(), vars.end(), k) != vars.end()) continue;
            vars.push_back(k);
            back.push_back(requested[k]);
            to.push_back(!requested[k]);
          }
          std::vector<uint8_t> next = requested;
          for (size_t i = 0; i < vars.size(); ++i) next[vars[i]] = to[i];
          const double delta = rows.move(vars, to);
          const std::string where = name + " step " + std::to_string(step);
          expect_rows_equal(space, rows, next, targets, limit, where);
          if (rows.valid() && space.implied_recompute(requested)) {
            const double want = cost_of(space, next) - cost_of(space, requested);
            EXPECT_NEAR(delta, want, 1e-9 * (1 + std::abs(cost_of(space, requested)))) << where;
          }
          valid += rows.valid();
          if (!rows.valid() || rng() % 3 == 0) {
            rows.move(vars, back);
            expect_rows_equal(space, rows, requested, targets, limit, where + " back");
          } else {
            requested = std::move(next);
          }
        }
        EXPECT_GE(valid, 30) << name;
      }
    }
  // The spaces had every kind of term the kept rows follow.
  EXPECT_GT(seen.aliases, 0);
  EXPECT_GT(seen.early, 0);
  EXPECT_GT(seen.extra, 0);
  EXPECT_GT(seen.chained, 0);
}

}  // namespace
}  // namespace remat
