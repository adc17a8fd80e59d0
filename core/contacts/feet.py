"""The feet: which mesh vertices are a foot, the sole points that carry it on the ground, and each foot's
lowest point and horizontal velocity over a clip.

One definition, shared by copy-rotations (the ground at frame 0, the hip height), the source floor estimate
(``core.contacts.ground``), the solver's foot terms and the metrics (docs/metrics.md "the foot"):

- a vertex belongs to a foot when its body segment (``core.rig.parts.vertex_segments``: its dominant bone, or that
  bone's nearest mapped core ancestor) is that side's ``foot`` or ``toes``;
- ``foot_vertices`` lists them per side, evenly subsampled to ``FOOT_MAX_VERTICES`` where a caller needs a
  bounded count (the lowest point of a sole barely moves: the sole is flat and densely sampled);
- the lowest point of a foot on a frame is a soft minimum of its vertices' heights (``soft_lowest``), so that
  on a flat sole the gradient is shared instead of jumping from vertex to vertex;
- a foot's speed is the centred mean speed over ``LOCK_WINDOW_S`` of the vertex lowest on that frame
  (``window_bounds``): a box low-pass that ignores capture jitter a one-frame difference amplifies by fps.
"""

from __future__ import annotations

import numpy as np
import torch

from ..rig.parts import vertex_segments
from ..types import Character

SIDES = ("left", "right")
#: vertices per foot (evenly subsampled) where a bounded count is needed: metrics, ground, sole points
FOOT_MAX_VERTICES = 300
#: a foot vertex within SOLE_BAND of h_c of its foot's lowest vertex on a frame carries the foot there
SOLE_BAND = 0.005
#: temperature of a foot's soft lowest point, as a share of h_c
SOFT_LOW = 0.001
#: foot speed = mean speed over this window, centred (docs/metrics.md)
LOCK_WINDOW_S = 1.0 / 15.0
#: a locked foot: at least this long below the speed threshold (one frame at 30 fps, four at 120 fps)
LOCK_MIN_RUN_S = 1.0 / 30.0


def even_subset(ids: np.ndarray, count: int = None) -> np.ndarray:
    """At most ``count`` of ``ids`` (V,), evenly spaced along the array (all of them when count is None)."""
    ids = np.asarray(ids, dtype=np.int64)
    if count is None or len(ids) <= count:
        return ids
    return ids[np.linspace(0, len(ids) - 1, count).round().astype(np.int64)]


def foot_vertices(character: Character, max_vertices: int = FOOT_MAX_VERTICES) -> list:
    """[left ids, right ids]: the mesh vertices of each foot (segment ``<side>_foot`` or ``<side>_toes``),
    each (≤ max_vertices,) int64 (every one when ``max_vertices`` is None); empty where a foot is absent."""
    sk, mesh = character.skeleton, character.mesh
    seg, bones, _ = vertex_segments(sk, mesh, character.bone_map)
    out = []
    for side in SIDES:
        k = [bones.index(c) for c in (f"{side}_foot", f"{side}_toes") if c in bones]
        out.append(even_subset(np.nonzero(np.isin(seg, k))[0], max_vertices))
    return out


def foot_side(character: Character, vertex_ids) -> np.ndarray:
    """(V,) int64: 0 for vertices of the left foot, 1 for the right one, -1 elsewhere."""
    sk, mesh = character.skeleton, character.mesh
    seg, bones, _ = vertex_segments(sk, mesh, character.bone_map)
    s = seg[np.asarray(vertex_ids, dtype=np.int64)]
    out = np.full(len(s), -1, dtype=np.int64)
    for k, side in enumerate(SIDES):
        ids = [bones.index(c) for c in (f"{side}_foot", f"{side}_toes") if c in bones]
        out[np.isin(s, ids)] = k
    return out


def window_half(fps: float, window_s: float = LOCK_WINDOW_S) -> int:
    """k = max(1, round(fps · window_s / 2)): the frames on each side of a frame in its centred window."""
    return max(1, int(round(fps * window_s / 2.0)))


def window_bounds(num_frames: int, fps: float, window_s: float = LOCK_WINDOW_S, frames=None):
    """(T,) first and last frame of the centred window of frame t: t ∓ k (``window_half``), clamped to the
    clip of ``num_frames`` frames (the foot-speed estimator of docs/metrics.md; the solver's foot lock); for
    the clip frames ``frames`` only (an index array) when given."""
    k = window_half(fps, window_s)
    t = np.arange(num_frames) if frames is None else np.asarray(frames, dtype=np.int64)
    return np.clip(t - k, 0, num_frames - 1), np.clip(t + k, 0, num_frames - 1)


