"""Entropic optimal transport between a template limb and a destination limb (ReConForM §3.1
steps 4, 6-8).

Per-limb normalisation (``_normalize``), area-preserving clustering (``_cluster``), the Sinkhorn solve (POT
``ot.sinkhorn``, log-domain fallback; ``ot_limb``), transport-plan rows of template points over the
destination clusters or over every destination vertex (soft c-transform; ``plan_rows``, ``plan_rows_full``),
the read-out of one destination vertex per template key vertex (``_readout``) and the joint read-out of a
mirrored pair (``pair_readout``).
"""

from __future__ import annotations

import warnings

import numpy as np
import ot

from ..errors import CoreError

#: Entropic regularisation on unit-variance limb clouds (chosen by measurement, docs/keyverts.md).
DEFAULT_REG = 0.2
#: Largest number of OT atoms per side and limb (area-preserving clusters above it).
DEFAULT_MAX_POINTS = 300


def _normalize(x, w, mode):
    mu = (w[:, None] * x).sum(0)
    d = x - mu
    var = (w[:, None] * d * d).sum(0)
    if mode == "iso":
        return d / np.sqrt(max(var.sum() / 3.0, 1e-18))
    if mode == "axis":
        return d / np.sqrt(np.maximum(var, 1e-18 + 1e-6 * var.max()))
    raise CoreError(f"Unknown normalisation {mode!r}.")


def _cluster(x, w, max_points, cell=None):
    """Area-preserving clustering on a grid anchored at the origin (the limb's mean after normalisation).

    Returns (M,3) weighted centroids, (M,) masses and the cell size. ``cell`` reuses a cell size (the
    template's), so that two clouds that normalise alike are clustered alike; it grows when that would give
    more than twice ``max_points`` clusters. Deterministic.
    """
    if cell is None:
        if len(x) <= max_points:
            return x, w, 0.0
        ext = np.maximum(np.ptp(x, 0), 1e-9)
        cell = float(np.sqrt((ext[0] * ext[1] + ext[1] * ext[2] + ext[0] * ext[2]) * 2 / max_points))
        limit = max_points
    else:
        if cell <= 0.0:
            if len(x) <= 2 * max_points:
                return x, w, 0.0
            return _cluster(x, w, max_points)
        limit = 2 * max_points
    for _ in range(12):
        key = np.floor(x / cell).astype(np.int64)
        _, inv = np.unique(key, axis=0, return_inverse=True)
        m = int(inv.max()) + 1
        if m <= limit:
            break
        cell *= (m / limit) ** 0.5 * 1.02
    inv = inv.ravel()
    mass = np.bincount(inv, weights=w, minlength=m)
    cen = np.stack([np.bincount(inv, weights=w * x[:, a], minlength=m) for a in range(3)], 1)
    ok = mass > 0
    return cen[ok] / mass[ok, None], mass[ok], cell


def _logsumexp(a, axis):
    m = a.max(axis=axis, keepdims=True)
    return (m + np.log(np.exp(a - m).sum(axis=axis, keepdims=True))).squeeze(axis)


def ot_limb(xt, wt, xd, wd, reg=DEFAULT_REG, max_points=DEFAULT_MAX_POINTS, num_iter=3000, tol=1e-6):
    """Entropic OT (POT ``ot.sinkhorn``) between two normalised limb clouds, on area-preserving clusters.

    Args:
        xt: (Nt,3) template points, wt: (Nt,) weights; xd: (Nd,3) destination points, wd: (Nd,) weights.
    Returns:
        dict with 'ct' (Mt,3), 'cd' (Md,3) cluster centroids, 'a' (Mt,), 'b' (Md,) masses, 'plan' (Mt,Md),
        'log_u' (Mt,), 'log_v' (Md,) scalings (plan = diag(u) exp(-C/reg) diag(v)), 'niter', 'reg'.
    """
    wt = wt / wt.sum()
    wd = wd / wd.sum()
    ct, at, cell = _cluster(xt, wt, max_points)
    cd, bd, _ = _cluster(xd, wd, max_points, cell=cell)
    C = ot.dist(ct, cd, metric="sqeuclidean")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        P, log = ot.sinkhorn(at, bd, C, reg, method="sinkhorn", numItermax=num_iter, stopThr=tol, log=True)
        with np.errstate(divide="ignore"):
            log_u, log_v = np.log(log["u"]), np.log(log["v"])
        if not (np.isfinite(P).all() and np.isfinite(log_u).all() and np.isfinite(log_v).all()):
            P, log = ot.sinkhorn(at, bd, C, reg, method="sinkhorn_log", numItermax=num_iter, stopThr=tol,
                                 log=True)
            log_u, log_v = log["log_u"], log["log_v"]
    return {"ct": ct, "cd": cd, "a": at, "b": bd, "plan": P, "log_u": log_u, "log_v": log_v,
            "niter": int(log.get("niter", 0)), "reg": reg, "cost": C}


