"""Adaptive weights (ReConForM §4.1, and the mix of Eq. 2 in §4.2): W_interaction, W_floor, the source→target mix and the α ramp,
plus the sparse set of (frame, i, j) key-vertex pairs on which pair terms are evaluated.

Thresholds are per character: d_min = h_min = ``MIN_FRACTION`` · h_c, d_max = h_max = ``MAX_FRACTION`` · h_c.
For a pair of key vertices of two different stacked characters the mean of their heights is used.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from .pose import pair_descriptors
from ..rig.vec3 import sq_norm3

MIN_FRACTION = 0.05
MAX_FRACTION = 0.15
#: a refresh of the candidates that must run takes along the frames that moved this share of their slack: fewer,
#: larger refreshes (each has a fixed cost), as exact (``refresh_due``)
REFRESH_LOOKAHEAD = 0.5


def frame_centroids(p: torch.Tensor) -> torch.Tensor:
    """(T, 3) the mean of each frame's points of ``p`` (T, ..., 3)."""
    return p.flatten(1, -2).mean(1)


def centred(p: torch.Tensor, c: torch.Tensor = None) -> torch.Tensor:
    """(T, ..., 3) ``p`` less each frame's centroid (``frame_centroids``, or the given (T, 3) ``c``): what the
    candidate caches compare (``largest_moves``), every cached quantity being a distance between two points of one
    frame (a pair's distance, a depth between capsules), unchanged when the frame moves as a whole. For any
    per-frame shift c, |Δ|p_j − p_i|| ≤ |Δp_i − c| + |Δp_j − c|: the caches stay exact, and a root that slides
    carries no refresh."""
    c = frame_centroids(p) if c is None else c
    return p - c.view(p.shape[0], *([1] * (p.dim() - 2)), 3)


