"""remat.torch tells users what torch's partitioner tells them: the same log
lines through the same logger, the same structured-trace artifacts, the same
debug files, computed live from torch on the same joint graphs.

* log lines: torch's and remat's partitioners run on copies of captured
  joint graphs with AOT_PARTITIONER_DEBUG on and the partitioner logger at
  DEBUG; the (level, message) sequences are equal;
* min_cut_information: under AOT_PARTITIONER_DEBUG with a budget that reaches
  the knapsack, both emit the artifacts with equal JSON payloads, and keep
  the payload on the graph for AOTAutograd's cache;
* a graph with no finite cut: the min_cut_failed_* artifacts (the edge list
  byte for byte), min_cut_failed_graph.txt and the error's file lines;
* visualize_memory_budget_pareto: the frontier lands where torch saves its
  plot, drawn by remat with torch's points;
* remat's own remat_partition artifact, REMAT_REPORT_DIR reports, and the
  helpers for the rewrites remat does not perform yet.
"""

from __future__ import annotations

import html as html_module
import json
import logging
import os
import re
import sys
import types
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch._functorch import partitioners as tp  # noqa: E402

import remat  # noqa: E402
from corpus import captured_graphs, run_partition  # noqa: E402

rt = pytest.importorskip("remat.torch", reason="remat.torch is not importable (engine not built)")
from remat.torch import _trace  # noqa: E402

HERE = Path(__file__).resolve().parent
NO_FINITE_CUT = HERE.parent / "data" / "no_finite_cut.json"
LOGGER = "torch._functorch.partitioners"


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def logger_level():
    """Sets the partitioner logger's level for one test. setLevel (not the
    attribute) so that logging's isEnabledFor cache is invalidated."""
    logger = logging.getLogger(LOGGER)
    old = logger.level
    yield logger.setLevel
    logger.setLevel(old)


@pytest.fixture
def partitioner_log(monkeypatch, logger_level):
    """The partitioner logger at DEBUG (not propagated), AOT_PARTITIONER_DEBUG on."""
    logger = logging.getLogger(LOGGER)
    logger_level(logging.DEBUG)
    monkeypatch.setattr(logger, "propagate", False)
    monkeypatch.setattr(tp, "AOT_PARTITIONER_DEBUG", True)

    def run(fn, cap, **config):
        handler = _Records()
        logger.addHandler(handler)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = run_partition(fn, cap, **config)
        finally:
            logger.removeHandler(handler)
        return out, [(r.levelname, r.getMessage()) for r in handler.records]

    return run


@pytest.fixture
def artifacts():
    """Structured-trace records: (name, encoding, payload), in order."""
    from torch._logging._internal import trace_log

    class Handler(logging.Handler):
        def __init__(self):
            super().__init__(level=logging.DEBUG)
            self.items: list[tuple[str, str, str]] = []

        def emit(self, record):
            meta = getattr(record, "metadata", {})
            if "artifact" in meta:
                art = meta["artifact"]
                self.items.append((art["name"], art["encoding"], record.payload))

    handler = Handler()
    old_level = trace_log.level
    trace_log.setLevel(logging.DEBUG)
    trace_log.addHandler(handler)
    try:
        yield handler.items
    finally:
        trace_log.removeHandler(handler)
        trace_log.setLevel(old_level)


def _long_chain():
    """A fusible chain over 100 forward positions long: torch logs "too long"."""
    sys.path.insert(0, str(HERE.parents[1] / "bench"))
    try:
        import cases
    finally:
        sys.path.pop(0)

    def f(x):
        y = x
        for _ in range(60):
            y = torch.sin(y) * 1.5
        return y

    joint = cases.capture(f, torch.randn(8, requires_grad=True), name="long_chain")

    class Cap:  # the corpus' CapturedGraph interface run_partition needs
        label = "long_chain"
        num_fwd_outputs = joint.kwargs["num_fwd_outputs"]

        def fresh_joint(self):
            from corpus.capture import copy_graph_module
            return copy_graph_module(joint.gm)

        joint_inputs = None

        def partition_kwargs(self):
            return dict(joint.kwargs)

    return Cap()


