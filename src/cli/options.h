// cli/options.h — the options of `remat partition`, `pareto` and `report`
// from their three sources: --options FILE, --config KEY=VALUE, and the
// dedicated flags (--memory-budget, --solver, ...).
//
// Contract: precedence is fixed and stated in --help (kOptionPrecedence):
// torch's defaults for one release (--torch, else the --options file's
// torch_release, else the release the graph records, else the newest) with
// the graph's own op categories, then the --options file (the options
// object of docs/format.md), then each --config in the order given, then
// the dedicated flags. --config accepts exactly the
// torch._functorch.config flags remat honors (remat::torch_config_flags),
// under torch's names; every bad key or value is Error(kInvalidOption)
// naming the entry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "remat/io.h"

namespace remat::cli {

struct OptionSources {
  std::string torch;                // --torch RELEASE ("" = none)
  std::string file;                 // --options FILE ("" = none)
  std::vector<std::string> config;  // --config KEY=VALUE, in order
};

inline constexpr const char* kOptionPrecedence =
    "Options are applied in this order, later ones winning: torch's defaults for the release "
    "(--torch, else the --options file's torch_release, else the graph's torch_version, else "
    "the newest) with the graph's own op categories, --options FILE, "
    "each --config KEY=VALUE in the order given, then the dedicated flags (--memory-budget, "
    "--solver, ...).";

// The JSON member {"option": value} that one --config entry stands for.
// VALUE is read Python-literal-ish: True / False / None, a JSON number, a
// JSON array, object or "string" as is, a 'single-quoted' string, and any
// other text as a string (greedy, flops).
std::string config_entry_json(const std::string& entry);

// Options for `joint` from the file and the --config entries, not yet
// validated (the command applies its dedicated flags first).
PartitionOptions options_from(const JointGraph& joint, const OptionSources& sources,
                              uint64_t max_input_bytes);

// "cse, recompute_views, ..." for --help.
std::string torch_flag_list();

// The checks of single option values the command line runs while parsing
// (so a bad one is a usage error): each applies the value to default
// options as the sources above would and validates them, throwing
// Error(kInvalidOption or kUnsupported) in the library's words, which say
// what is accepted. --config KEY=VALUE; --torch RELEASE; --solver NAME;
// --runtime-estimator NAME; --activation-quantization JSON.
void check_config_entry(const std::string& entry);
void check_torch_release(const std::string& release);
void check_solver(const std::string& name);
void check_estimator(const std::string& name);
void check_activation_quantization(const std::string& json);

}  // namespace remat::cli
