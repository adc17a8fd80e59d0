"""Key-vertex pairs between characters (ReConForM §6.1): the sparse entries of W_interaction that join two
stacked characters, for the joint solve of several characters.

The paper stacks the key vertices of all characters, so W_interaction becomes (K·N) × (K·N) and a hand holding
a partner's hand is an ordinary entry, like a self-contact. Evaluated densely that costs (K·N)² per frame;
``PartnerPairs`` keeps, per frame, only the entries whose mixed weight ``W_src + α·W_tgt`` is non-zero, and finds
them through a broad phase per character pair: the bounding boxes of the two characters' key vertices at that
frame. When the boxes are farther apart than the pair's d_max no entry of that (frame, character pair) can be
active and its N_a·N_b distances are never computed, so the cost follows the characters that come close, not
(K·N)². Thresholds are those of ``weights.pair_thresholds``: 5 % and 15 % of the mean height of the two
characters (source heights for the source weight, target heights for the target's).

Indices are global over the stacked key vertices (character c's key vertex i is ``offsets[c] + i``); entries
are ordered by (frame, pair), every pair (i, j) with i in the lower-numbered character.
"""

from __future__ import annotations

import numpy as np
import torch

from ..descriptors.pose import pair_descriptors
from ..rig.vec3 import sq_norm3
from ..descriptors.weights import (MAX_FRACTION, MIN_FRACTION, PairSet, centred, frame_centroids, interaction_weight,
                      largest_moves, refresh_due, scaled_to_target)

#: frames per chunk of the narrow-phase distance test (bounds its temporary memory)
CHUNK = 1024


def box_distance(lo_a: torch.Tensor, hi_a: torch.Tensor, lo_b: torch.Tensor, hi_b: torch.Tensor) -> torch.Tensor:
    """Euclidean distance between axis-aligned boxes, (..., 3) corners -> (...); 0 where they overlap."""
    gap = torch.maximum(lo_b - hi_a, lo_a - hi_b).clamp(min=0.0)
    return gap.norm(dim=-1)


def _closer_than(pa: torch.Tensor, pb: torch.Tensor, limit) -> tuple:
    """(f, i, j) of the pairs of points pa[f, i], pb[f, j] ((F, N_a, 3), (F, N_b, 3)) closer than ``limit``, by
    the same test as ``sq_norm3(pa[f, i] − pb[f, j]) < limit²``: a product |a|² + |b|² − 2 a·b (one batched
    matrix product instead of an (F, N_a, N_b, 3) difference; tools/experiments/narrow_phase_speed.py), made
    conservative by its rounding bound, picks the candidates; the difference test on those decides."""
    c = frame_centroids(pb)                            # about the frame's points: small norms, small rounding
    a, b = centred(pa, c), centred(pb, c)
    na, nb = sq_norm3(a), sq_norm3(b)
    s = na[:, :, None] + nb[:, None, :]                                                        # (F, N_a, N_b)
    # |a|² + |b|² − 2 a·b, the centring and the difference test each round by a few ε (|a|² + |b|²) at most: a
    # lower bound of the difference test's d² with 16 ε (|a|² + |b|²) taken off
    lower = torch.baddbmm(s, a, b.transpose(1, 2), beta=1.0 - 16.0 * torch.finfo(pa.dtype).eps, alpha=-2.0)
    f, i, j = torch.nonzero(lower < limit * limit, as_tuple=True)
    flat_a, flat_b = pa.reshape(-1, 3), pb.reshape(-1, 3)
    d2 = sq_norm3(flat_a.index_select(0, f * pa.shape[1] + i) - flat_b.index_select(0, f * pb.shape[1] + j))
    keep = torch.nonzero(d2 < limit * limit, as_tuple=True)[0]
    return f.index_select(0, keep), i.index_select(0, keep), j.index_select(0, keep)


def close_entries(pa: torch.Tensor, pb: torch.Tensor, limit, frames: torch.Tensor = None) -> tuple:
    """(t, i, j) of every pair of points pa[t, i], pb[t, j] ((T, N_a, 3), (T, N_b, 3)) closer than ``limit``, on the
    ``frames`` (F,) only when given; the narrow phase run in chunks of ``CHUNK`` frames (its temporaries bounded)."""
    out = []
    for s in range(0, pa.shape[0] if frames is None else frames.numel(), CHUNK):
        if frames is None:
            f, i, j = _closer_than(pa[s:s + CHUNK], pb[s:s + CHUNK], limit)
            out.append((f + s, i, j))
        else:
            fr = frames[s:s + CHUNK]
            f, i, j = _closer_than(pa.index_select(0, fr), pb.index_select(0, fr), limit)
            out.append((fr[f], i, j))
    if not out:
        empty = torch.zeros(0, dtype=torch.long, device=pa.device)
        return empty, empty, empty
    return tuple(torch.cat(x) for x in zip(*out))


