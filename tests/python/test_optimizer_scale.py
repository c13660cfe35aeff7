"""The peak-memory optimizer on real deep stacks (remat issue 35): the stored
benchmark graphs of ~2k nodes (bench/graphs, captured from corpus blocks made
deep by bench/scale_graphs.py), where `fast` must reach below torch's own
plans. The reference is torch's plans at the same limit (the `torch_plans`
search, which builds torch's budget plans); the peaks are the plans'
simulated peaks. Speed is measured by bench/bench_scale.py, never here.

Contract:
* At tight limits, where torch's plans recompute a matmul in
  every layer, fast's plan fits the limit, has no hazard and recomputes at
  most half of what torch's best plan does. (Fails when fast's cuts price a
  saved view at its own 0 bytes instead of its root's storage, or bisect the
  price only between its two extremes: optimize/fast.h.)
* At the plain partition's own peak on the transformer stack, fast recomputes
  less than the plain plan: the cheap trade made in the layers where it fits.
  One price per byte makes the same trade in every repeated layer (every
  layer or none), so only taking parts of the cheaper plan layer by layer
  (fast.h's mix) reaches it; without the mix fast returns the plain plan.
* On the ~10k-node transformer stack, fast at the plain partition's own
  peak recomputes no more than fast at a tighter limit (a plan that fits
  there fits here): the cheapest cut's plan builds far over its model
  there, and a large space's second round, with the targets corrected,
  finds what the first missed (with one round fast returned the plain plan,
  486 against 356).
* On the ~50k-node transformer stack, fast at its tightest limit recomputes
  no more than its own plan for a looser limit, which fits there too: both
  are checkpointed plans, and the fully checkpointed one peaks higher than
  a shorter prefix (optimize/checkpoint.h: a step next to that end bisects).
* On the ~10k-node transformer stack at docs/scale.md's tightest limit,
  where the golden section's first fitting prefix peaks at the limit
  itself, fast's checkpointed plan recomputes at most 1.40e9 (1.476e9
  before): the regula falsi goes on from that prefix, its peak being near
  the family's least, where peaks are flat in the prefix length, not a
  sign that a shorter prefix cannot fit (optimize/checkpoint.h).
* On the ~10k-node transformer stack, at a limit its fully checkpointed plan
  does not fit (it peaks at 25.6 MiB), fast finds a shorter checkpointed
  prefix that does (checkpoint.h: a golden-section search for the least
  peak); before, fast called 22 MiB unreachable, naming 25.6 MiB as the
  smallest reachable peak.
* exact on the ~10k-node ResNet stack proves a recompute bound above 0 at a
  tight limit, and calls the plain plan, which recomputes nothing, optimal
  at the plain peak (no plan recomputes less).
* At unet_2335's tightest limit of docs/scale.md, fast builds at most 3
  plans: the mixed plans' bisection (fast.h settle) takes the steps the
  chained model puts over the limit as misses without building them (10
  builds before, for the same plan), and so do the rounds their plans once
  that model has equalled every build's peak (5 before).
* At unet_9914's tightest limit, fast builds one plan: each round's plan
  the chained model puts over the limit corrects the targets by that
  model's rows instead of a build, on a large space always (3 before, the
  same plan).
* At moe_9923's tightest limit of docs/scale.md, where neither torch's plans
  nor the checkpointed ones fit and the repair path reaches the limit, fast
  builds at most 7 plans, the same plan it once built 23 for: the
  checkpointed plans the chained model puts over the limit and the
  smallest peak built so far are not built (optimize/checkpoint.h; 18
  builds), nor is the candidate torch's first pass built over the limit
  built again by the pass with repairs (memory/peak_budget.h
  PeakCandidates; 17), the chained model, which follows a recomputed
  expert matmul's storage through its view to the view's last recomputed
  user, sets aside more of the repair path's moves (11), and the repair
  path's start, built before the checkpointed plans where torch's first
  pass built nothing, lets those be set aside (they peak three times
  higher; 7).
* At moe_1923's 7.6 MiB limit, fast builds at most 6 plans: the same
  chained model equals every build's peak there, so settle's steps over the
  limit are misses without builds (10 before, 128 KiB under each build).
* At resnet_1991's tightest limit, where the repair path starts from
  torch's candidates set aside, fast builds at most 5 plans: the candidates
  are built least chained peak first, and the chained model, equal to their
  peaks there, sets the others aside (memory/peak_budget.h; 8 before, the
  same plan), and its second round's plan, which that model puts over
  the limit, is not built (6 before).
* At resnet_9943's tightest limit, where only torch's repair path reaches
  the limit, fast returns that plan with at most 4 builds (6 before, as
  above) and one cut: its rounds do not run there (optimize/fast.h; their
  cuts were a third of fast's time and offered no plan to build).
* At transformer_1995's 8.85 and 9.98 MiB limits, fast builds at most 5
  plans (9 and 8 before), each no worse than torch's: once a mixed step
  fits, settle builds the last step the chained model plus that build's
  gap puts within the limit, and stops when no step left is (fast.h;
  halving built four steps of one mix for what one build finds).
* At the ~2k-node stacks' loosest limits of docs/scale.md, fast cuts at
  most 11 times for a plan no worse than torch's: a mid-size space's
  search halves the per-byte price 3 times and steps the row prices 6
  times (fast.h kMidSpaceEffort; 18 cuts with 8 and 8, the same plans).
* At a limit torch's cheap-ops plan fits with room, fast's best plan
  recomputes at most 0.6x of it: the best plan, whichever search found it,
  takes the cheapest plan's choices where they fit (fast.h's final mix;
  without it fast keeps 95% of torch's recompute there).
"""