def _plain_run(fn, cap, **config):
    import torch._functorch.config as fconfig

    with fconfig.patch(config):
        return fn(cap.fresh_joint(), None, **cap.partition_kwargs())


LOG_CASES = ["mlp_gelu_d3", "transformer_block", "lstm_unrolled", "checkpoint_mlp"]


@pytest.mark.parametrize("budget", [1.0, 0.1])
@pytest.mark.parametrize("case_name", LOG_CASES)
def test_partitioner_log_lines_match_torch(case_name, budget, partitioner_log):
    seen = set()
    for cap in captured_graphs(case_name):
        _, expected = partitioner_log(tp.min_cut_rematerialization_partition, cap,
                                      activation_memory_budget=budget)
        _, actual = partitioner_log(rt.min_cut_rematerialization_partition, cap,
                                    activation_memory_budget=budget)
        assert actual == expected, cap.label
        seen.update(msg.split(" ")[0] for _, msg in expected)
    # The cases exercise the lines: banned ops and the final debug summary always.
    assert {"Ops", "Theoretical", "#", "Count"} <= seen, seen


def test_ban_rule_lines_all_appear_and_match(partitioner_log, monkeypatch):
    """"too long", "used above/below fusible" and "materialized backwards",
    each seen in torch's log and matched by remat's."""
    kinds = set()
    chain = _long_chain()
    logger = logging.getLogger(LOGGER)
    for fn_pair in [(chain, _plain_run)] + [(cap, run_partition) for cap in captured_graphs("lstm_unrolled")]:
        cap, runner = fn_pair
        logs = {}
        for who, fn in (("torch", tp.min_cut_rematerialization_partition),
                        ("remat", rt.min_cut_rematerialization_partition)):
            handler = _Records()
            logger.addHandler(handler)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    runner(fn, cap)
            finally:
                logger.removeHandler(handler)
            logs[who] = [(r.levelname, r.getMessage()) for r in handler.records]
        assert logs["remat"] == logs["torch"], cap.label
        kinds.update(m.split(" ")[0] for _, m in logs["torch"])
    assert {"too", "used", "materialized"} <= kinds, kinds


def test_dynamic_dp_solver_warns_as_torch(partitioner_log):
    cap = captured_graphs("mlp_gelu_d3")[0]
    config = dict(activation_memory_budget=0.1,
                  activation_memory_budget_solver="dynamic_memory_budget_dp")
    _, expected = partitioner_log(tp.min_cut_rematerialization_partition, cap, **config)
    _, actual = partitioner_log(rt.min_cut_rematerialization_partition, cap, **config)
    assert any(level == "WARNING" and "dynamic_memory_budget_dp" in m for level, m in expected)
    assert actual == expected


@pytest.mark.parametrize("case_name", ["mlp_gelu_d3", "transformer_block", "cnn_bn_maxpool"])
def test_min_cut_information_matches_torch(case_name, partitioner_log, artifacts):
    cap = captured_graphs(case_name)[0]
    graphs = {}
    for who, fn in (("torch", tp.min_cut_rematerialization_partition),
                    ("remat", rt.min_cut_rematerialization_partition)):
        artifacts.clear()
        joint = cap.fresh_joint()
        from corpus.capture import replay_context

        with replay_context(cap, activation_memory_budget=0.1), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(joint, cap.joint_inputs, **cap.partition_kwargs())
        graphs[who] = ([p for n, e, p in artifacts if n == "min_cut_information"],
                       getattr(joint.graph, "_min_cut_info_str", None))
        assert all(e == "json" for n, e, _ in artifacts if n == "min_cut_information")
    expected, actual = graphs["torch"][0], graphs["remat"][0]
    assert expected, "the budget must reach torch's knapsack for this test to mean anything"
    assert [json.loads(p) for p in actual] == [json.loads(p) for p in expected]
    # 2.13 on, the payload is also kept on the graph (min_cut_information_payload).
    kept = [graphs[who][1] for who in ("torch", "remat")]
    assert (kept[0] is None) == (kept[1] is None)
    if kept[0] is not None:
        assert json.loads(kept[1]) == json.loads(kept[0])


