// remat/graphviz.h — pictures of graphs through Graphviz's `dot` command.
//
// Contract: render_svg runs `dot -Tsvg` (found on PATH) on DOT text and
// returns the SVG, or nullopt when dot is missing or fails; it never throws
// for that, leaves no temporary files, and does not touch the caller's
// stdin/stdout/stderr. Graphviz is a runtime tool, not a link dependency.
// find_on_path is the one PATH search of the project (the CLI finds `dot`
// with it too): the first executable `program` in $PATH's directories, an
// empty entry meaning the current directory, or "" when there is none.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace remat::report {

std::string find_on_path(const char* program);
bool dot_available();
std::optional<std::string> render_svg(std::string_view dot);

}  // namespace remat::report