from __future__ import annotations

import gzip
import pathlib

import pytest

remat = pytest.importorskip("remat")

GRAPHS = pathlib.Path(__file__).resolve().parents[2] / "bench" / "graphs"
MiB = 1 << 20

# (graph, limit in MiB): limits of docs/scale.md's table where torch's plans
# recompute a matmul in every layer.
TIGHT = [
    ("transformer_1995", 7.718),
    ("transformer_1995", 6.587),
]


def _joint(name: str) -> bytes:
    with gzip.open(GRAPHS / f"{name}.json.gz", "rb") as f:
        return f.read()


def _partition(joint: bytes, limit: int | None, search: str = "fast") -> dict:
    options = {} if limit is None else {"peak_memory_budget": limit, "peak_search": search}
    return remat.partition(joint, options, as_json=False)


def _check_fits(result: dict, limit: int) -> None:
    assert result["memory"]["peak_bytes"] <= limit
    assert not result["hazards"]
    assert result["peak_search"]["search"] == "fast"


@pytest.mark.one_release
@pytest.mark.parametrize("name,limit_mib", TIGHT, ids=[f"{n}@{m}MiB" for n, m in TIGHT])
def test_fast_reaches_far_below_torchs_plans_at_tight_limits(name, limit_mib):
    joint = _joint(name)
    limit = int(limit_mib * MiB)
    torch_plan = _partition(joint, limit, "torch_plans")
    fast = _partition(joint, limit)
    _check_fits(fast, limit)
    assert torch_plan["recompute_runtime"] > 0
    assert fast["recompute_runtime"] <= 0.5 * torch_plan["recompute_runtime"], (
        fast["recompute_runtime"], torch_plan["recompute_runtime"])


@pytest.mark.one_release
def test_fast_makes_a_layers_trade_where_it_fits_at_the_plain_peak():
    joint = _joint("transformer_1995")
    plain = _partition(joint, None)
    limit = plain["memory"]["peak_bytes"]
    fast = _partition(joint, limit)
    _check_fits(fast, limit)
    assert plain["recompute_runtime"] > 0
    assert fast["recompute_runtime"] < 0.8 * plain["recompute_runtime"], (
        fast["recompute_runtime"], plain["recompute_runtime"])