def _no_finite_cut_module():
    doc = json.loads(NO_FINITE_CUT.read_text())
    return rt.import_graph(doc), doc["num_fwd_outputs"]


def test_no_finite_cut_emits_torchs_artifacts_and_files(tmp_path, monkeypatch, artifacts):
    monkeypatch.chdir(tmp_path)
    gm, nfo = _no_finite_cut_module()
    with pytest.raises(RuntimeError) as theirs:
        tp.min_cut_rematerialization_partition(gm, None, num_fwd_outputs=nfo)
    expected = list(artifacts)
    artifacts.clear()
    gm, nfo = _no_finite_cut_module()
    with pytest.raises(remat.NoFiniteCutError) as ours:
        rt.min_cut_rematerialization_partition(gm, None, num_fwd_outputs=nfo)
    actual = list(artifacts)

    by_name = lambda items: {n: p for n, _, p in items}  # noqa: E731
    # torch draws min_cut_failed_svg only with pydot; remat with graphviz.
    assert [n for n, _, _ in expected if n != "min_cut_failed_svg"] == \
        [n for n, _, _ in actual if n != "min_cut_failed_svg"]
    assert by_name(actual)["min_cut_failed_edge_list"] == by_name(expected)["min_cut_failed_edge_list"]
    assert by_name(actual)["min_cut_failed_fx_graph"] == by_name(expected)["min_cut_failed_fx_graph"]
    assert (tmp_path / "min_cut_failed_graph.txt").exists()   # torch's
    assert (tmp_path / "min_cut_failed_graph_1.txt").read_text() == \
        by_name(actual)["min_cut_failed_fx_graph"]             # remat's, numbered as torch does
    assert "FX graph dump: min_cut_failed_graph_1.txt" in str(ours.value)
    assert "FX graph dump: min_cut_failed_graph.txt" in str(theirs.value)
    tlparse_hint = "Use tlparse to extract debug artifacts"
    assert tlparse_hint in str(ours.value) and tlparse_hint in str(theirs.value)
    if _trace.shutil.which("dot"):
        svg = by_name(actual)["min_cut_failed_svg"]
        assert ET.fromstring(svg).tag.endswith("svg")
        assert "Min-cut graph visualization: min_cut_failed.svg" in str(ours.value)
        assert (tmp_path / "min_cut_failed.svg").read_text() == svg
    # The error keeps what the engine explained.
    assert ours.value.explanation and "mm_in" in ours.value.edge_list


