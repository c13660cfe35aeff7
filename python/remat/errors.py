"""The exceptions remat raises; the extension module translates remat::Error into these.

Contract: every error of the engine is a `RematError`; the subclass follows the
C++ ErrorCode. `NoFiniteCutError` carries `.explanation` (the infinite path, node
by node), `.dot` (the capacity graph in Graphviz syntax) and `.edge_list` (the
same graph as networkx's generate_edgelist prints it).
"""

from __future__ import annotations


class RematError(RuntimeError):
    """Base class: any failure reported by the remat engine."""

    code = "internal"


class InvalidGraphError(RematError):
    code = "invalid_graph"


class ParseError(RematError):
    code = "parse"


class UnsupportedError(RematError):
    code = "unsupported"


class InvalidOptionError(RematError, ValueError):
    code = "invalid_option"


class RematIOError(RematError, OSError):
    code = "io"


class InternalError(RematError):
    code = "internal"


class DropInError(RematError):
    """remat.torch's drop-in failed for a reason that is not a deliberate refusal.

    ``step`` says where: ``"options"`` (reading torch's configuration),
    ``"export"`` (FX joint graph to JSON; ``node`` names the node), ``"engine"``
    or ``"import"`` (JSON result to FX modules). The original exception is
    ``__cause__``. Under ``remat.torch.install()`` (with fallback) these hand
    the graph to torch's own partitioner with a warning.
    """

    code = "drop_in"

    def __init__(self, message: str = "", step: str = "", node: "str | None" = None) -> None:
        super().__init__(message)
        self.step = step
        self.node = node


class NoFiniteCutError(RematError):
    """No finite cut: a value the backward needs can be neither saved nor recomputed."""

    code = "no_finite_cut"

    def __init__(self, message: str = "", explanation: str = "", dot: str = "",
                 edge_list: str = "") -> None:
        super().__init__(message)
        self.explanation = explanation
        self.dot = dot
        self.edge_list = edge_list


# Keyed by the C++ error_code_name() spelling; the bindings look classes up here.
# (DropInError is raised by remat.torch only.)
BY_CODE = {
    cls.code: cls
    for cls in (
        InvalidGraphError,
        ParseError,
        UnsupportedError,
        InvalidOptionError,
        RematIOError,
        InternalError,
        NoFiniteCutError,
    )
}
