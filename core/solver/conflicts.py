"""Detect and resolve conflicting constraints (ReConForM §6.3, Eq. 3).

After a solve, for each body part b and each pair of semantic terms (k1, k2), the cosine between
∇_{q_b} L_k1 and ∇_{q_b} L_k2 is measured per window of frames, where q_b are the per-frame 6D rotation
residuals of the part's optimised bones. Windows where it falls below a threshold make one ``Conflict`` per
(part, term pair), its windows merged into frame spans and ranked by severity × duration (``score``), so
the list a person reads is short: the costliest first (``ranked``). A conflict is resolved with a slider value
in [0, 1] that trades one term against the other on that body part (``resolution_weights``), fed back as
``SolverSettings.part_weights`` into a warm-started re-solve (``resolve``).

In a joint solve of several characters (ReConForM §6.1) each member's list also weighs the terms between the
characters, as one term "partner", against its own (``detecting_group``), and ``resolve_group`` re-solves the
group with each member's sliders.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np
import torch

from ..errors import CoreError
from ..heap import release_free_memory
from ..progress import drive, scaled
from . import CONTINUE, PARTNER_TERM, RESOLVE, SEMANTIC_TERMS, GroupSolveJob, SolveJob, WarmSchedule
from .continued import can_continue, can_continue_group, continued, continued_group
from .optim import deterministic
from .partners import PAIR_TERMS

#: Body parts: the key-vertex limbs of core.rig.humanoid.LIMBS (a bone belongs to the limb of its canonical name).
#: Two terms' gradients conflict below this cosine (−0.5 before the contact state, with which the constructed belly
#: conflict read −0.49; at the current weights it reads −0.66; docs/solver.md "Conflicts")
DEFAULT_THRESHOLD = -0.45
DEFAULT_WINDOW_S = 0.5


@dataclass(frozen=True)
class Conflict:
    """Two semantic terms pulling a body part's rotations in opposite directions, over the whole clip.

    body_part: limb name (``left_arm``, ``torso`` ...); term_a, term_b: semantic term names;
    cosine: the lowest gradient cosine over its frames; severity: its peak, 0 at the threshold, 1 at cosine −1;
    spans: ((first, last), ...) scene frames where the two terms conflict on the part (windows merged);
    score: Σ over those windows of severity × seconds, how much of the clip the conflict costs (the ranking).
    """

    body_part: str
    term_a: str
    term_b: str
    cosine: float
    severity: float
    spans: tuple = ()
    score: float = 0.0

    @property
    def frames(self) -> tuple:
        """(first, last) scene frame over all spans (() when none)."""
        return (self.spans[0][0], self.spans[-1][1]) if self.spans else ()

    @property
    def num_frames(self) -> int:
        """Number of frames covered by the spans."""
        return sum(b - a + 1 for a, b in self.spans)


#: up to this many frames, the conflicts' gradients share one forward pass (``_term_gradients``)
SHARED_PASS_FRAMES = 2000


def term_gradients(job: SolveJob, terms=SEMANTIC_TERMS, alpha: float = 1.0, extra=None) -> dict:
    """{term: (T, Jo, 6) gradient of its weighted value w.r.t. the per-frame rotation residuals}; ``extra``: as
    ``_term_gradients``'."""
    return drive(_term_gradients(job, terms, alpha, extra=extra))


def _term_gradients(job: SolveJob, terms, alpha: float, shared: bool = None, extra=None):
    """``term_gradients`` as a generator of the share of terms done (core.progress).

    ``shared``: one forward pass whose graph is kept for every term's backward pass (the default up to
    ``SHARED_PASS_FRAMES`` frames), or one forward pass per term, each graph freed by its backward pass (longer
    clips: the kept graph of a shared pass peaked at 2.28 GB on a 10 000-frame retarget, docs/solver.md). Both
    give the same gradients. ``extra(p, n)``: more {term: value} at the job's key vertices p, n (T, N, 3) (a
    joint solve's terms between the characters, ``detecting_group``)."""
    if not job.done:
        raise CoreError("Conflicts are measured after a finished solve: run the solve first.")
    with torch.no_grad():
        d0, off = job.frame_residuals()
    d0, off = d0.detach(), off.detach()
    if shared is None:
        shared = job.num_frames <= SHARED_PASS_FRAMES
    d = vals = None
    out = {}
    for n, k in enumerate(terms):
        # on a GPU the gradients' scatters are reproducible only under the switch (as the solve's steps)
        with deterministic(job.settings.device):
            if vals is None or not shared:
                d = d0.clone().requires_grad_(True)
                p, nrm, sole = job._forward((d, off), alpha)
                vals = job.terms_at(p, nrm, sole, alpha)
                if extra is not None:
                    vals.update(extra(p, nrm))
            v = vals[k]
            if not v.requires_grad:
                out[k] = torch.zeros_like(d)
            else:
                (g,) = torch.autograd.grad(v, d, retain_graph=shared, allow_unused=True)
                out[k] = torch.zeros_like(d) if g is None else g.detach()
        if not shared:                   # a long clip: its graph freed, and the heap it held handed back (core.heap)
            vals = p = nrm = sole = None
            release_free_memory()
        yield (n + 1) / len(terms)
    return out


