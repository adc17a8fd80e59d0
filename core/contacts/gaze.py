"""Gaze (ReConForM §6.1): where each character looks, and the cone weight that lets L_dir keep it.

Each character has one eye key vertex, ``KeyVertexSet.eye`` (the template's ``face_center``). Its gaze
direction (the paper leaves it open) is the head's forward axis, read from three key vertices that ride on
the head (``face_center``, ``head_back``, ``head_top``):

- a head frame per frame: e1 = unit(face_center − head_back), e2 = head_top − head_back made orthogonal to e1
  and unit, e3 = e1 × e2 (columns of R_head (T, 3, 3));
- calibrated once in the character's T-pose (``core.rig.tpose``, the shared standard pose of the method, where the
  character looks straight ahead along its body's forward axis f_T): g_local = R_head(T-pose)ᵀ f_T;
- gaze(t) = R_head(t) g_local, averaged over a centred window of ``GAZE_WINDOW_S`` seconds and normalised
  ("the averaged gaze direction of character c at a given time", §6.1): mocap head jitter of a degree or two
  would otherwise move a 2°–5° cone on every frame.

Calibrating in the T-pose makes the direction independent of the head's shape (a flat or a round face puts
face_center − head_back at another angle): source and target gaze agree whenever their heads turn alike, as
copy-rotations turns them.

The cone weight (the intended form of the printed formula, which never reaches 1): for the eye vertex i of a
character and a key vertex j of another character,
``W_gaze(i, j) = clamp((S_cos(M_dir(i, j), gaze) − cos a_max) / (cos a_min − cos a_max))``, a_min = 2°,
a_max = 5°: 1 inside 2°, 0 beyond 5°, linear in the cosine between.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from ..character.frame import reference_basis
from ..errors import CoreError
from ..rig.tpose import body_frame, tpose_basis
from ..character.track import ClipTrack
from ..types import Character, Motion

GAZE_MIN_DEG = 2.0     #: fully inside the gaze cone within this angle
GAZE_MAX_DEG = 5.0     #: outside it beyond this angle
GAZE_WINDOW_S = 0.2    #: the gaze direction is averaged over a centred window this long
HEAD_KEYVERTS = ("face_center", "head_back", "head_top")


def cone_weight(cos: torch.Tensor, a_min_deg: float = GAZE_MIN_DEG, a_max_deg: float = GAZE_MAX_DEG) -> torch.Tensor:
    """clamp((cos − cos a_max) / (cos a_min − cos a_max)) in [0, 1]; any shape."""
    c_min, c_max = math.cos(math.radians(a_min_deg)), math.cos(math.radians(a_max_deg))
    return ((cos - c_max) / (c_min - c_max)).clamp(0.0, 1.0)


def head_frames(p: torch.Tensor, head_ids) -> torch.Tensor:
    """(T, 3, 3) head frames (columns e1, e2, e3) from key-vertex positions p (T, N, 3) and the indices of
    (face_center, head_back, head_top) among them."""
    return head_frames_batched(p, torch.as_tensor([[int(k) for k in head_ids]], device=p.device))[:, 0]


def head_frames_batched(p: torch.Tensor, head_ids: torch.Tensor) -> torch.Tensor:
    """(T, K, 3, 3) head frames of K characters: ``head_ids`` (K, 3) indices of each one's (face_center,
    head_back, head_top) among the stacked key vertices p (T, N, 3)."""
    q = p[:, head_ids]                                                                # (T, K, 3, 3)
    return frames_of(q[:, :, 0], q[:, :, 1], q[:, :, 2])


def frames_of(f: torch.Tensor, b: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """(..., 3, 3) head frames (columns e1, e2, e3) from face_center, head_back and head_top positions (..., 3):
    e1 = unit(f − b), e2 = u − b made orthogonal to e1 and unit, e3 = e1 × e2 (no gather: a CUDA graph records
    it)."""
    e1 = f - b
    e1 = e1 / e1.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    up = u - b
    e2 = up - (up * e1).sum(-1, keepdim=True) * e1
    e2 = e2 / e2.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return torch.stack([e1, e2, torch.cross(e1, e2, dim=-1)], -1)


def window_mean_plan(num_frames: int, k: int, dtype=torch.float64, device="cpu"):
    """(first index, end index, divisor) of the centred windows [t − k, t + k] clamped to a clip of
    ``num_frames`` frames, for ``window_mean`` (None when k = 0)."""
    if k <= 0 or num_frames < 2:
        return None
    t = torch.arange(num_frames, device=device)
    lo, hi = (t - k).clamp(min=0), (t + k).clamp(max=num_frames - 1) + 1
    return lo, hi, (hi - lo).to(dtype)


def window_mean(x: torch.Tensor, k: int = 0, plan=None) -> torch.Tensor:
    """Mean of x (T, ...) over frames [t − k, t + k] clamped to the clip (a box filter; k = 0: x); ``plan``:
    ``window_mean_plan`` of x's frame count, when the caller keeps one."""
    plan = window_mean_plan(x.shape[0], k, x.dtype, x.device) if plan is None else plan
    if plan is None:
        return x
    lo, hi, div = plan
    c = torch.cat([torch.zeros_like(x[:1]), torch.cumsum(x, 0)], 0)
    return (c.index_select(0, hi) - c.index_select(0, lo)) / div.reshape((-1,) + (1,) * (x.dim() - 1))


