"""Loss terms of the ReConForM objective (ReConForM §4.2, Eq. 1), one pure function each.

Every function returns the *sum* written in the paper (a 0-d tensor); the solver divides each term by a
reference scale (docs/solver.md "Balancing") and multiplies it by its weight. ``weight`` arguments are the
already mixed adaptive weights W^{s→t}; ``scale`` arguments are optional per-entry multipliers of the squared
residual (per-body-part overrides from conflict resolution), default 1.
"""

from __future__ import annotations

import torch

from ..rig.vec3 import dot3, sq_norm3


def _scaled(x: torch.Tensor, scale):
    return x if scale is None else x * scale


def reg_loss(p: torch.Tensor, p_init: torch.Tensor, scale=None) -> torch.Tensor:
    """L_reg = Σ_t Σ_i ||p_{i,t} − p^init_{i,t}||².  p, p_init (T, N, 3); scale (N,) or (T, N)."""
    return _scaled(sq_norm3(p - p_init), scale).sum()


def jerk(p: torch.Tensor, fps: float) -> torch.Tensor:
    """Third forward difference (p_{t+3} − 3 p_{t+2} + 3 p_{t+1} − p_t) · fps³.

    p (T, ...) -> (T − 3, ...), in units of p per s³ (first-order accurate, centred at t + 1.5).
    """
    return (p[3:] - 3.0 * p[2:-1] + 3.0 * p[1:-2] - p[:-3]) * float(fps) ** 3


def smooth_loss(p: torch.Tensor, fps: float, scale=None, eps: float = 1e-3, reference=None,
                j: torch.Tensor = None) -> torch.Tensor:
    """L_smooth = Σ_t Σ_i ||jerk(p)_{i,t} − reference_{i,t}|| (non-squared L2, as printed), smoothed as
    sqrt(||·||² + eps²).

    p (T, N, 3); scale (N,); reference: optional (T − 3, N, 3) jerk to subtract (the solver passes the
    initial motion's jerk so only *added* jerk is penalised); eps in m/s³ keeps the gradient finite where the
    argument vanishes; ``j``: ``jerk(p, fps)`` when the caller has it. Returns 0 for clips shorter than 4 frames.
    """
    if p.shape[0] < 4:
        return p.sum() * 0.0
    j = jerk(p, fps) if j is None else j
    if reference is not None:
        j = j - reference
    return _scaled((sq_norm3(j) + eps * eps).sqrt(), scale).sum()


def jerk_totals(p: torch.Tensor, fps: float, window: int, eps: float = 1e-3, j: torch.Tensor = None) -> torch.Tensor:
    """Each point's jerk magnitude summed over windows of ``window`` frames: p (T, N, 3) -> (W, N), the last
    window shorter (its missing frames count 0), magnitudes smoothed as sqrt(||·||² + eps²) like L_smooth's;
    ``j``: ``jerk(p, fps)`` when the caller has it."""
    j = (sq_norm3(jerk(p, fps) if j is None else j) + eps * eps).sqrt()        # (T − 3, N)
    pad = (-j.shape[0]) % window
    if pad:
        j = torch.cat([j, j.new_zeros((pad,) + j.shape[1:])])
    return j.unflatten(0, (-1, window)).sum(1)


def jerk_budgets(inits: tuple, fps: float, window: int, eps: float, sources=None, ratio: float = 1.0,
                 slack: float = 0.0, totals: tuple = None) -> tuple:
    """Each point's jerk budget per window, (W, ·) for each of ``inits`` (key vertices (T, N, 3), sole points
    (T, S, 3) or None, body points (T, P, 3) or None; None stays None): copy-rotations' ``jerk_totals`` there,
    capped by the source's own × ``ratio`` (its height to the target's) where ``sources`` gives them (key vertices
    (T, N, 3) and (body points (T, P, 3), (P,) bool which have one) or None), times 1 + ``slack``: a point exactly
    at its budget (a self-retarget) must not pay for round-off (sums in another order). ``totals``: ``inits``'
    ``jerk_totals`` when the caller has them (None: read here)."""
    out = list(totals) if totals is not None else [None if x is None else jerk_totals(x, fps, window, eps)
                                                   for x in inits]
    if sources is not None:
        src_p, src_body = sources
        out[0] = torch.minimum(out[0], jerk_totals(src_p, fps, window, eps) * ratio)
        if out[2] is not None and src_body is not None:
            sb = jerk_totals(src_body[0], fps, window, eps) * ratio
            out[2] = torch.where(src_body[1], torch.minimum(out[2], sb), out[2])
    return tuple(None if b is None else b * (1.0 + slack) for b in out)


def capped_gain(budget: torch.Tensor, own: torch.Tensor, gain: float) -> torch.Tensor:
    """(W, ·) ``gain`` where a point's window ``budget`` lies below copy-rotations' budget there (``own``: its
    ``jerk_totals`` with the same slack), 1 elsewhere: the windows the source's own jerk caps (beyond a 0.1 % share
    of round-off)."""
    return torch.where(budget < own * (1.0 - 1e-3), gain, 1.0).to(budget.dtype)