def lock_runs(below: np.ndarray, fps: float, min_run_s: float = LOCK_MIN_RUN_S) -> np.ndarray:
    """(..., T) bool: ``below`` (..., T) kept only in runs of at least ceil(fps · min_run_s) consecutive frames
    (docs/metrics.md: a single-frame dip in a jittering stance is not a lock)."""
    below = np.asarray(below, bool)
    n = max(1, int(np.ceil(fps * min_run_s - 1e-9)))
    if n == 1 or below.shape[-1] == 0:
        return below.copy()
    flat = below.reshape(-1, below.shape[-1])
    pad = np.zeros((len(flat), 1), bool)
    edges = np.diff(np.concatenate([pad, flat, pad], 1).astype(np.int8), axis=1)
    out = np.zeros_like(flat)
    for r, (starts, stops) in enumerate(zip((edges == 1), (edges == -1))):
        for a, b in zip(np.nonzero(starts)[0], np.nonzero(stops)[0]):
            if b - a >= n:
                out[r, a:b] = True
    return out.reshape(below.shape)


def soft_lowest(heights: torch.Tensor, tau: float, dim: int = -1) -> torch.Tensor:
    """Soft minimum −τ·logsumexp(−h/τ) of ``heights`` over ``dim`` (within τ·log(count) below the minimum)."""
    return -tau * torch.logsumexp(-heights / tau, dim)


def spread_sole_points(z: np.ndarray, rest: np.ndarray, band: float, count: int) -> np.ndarray:
    """Sole points of one foot: sorted indices (≤ count) into its vertices.

    z: (F, V) world heights of the foot's vertices on sampled frames; rest: (V, 3) their rest positions.
    A vertex is near the floor on a frame where it lies within ``band`` of that frame's lowest foot vertex;
    the vertices near it on at least 5 % as many frames as the most frequent one are spread over the sole by
    farthest-point sampling (in the rest pose), starting from the most frequent, so that a foot standing
    still and flat gets its whole outline (heel, ball, toe, both edges), not only the one vertex that happens
    to be lowest."""
    near = (z - z.min(-1, keepdims=True)) <= band                             # (F, V)
    freq = near.sum(0)
    cand = np.nonzero(freq >= max(1.0, 0.05 * freq.max()))[0]                # not a one-frame glitch
    cand = cand[np.argsort(-freq[cand], kind="stable")]
    if len(cand) <= count:
        return np.sort(cand)
    x = rest[cand]
    chosen = [0]
    d = np.linalg.norm(x - x[0], axis=1)
    while len(chosen) < count:
        k = int(np.argmax(d))
        if d[k] <= 0.0:
            break
        chosen.append(k)
        d = np.minimum(d, np.linalg.norm(x - x[k], axis=1))
    return np.sort(cand[chosen])


def foot_lows_and_velocity(points: list, ground, fps: float, tau: float, speed_points: list = None) -> tuple:
    """Each foot's lowest point over a clip.

    Args:
        points: per foot, (T, V_k, 3) world positions of its points (sole points, or all its vertices).
        ground: the floor under them: a level, or (T,) levels per frame (metres).
        tau: temperature of the soft lowest point (metres; ``SOFT_LOW`` × h_c).
        speed_points: per foot, (T, W_k, 3) the points whose lowest one on each frame gives the velocity (default
            ``points``): the solver passes every foot vertex, the foot point of the foot-locked metric, so that a
            foot rolling over its heel or toes moves at the speed the metric reads and not at a sparse sole
            point's.
    Returns:
        low (T, 2): height above ``ground`` of the soft lowest point of ``points``; vel (T, 2, 2): horizontal
        velocity (m/s) of that frame's lowest point of ``speed_points``, followed over the centred window of
        ``window_bounds``. NaN for a foot without points.
    """
    T = points[0].shape[0] if points else 0
    low = np.full((T, 2), np.nan)
    vel = np.full((T, 2, 2), np.nan)
    g = np.asarray(ground, dtype=np.float64)
    g = g[:, None] if g.ndim else g
    lo, hi = window_bounds(T, fps, LOCK_WINDOW_S)
    for k, P in enumerate(points):
        if P.shape[1] == 0:
            continue
        low[:, k] = soft_lowest(torch.as_tensor(P[..., 2] - g), tau).numpy()
        Q = P if speed_points is None else speed_points[k]
        v = Q[..., 2].argmin(-1)                                          # (T,) lowest point
        d = Q[hi, v, :2] - Q[lo, v, :2]
        vel[:, k] = d / np.maximum(hi - lo, 1)[:, None] * fps
    return low, vel
