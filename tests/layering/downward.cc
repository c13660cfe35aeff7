// tests/layering/downward.cc — compiled as part of the decide stage, it
// includes headers of stages decide declares (analyze, budget) and of one it
// reaches through them (graph): the control for upward.cc, built the same way.
#include "analyze/analyze.h"
#include "budget/knapsack.h"
#include "decide/decide.h"
#include "graph/copy.h"