def largest_moves(p: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """(T,) per frame, the largest distance any point of ``p`` (T, ..., 3) moved from ``ref`` (the same shape)."""
    return sq_norm3(p - ref).flatten(1).amax(1).sqrt()


def refresh_due(far: torch.Tensor) -> torch.Tensor:
    """(T,) bool: the frames whose candidates are searched again, given each frame's move over its allowance
    ``far`` (T,): none while every frame is within it, else every frame past ``REFRESH_LOOKAHEAD`` of it. The rule
    of every candidate cache here (self pairs, partner pairs, the barrier's candidates and hot entries)."""
    return far >= (REFRESH_LOOKAHEAD if bool((far >= 1.0).any()) else 1.0)


def ramp_weight(value: torch.Tensor, vmin, vmax) -> torch.Tensor:
    """clamp(1 − (value − vmin) / (vmax − vmin)) in [0, 1]; vmin, vmax broadcast with value."""
    return (1.0 - (value - vmin) / (vmax - vmin)).clamp(0.0, 1.0)


def interaction_weight(dist: torch.Tensor, d_min, d_max) -> torch.Tensor:
    """W_interaction = clamp(1 − (M_dist − d_min) / (d_max − d_min)); any shape."""
    return ramp_weight(dist, d_min, d_max)


def floor_weight(height: torch.Tensor, h_min, h_max) -> torch.Tensor:
    """W_floor = clamp(1 − (M_height − h_min) / (h_max − h_min)); any shape."""
    return ramp_weight(height, h_min, h_max)


def time_mean(w: torch.Tensor, radius: int) -> torch.Tensor:
    """Centred moving mean of ``w`` (T, ...) over 2·radius + 1 frames along the first axis (fewer at the clip's
    ends: the mean of the frames that exist); ``w`` itself when radius < 1."""
    if radius < 1 or w.shape[0] < 2:
        return w
    T = w.shape[0]
    c = torch.cat([torch.zeros_like(w[:1]), w.cumsum(0)], 0)          # (T + 1, ...)
    t = torch.arange(T, device=w.device)
    lo, hi = (t - radius).clamp(min=0), (t + radius + 1).clamp(max=T)
    n = (hi - lo).to(w.dtype).reshape((T,) + (1,) * (w.dim() - 1))
    return (c[hi] - c[lo]) / n


def alpha_ramp(step: int, total: int, end: float = 1.0) -> float:
    """α rises linearly from 0 at the first step to 1 at the share ``end`` of the steps (the last step when
    ``end`` is 1), then stays at 1 (1 when total <= 1)."""
    if total <= 1:
        return 1.0
    return float(min(max(step / max((total - 1) * end, 1e-9), 0.0), 1.0))


def mix_weights(w_src: torch.Tensor, w_tgt: torch.Tensor, alpha: float) -> torch.Tensor:
    """W^{s→t} = W_src + α · stopgrad(W_tgt) (Eq. 2), values in [0, 2]."""
    return w_src + alpha * w_tgt.detach()


def pair_thresholds(heights_per_vertex: np.ndarray, i: np.ndarray, j: np.ndarray):
    """(d_min, d_max) per pair from the owning characters' heights (mean of the two), numpy (E,)."""
    h = 0.5 * (heights_per_vertex[i] + heights_per_vertex[j])
    return MIN_FRACTION * h, MAX_FRACTION * h


def scaled_to_target(ps: "PairSet") -> "PairSet":
    """The PairSet with the source's distances and penetrations (and its d_min) multiplied by each entry's
    target d_min over its source d_min, i.e. the pair's target height over its source height: the target then
    keeps the source's distances as a share of its own size, as the contact metric reads them (docs/solver.md
    "Pair terms"). Directions and weights are unchanged; src_dist / src_dmin is the same."""
    r = ps.tgt_dmin / ps.src_dmin
    # field by field: NamedTuple._replace rebuilds through len(), which PairSet defines as its entry count
    return PairSet(ps.t, ps.i, ps.j, ps.src_dist * r, ps.src_dir, ps.src_pen_ij * r, ps.src_pen_ji * r, ps.w_src,
                   ps.src_dmin * r, ps.tgt_dmin, ps.tgt_dmax)


def allowed_pairs(limbs, character=None, exclude_same_limb: bool = True) -> np.ndarray:
    """(N, N) bool mask of unordered pairs i < j that pair terms may use.

    The diagonal is always excluded. With ``exclude_same_limb``, pairs of key vertices on the same limb of the
    same character are excluded: they sit on one rigid or nearly rigid segment chain, so their raw distances
    cannot be matched across morphologies and only pull the skeleton out of shape (the paper leaves same-limb pairs
    open, ReConForM §4.1).
    """
    N = len(limbs)
    mask = np.triu(np.ones((N, N), bool), k=1)
    if exclude_same_limb:
        limbs = np.asarray(limbs)
        same = limbs[:, None] == limbs[None, :]
        if character is not None:
            c = np.asarray(character)
            same &= c[:, None] == c[None, :]
        mask &= ~same
    return mask


class PairSet(NamedTuple):
    """E active entries: frame t, key vertices i < j (int64 tensors), with the source descriptors there.

    src_dist (E,), src_dir (E, 3), src_pen_ij (E,) = n_i·(p_j − p_i), src_pen_ji (E,) = n_j·(p_i − p_j),
    w_src (E,) source interaction weight; src_dmin (E,) source d_min; tgt_dmin, tgt_dmax (E,) target thresholds.
    """

    t: torch.Tensor
    i: torch.Tensor
    j: torch.Tensor
    src_dist: torch.Tensor
    src_dir: torch.Tensor
    src_pen_ij: torch.Tensor
    src_pen_ji: torch.Tensor
    w_src: torch.Tensor
    src_dmin: torch.Tensor
    tgt_dmin: torch.Tensor
    tgt_dmax: torch.Tensor

    def __len__(self):
        return int(self.t.numel())


def _close_entries(p: torch.Tensor, ii: torch.Tensor, jj: torch.Tensor, limit: torch.Tensor, chunk: int):
    """(t, pair index) of entries with ||p_j − p_i|| < limit[pair]; p (T, N, 3) without grad."""
    ts, ks = [], []
    for s in range(0, p.shape[0], chunk):
        blk = p[s:s + chunk]
        d = (blk[:, jj] - blk[:, ii]).norm(dim=-1)  # (B, P)
        t, k = torch.nonzero(d < limit, as_tuple=True)
        ts.append(t + s)
        ks.append(k)
    return torch.cat(ts), torch.cat(ks)


class ActivePairs:
    """Maintains the sparse set of (t, i, j) entries on which W_interaction^{s→t} can be non-zero.

    An entry is active when the source pair is closer than the source d_max (its source weight is non-zero;
    fixed for the whole solve) or the target pair is closer than the target d_max plus ``margin`` (refreshed
    from the current target every few steps; the margin covers what the target can move in between).

    Args:
        src_p, src_n: (T, N, 3) source key-vertex positions and normals (fixed).
        src_heights, tgt_heights: (N,) h_c of the character owning each source / target key vertex.
        mask: (N, N) allowed unordered pairs (``allowed_pairs``).
        margin: extra distance, as a fraction of the target pair's height, for the target test.
        scale: the source's distances scaled to the target's size (``scaled_to_target``).
    """

    def __init__(self, src_p: torch.Tensor, src_n: torch.Tensor, src_heights: np.ndarray,
                 tgt_heights: np.ndarray, mask: np.ndarray, margin: float = 0.05, chunk: int = 2048,
                 scale: bool = False):
        self.src_p, self.src_n = src_p.detach(), src_n.detach()
        self.scale = scale
        dev = src_p.device
        ii, jj = np.nonzero(mask)
        self.ii = torch.as_tensor(ii, device=dev)
        self.jj = torch.as_tensor(jj, device=dev)
        s_min, s_max = pair_thresholds(np.asarray(src_heights), ii, jj)
        t_min, t_max = pair_thresholds(np.asarray(tgt_heights), ii, jj)
        dt = src_p.dtype
        self.s_min = torch.as_tensor(s_min, dtype=dt, device=dev)
        self.s_max = torch.as_tensor(s_max, dtype=dt, device=dev)
        self.t_min = torch.as_tensor(t_min, dtype=dt, device=dev)
        self.t_max = torch.as_tensor(t_max, dtype=dt, device=dev)
        self.t_limit = self.t_max + margin * torch.as_tensor(0.5 * (np.asarray(tgt_heights)[ii]
                                                                   + np.asarray(tgt_heights)[jj]),
                                                             dtype=dt, device=dev)
        self.num_pairs = len(ii)
        self.num_frames = src_p.shape[0]
        # pair index of (i, j) at i · N + j (-1 where not allowed): a candidate's key t · P + k at a refresh, not kept
        N = src_p.shape[1]
        self._pair_of = torch.full((N * N,), -1, dtype=torch.long, device=dev)
        self._pair_of[self.ii * N + self.jj] = torch.arange(len(ii), device=dev)
        self.chunk = chunk
        if self.num_pairs:
            st, sk = _close_entries(self.src_p, self.ii, self.jj, self.s_max, chunk)
        else:
            st = sk = torch.zeros(0, dtype=torch.long, device=dev)
        self.src_keys = st * max(self.num_pairs, 1) + sk  # sorted by (t, k)
        self._src_mask = None
        self._src_set = None
        # candidates for the target test: the entries within t_limit at ``_ref`` (a superset of the exact set
        # while no key vertex has moved more than half the smallest margin since; see ``active``)
        self._slack = float((self.t_limit - self.t_max).min()) if self.num_pairs else 0.0
        self._ref = None
        self._cand = None
        self._cand_src = None
        self.refreshes = 0

    def active(self, tgt_p: torch.Tensor, alpha: float) -> PairSet:
        """The exact PairSet of entries whose mixed weight ``W_src + α·W_tgt`` is non-zero at ``tgt_p``.

        An entry with zero mixed weight contributes neither value nor gradient (W_tgt is detached), so
        evaluating exactly these entries gives the same loss and gradient as the dense (T, N, N) form.
        ``tgt_p`` (T, N, 3) is read without gradient; the target test is skipped when ``alpha`` is 0.
        """
        if not self.num_pairs:
            return self.build(None)
        if self._src_mask is None:
            self._src_mask = self._mask(self.src_p, self.s_max)
        if alpha <= 0 or tgt_p is None:
            if self._src_set is None:
                self._src_set = self._pairset(*torch.nonzero(self._src_mask, as_tuple=True))
            return self._src_set
        # The target test runs on candidates only: the entries active in the source or within t_limit (t_max
        # plus a margin) of the target at the frame's last refresh. While no key vertex of a frame has moved by
        # half the smallest margin since, no other pair of that frame can have come within t_max, so filtering
        # the candidates gives exactly the entries (and their order) of the full (T, P) test, at the cost of one
        # gather; the frames past it are searched again (``_refresh``). Moves are measured about each frame's centroid
        # (``centred``): a frame that moves as a whole keeps its distances.
        p = tgt_p.detach()
        cp = centred(p)
        N, P = p.shape[1], max(self.num_pairs, 1)
        if self._ref is None:
            frames = None
        else:   # frame by frame: a frame whose key vertices all moved less than half the margin keeps its candidates
            frames = torch.nonzero(refresh_due(2.0 * largest_moves(cp, self._ref) / self._slack), as_tuple=True)[0]
        if frames is None or frames.numel():
            self._refresh(p, cp, frames, N, P)
        c = self._cand
        fp = p.reshape(-1, 3)
        d2 = sq_norm3(fp.index_select(0, c.t * N + c.j) - fp.index_select(0, c.t * N + c.i))
        keep = torch.nonzero(self._cand_src | (d2 < c.tgt_dmax.square()), as_tuple=True)[0]
        return PairSet(*(f.index_select(0, keep) for f in c))

    def _refresh(self, p: torch.Tensor, cp: torch.Tensor, frames, N: int, P: int):
        """The candidates of ``frames`` (all when None) tested again at ``p`` (T, N, 3), the others kept; kept in
        (frame, pair) order, as the full test lists them. ``cp``: ``centred(p)``, the reference of later moves."""
        if frames is None:
            self._ref = cp.clone()
            t, k = torch.nonzero(self._src_mask | self._mask(p, self.t_limit), as_tuple=True)
            cand = self._pairset(t, k)
            self._cand_src = self._src_mask[t, k]
        else:
            self._ref[frames] = cp[frames]
            f, k = torch.nonzero(self._src_mask[frames] | self._mask(p[frames], self.t_limit), as_tuple=True)
            t = frames[f]
            fresh = self._pairset(t, k)
            stale = torch.zeros(self.num_frames, dtype=torch.bool, device=p.device)
            stale[frames] = True
            c = self._cand
            old = torch.nonzero(~stale[c.t], as_tuple=True)[0]
            ci, cj = c.i.index_select(0, old), c.j.index_select(0, old)
            order = torch.argsort(torch.cat([c.t.index_select(0, old) * P + self._pair_of.index_select(0, ci * N + cj),
                                             t * P + k]))
            del ci, cj
            # field by field: the temporaries of one field at a time beside the two sets (a long clip's candidates
            # run to hundreds of MB)
            cand = PairSet(*(torch.cat([x.index_select(0, old), y]).index_select(0, order) for x, y in zip(c, fresh)))
            self._cand_src = torch.cat([self._cand_src.index_select(0, old), self._src_mask[t, k]]).index_select(0, order)
        self._cand = cand
        self.refreshes += 1

    def _mask(self, p: torch.Tensor, limit: torch.Tensor) -> torch.Tensor:
        """(T, P) bool: pair k closer than limit[k] at frame t."""
        out = torch.empty((p.shape[0], self.num_pairs), dtype=torch.bool, device=p.device)
        for s in range(0, p.shape[0], self.chunk):
            blk = p[s:s + self.chunk]
            d = sq_norm3(blk.index_select(1, self.jj) - blk.index_select(1, self.ii))
            torch.lt(d, limit.square(), out=out[s:s + self.chunk])
        return out

    def _pairset(self, t: torch.Tensor, k: torch.Tensor) -> PairSet:
        i, j = self.ii[k], self.jj[k]
        d = pair_descriptors(self.src_p, self.src_n, t, i, j)
        n_j = self.src_n.reshape(-1, 3)[t * self.src_p.shape[1] + j]
        pen_ji = -(n_j * d.dir).sum(-1)
        w = interaction_weight(d.dist, self.s_min[k], self.s_max[k])
        ps = PairSet(t, i, j, d.dist, d.dir, d.pen, pen_ji, w, self.s_min[k], self.t_min[k], self.t_max[k])
        return scaled_to_target(ps) if self.scale else ps

    @property
    def num_source_entries(self) -> int:
        return int(self.src_keys.numel())

    def build(self, tgt_p: torch.Tensor = None) -> PairSet:
        """The active PairSet for the current target positions ``tgt_p`` (T, N, 3) (source only if None)."""
        P = max(self.num_pairs, 1)
        keys = self.src_keys
        if tgt_p is not None and self.num_pairs:
            tt, tk = _close_entries(tgt_p.detach(), self.ii, self.jj, self.t_limit, self.chunk)
            keys = torch.unique(torch.cat([keys, tt * P + tk]))
        return self._pairset(keys // P, keys % P)
