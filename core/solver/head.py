"""The head's attitude (beyond the paper; docs/solver.md "The head's attitude").

A head weighs little in the objective: three key vertices ride on it (``gaze.HEAD_KEYVERTS``), so a term that
reaches one of them (a partner's hand passing behind it, the gaze cone, a barrier) can turn it far for a small
gain, and L_reg, on positions, charges little for it. Left alone, a joint solve swung a head from 37° face down to
40° face up within 15 frames where its source held it still. This term keeps each frame's head attitude within
``HEAD_TOLERANCE_DEG`` of the source's and charges what lies beyond:

    L_c, F_c                        each head's frame in its own T-pose, in its body's axes there, and those axes
                                    (R: ``gaze.head_frames`` of the three key vertices; F: left, forward, up;
                                    ``gaze.tpose_head_frame``)
    Q(t)   = A R_src(t) L_srcᵀ L_tgt  the target's head frame had copy-rotations turned it as the source's
                                    (A = F_tgt F_srcᵀ, its turn between the two bodies' axes)
    u(t)   = 1 − cos θ(t) = (3 − tr(Q(t)ᵀ R_tgt(t))) / 2        θ: the angle between R_tgt(t) and Q(t)
    L_head = Σ_t relu(u(t) − u₀)² / (T · (u₁ − u₀)²)

u₀ = 1 − cos ``HEAD_TOLERANCE_DEG``, u₁ = 1 − cos ``HEAD_SCALE_DEG``: inside the tolerance the head is free (the
gaze, the contacts and the spine's own corrections turn it as before); a frame at the scale angle costs 1 / T, as
much as that frame's share of a term at its copy-rotations value. The calibration makes the angle independent of
the head's shape, the rest pose and where the armature objects face (copy-rotations turns the two heads alike: θ
≈ 0.1–0.6° on the salsa couples). The metrics read the same angle (``head_attitude_mean`` / ``_max``,
docs/metrics.md).
Reported inside L_reg, weighted by ``w_head`` (0: off).
"""

from __future__ import annotations

import math

import torch

from ..gaze import HEAD_KEYVERTS, attitude_gap, attitude_reference, tpose_head_frame

#: the head turns freely within this angle of the source's attitude
HEAD_TOLERANCE_DEG = 15.0
#: a frame whose head is this far from the source's costs 1 / T (the term's scale)
HEAD_SCALE_DEG = 30.0


class HeadAttitude:
    """The head's attitude term of one solve.

    Args:
        ids: (3,) indices of (face_center, head_back, head_top) among the solve's key vertices.
        reference: (T, 3, 3) ``gaze.attitude_reference`` of the source's head paths.
        dtype: the solve's dtype.
    """

    def __init__(self, ids, reference: torch.Tensor, dtype):
        self.ids = torch.as_tensor([int(k) for k in ids], device=reference.device)
        self.reference = reference.to(dtype)
        self.u0 = 1.0 - math.cos(math.radians(HEAD_TOLERANCE_DEG))
        self.scale = reference.shape[0] * (math.cos(math.radians(HEAD_TOLERANCE_DEG))
                                           - math.cos(math.radians(HEAD_SCALE_DEG))) ** 2

    @classmethod
    def of(cls, job, src_p: torch.Tensor):
        """The term of ``job`` (a SolveJob in its set-up; its key vertices in the source's order, ``src_p`` (T, N,
        3)), or None when ``w_head`` is 0 or either character lacks a head key vertex."""
        names = list(job.source.keyverts.names)
        if job.settings.w_head <= 0 or not all(n in names and n in job.target.keyverts.names
                                               for n in HEAD_KEYVERTS):
            return None
        ids = [names.index(n) for n in HEAD_KEYVERTS]
        source_frames = tpose_head_frame(job.source, job.source_motion, job.source_track)
        return cls(ids, attitude_reference(src_p[:, ids], source_frames, tpose_head_frame(job.target)), src_p.dtype)

    def loss(self, p: torch.Tensor) -> torch.Tensor:
        """L_head at key vertices p (T, N, 3): Σ_t relu(u(t) − u₀)² / (T · (u₁ − u₀)²)."""
        gap = attitude_gap(self.reference, p.index_select(1, self.ids))
        return (gap - self.u0).clamp_min(0.0).square().sum() / self.scale
