// remat/remat.h — the whole public API in one include.
#pragma once

#include "remat/cut_side.h"
#include "remat/error.h"
#include "remat/explain.h"
#include "remat/graph.h"
#include "remat/graphviz.h"
#include "remat/info.h"
#include "remat/io.h"
#include "remat/memory.h"
#include "remat/ops.h"
#include "remat/options.h"
#include "remat/pareto.h"
#include "remat/partition.h"
#include "remat/report.h"
#include "remat/sync.h"
#include "remat/version.h"
