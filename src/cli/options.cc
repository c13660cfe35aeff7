// cli/options.cc — --options FILE and --config KEY=VALUE (cli/options.h).
//
// Contract: see the header. The command line only translates its syntax into
// the options object; remat::apply_options reads it, so a value has the same
// meaning and the same errors here as in an --options file or in Python.
#include "options.h"

#include <cstdio>
#include <regex>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "remat/error.h"
#include "remat/io.h"

namespace remat::cli {
namespace {

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

bool is_json_number(const std::string& text) {
  static const std::regex kNumber(R"(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)");
  return std::regex_match(text, kNumber);
}

// VALUE as JSON text (config_entry_json's rules).
std::string value_json(const std::string& value) {
  if (value == "True") return "true";
  if (value == "False") return "false";
  if (value == "None") return "null";
  if (value == "true" || value == "false" || value == "null" || is_json_number(value)) return value;
  if (!value.empty() && (value[0] == '[' || value[0] == '{' || value[0] == '"')) return value;
  if (value.size() >= 2 && value.front() == '\'' && value.back() == '\'') {
    return json_string(std::string_view(value).substr(1, value.size() - 2));
  }
  return json_string(value);
}

const TorchConfigFlag* find_flag(std::string_view name) {
  for (const TorchConfigFlag& f : torch_config_flags()) {
    if (f.torch_name == name) return &f;
  }
  return nullptr;
}

// An "ops" key that names no operator of the graph does nothing: say so,
// and when the key is an overload of an op the graph has, name the packet
// the categories are keyed by. A warning, not an error: one options file
// may serve several graphs.
void warn_unmatched_ops(const JointGraph& joint, const std::string& path, const std::string& json) {
  for (const std::string& key : unmatched_op_keys(joint, json)) {
    std::string hint;
    const size_t dot = key.rfind('.');
    if (dot != std::string::npos && dot > 0) {
      const std::string packet = key.substr(0, dot);
      for (const OpInfo& op : joint.graph.ops())
        if (joint.graph.str(op.packet) == packet) {
          hint = fmt::format(" (categories are keyed by packet: did you mean '{}'?)", packet);
          break;
        }
    }
    std::fprintf(stderr,
                 "remat: warning: --options %s: \"ops\" key '%s' matches no operator of the graph, "
                 "so it does nothing%s\n",
                 path.c_str(), key.c_str(), hint.c_str());
  }
}

}  // namespace

std::string torch_flag_list() {
  std::string out;
  for (const TorchConfigFlag& f : torch_config_flags()) {
    if (!out.empty()) out += ", ";
    out += f.torch_name;
  }
  return out;
}

std::string config_entry_json(const std::string& entry) {
  const size_t eq = entry.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("--config '{}': expected KEY=VALUE, e.g. recompute_views=True", entry));
  }
  const std::string key = entry.substr(0, eq);
  const TorchConfigFlag* flag = find_flag(key);
  if (flag == nullptr) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("--config {}: '{}' is not a torch._functorch.config flag remat "
                            "honors (those are: {}); remat's own options go in --options FILE",
                            entry, key, torch_flag_list()));
  }
  return fmt::format("{{{}: {}}}", json_string(flag->option), value_json(entry.substr(eq + 1)));
}

namespace {

// Default options with `member` ("\"key\": value") applied and validated;
// a failure names the flag and its value.
void check_member(const std::string& flag, const std::string& value, const std::string& member) {
  try {
    PartitionOptions scratch;
    apply_options("{" + member + "}", scratch);
    scratch.validate();
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{} {}: {}", flag, value, e.what()));
  }
}

}  // namespace

void check_config_entry(const std::string& entry) {
  const std::string json = config_entry_json(entry);  // names --config itself
  check_member("--config", entry, json.substr(1, json.size() - 2));
}

void check_torch_release(const std::string& release) {
  check_member("--torch", release, "\"torch_release\": " + json_string(release));
}

void check_solver(const std::string& name) {
  check_member("--solver", name, "\"activation_memory_budget_solver\": " + json_string(name));
}

void check_estimator(const std::string& name) {
  check_member("--runtime-estimator", name,
               "\"activation_memory_budget_runtime_estimator\": " + json_string(name));
}

void check_activation_quantization(const std::string& json) {
  try {
    PartitionOptions scratch;
    scratch.activation_quantization = ActivationQuantizationOptions::from_json(json);
    scratch.validate();
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("--activation-quantization: {}", e.what()));
  }
}

PartitionOptions options_from(const JointGraph& joint, const OptionSources& sources,
                              uint64_t max_input_bytes) {
  const std::string file = sources.file.empty() ? "" : read_file(sources.file, max_input_bytes);
  // The release first: it sets every switch the later sources may flip.
  PartitionOptions options;
  if (!sources.torch.empty()) {
    try {
      apply_options(fmt::format("{{\"torch_release\": {}}}", json_string(sources.torch)), options);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("--torch {}: {}", sources.torch, e.what()));
    }
  } else if (!names_torch_release(file)) {
    options = default_options(joint);
  }
  for (const auto& [key, cats] : joint.op_overrides) options.ops.set(key, cats);
  if (!sources.file.empty()) {
    try {
      apply_options(file, options);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("--options {}: {}", sources.file, e.what()));
    }
    warn_unmatched_ops(joint, sources.file, file);
  }
  for (const std::string& entry : sources.config) {
    const std::string json = config_entry_json(entry);
    try {
      apply_options(json, options);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("--config {}: {}", entry, e.what()));
    }
  }
  return options;
}

}  // namespace remat::cli