class Gaze(NamedTuple):
    """One character's gaze set-up: indices of its eye and head key vertices (in its key-vertex order) and its
    calibrated forward axis in the head frame (3,)."""

    eye: int
    head: tuple
    local: np.ndarray


def gaze_setup(character: Character, motion: Motion = None, track: ClipTrack = None, order=None) -> Gaze:
    """The gaze of ``character`` (its key vertices in ``order``, an index array into its KeyVertexSet, or their
    own order): the eye and head key vertices, and g_local calibrated in its T-pose (built from ``motion``'s
    reference frame when its rest pose lies down, as copy-rotations does)."""
    kv = character.keyverts
    if kv is None:
        raise CoreError(f"Character '{character.name}' has no key vertices: transfer them first.")
    names = list(kv.names) if order is None else [kv.names[k] for k in order]
    missing = [n for n in (kv.eye,) + HEAD_KEYVERTS if n not in names]
    if missing:
        raise CoreError(f"Character '{character.name}': no key vertex {', '.join(missing)} for its gaze; "
                        "transfer the key vertices from the template.")
    sk, bm = character.skeleton, character.bone_map
    basis = tpose_basis(sk, bm, reference_basis(character, motion, track))
    pose = Motion(basis[None], np.zeros((1, sk.num_bones, 3)))
    ids = kv.vertex_ids[[kv.names.index(n) for n in HEAD_KEYVERTS]]
    p = torch.as_tensor(ClipTrack(character, pose).vertices(ids))                      # (1, 3, 3)
    R = head_frames(p, (0, 1, 2))[0].numpy()
    forward = body_frame(sk, bm, basis).forward
    return Gaze(names.index(kv.eye), tuple(names.index(n) for n in HEAD_KEYVERTS), R.T @ forward)


def gaze_directions(p: torch.Tensor, gaze: Gaze, fps: float, window_s: float = GAZE_WINDOW_S) -> torch.Tensor:
    """(T, 3) unit gaze directions of one character from its key vertices p (T, N, 3)."""
    g = head_frames(p, gaze.head) @ torch.as_tensor(gaze.local, dtype=p.dtype, device=p.device)
    g = window_mean(g, int(round(fps * window_s / 2.0)))
    return g / g.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def look_weights(p: torch.Tensor, eye: int, gaze_dir: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
    """(T, M) cone weight of key vertices ``others`` (M,) seen from key vertex ``eye`` looking along
    ``gaze_dir`` (T, 3), at positions p (T, N, 3)."""
    v = p.index_select(1, others) - p[:, eye:eye + 1]
    cos = (v * gaze_dir[:, None]).sum(-1) / v.norm(dim=-1).clamp_min(1e-9)
    return cone_weight(cos)


__all__ = ["GAZE_MAX_DEG", "GAZE_MIN_DEG", "GAZE_WINDOW_S", "Gaze", "HEAD_KEYVERTS", "cone_weight", "frames_of",
           "gaze_directions", "gaze_setup", "head_frames", "head_frames_batched", "look_weights", "window_mean",
           "window_mean_plan"]
