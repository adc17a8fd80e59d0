"""Detect and resolve conflicting constraints (ReConForM §6.3, Eq. 3).

After a solve, for each body part b and each pair of semantic terms (k1, k2), the cosine between
∇_{q_b} L_k1 and ∇_{q_b} L_k2 is measured per window of frames, where q_b are the per-frame 6D rotation
residuals of the part's optimised bones. Windows where it falls below a threshold are merged into
``Conflict`` records. A conflict is resolved with a slider value in [0, 1] that trades one term against the
other on that body part (``resolution_weights``), fed back as ``SolverSettings.part_weights`` into a
warm-started re-solve (``resolve``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np
import torch

from .errors import CoreError
from .solver import SEMANTIC_TERMS, SolveJob

#: Body parts: the key-vertex limbs of core.humanoid.LIMBS (a bone belongs to the limb of its canonical name).
DEFAULT_THRESHOLD = -0.5
DEFAULT_WINDOW_S = 0.5


@dataclass(frozen=True)
class Conflict:
    """Two semantic terms pulling a body part's rotations in opposite directions.

    body_part: limb name (``left_arm``, ``torso`` ...); term_a, term_b: semantic term names;
    cosine: the lowest gradient cosine over the frames; severity: 0 at the threshold, 1 at cosine −1;
    frames: (first, last) scene frames of the conflicting span.
    """

    body_part: str
    term_a: str
    term_b: str
    cosine: float
    severity: float
    frames: tuple


def term_gradients(job: SolveJob, terms=SEMANTIC_TERMS, alpha: float = 1.0) -> dict:
    """{term: (T, Jo, 6) gradient of its weighted value w.r.t. the per-frame rotation residuals}."""
    if not job.done:
        raise CoreError("Conflicts are measured after a finished solve: run the solve first.")
    with torch.no_grad():
        d, off = job.frame_residuals()
    d = d.detach().clone().requires_grad_(True)
    off = off.detach()
    vals = job.weighted_terms(alpha=alpha, residuals=(d, off))
    out = {}
    for k in terms:
        v = vals[k]
        if not v.requires_grad:
            out[k] = torch.zeros_like(d)
            continue
        (g,) = torch.autograd.grad(v, d, retain_graph=True, allow_unused=True)
        out[k] = torch.zeros_like(d) if g is None else g.detach()
    return out


def detect_conflicts(job: SolveJob, threshold: float = DEFAULT_THRESHOLD, window_s: float = DEFAULT_WINDOW_S,
                     min_share: float = 0.05, terms=SEMANTIC_TERMS) -> list:
    """Conflicts of a finished ``job``, most severe first.

    Args:
        threshold: cosine below which a pair of terms conflicts on a part.
        window_s: window length in seconds (frames are grouped into consecutive windows).
        min_share: a term counts on a (part, window) only if its gradient norm is at least this share of the
            largest term gradient there (vanishing gradients have meaningless directions).
    """
    grads = term_gradients(job, terms)
    T = job.num_frames
    win = max(1, int(round(window_s * job.fps)))
    parts = np.asarray(job.opt_parts)
    frame0 = job.init_motion.frame_start
    found = []
    for part in sorted(set(parts)):
        cols = torch.as_tensor(np.nonzero(parts == part)[0])
        G = {k: g[:, cols].reshape(T, -1) for k, g in grads.items()}
        spans = {}
        for w0 in range(0, T, win):
            w1 = min(T, w0 + win)
            vec = {k: G[k][w0:w1].reshape(-1) for k in terms}
            norms = {k: float(v.norm()) for k, v in vec.items()}
            top = max(norms.values())
            if top <= 0:
                continue
            for a, b in itertools.combinations(terms, 2):
                if norms[a] < min_share * top or norms[b] < min_share * top:
                    continue
                cos = float((vec[a] @ vec[b]) / (norms[a] * norms[b]))
                if cos < threshold:
                    spans.setdefault((a, b), []).append((w0, w1 - 1, cos))
        for (a, b), items in spans.items():
            # merge adjacent windows
            cur = None
            for s, e, c in items:
                if cur is not None and s == cur[1] + 1:
                    cur = (cur[0], e, min(cur[2], c))
                else:
                    if cur is not None:
                        found.append((part, a, b, cur))
                    cur = (s, e, c)
            found.append((part, a, b, cur))
    out = []
    for part, a, b, (s, e, c) in found:
        sev = float(np.clip((threshold - c) / (threshold + 1.0), 0.0, 1.0)) if threshold > -1 else 1.0
        out.append(Conflict(str(part), a, b, float(c), sev, (frame0 + s, frame0 + e)))
    out.sort(key=lambda c: (-c.severity, c.body_part, c.term_a, c.term_b, c.frames))
    return out


def resolution_weights(conflict: Conflict, value: float) -> dict:
    """Per-part term factors for a slider ``value`` in [0, 1]: 0 keeps only term_a on the part, 1 keeps only
    term_b, 0.5 leaves both as they were. Factors are 2·(1 − value) and 2·value (their sum stays 2).

    Returns {(body_part, term): factor}, the format of SolverSettings.part_weights.
    """
    v = float(value)
    if not 0.0 <= v <= 1.0:
        raise CoreError(f"Conflict slider value must be in [0, 1], got {value}.")
    return {(conflict.body_part, conflict.term_a): 2.0 * (1.0 - v),
            (conflict.body_part, conflict.term_b): 2.0 * v}


def merge_part_weights(*weights: dict) -> dict:
    """Combine several part-weight dicts; factors of the same (part, term) multiply."""
    out = {}
    for w in weights:
        for key, f in (w or {}).items():
            out[key] = out.get(key, 1.0) * float(f)
    return out


def resolve(job: SolveJob, part_weights: dict, fraction: float = None) -> SolveJob:
    """A new SolveJob warm-started from ``job``'s result with ``part_weights`` replacing the previous ones.

    It runs ``fraction`` (default ``settings.resolve_fraction``) of the first solve's iterations with α = 1.
    """
    settings = replace(job.settings, part_weights=dict(part_weights))
    if fraction is not None:
        settings = replace(settings, resolve_fraction=float(fraction))
    return SolveJob(job.source, job.source_motion, job.target, job.init_motion, settings,
                    warm_start=job.result())
