// io/categories.cc — read_op_categories (io/categories.h).
//
// Contract: see the header; the message for an unknown name lists every
// category, so a typo shows the spelling remat expects.
#include "io/categories.h"

#include <string>

#include <fmt/format.h>

#include "remat/error.h"
#include "remat/ops.h"

namespace remat::io {
namespace {

[[noreturn]] void fail_with(const CategoryFail& fail, std::string_view why) {
  fail(why);
  throw Error(ErrorCode::kInternal, fmt::format("op categories: {}", why));
}

std::string all_names() {
  std::string out;
  const size_t n = std::size(kOpCategoryNames);
  for (size_t i = 0; i < n; ++i) {
    if (i != 0) out += i + 1 == n ? " or " : ", ";
    out += kOpCategoryNames[i].name;
  }
  return out;
}

}  // namespace

uint8_t read_op_categories(simdjson::dom::element list, const CategoryFail& fail) {
  simdjson::dom::array names;
  if (list.get(names)) fail_with(fail, "expected an array of op category names");
  uint8_t bits = 0;
  for (simdjson::dom::element e : names) {
    std::string_view name;
    if (e.get(name)) fail_with(fail, "expected op category names (strings)");
    const uint8_t bit = op_category_from_name(name);
    if (bit == 0) {
      fail_with(fail, fmt::format("unknown op category '{}' (expected {})", name, all_names()));
    }
    bits |= bit;
  }
  return bits;
}

}  // namespace remat::io