def jerk_excess_loss(p: torch.Tensor, fps: float, budget: torch.Tensor, window: int, scale=None,
                     eps: float = 1e-3, j: torch.Tensor = None, knee: float = 0.0) -> torch.Tensor:
    """Σ_i Σ_w hinge(Σ_{t∈w} ||jerk(p)_{i,t}|| − budget_{w,i}): the jerk a point spends in each window beyond its
    budget (W, N) (``jerk_totals`` of the initial motion: a point may move its jerk within a window, not add
    to it). p (T, N, 3); scale (N,); ``j``: ``jerk(p, fps)`` when the caller has it. ``knee``: a share of each
    budget over which the hinge rounds off, e²/(2k) under k = knee·budget and e − k/2 beyond (0: relu(e)), so that
    a point at its budget is not kicked by the full slope for a round-off's excess. Returns 0 for clips shorter
    than 4 frames."""
    if p.shape[0] < 4:
        return p.sum() * 0.0
    e = (jerk_totals(p, fps, window, eps, j) - budget).clamp_min(0.0)
    if knee > 0:
        k = knee * budget
        e = torch.where(e < k, e.square() / (2.0 * k), e - 0.5 * k)
    return _scaled(e, scale).sum()


def dist_loss(tgt_dist, src_dist, weight, scale=None) -> torch.Tensor:
    """L_dist = Σ (W ∘ (M_dist^src − M_dist^tgt))².  All (E,) on the same entries."""
    return _scaled((weight * (src_dist - tgt_dist)).square(), scale).sum()


def contact_state_loss(tgt_dist, src_dist, src_dmin, tgt_dmin, weight, margin: float, scale=None) -> torch.Tensor:
    """Σ (W ∘ g)²: the target's pair kept on the source's side of d_min, as far from it as the source is (in units
    of each one's d_min), up to ``margin``. With r = M_dist^src / d_min^src and b = clamp(r, 1 − margin, 1 +
    margin): a source contact (r < 1) pays g = relu(M_dist^tgt − b·d_min^tgt), a source gap g = relu(b·d_min^tgt −
    M_dist^tgt). The bound is continuous in r (both sides ask for d_min at r = 1), so a source pair that crosses
    d_min moves the target's bound by as little as it moves itself. All (E,)."""
    r = src_dist / src_dmin
    bound = r.clamp(1.0 - margin, 1.0 + margin) * tgt_dmin
    g = torch.where(r < 1.0, (tgt_dist - bound).clamp(min=0.0), (bound - tgt_dist).clamp(min=0.0))
    return _scaled((weight * g).square(), scale).sum()


def cosine(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-9, a_norm=None, b_norm=None) -> torch.Tensor:
    """Element-wise cosine similarity over the last axis; (..., 3), (..., 3) -> (...). ``a_norm``, ``b_norm``:
    the vectors' lengths (...) when the caller already has them (pair distances)."""
    a_norm = a.norm(dim=-1) if a_norm is None else a_norm
    b_norm = b.norm(dim=-1) if b_norm is None else b_norm
    return dot3(a, b) / (a_norm * b_norm).clamp_min(eps)


def dir_loss(tgt_dir, src_dir, weight, scale=None, tgt_norm=None, src_norm=None) -> torch.Tensor:
    """L_dir = Σ (W ∘ (1 − S_cos(M_dir^src, M_dir^tgt)))² (the printed S_cos is a sign typo: minimising the cosine would push directions apart).

    tgt_dir, src_dir (E, 3); weight (E,); tgt_norm, src_norm: optional (E,) lengths of the directions (the
    pair distances M_dist), so that they are not computed twice.
    """
    return _scaled((weight * (1.0 - cosine(src_dir, tgt_dir, a_norm=src_norm, b_norm=tgt_norm))).square(),
                   scale).sum()


def pen_loss(tgt_pen, src_pen, weight, scale=None, surface: bool = False) -> torch.Tensor:
    """L_pen = Σ (W ∘ (M_pen^src − M_pen^tgt))².  All (E,).

    ``surface``: an entry whose source value is negative (behind the other key vertex's surface) penalises only
    the target's being behind it, relu(−M_pen^tgt), instead of copying the source's depth."""
    diff = src_pen - tgt_pen
    if surface:
        diff = torch.where(src_pen < 0, (-tgt_pen).clamp(min=0.0), diff)
    return _scaled((weight * diff).square(), scale).sum()


def floor_barrier(tgt_height: torch.Tensor, scale=None) -> torch.Tensor:
    """Σ min(0, M_height^tgt)² over every key vertex and frame (unweighted).  (T, N)."""
    return _scaled(tgt_height.clamp(max=0.0).square(), scale).sum()


def height_loss(tgt_height, src_height, weight, scale=None) -> torch.Tensor:
    """L_height = Σ min(0, M_height^tgt)² + Σ (W_floor ∘ (M_height^src − M_height^tgt))².  (T, N)."""
    match = _scaled((weight * (src_height - tgt_height)).square(), scale).sum()
    return floor_barrier(tgt_height, scale) + match


def sliding_loss(tgt_vel, src_vel, weight, scale=None) -> torch.Tensor:
    """L_sliding = Σ (W_floor ∘ (M_sliding^src − M_sliding^tgt))².

    tgt_vel, src_vel (T − 1, N, 2); weight (T − 1, N) broadcast over both horizontal components.
    """
    return _scaled((weight[..., None] * (src_vel - tgt_vel)).square().sum(-1), scale).sum()
