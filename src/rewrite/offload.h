// rewrite/offload.h — activation offloading: torch's
// `_activation_offloading.activation_offloading.enable_activation_offloading`,
// run by both partitioners after the backward is reordered and before
// getitems are raised.
//
// Release switches (options.torch):
//  * offload_async_ops (2.12): the separate stream is ao.offload / ao.reload
//    / ao.wait_tensor. torch 2.11 instead brackets each device_put with
//    streams.* ops numbered from dynamo's global object registry, which
//    remat cannot compute: with it off, offloading something on the
//    separate stream is an Error(kUnsupported). The synchronous path is the
//    same in every release.
//  * offload_reload_layout (2.13): the async reload passes the original size
//    and stride and its wait keeps the CPU tensor alive, and the backward
//    placeholder's meta holds original_size / original_stride. Off (2.12):
//    reload(p, device), wait_tensor(reload), and the offloaded forward nodes
//    record meta original_device instead; symbolic shapes are no obstacle.
//
// Contract: with options.enable_activation_offloading, on the extracted
// graphs of `e`:
//  * Choice: a forward node is offloaded when its joint node had
//    meta["should_offload"] and it is one of the forward's outputs, but not a
//    model output (the first `num_fwd_outputs`), not a view (op registry),
//    not an operator.getitem, and not a non-contiguous tensor (by size
//    hints). torch also skips static-lifetime inputs, but compares them as
//    joint-graph nodes against forward-graph nodes, so that check never
//    holds and is not reproduced. Nothing chosen: both graphs come back
//    unchanged. A chosen node whose value is not a tensor is an Error, as
//    torch fails on it.
//  * Forward: after the node's last effective user (its users other than
//    the output, and through views their users, transitively; the node
//    itself when there are none) comes
//      - `prims.device_put(x, cpu, non_blocking=True)` named
//        "cpu_offload_<x>", or, with activation_offload_separate_stream,
//      - `ao.offload(x)` named "async_cpu_offload_<x>", then
//        `ao.wait_tensor(offload, x)` named "cpu_offload_<x>";
//    several insertions after one node stack in reverse (FX inserting_after).
//    The output returns the cpu_offload node in x's place. The new nodes'
//    value is x's tensor on the CPU (the wait shares the offload's); x gets
//    meta saved_for_offloading.
//  * Backward: the placeholder of each forward output whose name contains
//    "cpu_offload_" (named by that name without it) is replaced in place by
//    a placeholder named as the forward output, with its value, meta
//    saved_for_offloading and the original tensor (original_device / _size
//    / _stride). Before its first user (the output node when it has none)
//    comes `prims.device_put(p, original_device, non_blocking=True)` named
//    "gpu_reload_<x>", or `ao.reload(p, original_device, size, stride)`
//    named "async_gpu_reload_<x>" then `ao.wait_tensor(reload, p)` named
//    "gpu_reload_<x>" (an Error when it has no user, as torch); every other
//    use of p reads the reload. Values: the original tensor's layout on its
//    device.
//  * With the separate stream, activation_offload_sink_wait moves each
//    forward wait of an offload, in order, to just before the output, and
//    activation_reload_prefetch moves each backward reload earlier, as
//    torch's reorder_for_prefetch: walking the backward in reverse, a
//    reload joins a FIFO queue with its transfer time (bytes / 2^30 * 1000 /
//    activation_offload_cpu_gpu_bw ms); each other node credits its runtime
//    (options.offload_node_runtime for nodes copied from the joint graph, 0
//    for created ones) to the queue's head, which moves right before that
//    node once its time is covered; at the last placeholder the rest lands
//    right after it (the last one queued first).
// New nodes are named through the graphs' FxNamespace in the order torch
// creates them. When `backward_reordered` and some tangent has a user,
// torch's reordering built a fresh backward graph, whose namespace holds
// only the names it copied; the backward namespace is rebuilt that way
// first. Created nodes get origin kCreatedNode. Symbolic sizes in an async
// reload's size/stride arguments (torch passes raw SymInts there) are
// refused with Error(kUnsupported). (Each release's own forms: above.)
#pragma once

#include "extract/extract.h"
#include "remat/options.h"

namespace remat {

// Returns the number of activations offloaded (0: graphs unchanged).
int offload_activations(Extracted& e, int num_fwd_outputs, bool backward_reordered,
                        const PartitionOptions& options);

}  // namespace remat