class PartnerPairs:
    """The active (t, i, j) entries between key vertices of different characters.

    Args:
        src_p, src_n: per character, (T, N_c, 3) source key-vertex positions and unit normals (world, fixed).
        src_heights, tgt_heights: (K,) h_c of each character's source and target.
        margin: extra distance (share of the pair's mean target height) of the candidate test, as
            ``weights.ActivePairs``: candidates are refreshed once a key vertex has moved half of it.
        scale: the source's distances scaled to the pair's target size (``weights.scaled_to_target``).
    Attributes:
        offsets: (K + 1,) start of each character in the stacked key vertices.
        blocks: [(a, b)] character pairs a < b, in order; an entry's ``block`` indexes this list.
    """

    def __init__(self, src_p, src_n, src_heights, tgt_heights, margin: float = 0.05, scale: bool = False):
        K = len(src_p)
        self.scale = scale
        self.num_characters = K
        self.sizes = [int(p.shape[1]) for p in src_p]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        dev, dt = src_p[0].device, src_p[0].dtype
        self.device, self.dtype = dev, dt
        self.src_p = torch.cat([p.detach() for p in src_p], 1)                   # (T, Ntot, 3)
        self.src_n = torch.cat([n.detach() for n in src_n], 1)
        self.num_frames = int(self.src_p.shape[0])
        self.blocks = [(a, b) for a in range(K) for b in range(a + 1, K)]
        hs, ht = np.asarray(src_heights, float), np.asarray(tgt_heights, float)
        mean_s = np.asarray([0.5 * (hs[a] + hs[b]) for a, b in self.blocks])
        mean_t = np.asarray([0.5 * (ht[a] + ht[b]) for a, b in self.blocks])
        as_t = lambda x: torch.as_tensor(x, dtype=dt, device=dev)  # noqa: E731
        self.s_min, self.s_max = as_t(MIN_FRACTION * mean_s), as_t(MAX_FRACTION * mean_s)   # (B,)
        self.t_min, self.t_max = as_t(MIN_FRACTION * mean_t), as_t(MAX_FRACTION * mean_t)
        self.t_limit = self.t_max + margin * as_t(mean_t)
        # global pair index k = pair_start[block] + i_local · N_b + j_local
        counts = [self.sizes[a] * self.sizes[b] for a, b in self.blocks]
        self.pair_start = torch.as_tensor(np.concatenate([[0], np.cumsum(counts)]), dtype=torch.long, device=dev)
        self.num_pairs = int(sum(counts))
        self._blocks_t = torch.as_tensor(self.blocks, dtype=torch.long, device=dev).reshape(-1, 2)
        self._sizes_t = torch.as_tensor(self.sizes, dtype=torch.long, device=dev)
        self._offsets_t = torch.as_tensor(self.offsets, dtype=torch.long, device=dev)
        self._slack = float((self.t_limit - self.t_max).min()) if self.blocks else 0.0
        self.broad_tests = 0        #: (frame, character pair) box tests run
        self.narrow_blocks = 0      #: (frame, character pair) blocks whose N_a·N_b distances were computed
        if self.blocks:
            self.src_keys = self._close_keys(self.src_p, self.s_max)
        else:
            self.src_keys = torch.zeros(0, dtype=torch.long, device=dev)
        self._src_set = None
        self._ref = None
        self._cand = None
        self._cand_src = None
        self.refreshes = 0

    # -- the broad and narrow phases -----------------------------------------------------------------------------

    def _boxes(self, p: torch.Tensor):
        """Per character, (lo, hi) (T, 3) corners of its key vertices' bounding box at every frame."""
        out = []
        for c in range(self.num_characters):
            q = p[:, self.offsets[c]:self.offsets[c + 1]]
            out.append((q.amin(1), q.amax(1)))
        return out

    def _close_keys(self, p: torch.Tensor, limit: torch.Tensor, frames: torch.Tensor = None) -> torch.Tensor:
        """Sorted keys t · P + k of the entries closer than ``limit[block]`` at positions p (T, Ntot, 3), on the
        clip's ``frames`` (F,) only when given."""
        if frames is not None:
            p = p.index_select(0, frames)
        boxes = self._boxes(p)
        keys = []
        for bi, (a, b) in enumerate(self.blocks):
            lim = limit[bi]
            near = torch.nonzero(box_distance(*boxes[a], *boxes[b]) < lim, as_tuple=True)[0]
            self.broad_tests += p.shape[0]
            self.narrow_blocks += int(near.numel())
            if not near.numel():
                continue
            t, i, j = close_entries(p[:, self.offsets[a]:self.offsets[a + 1]],
                                    p[:, self.offsets[b]:self.offsets[b + 1]], lim, near)
            t = t if frames is None else frames.index_select(0, t)
            keys.append(t * self.num_pairs + self.pair_start[bi] + i * self.sizes[b] + j)
        if not keys:
            return torch.zeros(0, dtype=torch.long, device=self.device)
        return torch.sort(torch.cat(keys)).values

    def _keys(self, t, i, j, block: torch.Tensor) -> torch.Tensor:
        """(E,) the keys t · P + k of entries (frame t, global i, j) (E,) of blocks ``block`` (E,): ``_pairset``'s
        inverse."""
        a, b = self._blocks_t[block, 0], self._blocks_t[block, 1]
        local = (i - self._offsets_t[a]) * self._sizes_t[b] + (j - self._offsets_t[b])
        return t * self.num_pairs + self.pair_start[block] + local

    def _decode(self, keys: torch.Tensor):
        """(frame t, global index i, global index j > i, block), each (E,), of entries ``keys`` (``_keys``' inverse)."""
        t = torch.div(keys, self.num_pairs, rounding_mode="floor")
        k = keys - t * self.num_pairs
        block = torch.searchsorted(self.pair_start, k, right=True) - 1
        local = k - self.pair_start[block]
        a, b = self._blocks_t[block, 0], self._blocks_t[block, 1]
        nb = self._sizes_t[b]
        return t, self._offsets_t[a] + torch.div(local, nb, rounding_mode="floor"), self._offsets_t[b] + local % nb, block

    def source_vertices(self) -> np.ndarray:
        """(T, Ntot) bool: the key vertices of a source entry on each frame (closer than the source's limit to a
        key vertex of another character)."""
        out = np.zeros((self.num_frames, int(self.offsets[-1])), dtype=bool)
        t, i, j, _ = (x.cpu().numpy() for x in self._decode(self.src_keys))
        out[t, i] = True
        out[t, j] = True
        return out

    def _pairset(self, keys: torch.Tensor):
        """(PairSet, block (E,)) of entries ``keys`` (global indices i < j, source descriptors)."""
        t, i, j, block = self._decode(keys)
        d = pair_descriptors(self.src_p, self.src_n, t, i, j)
        N = self.src_p.shape[1]
        n_j = self.src_n.reshape(-1, 3).index_select(0, t * N + j)
        pen_ji = -(n_j * d.dir).sum(-1)
        w = interaction_weight(d.dist, self.s_min[block], self.s_max[block])
        ps = PairSet(t, i, j, d.dist, d.dir, d.pen, pen_ji, w, self.s_min[block], self.t_min[block],
                     self.t_max[block])
        return (scaled_to_target(ps) if self.scale else ps), block

    # -- the active set --------------------------------------------------------------------------------------------

    @property
    def num_source_entries(self) -> int:
        return int(self.src_keys.numel())

    def active(self, tgt_p: torch.Tensor, alpha: float):
        """(PairSet, block (E,)): exactly the entries whose mixed weight ``W_src + α·W_tgt`` is non-zero at the
        stacked target positions ``tgt_p`` (T, Ntot, 3) (read without gradient; source entries only when α is
        0 or ``tgt_p`` is None). Same refresh rule as ``weights.ActivePairs.active``: the target test runs on
        candidates (source entries and pairs within t_limit at the last refresh), refreshed frame by frame: a
        frame's once one of its key vertices has moved by half the margin since (about the frame's centroid,
        ``weights.centred``), so no other pair can have come within t_max."""
        if alpha <= 0 or tgt_p is None or not self.blocks:
            if self._src_set is None:
                self._src_set = self._pairset(self.src_keys)
            return self._src_set
        p = tgt_p.detach()
        cp = centred(p)             # the group moved as a whole has not moved for its distances
        if self._ref is None:
            frames = None
        else:
            frames = torch.nonzero(refresh_due(2.0 * largest_moves(cp, self._ref) / self._slack), as_tuple=True)[0]
        if frames is None:
            self._ref = cp.clone()
            keys = torch.unique(torch.cat([self.src_keys, self._close_keys(p, self.t_limit)]))
        elif frames.numel():
            self._ref[frames] = cp[frames]
            stale = torch.zeros(self.num_frames, dtype=torch.bool, device=p.device)
            stale[frames] = True
            P = self.num_pairs
            (c, block), kept = self._cand, ~stale[self._cand[0].t]
            old = self._keys(c.t[kept], c.i[kept], c.j[kept], block[kept])
            src = self.src_keys[stale[torch.div(self.src_keys, P, rounding_mode="floor")]]
            keys = torch.unique(torch.cat([old, src, self._close_keys(p, self.t_limit, frames)]))
        if frames is None or frames.numel():
            self._cand = self._pairset(keys)
            pos = torch.searchsorted(self.src_keys, keys).clamp(max=max(self.src_keys.numel() - 1, 0))
            self._cand_src = (self.src_keys[pos] == keys) if self.src_keys.numel() else torch.zeros_like(keys,
                                                                                                       dtype=torch.bool)
            c = self._cand[0]
            N = p.shape[1]
            self._cand_flat = (c.t * N + c.i, c.t * N + c.j)
            self.refreshes += 1
        c, block = self._cand
        flat = p.reshape(-1, 3)
        fi, fj = self._cand_flat
        d2 = sq_norm3(flat.index_select(0, fj) - flat.index_select(0, fi))
        keep = torch.nonzero(self._cand_src | (d2 < c.tgt_dmax.square()), as_tuple=True)[0]
        return PairSet(*(f.index_select(0, keep) for f in c)), block.index_select(0, keep)


__all__ = ["PartnerPairs", "box_distance", "close_entries"]