def detect_conflicts(job: SolveJob, threshold: float = DEFAULT_THRESHOLD, window_s: float = DEFAULT_WINDOW_S,
                     min_share: float = 0.05, terms=SEMANTIC_TERMS) -> list:
    """``detecting`` run to its end: the conflicts of a finished ``job``, the costliest first."""
    return drive(detecting(job, threshold, window_s, min_share, terms))


def detecting(job: SolveJob, threshold: float = DEFAULT_THRESHOLD, window_s: float = DEFAULT_WINDOW_S,
              min_share: float = 0.05, terms=SEMANTIC_TERMS):
    """Generator of the share done (one gradient pass per term, the phase's cost on a long clip); returns the
    conflicts of a finished ``job``, one per (body part, term pair), the costliest first.

    Frames are grouped into consecutive windows of ``window_s`` seconds; on a window, two terms conflict on a
    part when the cosine of their gradients (over the part's bones and the window's frames) is below
    ``threshold`` and both gradients are at least ``min_share`` of the largest term's there (vanishing gradients
    have meaningless directions). A conflict's windows merge into spans; its score is Σ severity × window
    seconds, so a strong conflict over a long stretch ranks above a brief one. Ties (equal scores) keep a fixed
    order (part, terms), so identical solves list identical rankings.
    """
    grads = yield from _term_gradients(job, terms, 1.0)
    return _conflicts(job, grads, terms, threshold, window_s, min_share)


def _conflicts(job: SolveJob, grads: dict, terms, threshold: float, window_s: float, min_share: float) -> list:
    """The conflicts of ``job`` from its terms' gradients {term: (T, Jo, 6)} (``detecting``), ranked."""
    T = job.num_frames
    win = max(1, int(round(window_s * job.fps)))
    parts = np.asarray(job.opt_parts)
    frame0 = job.init_motion.frame_start
    out = []
    for part in sorted(set(parts)):
        cols = torch.as_tensor(np.nonzero(parts == part)[0])
        G = {k: g[:, cols].reshape(T, -1) for k, g in grads.items()}
        found = {}
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
                    found.setdefault((a, b), []).append((w0, w1 - 1, cos))
        for (a, b), windows in found.items():
            spans, score, worst = [], 0.0, 1.0
            for s0, s1, c in windows:
                score += _severity(c, threshold) * (s1 - s0 + 1) / job.fps
                worst = min(worst, c)
                if spans and s0 == spans[-1][1] + 1:
                    spans[-1][1] = s1
                else:
                    spans.append([s0, s1])
            out.append(Conflict(str(part), a, b, float(worst), _severity(worst, threshold),
                                tuple((frame0 + s0, frame0 + s1) for s0, s1 in spans), float(score)))
    out.sort(key=lambda c: (-round(c.score, 9), c.body_part, c.term_a, c.term_b))
    return out


def detect_group_conflicts(group: GroupSolveJob, threshold: float = DEFAULT_THRESHOLD,
                           window_s: float = DEFAULT_WINDOW_S, min_share: float = 0.05) -> list:
    """``detecting_group`` run to its end: one list of conflicts per member of a finished joint solve."""
    return drive(detecting_group(group, threshold, window_s, min_share))


