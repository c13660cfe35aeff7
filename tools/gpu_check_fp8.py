"""GPU check of FP8 activation quantization through remat.torch.install().

Contract: on a machine with a CUDA GPU, trains a small bfloat16 MLP (with a
checkpointed block) for a few steps with torch.compile (inductor) under
inductor's post_grad_fusion_options["activation_quantization_aten_pass"],
once with torch's partitioner and once with remat's (install(fallback=False)),
from the same seed and data. Prints the losses and the largest gradient
difference, and exits 1 unless the losses and gradients agree bit for bit
(the partitions are identical, so the compiled kernels are too) and torch's
counters show the pass ran under both. Exits 2 without a GPU.

    python tools/gpu_check_fp8.py [--steps 5] [--device cpu]

Not part of CI (CI has no GPU); run it where a GPU is lent.
"""

from __future__ import annotations

import argparse
import sys


def train(steps: int, use_remat: bool, device: str = "cuda"):
    import torch
    import torch._inductor.config as inductor_config
    from torch._dynamo.utils import counters
    from torch.utils.checkpoint import checkpoint

    import remat.torch as rt

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.Linear(256, 1024)
            self.down = torch.nn.Linear(1024, 256)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(x)))

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = Block(), Block()

        def forward(self, x):
            x = self.a(x)
            return checkpoint(self.b, x, use_reentrant=False)

    model = Model().to(device).to(torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    data = torch.randn(steps, 64, 256, device=device, dtype=torch.bfloat16,
                       generator=torch.Generator(device).manual_seed(1))
    fusion = {"activation_quantization_aten_pass": {"size_in_mb": 0, "use_scaling": True}}
    if use_remat:
        rt.install(fallback=False)
    try:
        with inductor_config.patch(post_grad_fusion_options=fusion):
            compiled = torch.compile(model)
            losses = []
            for step in range(steps):
                opt.zero_grad()
                loss = compiled(data[step]).float().pow(2).mean()
                loss.backward()
                opt.step()
                losses.append(loss.item())
    finally:
        if use_remat:
            rt.uninstall()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    ran = counters["inductor"]["activation_quantization_fwd_aten_pass"] > 0
    return losses, grads, ran


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--device", default="cuda", help="cpu: a dry run of the script itself")
    a = p.parse_args(argv)
    import torch

    if a.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check_fp8: no CUDA GPU here; nothing checked", file=sys.stderr)
        return 2
    theirs, their_grads, their_ran = train(a.steps, use_remat=False, device=a.device)
    ours, our_grads, our_ran = train(a.steps, use_remat=True, device=a.device)
    worst = max((g1.float() - g2.float()).abs().max().item() for g1, g2 in zip(their_grads, our_grads))
    print(f"torch losses: {theirs}\nremat losses: {ours}\nmax |grad difference|: {worst}")
    print(f"quantization pass ran: torch {their_ran}, remat {our_ran}")
    ok = theirs == ours and worst == 0 and their_ran and our_ran
    print("gpu_check_fp8:", "OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
