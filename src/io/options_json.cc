// io/options_json.cc — ActivationQuantizationOptions::from_json
// (remat/options.h): torch's activation_quantization_aten_pass dict, as JSON.
//
// Contract: the keys are the ones torch's partitioner reads, spelled as in
// torch's dict; values have JSON's types for torch's (strings for dtypes,
// bools for flags, a number for size_in_mb). Dtype strings are resolved as
// torch does (the text after the last '.', then getattr(torch, ...), so
// aliases such as "torch.half" work) and stored canonical. Anything else is
// Error(kInvalidOption) naming the key: a typo must not silently fall back to
// torch's default.
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <simdjson.h>

#include "graph/dtypes.h"
#include "remat/error.h"
#include "remat/options.h"

namespace remat {
namespace {

[[noreturn]] void bad(std::string_view key, std::string_view why) {
  throw Error(ErrorCode::kInvalidOption,
              fmt::format("activation_quantization.{}: {}", key, why));
}

// torch: getattr(torch, name.split(".")[-1]).
std::string resolve_dtype(std::string_view key, std::string_view name) {
  const size_t dot = name.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? name : name.substr(dot + 1);
  const std::string_view canonical = canonical_dtype(last);
  if (canonical.empty()) bad(key, fmt::format("\"{}\" is not a torch dtype", name));
  return std::string(canonical);
}

bool as_bool(std::string_view key, simdjson::dom::element v) {
  bool b = false;
  if (v.get(b)) bad(key, "expected a bool");
  return b;
}

std::string_view as_string(std::string_view key, simdjson::dom::element v) {
  std::string_view s;
  if (v.get(s)) bad(key, "expected a string");
  return s;
}

}  // namespace

ActivationQuantizationOptions ActivationQuantizationOptions::from_json(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(json.data(), json.size()).get(root)) {
    throw Error(ErrorCode::kParse,
                fmt::format("activation_quantization: {}", simdjson::error_message(err)));
  }
  ActivationQuantizationOptions q;
  if (root.is_null()) return q;
  simdjson::dom::object obj;
  if (root.get(obj)) {
    throw Error(ErrorCode::kInvalidOption,
                "activation_quantization: expected an object of torch's "
                "activation_quantization_aten_pass options, or null");
  }
  q.enabled = true;
  for (auto [key, value] : obj) {
    if (key == "quant_type") {
      q.quant_type = resolve_dtype(key, as_string(key, value));
    } else if (key == "size_in_mb") {
      double d = 0;
      if (value.get(d)) bad(key, "expected a number");
      q.size_in_mb = d;
    } else if (key == "use_scaling") {
      q.use_scaling = as_bool(key, value);
    } else if (key == "exclude_primals") {
      q.exclude_primals = as_bool(key, value);
    } else if (key == "allowed_dtypes") {
      // torch: "torch.bfloat16;torch.float32", split on ';'.
      q.allowed_dtypes.clear();
      std::string_view rest = as_string(key, value);
      while (true) {
        const size_t semi = rest.find(';');
        q.allowed_dtypes.push_back(resolve_dtype(key, rest.substr(0, semi)));
        if (semi == std::string_view::npos) break;
        rest = rest.substr(semi + 1);
      }
    } else if (key == "skip_dynamo_guards") {
      q.skip_dynamo_guards = as_bool(key, value);
    } else if (key == "quantize_dynamic_shape") {
      q.quantize_dynamic_shape = as_bool(key, value);
    } else {
      bad(key, "unknown key (torch reads quant_type, size_in_mb, use_scaling, exclude_primals, "
               "allowed_dtypes, skip_dynamo_guards, quantize_dynamic_shape)");
    }
  }
  return q;
}

}  // namespace remat