def plan_rows(ot_res, xk):
    """(K, Md) transport-plan rows of new template points xk (K,3) over the destination clusters (sum 1)."""
    lr = ot_res["log_v"][None] - ot.dist(np.atleast_2d(xk), ot_res["cd"], metric="sqeuclidean") / ot_res["reg"]
    lr -= lr.max(1, keepdims=True)
    r = np.exp(lr)
    return r / r.sum(1, keepdims=True)


def plan_rows_full(ot_res, xk, xd, wd):
    """(K, Nd) plan rows over every destination point (dual potential extended by soft c-transform)."""
    reg = ot_res["reg"]
    Cd = ot.dist(ot_res["ct"], xd, metric="sqeuclidean")
    log_v = np.log(np.maximum(wd / wd.sum(), 1e-300)) - _logsumexp(ot_res["log_u"][:, None] - Cd / reg, 0)
    lr = log_v[None] - ot.dist(np.atleast_2d(xk), xd, metric="sqeuclidean") / reg
    lr -= lr.max(1, keepdims=True)
    r = np.exp(lr)
    return r / r.sum(1, keepdims=True)


def _readout(ot_res, xk, xd, wd, nd, target_dir, mode, bias=None, candidates=1):
    """Destination indices (into the limb arrays) per template key point xk (K,3).

    ``bias`` (K,3): the entropic map's own shrinkage measured template -> template (``_self_bias``); it is
    removed from the barycentric projection so that identical clouds map each point onto itself.
    Returns (K,) indices, or with ``candidates`` m > 1 and a snapping mode, (K, m) indices of the m nearest
    eligible vertices (nearest first) and their (K, m) squared distances (normalised limb units; a vertex not
    facing the key vertex's direction counts 1e6 more).
    """
    if mode == "argmax":
        return np.argmax(plan_rows_full(ot_res, xk, xd, wd), 1)
    bary = plan_rows(ot_res, xk) @ ot_res["cd"]                           # (K,3) entropic map
    if bias is not None:
        bary = bary - bias
    d2 = ((bary[:, None, :] - xd[None]) ** 2).sum(-1)                     # (K, Nd)
    if mode == "snap_normal":
        facing = nd @ target_dir.T                                        # (Nd, K)
        d2 = np.where(facing.T > 0.0, d2, d2 + 1e6)
    elif mode != "barycentric":
        raise CoreError(f"Unknown key-vertex read-out {mode!r}.")
    if candidates <= 1:
        return np.argmin(d2, 1)
    m = min(int(candidates), d2.shape[1])
    part = np.argpartition(d2, m - 1, axis=1)[:, :m] if m < d2.shape[1] else np.tile(np.arange(m), (len(d2), 1))
    pd = np.take_along_axis(d2, part, 1)
    order = np.lexsort((part, pd), axis=1)                                # nearest first, ties by index
    return np.take_along_axis(part, order, 1), np.take_along_axis(pd, order, 1)


def pair_readout(cand_l, d2_l, cand_r, d2_r, pos, mid, scale2, lam):
    """Joint read-out of one mirrored key-vertex pair.

    Among the candidates of each side (vertex ids ``cand_l``, ``cand_r`` with their squared distances
    ``d2_l``, ``d2_r`` to their own barycentric point, normalised limb units), the pair minimising
    ``d2_l[a] + d2_r[b] + lam * |mirror(pos[a]) - pos[b]|^2 / scale2``, ``mirror`` reflecting about the plane
    x = ``mid`` (T-pose, template axes), ``scale2`` a squared length converting the asymmetry to normalised
    units. Ties go to the nearer left, then right candidate (deterministic). Returns (left id, right id).
    """
    pl = pos[cand_l].copy()
    pl[:, 0] = 2.0 * mid - pl[:, 0]
    asym2 = ((pl[:, None, :] - pos[cand_r][None]) ** 2).sum(-1)
    cost = d2_l[:, None] + d2_r[None, :] + lam * asym2 / scale2
    a, b = np.unravel_index(int(np.argmin(cost)), cost.shape)
    return int(cand_l[a]), int(cand_r[b])


__all__ = ["DEFAULT_MAX_POINTS", "DEFAULT_REG", "ot_limb", "pair_readout", "plan_rows", "plan_rows_full"]