def test_report_dir_writes_a_diagnosis_page_for_a_graph_with_no_finite_cut(tmp_path, monkeypatch):
    """As `remat report` does for such a graph: the page gives the diagnosis,
    the error names the page, and the error is still raised."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REMAT_REPORT_DIR", str(tmp_path / "reports"))
    gm, nfo = _no_finite_cut_module()
    with pytest.raises(remat.NoFiniteCutError) as ours:
        rt.min_cut_rematerialization_partition(gm, None, num_fwd_outputs=nfo)
    (page,) = (tmp_path / "reports").glob("*.html")
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert "no valid partition" in html and 'id="diagnosis"' in html
    diagnosis = [line.strip() for line in str(ours.value.__cause__).splitlines() if line.strip()]
    assert diagnosis  # the engine's own message, line by line on the page
    assert all(line in html_module.unescape(html) for line in diagnosis)
    assert f"remat report: {page}" in str(ours.value)


def test_files_the_drop_in_writes_follow_links_and_ignore_planted_temporaries(tmp_path, monkeypatch):
    """The failed cut's graph dump and the Pareto chart go through the command
    line's writer: a symlink planted at the old predictable temporary name
    (PATH.tmp<pid>) is left alone, a link at the path itself is followed to
    its target, which keeps its mode."""
    pid = os.getpid()
    monkeypatch.chdir(tmp_path)
    bait = tmp_path / "bait"
    bait.write_text("keep")
    (tmp_path / f"min_cut_failed_graph.txt.tmp{pid}").symlink_to(bait)
    gm, nfo = _no_finite_cut_module()
    with pytest.raises(remat.NoFiniteCutError):
        rt.min_cut_rematerialization_partition(gm, None, num_fwd_outputs=nfo)
    assert bait.read_text() == "keep"
    assert "class" in (tmp_path / "min_cut_failed_graph.txt").read_text()

    cap = captured_graphs("mlp_gelu_d3")[0]
    charts = tmp_path / "charts"
    config = dict(activation_memory_budget=0.1, visualize_memory_budget_pareto=True,
                  memory_budget_pareto_dir=str(charts))
    run_partition(rt.min_cut_rematerialization_partition, cap, **config)
    (chart,) = charts.iterdir()
    chart.unlink()
    kept = tmp_path / "kept.svg"
    kept.write_text("old")
    kept.chmod(0o600)
    chart.symlink_to(kept)
    (charts / f"{chart.name}.tmp{pid}").symlink_to(bait)
    run_partition(rt.min_cut_rematerialization_partition, cap, **config)
    assert bait.read_text() == "keep"
    assert chart.is_symlink() and ET.fromstring(kept.read_text()).tag.endswith("svg")
    assert kept.stat().st_mode & 0o777 == 0o600


def test_a_dangling_symlink_holds_its_name_for_the_failed_cut_files(tmp_path, monkeypatch):
    """torch's numbering skips names already taken; a dangling symlink takes
    one too, so the graph dump is not created wherever the link points."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "min_cut_failed_graph.txt").symlink_to(tmp_path / "elsewhere" / "made.txt")
    gm, nfo = _no_finite_cut_module()
    with pytest.raises(remat.NoFiniteCutError) as ours:
        rt.min_cut_rematerialization_partition(gm, None, num_fwd_outputs=nfo)
    assert not (tmp_path / "elsewhere" / "made.txt").exists()
    assert "FX graph dump: min_cut_failed_graph_1.txt" in str(ours.value)
    assert (tmp_path / "min_cut_failed_graph_1.txt").is_file()


class _FakePyplot(types.ModuleType):
    """Stands in for matplotlib.pyplot (not a remat dependency): records what
    torch plots and where it saves it."""

    def __init__(self):
        super().__init__("matplotlib.pyplot")
        self.plots, self.saved = [], []
        fig = types.SimpleNamespace(savefig=self.saved.append)
        self.gcf = lambda: fig
        for name in ("figure", "annotate", "xlabel", "ylabel", "title", "grid", "show"):
            setattr(self, name, lambda *a, **k: None)

    def plot(self, x, y, **kwargs):
        self.plots.append((list(x), list(y)))


def test_pareto_frontier_lands_where_torch_saves_its_plot(tmp_path, monkeypatch):
    fake = _FakePyplot()
    monkeypatch.setitem(sys.modules, "matplotlib", types.ModuleType("matplotlib"))
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", fake)
    cap = captured_graphs("mlp_gelu_d3")[0]
    config = dict(activation_memory_budget=0.1, visualize_memory_budget_pareto=True,
                  memory_budget_pareto_dir=str(tmp_path / "torch"))
    handler = _Records()
    logging.getLogger(LOGGER).addHandler(handler)
    try:
        run_partition(tp.min_cut_rematerialization_partition, cap, **config)
        (torch_path,) = fake.saved
        (xs, ys), = fake.plots
        config["memory_budget_pareto_dir"] = str(tmp_path / "remat")
        run_partition(rt.min_cut_rematerialization_partition, cap, **config)
    finally:
        logging.getLogger(LOGGER).removeHandler(handler)
    ours = [p for p in (tmp_path / "remat").iterdir()]
    assert [p.name for p in ours] == [os.path.basename(torch_path)]
    messages = [r.getMessage() for r in handler.records]
    assert f"Generated Pareto frontier curve at {torch_path}" in messages
    assert f"Generated Pareto frontier curve at {ours[0]}" in messages
    # remat's chart carries every point torch plotted: (ratio, runtime).
    titles = [t.text for t in ET.parse(ours[0]).iter("{http://www.w3.org/2000/svg}title")]
    points = [tuple(float(v) for v in re.findall(r"runtime (\S+), ratio (\S+)", t)[0]) for t in titles]
    assert sorted((ratio, runtime) for runtime, ratio in points) == sorted(zip(xs, ys))


