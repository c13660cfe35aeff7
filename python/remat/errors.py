"""The exceptions remat raises; the extension module translates remat::Error into these.

Contract: every error of the engine is a `RematError`; the subclass follows the
C++ ErrorCode. `NoFiniteCutError` carries `.explanation` (the infinite path, node
by node), `.dot` (the capacity graph in Graphviz syntax) and `.edge_list` (the
same graph as networkx's generate_edgelist prints it); `BudgetUnreachableError`
carries `.smallest_peak` and `.proven_bound`. Where torch raises one
of Python's builtin exceptions at the same point (a FLOP formula's
AssertionError, say: C++ remat::TorchError), remat raises TORCH_RAISES[name]:
an InvalidGraphError that is also that builtin and carries its name, with
torch's text as str(); where remat met it is a note (PEP 678).
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


class BudgetUnreachableError(RematError):
    """No plan fits the peak memory budget; the message names the smallest peak found.

    It says "the smallest reachable peak" only where the bound proves no
    valid plan goes lower, else "the smallest peak found" (another plan may
    reach lower, down to the proven bound).

    The same numbers as fields (C++ remat::BudgetUnreachableError), in bytes:
    ``smallest_peak``, the smallest simulated peak of the valid plans the
    search built (None when it built none), and ``proven_bound``, a peak no
    valid plan goes below (None where the search proves none: torch_plans;
    equal to ``smallest_peak`` when that is proven the least).
    """

    code = "budget_unreachable"

    def __init__(self, message: str = "", smallest_peak: "int | None" = None,
                 proven_bound: "int | None" = None) -> None:
        super().__init__(message)
        self.smallest_peak = smallest_peak
        self.proven_bound = proven_bound


def _torch_raises(builtin: type) -> type:
    """An InvalidGraphError that is also `builtin` and named like it, so the
    drop-in fails with the exception type and text torch's own partitioner
    raises there (`except AssertionError` catches both)."""
    return type(builtin.__name__, (InvalidGraphError, builtin), {
        "__module__": __name__,
        "__qualname__": f"TORCH_RAISES[{builtin.__name__!r}]",
        "__doc__": f"torch raises {builtin.__name__} here; so does remat, with torch's text.",
    })


# Keyed by the builtin's name, as C++ TorchError::python_type() spells it.
TORCH_RAISES = {cls.__name__: _torch_raises(cls) for cls in (AssertionError, TypeError, KeyError)}


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
        BudgetUnreachableError,
    )
}
