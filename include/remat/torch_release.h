// remat/torch_release.h — which torch release remat reproduces, and what
// that release's partitioner does differently from the others.
//
// Contract: remat reproduces the partitioner of every torch release from
// kOldestTorchRelease to kNewestTorchRelease, each with its own decisions.
// The release is chosen once, at a front door (the drop-in reads
// torch.__version__; the command line takes --torch; a joint graph file
// records the release it was captured under; C++ callers set it in
// PartitionOptions). From then on the engine never compares versions: every
// behavioral difference between two consecutive releases is one named
// switch of TorchBehavior, documented with the release that introduced it,
// and a stage reads that switch. TorchBehavior::of(release) sets them all;
// a caller (a test, say) may then flip one switch to study it alone.
// docs/torch-releases.md lists every switch, its release and its parity test.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace remat {

// A torch feature release, major.minor: patch releases do not change the
// partitioner.
struct TorchRelease {
  int major = 2;
  int minor = 15;

  friend constexpr bool operator==(TorchRelease, TorchRelease) = default;
  friend constexpr auto operator<=>(TorchRelease a, TorchRelease b) {
    return a.major != b.major ? a.major <=> b.major : a.minor <=> b.minor;
  }
  std::string str() const;  // "2.15"
};

inline constexpr TorchRelease kOldestTorchRelease{2, 11};
inline constexpr TorchRelease kNewestTorchRelease{2, 15};

// What a torch version string says, as a front door needs it.
struct TorchVersion {
  TorchRelease release;
  // A pre-release, nightly or development build ("2.16.0.dev20261101",
  // "2.15.0a0+git1234", "2.15.0rc1"): its partitioner may be anywhere
  // between two releases, so it is never taken as supported.
  bool prerelease = false;
};
// Parses "2.15", "2.15.0", "2.15.0+cu132", "2.16.0.dev20261101+cpu",
// "2.15.0a0+gitabc"; nullopt for anything else.
std::optional<TorchVersion> parse_torch_version(std::string_view text);

bool is_supported(TorchRelease release);
// "torch 2.11 to 2.15": the supported range, for messages.
std::string supported_torch_releases();
// The supported release nearest to `release` (the oldest for older ones,
// the newest for newer ones): what an explicit opt-in runs.
TorchRelease nearest_supported(TorchRelease release);

// Every behavioral difference between consecutive supported releases, one
// switch each. A switch is named after what it does and is true from the
// release that introduced it on (the comment gives that release, the torch
// function it lives in, and what it changes). Defaults are the newest
// release's.
struct TorchBehavior {
  TorchRelease release = kNewestTorchRelease;  // the release these were set from

  // Grouped by the stage that reads them; torch_switches() lists them by
  // release, with the torch function each lives in and its parity test.

  // --- prepare: DCE, CSE, tags --------------------------------------------
  bool impure_checks_packet_default = true;        // 2.13
  bool cse_partition_key = true;                   // 2.14
  bool cse_float_bit_keys = true;                  // 2.14
  bool cse_skip_impure = true;                     // 2.14
  bool cse_custom_context_key = true;              // 2.14
  bool cse_keep_mutation_bases = true;             // 2.14
  bool functional_graph_allows_shallow_copy_data = true;  // 2.14
  bool collective_leaf_getitems = true;            // 2.15
  bool effectful_recompute_policy = true;          // 2.15
  bool fx_name_count_by_base = true;               // 2.12 (graph/fx_names)

  // --- analyze / decide / extract: what is saved, and where ---------------
  bool opaque_values_saved = true;                 // 2.12
  bool drop_assert_only_symbool = true;            // 2.12
  bool default_skips_assert_only_symbool = true;   // 2.13
  bool default_skips_assert_async = true;          // 2.13
  bool generator_is_opaque = true;                 // 2.13
  bool script_object_size_flag = true;             // 2.13
  bool size_of_no_return_ops = true;               // 2.13
  bool sdpa_zero_dropout_not_random = true;        // 2.14
  bool bind_unreplaced_symbols = true;             // 2.14
  bool wait_tensors_like_wait_tensor = true;       // 2.15
  bool device_valued_nodes = true;                 // 2.15

  // --- decide: memory budget, knapsack, costs -----------------------------
  bool leaky_relu_family_pointwise = true;         // 2.12
  bool sdpa_flops_gqa = true;                      // 2.12
  bool region_memory_budget = true;                // 2.13
  bool prepare_softmax_online_recomputable = true; // 2.13
  bool knapsack_empty_returns_aggressive = true;   // 2.14
  bool flops_flash_attention_bshd = true;          // 2.14
  bool flops_mm_family_extra_args = true;          // 2.14
  bool region_budget_full_coverage_flag = true;    // 2.15
  bool epilogue_mutation_unsaveable = true;        // 2.15
  bool infinite_path_exact_inf = true;             // 2.15
  bool flops_sdpa_for_cpu = true;                  // 2.15
  bool flops_registered_hops = true;               // 2.15
  bool flops_nested_attention_dv = true;           // 2.15

  // --- extract / rewrite: the graphs emitted ------------------------------
  bool quantize_skips_user_outputs = true;         // 2.12
  bool offload_async_ops = true;                   // 2.12
  bool output_stack_traces_meta = true;            // 2.12 (drop-in)
  bool offload_reload_layout = true;               // 2.13
  bool mark_autograd_backward_meta = true;         // 2.13 (drop-in)
  bool min_cut_information_payload = true;         // 2.13 (drop-in)
  bool control_deps_extraction = true;             // 2.14
  bool static_input_meta = true;                   // 2.15 (drop-in)

  // --- sync: ranks agreeing on one decision --------------------------------
  bool sync_canonical_names = true;                // 2.13
  bool sync_stable_target_str = true;              // 2.14
  bool sync_decision_compile_pg = true;            // 2.15 (drop-in)

  // The switches for one supported release: each is on from the release
  // that introduced it (torch_switches()). Throws Error(kUnsupported)
  // naming the supported range for any other release.
  static TorchBehavior of(TorchRelease release);
};

// One switch of TorchBehavior, as a table row: its name (as in options
// JSON's "torch_switches" and docs/torch-releases.md), the release that
// introduced it, the member, where it lives in torch, what it changes, and
// its parity test. Switches marked "(drop-in)" above change what the Python
// front door stamps on the graphs it builds; it reads them from this table
// too (remat.torch_releases()).
struct TorchSwitch {
  std::string_view name;
  TorchRelease since;
  bool TorchBehavior::*member;
  std::string_view where;  // the torch function(s) it lives in
  std::string_view what;   // what the release that introduced it changed
  std::string_view test;   // the parity test that pins it (file::function)
};
// Every switch, grouped by release, oldest first: the one table that maps
// releases to behavior.
std::span<const TorchSwitch> torch_switches();
const TorchSwitch* find_torch_switch(std::string_view name);

}  // namespace remat
