"""Sums over a last axis of length 3 (dot products, squared lengths), written as a product with a vector of ones.

torch's CPU reduction over a short last axis takes three to four times the product's time on the same tensor in a
forward pass (the backward passes cost alike; ``tools/experiments/vec3_speed.py``), and the solver takes many of
them every step, most without gradient: pair distances, candidate filters, capsule depths, move bounds. Same
values up to round-off (the same three terms, summed in another order at most).
"""

from __future__ import annotations

import torch

_ONES = {}


def _ones(x: torch.Tensor) -> torch.Tensor:
    """(3,) ones of ``x``'s dtype and device (cached; made outside any inference mode, so that a solve with
    gradients can use the vector a caller's ``torch.inference_mode`` block created first)."""
    key = (x.dtype, x.device)
    v = _ONES.get(key)
    if v is None:
        with torch.inference_mode(False):
            v = _ONES[key] = torch.ones(3, dtype=x.dtype, device=x.device)
    return v


def dot3(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a, b (..., 3) -> (...): the dot product over the last axis."""
    ab = a * b
    return ab @ _ones(ab)


def sq_norm3(x: torch.Tensor) -> torch.Tensor:
    """x (..., 3) -> (...): the squared length over the last axis."""
    x2 = x.square()
    return x2 @ _ones(x2)


def norm3(x: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """x (..., 3) -> (...): sqrt(|x|² + eps), the length over the last axis. With ``eps`` 0 its gradient is
    infinite at x = 0: give an ``eps`` where the length may vanish under autograd."""
    return (sq_norm3(x) + eps).sqrt() if eps else sq_norm3(x).sqrt()