def detecting_group(group: GroupSolveJob, threshold: float = DEFAULT_THRESHOLD, window_s: float = DEFAULT_WINDOW_S,
                    min_share: float = 0.05):
    """Generator of the share done; returns one list of conflicts per member of the finished joint solve
    ``group`` (its members' order), each as ``detecting`` finds a single solve's, among the member's own
    semantic terms and PARTNER_TERM: the terms between the characters (their weighted dist, dir and pen) as a
    function of that member's rotations, the other members held at their results. So a hand that holds a
    partner against an elbow kept at the body's side is listed, and its slider (a per-part weight on "partner",
    ``resolve_group``) trades them. Without terms between the characters (one member, or w_partner 0) each
    member's list is ``detecting``'s."""
    if not group.done:
        raise CoreError("Conflicts are measured after a finished solve: run the solve first.")
    members = group.members
    partners = group.partners if group.partners is not None and group.settings.w_partner > 0 else None
    terms = SEMANTIC_TERMS + ((PARTNER_TERM,) if partners is not None else ())
    out = []
    for c, m in enumerate(members):
        extra = None if partners is None else _partner_term(partners, members, c)
        grads = yield from scaled(_term_gradients(m, terms, 1.0, extra=extra), c / len(members),
                                  (c + 1) / len(members))
        out.append(_conflicts(m, grads, terms, threshold, window_s, min_share))
    return out


def _partner_term(partners, members, c: int):
    """member c's partner term as a function of its key-vertex positions and normals (T, N, 3), the other members
    held at their current poses (α = 1): {PARTNER_TERM: scalar}."""
    with torch.no_grad():
        fixed = [mk._forward(alpha=1.0)[:2] for mk in members]

    def extra(p, n):
        ps = torch.cat([p if k == c else f[0] for k, f in enumerate(fixed)], 1)
        ns = torch.cat([n if k == c else f[1] for k, f in enumerate(fixed)], 1)
        vals = partners.weighted(ps, ns, 1.0)
        return {PARTNER_TERM: sum(vals[f"partner_{k}"] for k in PAIR_TERMS)}
    return extra


def _severity(cosine: float, threshold: float) -> float:
    """0 at the threshold, 1 at cosine −1."""
    return float(np.clip((threshold - cosine) / (threshold + 1.0), 0.0, 1.0)) if threshold > -1 else 1.0


def ranked(conflicts: list, shown: int = 3) -> tuple:
    """(the ``shown`` costliest conflicts, the rest): what a panel lists first and what it folds."""
    return list(conflicts[:shown]), list(conflicts[shown:])


def ranked_across(members) -> list:
    """[(name, Conflict)]: several characters' lists ``members`` [(name, conflicts)] in one ranking, the costliest
    first (``score``), ties in the members' order, then each list's: a joint retarget's conflicts as the panel and
    the batch report list them."""
    rows = [(-round(c.score, 9), k, n, name, c) for k, (name, conflicts) in enumerate(members)
            for n, c in enumerate(conflicts)]
    return [(name, c) for *_, name, c in sorted(rows, key=lambda r: r[:3])]


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

    It runs ``fraction`` (default ``CONTINUE.steps``) of the first solve's iterations with α = 1,
    continuing ``job``'s optimiser and its set-up (``core.solver.continued``: ready to step).
    """
    settings = replace(job.settings, part_weights=dict(part_weights))
    schedule, state_schedule = RESOLVE, CONTINUE
    if fraction is not None:
        schedule = WarmSchedule(steps=float(fraction), lr=RESOLVE.lr)
        state_schedule = WarmSchedule(steps=float(fraction), lr=CONTINUE.lr)
    if can_continue(job, settings, job.source, job.source_motion, job.target, job.init_motion, job.terrain):
        return continued(job, settings, schedule=state_schedule)
    return SolveJob(job.source, job.source_motion, job.target, job.init_motion, settings, warm_start=job.result(),
                    source_track=job.source_track, warm_sixd=job.result_sixd(), warm_state=job.optim,
                    warm_schedule=schedule, continue_schedule=state_schedule, terrain=job.terrain)


def resolve_group(group: GroupSolveJob, part_weights: list, fraction: float = None) -> GroupSolveJob:
    """A new joint solve warm-started from the finished ``group``'s results, member k at ``part_weights[k]``
    ({(part, term): factor}, terms of ``PART_WEIGHT_TERMS``: "partner" weighs the terms between the characters on
    that member's part) replacing its previous ones; as ``resolve`` for one pair: ``fraction`` of the
    iterations with α = 1, continuing the group's optimiser and set-up (``core.solver.continued.continued_group``)."""
    if len(part_weights) != len(group.members):
        raise CoreError(f"A joint solve of {len(group.members)} characters takes {len(group.members)} sets of "
                        f"per-part weights, not {len(part_weights)}.")
    settings = [replace(m.settings, part_weights=dict(pw or {})) for m, pw in zip(group.members, part_weights)]
    if not can_continue_group(group, settings):
        raise CoreError("Only a finished joint solve can be re-solved: retarget the characters together first.")
    return continued_group(group, settings, CONTINUE if fraction is None
                           else WarmSchedule(steps=float(fraction), lr=CONTINUE.lr))
