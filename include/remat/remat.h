// remat/remat.h — the whole public API in one include.
#pragma once

#include "remat/cut_side.h"
#include "remat/error.h"
#include "remat/graph.h"
#include "remat/info.h"
#include "remat/io.h"
#include "remat/ops.h"
#include "remat/options.h"
#include "remat/partition.h"
#include "remat/report.h"
#include "remat/sync.h"
#include "remat/version.h"
