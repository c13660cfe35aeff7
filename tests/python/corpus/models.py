"""The model zoo: small PyTorch programs whose joint graphs make up the parity corpus.

Each entry is a :class:`Case`: a name, a factory for the ``nn.Module``, a factory
for its example inputs, and compile options (dynamic shapes, decomposition table,
``mark_dynamic`` dims).  Sizes are tiny on purpose: the corpus is about graph
*structure* (what the partitioner sees), not about arithmetic, and the whole
Python suite must run in a few minutes on two CPU cores.

Factories are deterministic: ``make_module`` seeds torch before building
parameters and ``make_inputs`` draws from a seeded generator, so two calls give
bit-identical modules and inputs (the numerics tests rely on that).

Coverage (see ``CASES``): MLPs with several depths/activations, CNNs with
train-mode BatchNorm2d and pooling, scaled-dot-product attention (causal and
not), LayerNorm / RMSNorm (hand-written and ``nn.RMSNorm``), dropout outside and
inside ``torch.utils.checkpoint`` regions, selective-checkpoint policies,
dynamic shapes, several outputs, input and buffer mutation, tuple-returning ops,
inputs that need no gradient, a graph that saves nothing, embedding,
cross-entropy, residual blocks, unrolled GRU/LSTM cells, a graph break (two
joint graphs from one case), and tiny HuggingFace ``transformers`` models built
from config (random weights, never downloaded) when the package is importable.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)


@dataclasses.dataclass(frozen=True)
class Case:
    """One corpus entry.

    ``options`` keys (all optional):
      * ``dynamic``: passed to ``torch.compile(dynamic=...)``.
      * ``mark_dynamic``: list of ``(input_index, dim)`` to ``torch._dynamo.mark_dynamic``.
      * ``decompositions``: ``"inductor"`` to trace with inductor's decomposition
        table (graphs then look like what inductor's partitioner sees), else none.
    ``random``: the program draws random numbers (dropout); eager comparison is
    then meaningless and numerics compare against torch's own partitioner.
    """

    name: str
    make_module: Callable[[], nn.Module]
    make_inputs: Callable[[], tuple[Any, ...]]
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    random: bool = False


# --------------------------------------------------------------------------- helpers


def _seeded(factory: Callable[[], nn.Module], seed: int = 0) -> Callable[[], nn.Module]:
    def make() -> nn.Module:
        torch.manual_seed(seed)
        return factory()

    return make


def _randn(*shape: int, requires_grad: bool = False, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + sum(shape))
    t = torch.randn(*shape, generator=g)
    return t.requires_grad_(requires_grad)


def _randint(high: int, *shape: int, seed: int = 2) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, high, shape, generator=g)


def _inputs(*factories: Callable[[], Any]) -> Callable[[], tuple[Any, ...]]:
    return lambda: tuple(f() for f in factories)


_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU, "tanh": nn.Tanh}


def _mlp(width: int, depth: int, act: str, out: int = 4) -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), _ACTIVATIONS[act]()]
    layers.append(nn.Linear(width, out))
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------- modules


class CNNBatchNorm(nn.Module):
    def __init__(self, pool: str = "max") -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2) if pool == "max" else nn.AvgPool2d(2)
        self.fc = nn.Linear(4 * 2 * 2, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.pool(F.relu(self.bn2(self.conv2(x))))
        return self.fc(x.flatten(1))


class BasicResBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(x + y)


class Attention(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2, causal: bool = False) -> None:
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.proj(o.transpose(1, 2).reshape(b, s, d))


class HandRMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class NormMLP(nn.Module):
    def __init__(self, norm: nn.Module, dim: int = 16) -> None:
        super().__init__()
        self.norm = norm
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(self.norm(x))))


class TransformerBlock(nn.Module):
    def __init__(self, dim: int = 16, causal: bool = True) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, 2, causal)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class DropoutMLP(nn.Module):
    def __init__(self, p: float = 0.3) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)
        self.drop = nn.Dropout(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.drop(F.relu(self.fc1(x))))


class CheckpointMLP(nn.Module):
    """Two blocks; the first runs inside ``torch.utils.checkpoint`` (non-reentrant)."""

    def __init__(self, dropout: float = 0.0, context_fn: Callable | None = None, act: str = "gelu") -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 4)
        self.act = _ACTIVATIONS[act]()
        self.p = dropout
        self.context_fn = context_fn

    def block(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.fc1(x))
        if self.p:
            h = F.dropout(h, self.p, training=True)
        return torch.sin(self.fc2(h)) * h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kwargs: dict[str, Any] = {"use_reentrant": False}
        if self.context_fn is not None:
            kwargs["context_fn"] = self.context_fn
        h = checkpoint(self.block, x, **kwargs)
        return self.fc3(h.relu())


class MatmulCheckpoint(nn.Module):
    """Checkpointed region built from explicit ``torch.mm`` so SAC policies see ``aten.mm``."""

    def __init__(self, context_fn: Callable | None = None, dropout: float = 0.0) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(8, 16) * 0.3)
        self.w2 = nn.Parameter(torch.randn(16, 16) * 0.3)
        self.w3 = nn.Parameter(torch.randn(16, 4) * 0.3)
        self.context_fn = context_fn
        self.p = dropout

    def region(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.mm(x, self.w1).relu()
        if self.p:
            h = F.dropout(h, self.p, training=True)
        h = torch.mm(h, self.w2).sigmoid() * h
        return torch.mm(h.cos(), self.w2) + h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kwargs: dict[str, Any] = {"use_reentrant": False}
        if self.context_fn is not None:
            kwargs["context_fn"] = self.context_fn
        h = checkpoint(self.region, x, **kwargs)
        return torch.mm(h, self.w3)


class MultiOutput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = self.fc(x)
        return h.relu(), h.sigmoid() * x, (h * h).sum(-1)


class InputMutation(nn.Module):
    """Mutates an input that does not require grad (``x.add_(1)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        scale.add_(1)
        return self.fc(x * scale).tanh()


class BufferMutation(nn.Module):
    """Keeps an exponential running mean in a buffer, updated in place in forward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("running", torch.zeros(8))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        self.running.mul_(0.9).add_(h.detach().mean(0), alpha=0.1)
        self.steps.add_(1)
        return F.silu(h - self.running)


class BatchNorm1dMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.bn, self.fc2 = nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.bn(self.fc1(x))))


class TopK(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values, indices = torch.topk(self.fc(x), 3, dim=-1)
        return values.exp().sum(-1), indices


class MaxDim(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        m, _ = h.max(dim=-1, keepdim=True)
        mn = h.min(dim=0).values
        return (h - m).exp() + mn


class SplitChunk(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b, c = self.fc(x).chunk(3, dim=-1)
        d, e = torch.split(a * b, [1, 3], dim=-1)
        return torch.cat([d.sigmoid() * c[:, :1], e.tanh() * c[:, 1:]], dim=-1)


class VarMean(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        var, mean = torch.var_mean(h, dim=-1, keepdim=True)
        return (h - mean) * torch.rsqrt(var + 1e-5)


class MixedGradInputs(nn.Module):
    """Some inputs require grad, some do not."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return (self.fc(x) * mask + bias).relu() * x


class SavesNothing(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


class GradPassthrough(nn.Module):
    """Gradients flow straight from the tangent to the inputs: no backward computation at all."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x.clone() + y


class EmbeddingBag(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.fc = nn.Linear(8, 4)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.fc(self.emb(idx).mean(1)).relu()


class CrossEntropyModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.head = nn.Linear(8, 16)

    def forward(self, idx: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits = self.head(torch.tanh(self.emb(idx)))
        return F.cross_entropy(logits.flatten(0, 1), target.flatten())


class ResidualMLP(nn.Module):
    def __init__(self, dim: int = 16, blocks: int = 2) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
            for _ in range(blocks)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + block(x)
        return x


class UnrolledGRU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(4, 8)

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        h = xs.new_zeros(xs.shape[1], 8)
        for t in range(xs.shape[0]):
            h = self.cell(xs[t], h)
        return h


class UnrolledLSTM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(4, 8)

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        h = c = xs.new_zeros(xs.shape[1], 8)
        for t in range(xs.shape[0]):
            h, c = self.cell(xs[t], (h, c))
        return h + c


class GraphBreak(nn.Module):
    """A graph break in the middle: one case, two joint graphs."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.fc1(x))
        torch._dynamo.graph_break()
        return self.fc2(h * h)


class SizeOutput(nn.Module):
    """Returns a size that becomes a plain int in the joint graph.

    Under ``dynamic=True`` dynamo returns ``x.shape[-1]`` as a SymInt; the
    linear layer then specializes it to 64 while AOTAutograd traces, so the
    joint graph's output holds the literal ``64`` (as Mixtral's MoE block
    does). The caller reshapes with it, so a lost literal breaks training.
    """

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(64, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, int]:
        width = x.shape[-1]
        return torch.relu(self.fc(x)), width


class JaggedMLP(nn.Module):
    """An MLP over a jagged nested tensor: the joint graph carries the ragged
    size as a SymInt whose hint is a nested int (``j1``)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 8)

    def forward(self, nt: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(nt))).sin()


def _jagged(*lengths: int, d: int = 8) -> Callable[[], torch.Tensor]:
    def make() -> torch.Tensor:
        parts = [_randn(n, d, seed=11) for n in lengths]
        return torch.nested.nested_tensor(parts, layout=torch.jagged, requires_grad=True)

    return make


class Softmaxes(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        return h.softmax(-1) * h.log_softmax(-1)


class DuplicateWork(nn.Module):
    """Computes the same subexpression twice, so CSE has something to merge."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.sigmoid(self.fc(x)) * x
        b = torch.sigmoid(self.fc(x)) * x
        return a.exp() + b.cos()


class ViewHeavy(nn.Module):
    """Many views/reshapes between compute ops (exercises recompute_views)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        h = x.view(b, 2, 4).transpose(1, 2).reshape(b * 4, 2)
        h = h.exp().view(b, 4, 2).permute(0, 2, 1).reshape(b * 2, 4)
        y = h @ self.w
        return y.view(b, 8).unsqueeze(1).expand(b, 2, 8).sum(1).tanh()


class SdpaInCheckpoint(nn.Module):
    def __init__(self, context_fn: Callable | None = None) -> None:
        super().__init__()
        self.block = TransformerBlock(16, causal=True)
        self.context_fn = context_fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kwargs: dict[str, Any] = {"use_reentrant": False}
        if self.context_fn is not None:
            kwargs["context_fn"] = self.context_fn
        return checkpoint(self.block, x, **kwargs)


# --------------------------------------------------------------------------- SAC policies


_MM_OPS = (torch.ops.aten.mm.default,)
_MATMUL_OPS = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default)


def policy_save_mm(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    """MUST_SAVE for ``aten.mm``, PREFER_RECOMPUTE for everything else."""
    return CheckpointPolicy.MUST_SAVE if op in _MM_OPS else CheckpointPolicy.PREFER_RECOMPUTE


def policy_prefer_save_matmuls(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    """PREFER_SAVE for matmul-like ops, MUST_RECOMPUTE for everything else."""
    return CheckpointPolicy.PREFER_SAVE if op in _MATMUL_OPS else CheckpointPolicy.MUST_RECOMPUTE


def policy_recompute_all(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    """PREFER_RECOMPUTE for every op."""
    return CheckpointPolicy.PREFER_RECOMPUTE


def policy_save_pointwise_sigmoid(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    """MUST_SAVE for mm and sigmoid, MUST_RECOMPUTE otherwise."""
    if op in _MM_OPS or op == torch.ops.aten.sigmoid.default:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.MUST_RECOMPUTE


def sac_context(policy: Callable) -> Callable:
    return functools.partial(create_selective_checkpoint_contexts, policy)


# --------------------------------------------------------------------------- transformers


def _hf_available() -> bool:
    try:
        import transformers  # noqa: F401
    except Exception:
        return False
    return True


class HFCausalLM(nn.Module):
    """A ``transformers`` causal LM built from a tiny config; forward returns the LM loss."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        import transformers

        if kind == "gpt2":
            cfg = transformers.GPT2Config(
                vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2,
                resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
            )
            self.model = transformers.GPT2LMHeadModel(cfg)
        elif kind == "llama":
            cfg = transformers.LlamaConfig(
                vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16,
                bos_token_id=0, eos_token_id=0, pad_token_id=0,
            )
            self.model = transformers.LlamaForCausalLM(cfg)
        else:
            raise ValueError(kind)
        self.model.config.use_cache = False

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, labels=input_ids, use_cache=False).loss


# --------------------------------------------------------------------------- the corpus


def _x(b: int = 4, d: int = 8, grad: bool = True) -> Callable[[], torch.Tensor]:
    return lambda: _randn(b, d, requires_grad=grad)


INDUCTOR = {"decompositions": "inductor"}


def _build_cases() -> list[Case]:
    c: list[Case] = []
    add = c.append

    # MLPs
    add(Case("mlp_relu_d2", _seeded(lambda: _mlp(8, 2, "relu")), _inputs(_x())))
    add(Case("mlp_gelu_d3", _seeded(lambda: _mlp(8, 3, "gelu")), _inputs(_x())))
    add(Case("mlp_silu_d4", _seeded(lambda: _mlp(8, 4, "silu")), _inputs(_x())))
    add(Case("mlp_tanh_d2", _seeded(lambda: _mlp(8, 2, "tanh")), _inputs(_x())))
    add(Case("mlp_relu_d6", _seeded(lambda: _mlp(8, 6, "relu")), _inputs(_x())))
    add(Case("mlp_gelu_d3_inductor", _seeded(lambda: _mlp(8, 3, "gelu")), _inputs(_x()), INDUCTOR))
    add(Case("mlp_silu_d3_inductor", _seeded(lambda: _mlp(8, 3, "silu")), _inputs(_x()), INDUCTOR))
    add(Case("mlp_input_no_grad", _seeded(lambda: _mlp(8, 3, "tanh")), _inputs(_x(grad=False))))

    # CNNs
    img = lambda: _randn(2, 3, 8, 8, requires_grad=True)  # noqa: E731
    add(Case("cnn_bn_maxpool", _seeded(lambda: CNNBatchNorm("max")), _inputs(img)))
    add(Case("cnn_bn_avgpool_inductor", _seeded(lambda: CNNBatchNorm("avg")), _inputs(img), INDUCTOR))
    res_img = lambda: _randn(2, 4, 6, 6, requires_grad=True)  # noqa: E731
    add(Case("resnet_basic_block", _seeded(BasicResBlock), _inputs(res_img)))
    add(Case("resnet_basic_block_inductor", _seeded(BasicResBlock), _inputs(res_img), INDUCTOR))

    # attention
    seq = lambda: _randn(2, 6, 16, requires_grad=True)  # noqa: E731
    add(Case("sdpa", _seeded(lambda: Attention(causal=False)), _inputs(seq)))
    add(Case("sdpa_causal", _seeded(lambda: Attention(causal=True)), _inputs(seq)))
    add(Case("sdpa_causal_inductor", _seeded(lambda: Attention(causal=True)), _inputs(seq), INDUCTOR))
    add(Case("transformer_block", _seeded(TransformerBlock), _inputs(seq)))
    add(Case("transformer_block_inductor", _seeded(TransformerBlock), _inputs(seq), INDUCTOR))

    # norms
    x16 = _x(4, 16)
    add(Case("layernorm_mlp", _seeded(lambda: NormMLP(nn.LayerNorm(16))), _inputs(x16)))
    add(Case("layernorm_mlp_inductor", _seeded(lambda: NormMLP(nn.LayerNorm(16))), _inputs(x16), INDUCTOR))
    add(Case("rmsnorm_handwritten", _seeded(lambda: NormMLP(HandRMSNorm(16))), _inputs(x16)))
    add(Case("rmsnorm_handwritten_inductor", _seeded(lambda: NormMLP(HandRMSNorm(16))), _inputs(x16), INDUCTOR))
    add(Case("rmsnorm_nn", _seeded(lambda: NormMLP(nn.RMSNorm(16))), _inputs(x16)))

    # dropout and checkpointing
    add(Case("dropout_mlp", _seeded(DropoutMLP), _inputs(_x()), random=True))
    add(Case("dropout_mlp_inductor", _seeded(DropoutMLP), _inputs(_x()), INDUCTOR, random=True))
    add(Case("checkpoint_mlp", _seeded(CheckpointMLP), _inputs(_x())))
    add(Case("checkpoint_mlp_inductor", _seeded(CheckpointMLP), _inputs(_x()), INDUCTOR))
    add(Case("checkpoint_dropout", _seeded(lambda: CheckpointMLP(dropout=0.25)), _inputs(_x()), random=True))
    add(Case("checkpoint_dropout_inductor", _seeded(lambda: CheckpointMLP(dropout=0.25)), _inputs(_x()),
             INDUCTOR, random=True))
    add(Case("sac_save_mm", _seeded(lambda: MatmulCheckpoint(sac_context(policy_save_mm))), _inputs(_x())))
    add(Case("sac_save_mm_inductor", _seeded(lambda: MatmulCheckpoint(sac_context(policy_save_mm))),
             _inputs(_x()), INDUCTOR))
    add(Case("sac_prefer_save_matmuls", _seeded(lambda: MatmulCheckpoint(sac_context(policy_prefer_save_matmuls))),
             _inputs(_x())))
    add(Case("sac_recompute_all", _seeded(lambda: MatmulCheckpoint(sac_context(policy_recompute_all))),
             _inputs(_x())))
    add(Case("sac_must_save_sigmoid", _seeded(lambda: MatmulCheckpoint(sac_context(policy_save_pointwise_sigmoid))),
             _inputs(_x())))
    add(Case("sac_save_mm_dropout", _seeded(lambda: MatmulCheckpoint(sac_context(policy_save_mm), dropout=0.2)),
             _inputs(_x()), random=True))
    add(Case("sac_linear_save_mm", _seeded(lambda: CheckpointMLP(context_fn=sac_context(policy_save_mm))),
             _inputs(_x())))
    add(Case("checkpoint_matmul_no_policy", _seeded(MatmulCheckpoint), _inputs(_x())))
    add(Case("checkpoint_transformer_block", _seeded(SdpaInCheckpoint), _inputs(seq)))
    add(Case("sac_transformer_block_inductor",
             _seeded(lambda: SdpaInCheckpoint(sac_context(policy_prefer_save_matmuls))), _inputs(seq), INDUCTOR))

    # dynamic shapes
    add(Case("dynamic_mlp", _seeded(lambda: _mlp(8, 3, "gelu")), _inputs(_x(5)), {"dynamic": True}))
    add(Case("dynamic_layernorm", _seeded(lambda: NormMLP(nn.LayerNorm(16))), _inputs(_x(5, 16)),
             {"dynamic": True, **INDUCTOR}))
    add(Case("dynamic_attention_mark", _seeded(lambda: Attention(causal=True)), _inputs(seq),
             {"mark_dynamic": [(0, 1)]}))
    add(Case("dynamic_size_output", _seeded(SizeOutput), _inputs(_x(5, 64)), {"dynamic": True}))
    add(Case("nested_jagged_mlp", _seeded(JaggedMLP), _inputs(_jagged(3, 5))))
    add(Case("dynamic_checkpoint_dropout", _seeded(lambda: CheckpointMLP(dropout=0.25)), _inputs(_x(5)),
             {"dynamic": True}, random=True))

    # outputs, mutation, tuple ops, no-grad inputs
    add(Case("multi_output", _seeded(MultiOutput), _inputs(_x())))
    add(Case("input_mutation", _seeded(InputMutation), _inputs(_x(), lambda: _randn(4, 8, seed=7))))
    add(Case("buffer_mutation", _seeded(BufferMutation), _inputs(_x())))
    add(Case("batchnorm1d_running_stats", _seeded(BatchNorm1dMLP), _inputs(_x())))
    add(Case("batchnorm1d_running_stats_inductor", _seeded(BatchNorm1dMLP), _inputs(_x()), INDUCTOR))
    add(Case("topk", _seeded(TopK), _inputs(_x())))
    add(Case("max_min_dim", _seeded(MaxDim), _inputs(_x())))
    add(Case("split_chunk", _seeded(SplitChunk), _inputs(_x())))
    add(Case("var_mean", _seeded(VarMean), _inputs(_x())))
    add(Case("var_mean_inductor", _seeded(VarMean), _inputs(_x()), INDUCTOR))
    add(Case("mixed_grad_inputs", _seeded(MixedGradInputs),
             _inputs(_x(), lambda: _randn(4, 8, seed=3), lambda: _randn(8, requires_grad=True, seed=4))))
    add(Case("saves_nothing", SavesNothing, _inputs(_x())))
    add(Case("grad_passthrough", GradPassthrough,
             _inputs(_x(), lambda: _randn(4, 8, requires_grad=True, seed=5))))
    add(Case("mlp_bf16", _seeded(lambda: _mlp(8, 3, "gelu").to(torch.bfloat16)),
             _inputs(lambda: _randn(4, 8).to(torch.bfloat16).requires_grad_())))

    # embeddings, losses, residuals, recurrent cells, misc
    add(Case("embedding", _seeded(EmbeddingBag), _inputs(lambda: _randint(20, 3, 5))))
    add(Case("cross_entropy", _seeded(CrossEntropyModel),
             _inputs(lambda: _randint(16, 2, 5), lambda: _randint(16, 2, 5, seed=9))))
    add(Case("cross_entropy_inductor", _seeded(CrossEntropyModel),
             _inputs(lambda: _randint(16, 2, 5), lambda: _randint(16, 2, 5, seed=9)), INDUCTOR))
    add(Case("residual_mlp", _seeded(ResidualMLP), _inputs(x16)))
    add(Case("gru_unrolled", _seeded(UnrolledGRU), _inputs(lambda: _randn(3, 2, 4, requires_grad=True))))
    add(Case("lstm_unrolled", _seeded(UnrolledLSTM), _inputs(lambda: _randn(3, 2, 4, requires_grad=True))))
    add(Case("lstm_unrolled_inductor", _seeded(UnrolledLSTM), _inputs(lambda: _randn(3, 2, 4, requires_grad=True)),
             INDUCTOR))
    add(Case("graph_break", _seeded(GraphBreak), _inputs(_x())))
    add(Case("softmax_logsoftmax", _seeded(Softmaxes), _inputs(_x())))
    add(Case("duplicate_work_cse", _seeded(DuplicateWork), _inputs(_x())))
    add(Case("view_heavy", _seeded(ViewHeavy), _inputs(_x())))

    if _hf_available():
        ids = lambda: _randint(32, 2, 8)  # noqa: E731
        add(Case("hf_gpt2_tiny", _seeded(lambda: HFCausalLM("gpt2")), _inputs(ids)))
        add(Case("hf_llama_tiny", _seeded(lambda: HFCausalLM("llama")), _inputs(ids)))
    return c


CASES: list[Case] = _build_cases()
CASES_BY_NAME: dict[str, Case] = {case.name: case for case in CASES}
assert len(CASES_BY_NAME) == len(CASES), "duplicate case names"


# --------------------------------------------------------------------------- blocks for deep stacks
# bench/scale_graphs.py stacks these (nn.Sequential of N) into the large joint
# graphs of the scale benchmark; each maps its input's shape to itself so any
# number of them chain. Not corpus cases: graph structure, not size, is what
# the parity suite covers, and these keep it cheap.


def _conv_bn_relu(cin: int, cout: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class UNet(nn.Module):
    """A small U-Net: ``depth`` levels down (conv, train-mode BatchNorm, ReLU,
    then a 2x2 max pool, doubling the channels), a bottleneck, and as many
    levels up (nearest upsampling, concatenation with the level's skip, conv),
    back to ``channels`` channels at the input's size (its height and width
    divisible by 2**depth)."""

    def __init__(self, channels: int = 4, depth: int = 2) -> None:
        super().__init__()
        ch = [channels * 2**i for i in range(depth + 1)]
        self.down = nn.ModuleList(_conv_bn_relu(ch[i], ch[i + 1]) for i in range(depth))
        self.mid = _conv_bn_relu(ch[depth], ch[depth])
        # Deepest level first: its input is the level below's output and the skip.
        self.up = nn.ModuleList(_conv_bn_relu(2 * ch[i + 1], ch[i]) for i in reversed(range(depth)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for down in self.down:
            x = down(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.mid(x)
        for up, skip in zip(self.up, reversed(skips)):
            x = F.interpolate(x, scale_factor=2.0, mode="nearest")
            x = up(torch.cat([x, skip], dim=1))
        return x


def unet_case(depth: int) -> Case:
    """The U-Net of ``depth`` levels on a 2x4x8x8 input, as a case outside the
    corpus (the peak-limit tests' U-Nets: issue 35 found its gaps there)."""
    return Case(f"unet_d{depth}", _seeded(lambda: UNet(4, depth)),
                _inputs(lambda: _randn(2, 4, 8, 8, requires_grad=True)))


class SwiGLU(nn.Module):
    """Mixtral's expert MLP: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoEBlock(nn.Module):
    """A residual mixture-of-experts layer in Mixtral's manner (RMSNorm, a
    linear router, softmax, top-k, weights renormalized over the chosen
    experts), mixed densely: every expert runs on every token and a gate
    tensor, zero outside each token's top k, weighs its output. No shape
    depends on the data, so torch.compile captures one graph."""

    def __init__(self, dim: int = 16, experts: int = 4, top_k: int = 2, hidden: int = 32) -> None:
        super().__init__()
        self.top_k = top_k
        self.norm = nn.RMSNorm(dim)
        self.router = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(dim, hidden) for _ in range(experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        probs = self.router(h).softmax(-1)
        weights, chosen = probs.topk(self.top_k, dim=-1)
        gates = torch.zeros_like(probs).scatter(-1, chosen, weights / weights.sum(-1, keepdim=True))
        mixed = sum(gates[..., i : i + 1] * expert(h) for i, expert in enumerate(self.experts))
        return x + mixed
