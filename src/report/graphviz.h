// report/graphviz.h — pictures of graphs through Graphviz's `dot` command.
//
// Contract: render_svg runs `dot -Tsvg` (found on PATH) on DOT text and
// returns the SVG, or nullopt when dot is missing or fails; it never throws
// for that, leaves no temporary files, and does not touch the caller's
// stdin/stdout/stderr. Graphviz is a runtime tool, not a link dependency.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace remat::report {

bool dot_available();
std::optional<std::string> render_svg(std::string_view dot);

}  // namespace remat::report
