"""The optimiser of the ReConForM objective (ReConForM §4.2: Adam over all frames at once) and its schedule."""

from __future__ import annotations

import math

import contextlib

import torch

from ..descriptors.weights import alpha_ramp

#: Adam's ε on the gradients of the loss × the number of control points (``solver_adam``): large beside torch's
#: 1e-8, it damps the steps of control points whose gradient is noise (docs/solver.md "Optimisation schedule")
ADAM_EPS = 1e-3
#: the learning rates decay (cosine) to this share of themselves at the last step (``learning_rates``)
LR_FINAL = 0.1
#: the share of the steps at which α (the target's adaptive weights, ReConForM §4.1) reaches 1 (``alpha_at``)
ALPHA_END = 1.0


class Adam:
    """Adam (Kingma & Ba; the same update as ``torch.optim.Adam`` without weight decay or amsgrad).

    Written out because the first ``torch.optim.Adam`` of a process imports torch._dynamo (2-3 s on a
    2-core CPU), which would be paid by the first solve of every Blender session.

    Args:
        params: tensors with ``.grad``; lrs: one learning rate per tensor (``self.lrs`` may be changed per step).
    """

    def __init__(self, params, lrs, betas=(0.9, 0.999), eps=1e-8):
        self.params, self.lrs = list(params), list(lrs)
        self.b1, self.b2 = betas
        self.eps = eps
        self.t = 0
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def continue_from(self, other: "Adam") -> bool:
        """Take ``other``'s moment estimates and step count (a re-solve continuing the solve that made its start:
        its second moments set the step size where a fresh Adam would take learning-rate-sized steps away from the
        optimum). False, and nothing taken, when the variables' shapes differ."""
        if len(other.m) != len(self.m) or any(a.shape != b.shape for a, b in zip(self.m, other.m)):
            return False
        for mine, theirs in ((self.m, other.m), (self.v, other.v)):
            for a, b in zip(mine, theirs):
                a.copy_(b)
        self.t = other.t
        return True

    @torch.no_grad()
    def step(self):
        self.t += 1
        bc1 = 1.0 - self.b1 ** self.t
        bc2 = math.sqrt(1.0 - self.b2 ** self.t)
        for p, m, v, lr in zip(self.params, self.m, self.v, self.lrs):
            if p.grad is None:
                continue
            g = p.grad
            m.mul_(self.b1).add_(g, alpha=1.0 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1.0 - self.b2)
            denom = (v.sqrt() / bc2).add_(self.eps)
            if isinstance(lr, torch.Tensor):            # one rate per slice (broadcast against the variable)
                p.addcdiv_(m * lr, denom, value=-1.0 / bc1)
            else:
                p.addcdiv_(m, denom, value=-lr / bc1)


def solver_adam(params, lrs) -> Adam:
    """The solve's Adam on ``params`` at base rates ``lrs``, with ε ADAM_EPS."""
    return Adam(params, lrs, eps=ADAM_EPS)


def learning_rates(base_lrs, step: int, total: int, warmup: float) -> list:
    """The learning rates of step ``step`` of ``total``: each base rate times a linear warm-up over the first
    ``warmup`` share of the steps and a cosine decay to LR_FINAL of it at the last step."""
    lr_final = LR_FINAL
    c = 0.5 * (1 + math.cos(math.pi * step / max(total - 1, 1)))
    warm = min(1.0, (step + 1) / max(1.0, warmup * total))
    return [base * warm * (lr_final + (1 - lr_final) * c) for base in base_lrs]


def alpha_at(step: int, total: int) -> float:
    """α at step ``step`` of a first solve of ``total`` steps: 0 to 1 over ALPHA_END of the steps."""
    return alpha_ramp(step, total, ALPHA_END)


@contextlib.contextmanager
def torch_threads(n):
    """torch's intra-op threads at ``n`` while the block runs (left alone when None or 0)."""
    prev = torch.get_num_threads()
    if n:
        torch.set_num_threads(int(n))
    try:
        yield
    finally:
        if n:
            torch.set_num_threads(prev)


#: on a GPU, torch's deterministic algorithms during the set-up and each step: every run gives the same result (the
#: product's promise; off, an experiment's: a little faster, runs differ by rounding; docs/solver.md "GPU")
DETERMINISTIC = True
#: whether torch fills each tensor it allocates uninitialised while its deterministic algorithms are on
#: (``torch.utils.deterministic.fill_uninitialized_memory``, True by default: NaN, so that code reading memory it
#: never wrote gives the same result every run). The solver reads none, and on a GPU those fills were a third of a
#: step's kernel launches (docs/solver.md "GPU"): off within ``deterministic``, torch's setting restored after it
FILL_UNINITIALIZED = False


@contextlib.contextmanager
def deterministic(device):
    """torch's deterministic algorithms for the block when ``device`` is a GPU (and ``DETERMINISTIC``: ``index_add_``
    and scatters are not deterministic there otherwise: they add in whatever order the GPU's threads run), without
    filling new tensors (``FILL_UNINITIALIZED``). On the CPU those ops already are, and the switch is left alone:
    its first use in a process imports ``torch._dynamo`` (2-3 s, measured on the first solver step of every
    process)."""
    if torch.device(device).type == "cpu" or not DETERMINISTIC:
        yield
        return
    import torch.utils.deterministic as torch_det
    prev, prev_fill = torch.are_deterministic_algorithms_enabled(), torch_det.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch_det.fill_uninitialized_memory = FILL_UNINITIALIZED
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(prev)
        torch_det.fill_uninitialized_memory = prev_fill
