"""Pose descriptors of key vertices (ReConForM §3.2), batched over frames, in world space (metres, Z up).

Pure functions on key-vertex positions ``p (T, N, 3)`` and unit normals ``n (T, N, 3)`` (``core.rig.chains`` computes
them from pose channels): dense (``dist_matrix``, ``dir_matrix``, ``pen_matrix``) for tests and small clips,
sparse (``pair_descriptors``) on index lists ``(t, i, j)`` for the solver; ``height`` (above a level, one level
per frame, or a differentiable terrain, ``core.contacts.terrain``) and ``sliding`` (horizontal velocity, Δt = 1 / fps).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..rig.vec3 import dot3, norm3

UP_AXIS = 2  # world Z


# ----------------------------------------------------------------------------------------------------------
# Dense pair descriptors (T, N, N)
# ----------------------------------------------------------------------------------------------------------

def dir_matrix(p: torch.Tensor) -> torch.Tensor:
    """M_dir(i, j) = p_j − p_i.  p (..., N, 3) -> (..., N, N, 3)."""
    return p[..., None, :, :] - p[..., :, None, :]


def dist_matrix(p: torch.Tensor) -> torch.Tensor:
    """M_dist(i, j) = ||p_j − p_i||.  p (..., N, 3) -> (..., N, N)."""
    return dir_matrix(p).norm(dim=-1)


def pen_matrix(p: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """M_pen(i, j) = n_i · (p_j − p_i), signed distance of j along i's normal (asymmetric).

    p, n (..., N, 3) -> (..., N, N).
    """
    return (n[..., :, None, :] * dir_matrix(p)).sum(-1)


# ----------------------------------------------------------------------------------------------------------
# Sparse pair descriptors on index lists
# ----------------------------------------------------------------------------------------------------------

class PairDescriptors(NamedTuple):
    """Pair descriptors of E (frame, i, j) entries: dist (E,), dir (E, 3), pen (E,)."""

    dist: torch.Tensor
    dir: torch.Tensor
    pen: torch.Tensor


def pair_descriptors(p: torch.Tensor, n: torch.Tensor, t: torch.Tensor, i: torch.Tensor,
                     j: torch.Tensor, eps: float = 1e-12) -> PairDescriptors:
    """Descriptors of chosen (t, i, j) entries only.

    Args:
        p, n: (T, N, 3) positions and unit normals.
        t, i, j: (E,) int64 frame and key-vertex indices.
    Returns:
        PairDescriptors with dist (E,) (gradient-safe at 0), dir (E, 3) = p_j − p_i, pen (E,).
    """
    N = p.shape[1]
    flat_p = p.reshape(-1, 3)
    fi = t * N + i
    fj = t * N + j
    d = flat_p.index_select(0, fj) - flat_p.index_select(0, fi)
    dist = norm3(d, eps)
    pen = dot3(n.reshape(-1, 3).index_select(0, fi), d)
    return PairDescriptors(dist, d, pen)


# ----------------------------------------------------------------------------------------------------------
# Height and sliding
# ----------------------------------------------------------------------------------------------------------

def height(p: torch.Tensor, ground=0.0) -> torch.Tensor:
    """M_height(i) = up · p_i − ground.  p (..., N, 3) -> (..., N).

    ground: a constant level (float), or a HeightField / callable ``f(x, y)`` (ReConForM §6.2).
    """
    z = p[..., UP_AXIS]
    if callable(ground):
        return z - ground(p[..., 0], p[..., 1])
    return z - ground


def sliding(p: torch.Tensor, fps: float, pad: bool = False) -> torch.Tensor:
    """M_sliding: horizontal velocity (H(p_{t+1}) − H(p_t)) · fps.

    p (T, N, 3) -> (T − 1, N, 2), or (T, N, 2) with ``pad`` (the last velocity repeated).
    """
    v = (p[1:, :, :2] - p[:-1, :, :2]) * float(fps)
    if pad:
        v = torch.cat([v, v[-1:]], dim=0) if len(v) else torch.zeros_like(p[..., :2])
    return v
