// report/escape.cc — markup escaping.
//
// Contract: escape.h (one loop; the two functions differ only in ').
#include "report/escape.h"

namespace remat::report {
namespace {

std::string escape(std::string_view s, bool apostrophe) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'':
        if (apostrophe) {
          out += "&#39;";
          break;
        }
        [[fallthrough]];
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string xml_escape(std::string_view s) { return escape(s, /*apostrophe=*/false); }
std::string html_escape(std::string_view s) { return escape(s, /*apostrophe=*/true); }

}  // namespace remat::report
