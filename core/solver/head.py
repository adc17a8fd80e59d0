"""The head's attitude (beyond the paper; docs/solver.md "The head's attitude").

A head weighs little in the objective: three key vertices ride on it (``gaze.HEAD_KEYVERTS``), so a term that
reaches one of them (a partner's hand passing behind it, the gaze cone, a barrier) can turn it far for a small
gain, and L_reg, on positions, charges little for it. Left alone, a joint solve swung a head from 37° face down to
40° face up within 15 frames where its source and copy-rotations held it still. This term keeps each frame's head
within ``HEAD_TOLERANCE_DEG`` of copy-rotations' (the solve's start, which turns the head as the source's) and
charges what lies beyond:

    R(t)   the head frame of the three key vertices (``gaze.head_frames``: e1 = face − back, e2 = top − back
           made orthogonal to e1, e3 = e1 × e2), R_0(t) copy-rotations' (at p_init)
    u(t)   = 1 − cos θ(t) = (3 − tr(R_0(t)ᵀ R(t))) / 2          θ: the angle the solve turned the head by
    L_head = Σ_t relu(u(t) − u₀)² / (T · (u₁ − u₀)²)

u₀ = 1 − cos ``HEAD_TOLERANCE_DEG``, u₁ = 1 − cos ``HEAD_SCALE_DEG``: inside the tolerance the head is free (the
gaze, the contacts and the spine's own corrections turn it as before); a frame at the scale angle costs 1 / T, as
much as that frame's share of a term at its copy-rotations value. Reported inside L_reg, weighted by ``w_head``
(0: off). The metrics read the same angle (``head_turn_mean`` / ``head_turn_max``, ``head_turn_degrees``,
docs/metrics.md).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..contacts.gaze import HEAD_KEYVERTS, frames_of, head_frames
from ..character.track import ClipTrack
from ..types import Character, Motion

#: the head turns freely within this angle of copy-rotations' head
HEAD_TOLERANCE_DEG = 15.0
#: a frame whose head is this far from copy-rotations' costs 1 / T (the term's scale)
HEAD_SCALE_DEG = 30.0
#: frames per pass of ``head_turn`` (two key-vertex tracks of this many frames at a time: a long clip's memory)
HEAD_CHUNK = 1024


def head_ids(names):
    """Indices of (face_center, head_back, head_top) among key vertices named ``names``, or None when one is
    missing."""
    names = list(names)
    return [names.index(n) for n in HEAD_KEYVERTS] if all(n in names for n in HEAD_KEYVERTS) else None


def turn_gap(reference: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
    """(T,) 1 − cos θ(t), θ the angle between the head frame of ``head`` (T, 3, 3): face_center, head_back,
    head_top positions, and the ``reference`` head frames (T, 3, 3)."""
    return 0.5 * (3.0 - (reference * frames_of(head[:, 0], head[:, 1], head[:, 2])).sum((-1, -2)))


def head_turn_degrees(head: np.ndarray, reference_head: np.ndarray) -> np.ndarray:
    """(T,) degrees between the head frames of two (T, 3, 3) paths of (face_center, head_back, head_top): how far
    one motion turned a character's head from another (the result from copy-rotations, a metric)."""
    with torch.no_grad():
        ref = torch.as_tensor(reference_head, dtype=torch.float64)
        gap = turn_gap(frames_of(ref[:, 0], ref[:, 1], ref[:, 2]), torch.as_tensor(head, dtype=torch.float64))
    gap = gap.numpy()
    return np.degrees(np.arccos(np.clip(1.0 - gap, -1.0, 1.0)))


def head_turn(target: Character, motion: Motion, reference: Motion):
    """(T,) degrees by which ``motion`` turns ``target``'s head from ``reference`` (a solve's result from its
    copy-rotations start: the metrics' ``head_turn_mean`` / ``_max``), ``HEAD_CHUNK`` frames at a time; None when
    the target lacks a head key vertex."""
    found = head_ids(target.keyverts.names) if target.keyverts is not None else None
    if found is None:
        return None
    ids = target.keyverts.vertex_ids[found]
    return np.concatenate([head_turn_degrees(*(ClipTrack(target, m.slice(a, a + HEAD_CHUNK)).vertices(ids)
                                               for m in (motion, reference)))
                           for a in range(0, motion.num_frames, HEAD_CHUNK)])


class HeadAttitude:
    """The head's attitude term of one solve.

    Args:
        ids: (3,) indices of (face_center, head_back, head_top) among the solve's key vertices.
        reference: (T, 3, 3) copy-rotations' head frames (``anchored``), None until then.
    """

    def __init__(self, ids, reference: torch.Tensor = None):
        self.ids = tuple(int(k) for k in ids)
        self.reference = reference
        #: the ids on the reference's device (a gather a CUDA graph can record: no host copy at each step)
        self.index = None if reference is None else torch.as_tensor(self.ids, device=reference.device)
        self.u0 = 1.0 - math.cos(math.radians(HEAD_TOLERANCE_DEG))
        self.unit = (math.cos(math.radians(HEAD_TOLERANCE_DEG)) - math.cos(math.radians(HEAD_SCALE_DEG))) ** 2

    @classmethod
    def of(cls, settings, names):
        """The term for key vertices named ``names`` (the solve's order), or None when ``settings.w_head`` is 0 or
        a head key vertex is missing."""
        found = head_ids(names) if settings.w_head > 0 else None
        return None if found is None else cls(found)

    def anchored(self, p_init: torch.Tensor) -> "HeadAttitude":
        """This term with copy-rotations' key vertices p_init (T, N, 3) as its reference."""
        with torch.no_grad():
            return HeadAttitude(self.ids, head_frames(p_init, self.ids))

    def loss(self, p: torch.Tensor) -> torch.Tensor:
        """L_head at key vertices p (T, N, 3): Σ_t relu(u(t) − u₀)² / (T · (u₁ − u₀)²)."""
        gap = turn_gap(self.reference, p.index_select(1, self.index))
        return (gap - self.u0).clamp_min(0.0).square().sum() / (p.shape[0] * self.unit)
