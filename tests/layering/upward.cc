// tests/layering/upward.cc — compiled as part of the graph stage, it includes
// a header of decide, a stage above it: the build must reject it
// (check.cmake expects this compile to fail, naming the header).
#include "decide/decide.h"