def test_remat_partition_artifact_tells_the_decision(artifacts):
    cap = captured_graphs("mlp_gelu_d3")[0]
    fw, bw = run_partition(rt.min_cut_rematerialization_partition, cap)
    (payload,) = [p for n, e, p in artifacts if n == "remat_partition" and e == "json"]
    doc = json.loads(payload)
    joint = cap.fresh_joint()
    assert set(doc["decisions"]) == {n.name for n in joint.graph.nodes}
    assert doc["saved_values"] and all(doc["decisions"][n]["where"] == "saved" for n in doc["saved_values"])
    assert "decide" in doc["stages"] and doc["budget_step"] == "runtime_optimized"
    # The simulated peak travels along: that of the modules the drop-in returned.
    assert doc["peak_bytes"] == rt.simulate_memory(fw, bw)["memory"]["peak_bytes"] > 0
    assert doc["memory"]["peak_bytes"] == doc["peak_bytes"]


def test_nothing_is_recorded_when_nobody_listens(monkeypatch, logger_level):
    """No listener: the engine is not asked for a trace (no cost)."""
    from torch._logging._internal import trace_log

    monkeypatch.setattr(trace_log, "handlers", [])
    monkeypatch.setattr(tp, "AOT_PARTITIONER_DEBUG", False)
    logger_level(logging.WARNING)
    monkeypatch.delenv("REMAT_REPORT_DIR", raising=False)
    assert "trace" not in _trace.request({"activation_memory_budget": 1.0})
    monkeypatch.setattr(tp, "AOT_PARTITIONER_DEBUG", True)
    assert _trace.request({})["trace"] is True


def test_quantization_artifacts_have_torchs_names_and_payloads(artifacts):
    """The FP8 pass's artifacts (the cross-rank sync's are checked against
    torch live in test_sync_decision.py)."""
    gm = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    for when in ("before", "after"):
        for which in ("fwd", "bwd"):
            _trace.trace_activation_quantization(when, which, gm)
    names = [n for n, _, _ in artifacts]
    assert names == [
        "before_activation_quantization_fwd_aten_pass",
        "before_activation_quantization_bwd_aten_pass",
        "after_activation_quantization_fwd_aten_pass",
        "after_activation_quantization_bwd_aten_pass",
    ]
    readable = gm.print_readable(print_output=False, include_stride=True, include_device=True)
    assert all(p == readable for n, _, p in artifacts)
    with pytest.raises(ValueError):
        _trace.trace_activation_quantization("during", "fwd", gm)


def test_report_dir_writes_one_report_per_graph(tmp_path, monkeypatch):
    monkeypatch.setenv("REMAT_REPORT_DIR", str(tmp_path))
    for cap in captured_graphs("mlp_gelu_d3") + captured_graphs("transformer_block"):
        run_partition(rt.min_cut_rematerialization_partition, cap)
    reports = sorted(tmp_path.glob("*.html"))
    assert len(reports) == 2
    for path in reports:
        html = path.read_text()
        assert html.startswith("<!DOCTYPE html>")
        assert 'id="node-data"' in html and 'class="plans"' in html  # torch's plans, built
        assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") \
            .replace("http://www.w3.org/1999/xlink", "")