@pytest.mark.one_release
def test_the_best_plan_takes_the_cheap_trade_where_it_fits():
    """Whichever search found the best plan (here torch's, which recomputes
    the cheap ops of every layer), fast mixes into it the cheapest plan's
    choices where they fit, layer by layer (fast.h: the final mix)."""
    joint = _joint("transformer_1995")
    limit = int(8.85 * MiB)
    torch_plan = _partition(joint, limit, "torch_plans")
    fast = _partition(joint, limit)
    _check_fits(fast, limit)
    assert fast["recompute_runtime"] <= 0.6 * torch_plan["recompute_runtime"], (
        fast["recompute_runtime"], torch_plan["recompute_runtime"])


@pytest.mark.one_release
def test_fast_at_the_plain_peak_is_no_worse_than_at_a_tighter_limit():
    joint = _joint("transformer_9963")
    plain = _partition(joint, None)
    limit = plain["memory"]["peak_bytes"]
    tighter = _partition(joint, int(0.87 * limit))
    assert tighter["memory"]["peak_bytes"] <= limit
    fast = _partition(joint, limit)
    _check_fits(fast, limit)
    assert fast["recompute_runtime"] <= tighter["recompute_runtime"] < plain["recompute_runtime"], (
        fast["recompute_runtime"], tighter["recompute_runtime"], plain["recompute_runtime"])


@pytest.mark.one_release
def test_fast_at_a_deep_stacks_tightest_limit_is_no_worse_than_its_looser_plan():
    """transformer_49803 at docs/scale.md's tightest limit (86.4 MiB) and at
    96.0 MiB: fast's plan for 96.0 MiB peaks at 86.0 MiB, so it fits 86.4
    MiB too, and fast there recomputes no more. Both are checkpointed plans;
    the fully checkpointed one peaks at 96.0 MiB, and a regula falsi step
    drawn to it once landed next to it (fast returned 7.514e9 at 96.0 MiB
    against 7.476e9 for its plan at 138.2 MiB, which then fitted there;
    that plan now peaks at 120.8 MiB and recomputes 5.2e9)."""
    joint = _joint("transformer_49803")
    looser = _partition(joint, 100648448)
    limit = 90647552
    assert looser["memory"]["peak_bytes"] <= limit
    fast = _partition(joint, limit)
    _check_fits(fast, limit)
    assert fast["recompute_runtime"] <= looser["recompute_runtime"], (
        fast["recompute_runtime"], looser["recompute_runtime"])


@pytest.mark.one_release
def test_fast_finds_a_shorter_checkpointed_prefix_where_the_full_one_does_not_fit():
    joint = _joint("transformer_9963")
    limit = 22 * MiB
    fast = _partition(joint, limit)
    _check_fits(fast, limit)


@pytest.mark.one_release
def test_the_checkpointed_search_goes_on_past_the_golden_sections_prefix():
    joint = _joint("transformer_9963")
    limit = 21127424  # docs/scale.md's tightest, 20.149 MiB
    fast = _partition(joint, limit)
    _check_fits(fast, limit)
    assert fast["recompute_runtime"] <= 1.40e9, fast["recompute_runtime"]


@pytest.mark.one_release
def test_exact_at_ten_thousand_nodes_proves_a_bound_and_calls_a_plan_recomputing_nothing_optimal():
    """exact on a ~10k-node stack, at its default node budget: lazy memory
    rows (optimize/exact.h) give it a proven recompute bound above 0 at a
    tight limit; at the plain peak the plain plan recomputes nothing, and is
    optimal (Search::best_is_free: no plan recomputes less; before that
    rule, a bound reaching its recompute proved it once the solver's nodes
    ran out)."""
    joint = _joint("resnet_9943")
    plain = _partition(joint, None)
    assert plain["recompute_runtime"] == 0
    at_plain = _partition(joint, plain["memory"]["peak_bytes"], "exact")["peak_search"]
    assert at_plain["optimal"] and at_plain["recompute_lower_bound"] == 0, at_plain
    tight = _partition(joint, int(28.722 * MiB), "exact")
    search = tight["peak_search"]
    assert tight["memory"]["peak_bytes"] <= int(28.722 * MiB)
    assert 0 < search["recompute_lower_bound"] <= tight["recompute_runtime"], search


