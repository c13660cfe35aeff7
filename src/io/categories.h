// io/categories.h — a JSON list of op category names, as the joint graph's
// ops[].categories and the option "ops" (docs/format.md) spell them.
//
// Contract: the one parser of category lists. Names are those of
// remat/ops.h's kOpCategoryNames; the result is their bits OR-ed. A value
// that is not an array, an element that is not a string and an unknown name
// are reported through `fail`, which must throw (the caller's Error names
// its own field and context); fail returning is a bug and becomes
// Error(kInternal).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include <simdjson.h>

namespace remat::io {

using CategoryFail = std::function<void(std::string_view why)>;

uint8_t read_op_categories(simdjson::dom::element list, const CategoryFail& fail);

}  // namespace remat::io
