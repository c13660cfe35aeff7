// bench/cpp/milp_bench.cc — solves one MPS file with remat's own Milp (CBC as
// the library configures it), for the solver comparison in docs/memory.md.
//
// Contract: `remat_milp_bench FILE.mps [SECONDS]` reads the program with
// CBC's own reader (CoinMpsIO), rebuilds it through Milp's API (integer
// columns bounded by [0, 1] become binaries, fixed ones fixed; the rest
// continuous), solves it once with Milp::Limits{SECONDS (default 60), 1e-9,
// 1e-9} (exact mode's gaps) and prints one JSON line: status, objective,
// bound, nodes, seconds (Milp::Result's). Exit 0 when it solved, 1 on a
// usage or read error. bench/bench_memory.py runs it on the programs exact
// mode wrote (REMAT_MILP_DUMP_DIR) next to the `cbc` command and HiGHS: the
// command runs CbcSolver's defaults (preprocessing, more cuts), this runs
// what remat runs, which is the time that counts.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <CoinFinite.hpp>
#include <CoinMpsIO.hpp>
#include <CoinPackedMatrix.hpp>

#include "optimize/milp.h"

using remat::optimize::Milp;

namespace {

// CoinMpsIO writes a missing bound as +-COIN_DBL_MAX; Milp wants infinities.
double from_coin(double v) {
  if (v >= COIN_DBL_MAX) return Milp::kInfinity;
  if (v <= -COIN_DBL_MAX) return -Milp::kInfinity;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s FILE.mps [SECONDS]\n", argv[0]);
    return 1;
  }
  CoinMpsIO mps;
  mps.messageHandler()->setLogLevel(0);
  if (mps.readMps(argv[1], "") != 0) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }
  Milp milp;
  const int columns = mps.getNumCols();
  const double* lo = mps.getColLower();
  const double* hi = mps.getColUpper();
  const double* cost = mps.getObjCoefficients();
  for (int c = 0; c < columns; ++c) {
    // Milp numbers variables densely in the order they are added, so ids
    // match the file's columns (write_mps names them x<id> in that order).
    if (mps.isInteger(c) && lo[c] >= 0 && hi[c] <= 1) {
      const int v = milp.add_binary(cost[c]);
      if (lo[c] == hi[c]) milp.fix(v, lo[c]);
    } else {
      milp.add_continuous(from_coin(lo[c]), from_coin(hi[c]), cost[c]);
    }
  }
  const CoinPackedMatrix* rows = mps.getMatrixByRow();
  const double* row_lo = mps.getRowLower();
  const double* row_hi = mps.getRowUpper();
  for (int r = 0; r < mps.getNumRows(); ++r) {
    const CoinShallowPackedVector row = rows->getVector(r);
    std::vector<int> idx(row.getIndices(), row.getIndices() + row.getNumElements());
    std::vector<double> coef(row.getElements(), row.getElements() + row.getNumElements());
    milp.add_row(idx, coef, from_coin(row_lo[r]), from_coin(row_hi[r]));
  }
  Milp::Limits limits;
  limits.seconds = argc == 3 ? std::atof(argv[2]) : 60.0;
  limits.relative_gap = 1e-9;
  limits.absolute_gap = 1e-9;
  const Milp::Result res = milp.solve(limits);
  auto num = [](double v) { return std::isfinite(v) ? v : (v > 0 ? 1e308 : -1e308); };
  std::printf("{\"status\": \"%s\", \"objective\": %.17g, \"bound\": %.17g, \"nodes\": %lld, "
              "\"seconds\": %.6f}\n",
              remat::optimize::status_name(res.status), num(res.objective), num(res.bound),
              static_cast<long long>(res.nodes), res.seconds);
  return 0;
}