# (graph, limit in bytes, most plans built): docs/scale.md's tightest limits
# where fast skips what the chained model rules out; the contract above says
# which skip each pins and what it built before.
RULED_OUT = [
    ("unet_2335", 6355620, 3),    # settle's steps; rounds' plans
    ("moe_9923", 29871872, 7),    # checkpointed plans; torch's candidate built once; repair moves
    ("moe_1923", 7943360, 6),     # settle's steps, the chained model exact there
    ("resnet_1991", 5655300, 5),  # the repair path's start; a round's plan
    ("unet_9914", 17769532, 1),   # rounds' plans (large space)
]


@pytest.mark.one_release
@pytest.mark.parametrize("name,limit,most", RULED_OUT, ids=[n for n, _, _ in RULED_OUT])
def test_fast_builds_no_plan_the_chained_model_rules_out(name, limit, most):
    fast = _partition(_joint(name), limit)
    _check_fits(fast, limit)
    assert fast["peak_search"]["plans_built"] <= most, fast["peak_search"]


# (graph, limit in bytes, most plans built): limits of docs/scale.md where
# one mix's steps build with one gap over the chained model.
GAP_GUIDED = [
    ("transformer_1995", 9279616, 5),
    ("transformer_1995", 10465984, 5),
]


@pytest.mark.one_release
@pytest.mark.parametrize("name,limit,most", GAP_GUIDED, ids=[f"{n}@{l}" for n, l, _ in GAP_GUIDED])
def test_settle_builds_the_step_a_fitting_builds_gap_puts_last_within_the_limit(name, limit, most):
    joint = _joint(name)
    fast = _partition(joint, limit)
    _check_fits(fast, limit)
    assert fast["peak_search"]["plans_built"] <= most, fast["peak_search"]
    torch_plan = _partition(joint, limit, "torch_plans")
    assert fast["recompute_runtime"] <= torch_plan["recompute_runtime"]


# (graph, limit in bytes): docs/scale.md's loosest limits on the ~2k-node
# stacks where fast's one round finds its plan.
LOOSEST_MID = [
    ("transformer_1995", 11652352),
    ("moe_1923", 14561792),
    ("unet_2335", 10042788),
]


@pytest.mark.one_release
@pytest.mark.parametrize("name,limit", LOOSEST_MID, ids=[n for n, _ in LOOSEST_MID])
def test_a_mid_size_search_cuts_at_most_eleven_times_in_one_round(name, limit):
    joint = _joint(name)
    fast = _partition(joint, limit)
    _check_fits(fast, limit)
    assert fast["peak_search"]["cuts"] <= 11, fast["peak_search"]
    torch_plan = _partition(joint, limit, "torch_plans")
    assert fast["recompute_runtime"] <= torch_plan["recompute_runtime"]


@pytest.mark.one_release
def test_fast_runs_no_round_after_a_plan_only_the_repair_path_reached():
    joint = _joint("resnet_9943")
    limit = 27749764
    fast = _partition(joint, limit)
    _check_fits(fast, limit)
    torch_plan = _partition(joint, limit, "torch_plans")
    assert fast["recompute_runtime"] <= torch_plan["recompute_runtime"]
    assert fast["peak_search"]["plans_built"] <= 4, fast["peak_search"]
    assert fast["peak_search"]["cuts"] <= 1, fast["peak_search"]
