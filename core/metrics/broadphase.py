"""What the metrics' surface passes share (``core.metrics.measures``' self-penetration and floor shares,
``core.metrics.partners``' penetration between characters): skinning with each vertex's own few weights, and a
box broad phase that finds which (frame, vertex, capsule) entries can be inside, so that the exact test runs on
those entries only, whatever the clip's length.

The broad phase is exact: a point inside a capsule lies inside the capsule's box, and inside the box of its own
group of points (a body segment's sampled vertices), so every such entry belongs to a (frame, group, capsule)
whose two boxes meet; the narrow test then reads the same arithmetic as a dense test of every entry.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

#: entries (frame, point, capsule) tested at once by ``candidates`` (bounds the narrow phase's temporaries)
ENTRY_BLOCK = 1 << 20


class Groups:
    """Points ordered by group (a body segment), so that a group's points are contiguous.

    Attributes:
        order: (N,) int64, the points' indices, group by group (stable within a group).
        group: (N,) int64 tensor, the group of each point in that order (0..G-1).
        start, count: (G,) int64 tensors, where each group's points begin in that order and how many there are.
    """

    def __init__(self, groups: np.ndarray, num_groups: int):
        groups = np.asarray(groups, dtype=np.int64)
        self.order = np.argsort(groups, kind="stable")
        g = groups[self.order]
        count = np.bincount(g, minlength=num_groups)
        self.group = torch.as_tensor(g)
        self.count = torch.as_tensor(count)
        self.start = torch.as_tensor(np.cumsum(count) - count)
        self.num_groups = int(num_groups)


def skinning_matrix(rest: np.ndarray, bones: np.ndarray, weights: np.ndarray, num_bones: int) -> torch.Tensor:
    """(N, J·4) sparse (CSR) float32 linear-blend-skinning matrix of N points: row n holds w_nk · (rest_n, 1) at
    columns 4·bones[n, k] .. 4·bones[n, k] + 3, so that ``skin_rows`` is one sparse product (rest (N, 3); bones,
    weights (N, K): each point's own few skin weights; zero weights dropped, repeated bones summed)."""
    N, K = bones.shape
    rest_h = np.concatenate([np.asarray(rest, np.float64), np.ones((N, 1))], 1)                 # (N, 4)
    rows = np.repeat(np.arange(N), K * 4)
    cols = (np.asarray(bones, np.int64)[:, :, None] * 4 + np.arange(4)).reshape(-1)
    vals = (np.asarray(weights, np.float64)[:, :, None] * rest_h[:, None, :]).reshape(-1)
    keep = np.asarray(weights)[:, :, None].repeat(4, 2).reshape(-1) != 0
    key, inverse = np.unique(rows[keep] * (4 * num_bones) + cols[keep], return_inverse=True)
    vals = np.bincount(inverse.ravel(), vals[keep], minlength=len(key))
    crow = np.concatenate([[0], np.cumsum(np.bincount(key // (4 * num_bones), minlength=N))])
    with warnings.catch_warnings():      # torch calls its sparse CSR layout beta; its products are what we need
        warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta state")
        warnings.filterwarnings("ignore", "Sparse invariant checks are implicitly disabled")
        return torch.sparse_csr_tensor(torch.as_tensor(crow), torch.as_tensor(key % (4 * num_bones)),
                                       torch.as_tensor(vals, dtype=torch.float32), (N, 4 * num_bones))


def skin_rows(A: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    """(B, N, R) rows of the skinned points: the ``skinning_matrix`` A (N, J·4) times per-bone rows S (B, J, R, 4)
    of affine transforms (R = 3: positions; R = 1: one world coordinate)."""
    B, J, R = S.shape[:3]
    out = A @ S.permute(1, 3, 0, 2).reshape(J * 4, B * R)                     # (N, B·R)
    return out.reshape(-1, B, R).transpose(0, 1).contiguous()


def group_boxes(x: torch.Tensor, groups: Groups):
    """(lo, hi), each (B, G, 3): per frame the box of each group's points, x (B, N, 3) in ``groups.order``
    (an empty group's box is empty: lo = +inf, hi = −inf)."""
    B, G = x.shape[0], groups.num_groups
    idx = groups.group[None, :, None].expand(B, -1, 3)
    lo = torch.full((B, G, 3), float("inf"), dtype=x.dtype).scatter_reduce(1, idx, x, "amin")
    hi = torch.full((B, G, 3), float("-inf"), dtype=x.dtype).scatter_reduce(1, idx, x, "amax")
    return lo, hi


def capsule_boxes(a: torch.Tensor, b: torch.Tensor, radius: torch.Tensor):
    """(lo, hi), each (B, C, 3): the boxes of capsules with axis ends a, b (B, C, 3) and radii (C,), grown by 1 %
    of the radius (rounding in the narrow test never reaches past it)."""
    pad = (1.01 * radius)[None, :, None]
    return torch.minimum(a, b) - pad, torch.maximum(a, b) + pad


def candidates(boxes, capsules, allowed: torch.Tensor, groups: Groups):
    """Generator of (frame (E,), point (E,) in ``groups.order``, capsule (E,)) int64 entries, at most about
    ``ENTRY_BLOCK`` at a time: every point of each (frame, group, capsule) whose group box (``group_boxes``) meets
    the capsule's box (``capsule_boxes``) and where ``allowed`` (G, C) holds."""
    (glo, ghi), (clo, chi) = boxes, capsules
    meet = ((glo[:, :, None] <= chi[:, None]) & (clo[:, None] <= ghi[:, :, None])).all(-1) & allowed[None]
    f, g, c = torch.nonzero(meet, as_tuple=True)
    if not f.numel():
        return
    n = groups.count[g]
    ends = torch.cumsum(n, 0)
    cut = 0
    while cut < len(f):                               # blocks of whole pairs, about ENTRY_BLOCK entries each
        base = int(ends[cut - 1]) if cut else 0
        stop = max(cut + 1, int(torch.searchsorted(ends, base + ENTRY_BLOCK, right=True)))
        pair = torch.repeat_interleave(torch.arange(cut, stop), n[cut:stop])
        within = torch.arange(len(pair)) - (ends[pair] - n[pair] - base)
        yield f[pair], groups.start[g[pair]] + within, c[pair]
        cut = stop


__all__ = ["ENTRY_BLOCK", "Groups", "candidates", "capsule_boxes", "group_boxes", "skin_rows", "skinning_matrix"]
