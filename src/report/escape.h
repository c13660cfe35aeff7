// report/escape.h — text made safe inside markup, for every writer of SVG
// and HTML.
//
// Contract: xml_escape replaces & < > " with their entities (enough for SVG
// text and double-quoted attributes); html_escape also replaces ' (HTML
// attributes may be single-quoted). Everything else passes unchanged, so
// the same text always gives the same bytes.
#pragma once

#include <string>
#include <string_view>

namespace remat::report {

std::string xml_escape(std::string_view s);
std::string html_escape(std::string_view s);

}  // namespace remat::report
