#!/usr/bin/env python3
"""tools/gen_default_ops.py — writes src/ops/default_ops.inc from the installed torch.

The .inc is data about torch's op library and about the default op lists of
torch._functorch.partitioners.get_default_op_list(); src/ops/registry.cc reads it.
Nothing here is an expectation for tests: it is what torch itself reports.

Contents (all names use remat's target spelling, see src/ops/registry.cc):
  * the category lists of get_default_op_list() as written there, without the
    pointwise_ops() expansion: registry.cc applies the pointwise rule from op
    facts instead (torch derives that expansion from op tags too);
  * aten/prims/... packets that have at least one pointwise overload, and the
    overloads of those packets that are not pointwise themselves;
  * overloads tagged nondeterministic_seeded;
  * view overloads (the first argument is aliased and not written);
  * overloads whose mutability the name rule (op name ends in a single "_",
    or the overload name mentions "out") gets wrong.

One table, of the newest supported release: run this under that release's
torch. What an older release lacks is not a second table but a list in
src/ops/registry.cc (kReleaseGatedPointwise, kReleaseGatedDefaults), each
entry under the TorchBehavior switch that added it. RELEASE_GATED below
names those entries; the tool refuses a torch that lacks any of them, since
its table would take them away from every release.

Usage: python tools/gen_default_ops.py [output path]
"""
import os
import sys

import torch
import torch._functorch.partitioners as partitioners
from torch.fx.experimental.sym_node import magic_methods, method_to_operator


# src/ops/registry.cc's release-gated entries: (list, name). "pointwise" is a
# packet with a pointwise overload, "recomputable" an entry of
# get_default_op_list().recomputable_ops as written there.
RELEASE_GATED = [
    ("pointwise", p) for p in (
        "aten.leaky_relu", "aten._conj_physical", "aten.celu_", "aten.elu_",
        "aten.hardsigmoid_", "aten.hardtanh_", "aten.leaky_relu_", "aten.selu_")
] + [("recomputable", "prims.prepare_softmax_online")]


def callable_name(fn) -> str:
    """remat's target name for a Python callable: module.qualname, with the C
    module `_operator` spelled `operator`."""
    module = fn.__module__
    if module == "_operator":
        module = "operator"
    return f"{module}.{fn.__qualname__}"


def target_name(t) -> str:
    if isinstance(t, torch._ops.OpOverloadPacket):
        ns, op = t._qualified_op_name.split("::")
        return f"{ns}.{op}"
    if isinstance(t, torch._ops.HigherOrderOperator):
        return f"higher_order.{t.name()}"
    return callable_name(t)


def name_rule_mutable(op: str, overload: str) -> bool:
    return (op.endswith("_") and not op.endswith("__")) or "out" in overload


def all_overloads():
    """Every registered operator overload, loaded through torch.ops (so the
    lazily populated namespaces hold every packet)."""
    seen = set()
    for full in sorted(set(torch._C._dispatch_get_all_op_names())):
        ns, rest = full.split("::")
        op, _, overload = rest.partition(".")
        overload = overload or "default"
        if (ns, op, overload) in seen:
            continue
        seen.add((ns, op, overload))
        try:
            packet = getattr(getattr(torch.ops, ns), op)
            ov = getattr(packet, overload)
        except Exception:  # ops whose python binding cannot be created
            continue
        yield ns, op, overload, ov


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "src", "ops", "default_ops.inc")

    pw_packets = {}        # "ns.op" -> list of non-pointwise overload names
    pw_any = set()
    seeded, views, mutable_exceptions = [], [], []
    namespaces = set()
    for ns, op, overload, ov in all_overloads():
        namespaces.add(ns)
        packet = f"{ns}.{op}"
        name = f"{packet}.{overload}"
        tags = ov.tags
        pw_packets.setdefault(packet, [])
        if torch.Tag.pointwise in tags:
            pw_any.add(packet)
        else:
            pw_packets[packet].append(name)
        if torch.Tag.nondeterministic_seeded in tags:
            seeded.append(name)
        schema = ov._schema
        if schema.arguments:
            a0 = schema.arguments[0].alias_info
            if a0 is not None and not a0.is_write:
                views.append(name)
        if schema.is_mutable != name_rule_mutable(op, overload):
            mutable_exceptions.append(name)
    non_pw_in_pw = sorted(n for p in pw_any for n in pw_packets[p])

    # The category lists. pointwise_ops() is stubbed out while building them:
    # its packets come from the pointwise rule in registry.cc (torch derives
    # that list from op tags too), while explicitly listed packets stay keys.
    pointwise = {target_name(p) for p in partitioners.pointwise_ops()}
    full = partitioners.get_default_op_list()
    real_pointwise_ops = partitioners.pointwise_ops
    partitioners.pointwise_ops = lambda: []
    try:
        ops = partitioners.get_default_op_list()
    finally:
        partitioners.pointwise_ops = real_pointwise_ops
    recomputable = sorted(target_name(t) for t in ops.recomputable_ops)
    assert {target_name(t) for t in full.recomputable_ops} == set(recomputable) | pointwise
    random = sorted(target_name(t) for t in ops.random_ops)
    view = sorted(target_name(t) for t in ops.view_ops)
    compute = sorted(target_name(t) for t in ops.compute_intensive_ops)
    fusible = {target_name(t) for t in ops.fusible_ops}
    assert fusible == ({target_name(t) for t in ops.recomputable_ops}
                       | set(random)), "fusible != recomputable | random"
    assert pointwise <= {p for p in pw_any if p.startswith("aten.")}
    has = {"pointwise": pw_any, "recomputable": set(recomputable)}
    missing = [name for kind, name in RELEASE_GATED if name not in has[kind]]
    if missing:
        sys.exit(f"torch {torch.__version__} lacks {missing}: generate the table under the "
                 "newest supported release (src/ops/registry.cc gates what older ones lack)")

    def block(cname, items, comment):
        lines = [f"// {comment}", f"inline constexpr std::string_view {cname}[] = {{"]
        lines += [f'    "{s}",' for s in items]
        lines.append("};")
        return "\n".join(lines)

    text = "\n\n".join([
        "// src/ops/default_ops.inc — GENERATED by tools/gen_default_ops.py from torch "
        f"{torch.__version__}.\n// Do not edit; rerun the tool. Included by src/ops/registry.cc only.",
        block("kDefaultRecomputable", recomputable,
              "get_default_op_list().recomputable_ops without pointwise_ops() (see registry.cc)."),
        block("kDefaultRandom", random, "get_default_op_list().random_ops."),
        block("kDefaultView", view, "get_default_op_list().view_ops."),
        block("kDefaultComputeIntensive", compute,
              "get_default_op_list().compute_intensive_ops."),
        block("kOpNamespaces", sorted(namespaces), "Namespaces of torch's op library."),
        block("kPointwisePackets", sorted(pw_any),
              "Packets with at least one overload tagged pointwise."),
        block("kNonPointwiseOverloads", non_pw_in_pw,
              "Overloads of those packets that are not tagged pointwise."),
        block("kSeededOverloads", sorted(seeded), "Overloads tagged nondeterministic_seeded."),
        block("kViewOverloads", sorted(views),
              "Overloads whose schema aliases the first argument without writing it."),
        block("kMutabilityExceptions", sorted(mutable_exceptions),
              "Overloads whose schema.is_mutable differs from the name rule."),
    ]) + "\n"
    with open(out, "w") as f:
        f.write(text)
    print(f"wrote {out}: {len(text)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
