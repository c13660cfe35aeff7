// rewrite/quantize.h — FP8 activation quantization: torch 2.13's
// enable_activation_quantization, which _extract_fwd_bwd_modules runs on the
// graphs it has just built when inductor's
// post_grad_fusion_options["activation_quantization_aten_pass"] is set (for
// both partitioners, before any other rewrite).
//
// Contract, as torch:
//  * Candidates: the forward's outputs, in order, that are saved values
//    (minus names containing "primals" with exclude_primals) and pass
//    should_quantize: a tensor value of an allowed dtype whose size
//    numel * itemsize / 2**20 is >= size_in_mb (a symbolic size is settled as
//    SizeQuery describes, through the options' hook), and that are not
//    static-lifetime inputs. A forward output that is no node is an
//    Error(kInvalidGraph) (torch raises AttributeError on it).
//  * Nothing qualifies: the graphs are left alone (torch runs nothing more:
//    no counters, no trace artifacts).
//  * User outputs (torch.quantize_skips_user_outputs, 2.12 on): the walk
//    over output positions starts at num_fwd_outputs, so a value that is
//    both a user output and a saved value is quantized only where it is
//    saved. 2.11 starts at position 0 and quantizes the user's position
//    too: it returns the user an fp8 tensor and builds a backward with an
//    extra, dead placeholder that fails at run time. remat does not build
//    that graph: under 2.11 such an overlap is an Error(kUnsupported)
//    (the drop-in falls back to torch). Without an overlap the two walks
//    are the same (only saved values are candidates).
//  * Forward: at each output position past num_fwd_outputs holding a
//    candidate x (position P), right after x: with scaling,
//    abs -> amax([-1], keepdim) -> float64 -> clamp_min(1e-12) -> reciprocal
//    -> mul(finfo(quant_type).max) -> float32 named fp8_scale_pos_P_<x>, then
//    float32(x) * scale -> clamp_min(finfo.min) -> clamp_max(finfo.max) ->
//    quant_type named fp8_quant_pos_P_<x>; without, only the last convert of
//    x. The output takes the quantized node at P; the scales join the outputs
//    before the trailing sym nodes.
//  * Backward: each placeholder of a quantized value is replaced, in place,
//    by a placeholder named like its fp8_quant node (with its value); with
//    forward scaling, placeholders for the scales follow the last
//    non-tangent placeholder. Each quantized placeholder is dequantized:
//    with backward scaling, right after its scale placeholder,
//    convert(dequant dtype) / scale -> convert(dequant dtype); without, one
//    convert named dequant_<placeholder>, right after it. Every other use of
//    the placeholder moves to the dequantized value.
//  * New nodes are named through the graphs' FxNamespace in the order torch
//    creates them ("abs_default", "mul_tensor", ...), carry value metadata as
//    torch's fake tensors would (rewrite/value_meta.h) with tensor_meta, and
//    get origin kCreatedNode. Forward scaling and backward scaling follow
//    ActivationQuantizationOptions::scale_forward / scale_backward, which
//    reproduce torch's two different defaults.
#pragma once

#include <cstdint>
#include <vector>

#include "extract/extract.h"
#include "remat/graph.h"
#include "remat/options.h"
#include "remat/result.h"
#include "remat/torch_release.h"

namespace remat {

// Quantizes e's graphs in place. `static_lifetime` flags the static-lifetime
// inputs among g's nodes (g: the graph extraction ran on). Returns the joint
// ids (the forward nodes' origins) of the quantized saved values in forward
// output order; empty when nothing qualified. With `snapshots`, appends the
// forward before and after, then the backward before and after, under
// torch's artifact names. With `log`, appends the debug line torch logs for
// each static-lifetime input it skips ("Skipping quantization of static
// input %s: "), once per forward output that holds one. `torch` is the
// release's behavior (its quantize_skips_user_outputs switch).
std::vector<NodeId> quantize_activations(const Graph& g, Extracted& e,
                                         const std::vector<uint8_t>& static_lifetime,
                                         int num_fwd_outputs,
                                         const ActivationQuantizationOptions& options,
                                         std::vector<GraphSnapshot>* snapshots,
                                         std::vector<LogRecord>* log = nullptr,
                                         const TorchBehavior& torch = TorchBehavior{});

}  // namespace remat
