"""A one-sided barrier between the bodies of a joint solve (docs/solver.md "Multi-character", "Barrier").

The partner terms of ReConForM §6.1 (``partners.PartnerObjective``) match the source's key-vertex descriptors:
their L_pen keeps the sign of a key vertex's side of its partner's surface, it does not stop a limb whose key
vertices are far from the partner's from going inside the partner's body. This term does, on coarse proxies of
each target body: the capsule cores of the partner-penetration measure (``metrics_partners.body_capsules``: one
capsule per mapped segment, axis along its bone, radius the median distance of its vertices to the axis),
carried by the target's bones (``SolveJob.body_points``). Character a's segment s is a chain of spheres of its
capsule's radius at ``SPHERES`` along its axis; its depth into character b's capsule k is

    d(t, s, u, k) = r_s + r_k − |q_s,u(t) − closest point of axis k(t)|      (metres; > 0: overlapping)

and the barrier is Σ relu(d_tgt − allow)² over every (t, sphere, capsule) of two different characters, with
``allow`` = max(d_src, 0) · (h̄_tgt / h̄_src): the same sphere and capsule in the source couple, scaled by the
two characters' mean heights. So it acts only where the target goes deeper than the captured couple does (a
hand on the partner's back is as deep as in the capture); a hand's spheres in the partner's hand capsule are
never penalised (hands that hold hands). Divided by T·(1 % h̄)², weighted by ``w_barrier``.

Sparse as the pair terms: per ordered pair of characters (a block), the entries within ``MARGIN`` of touching
are found at a search (broad phase on the two bodies' boxes per frame), and a frame of that block is searched
again once its two characters' capsule ends have moved there, together, by that margin (or, at a frame where the
two are far apart, by the margin plus their clearance; moves measured about the frame's centroid, ``_centred``:
a body that moves as a whole keeps its depths), so no entry left out can have come to overlap (exact):
two characters metres apart are not searched again every few steps, and a solve that moves a few frames far
searches those frames only. Of the candidates, each step evaluates the hot ones: those within ``HOT`` of their
allowed depth when last checked (checked again, frame by frame, once the frame has moved by that much).

The self barrier (``own_barrier``, ``w_self_barrier``) is the same term between one character's segments, with
one more sphere per bulky segment: its surface point farthest outside its core (``bulges.py``, radius 0), so a
limb cannot sink into a belly or a chest whose core it does not reach (docs/solver.md "Self
barrier").
"""

from __future__ import annotations

import numpy as np
import torch

from ..rig.humanoid import limb_of
from ..metrics.measures import segment_exclusion
from ..contacts.partners import box_distance
from ..rig.vec3 import dot3, norm3, sq_norm3
from ..descriptors.weights import centred, frame_centroids, largest_moves, refresh_due
from .bulges import bulge_points
from .capsules import capsule_ends, source_capsules
from .free_pairs import own_contacts

#: where the spheres of a segment sit along its capsule's axis (0: its start, 1: its end)
SPHERES = (0.0, 0.25, 0.5, 0.75, 1.0)
#: candidate slack, share of the two characters' mean target height
MARGIN = 0.05
#: the hot entries' slack, share of the two characters' mean target height (``PartnerBarrier._refresh``)
HOT = 0.01
#: a hold, not a penetration: a hand's spheres in the partner's hand or forearm capsule, and a forearm's spheres
#: in the partner's hand capsule (hands holding hands or wrists overlap the capsule cores in the capture too)
HOLDS = {"hand": ("hand", "lower_arm"), "lower_arm": ("hand",)}
_CHUNK = 256


def own_barrier(job):
    """``job``'s self-contact barrier once its set-up has evaluated the start (``body_positions``: copy-rotations'
    capsule ends), or None without ``own_capsules``."""
    caps = job._own_caps
    if caps is None:
        return None
    bulge_seg = bulge_points(job.target, caps)[0]
    return PartnerBarrier(job.settings, [job], [caps], own=True, init_ends=[capsule_ends(job)],
                          contacts={(0, 0): own_contacts(job, caps)}, bulges=[bulge_seg])


def _spheres(ends: torch.Tensor) -> torch.Tensor:
    """(T, B·U, 3) sphere centres along capsule axes ends (T, B, 2, 3), segment-major."""
    u = torch.as_tensor(SPHERES, dtype=ends.dtype, device=ends.device)[:, None]
    q = ends[:, :, None, 0] + u * (ends[:, :, None, 1] - ends[:, :, None, 0])   # (T, B, U, 3)
    return q.reshape(ends.shape[0], -1, 3)


def _depth(q, r_q, a, b, r_k):
    """Overlap r_q + r_k − distance of sphere centres q (..., 3) to axis segments a-b (..., 3) -> (...)."""
    ab = b - a
    t = (dot3(q - a, ab) / sq_norm3(ab).clamp_min(1e-12)).clamp(0.0, 1.0)
    return r_q + r_k - norm3(q - a - t[..., None] * ab, 1e-24)   # ε: a finite gradient on the axis itself


class PartnerBarrier:
    """The barrier term of a joint solve.

    Args:
        settings: the group's SolverSettings (``w_barrier``; ``w_self_barrier`` for ``own`` blocks).
        members: the set-up ``SolveJob``s, whose ``body_points`` were ``capsule_points(target)[1]``.
        capsules: per member, its target's ``BodyCapsules`` (``capsule_points(target)[0]``).
        own: the blocks are each character with itself (its limbs against its other segments, those within
            ``segment_exclusion`` of each other left out: a bent elbow is not a collision), not the pairs of
            different characters.
        init_ends: per member, its capsule ends (T, B, 2, 3) at the start (copy-rotations): each entry is then
            allowed the larger of the source's depth and its depth there (the solve adds none); a source body
            that is a fitted template (``SkinnedMesh.fitted``) allows none of its own depths.
        contacts: {(a, b): (T, B_a, B_b) bool} per ordered pair of members of a block (a == b in an own barrier):
            the segment pairs left free at a frame, those whose limbs touch in the source (``own_contacts``,
            ``partner_contacts``); a block without an entry leaves none free.
        bulges: per member, (P,) the segment of each of its bulge points (``bulges.bulge_points``), whose rows
            follow the B capsules' in its ``body_points`` (``capsule_points(target, bulges=True)``): each is one
            more sphere, of radius 0, of that segment (spheres only: never a capsule). None: the capsules only
            (rows past the B capsules' are then ignored).

    A member's spheres: B·U along its capsule axes (sphere q: row q // U, at ``SPHERES[q % U]``), then one per
    bulge point (row B + q − B·U); its rows of ends: the B capsules', then the P bulge points'.
    """

    def __init__(self, settings, members, capsules, own: bool = False, init_ends: list = None,
                 contacts: list = None, bulges: list = None):
        self.settings = settings
        self.own = own
        m0 = members[0]
        self.dtype, self.device = m0.dtype, m0.device
        K = len(members)
        U = len(SPHERES)
        T = m0.num_frames
        self.num_frames = T
        self.radius = [torch.as_tensor(c.radius, dtype=self.dtype, device=self.device) for c in capsules]
        bulges = [np.zeros(0, np.int64) if g is None else np.asarray(g, np.int64) for g in bulges or [None] * K]
        #: per member: its number of capsules B, the segment of each row of ends (R,), each row's sphere radius (R,)
        #: (a bulge point's 0), each sphere's row (Q,) and place along the row's axis (Q,), each sphere's radius (Q,)
        self.num_caps = [len(c.names) for c in capsules]
        self.row_seg = [torch.cat([torch.arange(B, device=self.device), torch.as_tensor(g, device=self.device)])
                        for B, g in zip(self.num_caps, bulges)]
        self.row_r = [torch.cat([r, r.new_zeros(len(g) - B)]) for r, g, B in zip(self.radius, self.row_seg,
                                                                                 self.num_caps)]
        u = torch.as_tensor(SPHERES, dtype=self.dtype, device=self.device)
        self.q_row = [torch.cat([torch.arange(B * U, device=self.device) // U,
                                 torch.arange(B, len(g), device=self.device)]) for B, g in zip(self.num_caps,
                                                                                               self.row_seg)]
        self.q_u = [torch.cat([u.repeat(B), u.new_zeros(len(g) - B)]) for B, g in zip(self.num_caps, self.row_seg)]
        self.sphere_r = [r.index_select(0, q) for r, q in zip(self.row_r, self.q_row)]
        src_ends, src_r = [], []
        for m, caps in zip(members, capsules):
            ends, r, missing = source_capsules(m, caps.names)
            r = r.to(self.dtype)
            src_ends.append(ends.to(dtype=self.dtype, device=self.device))
            src_r.append(torch.where(missing, torch.full_like(r, -1e3), r).to(self.device))  # never inside
        # a bulge point has no sphere in the source (it allows no depth there): at the origin, of radius −1e3
        P = [len(g) - B for g, B in zip(self.row_seg, self.num_caps)]
        self.src_spheres = [torch.cat([_spheres(e), e.new_zeros((T, n, 3))], 1) for e, n in zip(src_ends, P)]
        self.src_sphere_r = [torch.cat([r.repeat_interleave(U), r.new_full((n,), -1e3)]) for r, n in zip(src_r, P)]
        self.src_ends, self.src_r = src_ends, src_r
        kind = [[n.partition("_")[2] if limb_of(n) != "torso" else n for n in c.names] for c in capsules]
        ht = np.asarray([m.h_tgt for m in members])
        hs = np.asarray([m.h_src for m in members])
        #: ordered character pairs (a: spheres, b: capsules): their height ratio, unit, candidate margin, excluded
        #: segment pairs and hot slack
        self.blocks = []
        self.weight = settings.w_self_barrier if own else settings.w_barrier
        #: per member, its capsule ends (T, B, 2, 3) at the start: an own block allows their depths as well
        self.init_ends = None if init_ends is None else [e.detach() for e in init_ends]
        self.contacts = contacts
        #: per member, 1 when its source's depths are allowed; 0 in an own block whose source body is a fitted
        #: template (``SkinnedMesh.fitted``): its limbs' overlaps are the fit's, not the captured body's
        self.source_depth = [0.0 if own and m.source.mesh.fitted else 1.0 for m in members]
        for a in range(K):
            for b in range(K):
                if (a == b) != own:
                    continue
                h_t, h_s = 0.5 * (ht[a] + ht[b]), 0.5 * (hs[a] + hs[b])
                if own:
                    hold = segment_exclusion(list(capsules[a].names))
                else:
                    hold = np.asarray([[kb in HOLDS.get(ka, ()) for kb in kind[b]] for ka in kind[a]])
                excl = torch.as_tensor(hold, device=self.device)[self.row_seg[a]]     # (R_a, B_b) rows, segments
                self.blocks.append((a, b, h_t / h_s, (0.01 * h_t) ** 2, MARGIN * h_t, excl,
                                    HOT * h_t))
        self.release()
        self.refreshes = 0              # steps that refreshed at least one block
        self.hot_refreshes = 0
        self.block_refreshes = 0
        self.measured = 0               # blocks whose moves since their last search or hot pick were measured
        self.last_entries = 0
        self.last_frames = []          # (see ``weighted``)

    def _candidates(self, i: int, ends: list, frames: torch.Tensor) -> tuple:
        """Block ``i``'s (t, sphere, capsule, allowed depth) of the entries within its margin at ``ends`` on the
        clip's ``frames`` (F,), and per frame how far its two characters may move together (the sum of their
        capsule ends' largest moves at that frame) before an entry left out can overlap: the margin, plus the
        two bodies' clearance at a frame where they are far apart (two characters metres apart).

        Broad phase per frame on the two bodies' boxes, then per (frame, segment, capsule) on the segment's
        bounding sphere (its axis' middle, half its length plus its radius): only the pairs that pass have their
        ``SPHERES`` depths computed."""
        U = len(SPHERES)
        u = torch.as_tensor(SPHERES, dtype=self.dtype, device=self.device)
        a, b, ratio, _, margin, excl, _ = self.blocks[i]
        ea, eb = ends[a][frames], ends[b][frames][:, :self.num_caps[b]]       # rows of spheres, capsules
        mid_a, mid_b = ea.mean(2), eb.mean(2)                                  # (F, R_a, 3), (F, B_b, 3)
        reach_a = 0.5 * norm3(ea[:, :, 1] - ea[:, :, 0]) + self.row_r[a]
        reach_b = 0.5 * norm3(eb[:, :, 1] - eb[:, :, 0]) + self.radius[b]
        pad = reach_a.amax(1) + reach_b.amax(1) + margin                      # (F,)
        box = box_distance(mid_a.amin(1), mid_a.amax(1), mid_b.amin(1), mid_b.amax(1))          # (F,)
        near = torch.nonzero(box < pad, as_tuple=True)[0]
        # a depth is at most pad − margin − box; an entry left out gains at most the two characters' moves
        reach = margin + (box - pad).clamp_min(0.0)
        keys = []
        for c in range(0, near.numel(), _CHUNK):        # every temporary bounded by a chunk of frames
            fr = near[c:c + _CHUNK]
            gap = norm3(mid_a[fr][:, :, None] - mid_b[fr][:, None])                   # (F, Ba, Bb)
            close = (gap < reach_a[fr][:, :, None] + reach_b[fr][:, None] + margin) & ~excl
            free = None if self.contacts is None else self.contacts.get((a, b))
            if free is not None:                        # limbs that touch in the source are free there
                close &= ~free[frames[fr]].index_select(1, self.row_seg[a])
            f, sa, k = torch.nonzero(close, as_tuple=True)
            row = fr[f]                                                              # rows of ``frames``
            e = ea[row, sa]                                                          # (E, 2, 3)
            q = e[:, None, 0] + u[:, None] * (e[:, None, 1] - e[:, None, 0])        # (E, U, 3)
            d = _depth(q, self.row_r[a][sa, None], eb[row, k, None, 0], eb[row, k, None, 1],
                       self.radius[b][k, None])                                     # (E, U)
            B = self.num_caps[a]
            axis = (sa < B)[:, None]
            qi = torch.where(axis, sa[:, None] * U + torch.arange(U, device=self.device), B * (U - 1) + sa[:, None])
            # a bulge point's row has both ends at the point: its U spheres are one, kept once
            e_idx, u_idx = torch.nonzero((d > -margin) & (axis | (torch.arange(U, device=self.device) == 0)),
                                         as_tuple=True)
            t, q, k, depth = frames[row[e_idx]], qi[e_idx, u_idx], k[e_idx], d[e_idx, u_idx]
            allow = self._allowed(a, b, ratio, t, q, k)
            # only entries within the margin of their allowed depth can reach it before the next search (a
            # depth grows by at most the two characters' moves): where the source (or the start) is deeper than
            # the target is now by more than the margin, the entry stays out
            keep = torch.nonzero(depth - allow > -margin, as_tuple=True)[0]
            keys.append((t[keep], q[keep], k[keep], allow[keep]))
        if keys:
            t, q, k, allow = (torch.cat(x) for x in zip(*keys))
        else:
            t = q = k = torch.zeros(0, dtype=torch.long, device=self.device)
            allow = torch.zeros(0, dtype=self.dtype, device=self.device)
        return (t, q, k, allow), reach

    def release(self):
        """Forget the candidates and hot entries (searched again at the next evaluation): a finished solve's
        barrier holds tens of MB on a long clip while the metrics run (``core.pipeline.retarget``)."""
        n = len(self.blocks)
        #: per block: its two characters' capsule ends at each frame's last search, (T,) how far they may move
        #: together at a frame before it is searched again, its candidates (t, q, k, allow) and their rows
        self._ref, self._reach, self._cand, self._rows = [None] * n, [None] * n, [None] * n, [None] * n
        #: per block, its hot entries: the candidates within ``HOT`` of their allowed depth at ``_hot_ref`` (their
        #: (t, q, k, allow) and rows), the only ones evaluated at a step until the frame moves by ``HOT``
        self._hot, self._hot_ref = [None] * n, [None] * n
        #: between characters: per member, its capsule ends at the last evaluation and (T,) the sum of its moves at
        #: each frame over every evaluation (``_refresh``'s ``due``); per block, its two characters' sums at its
        #: searches and at its hot picks
        self._prev = self._drift = None
        self._drift_ref, self._hot_drift = [None] * n, [None] * n

    def _allowed(self, a: int, b: int, ratio: float, t, q, k) -> torch.Tensor:
        """(E,) the depth allowed to entries (frame t, sphere q of character a, capsule k of character b): the
        source's there (≥ 0, scaled by ``ratio``; none for an own block on a fitted source body) and, in own
        blocks, copy-rotations' (where the solve starts)."""
        src = self.src_ends[b]
        d_src = _depth(self.src_spheres[a][t, q], self.src_sphere_r[a][q], src[t, k, 0], src[t, k, 1],
                       self.src_r[b][k])
        allow = d_src.clamp_min(0.0) * (ratio * self.source_depth[a])
        if self.init_ends is not None:
            ia, ib = self.init_ends[a], self.init_ends[b]
            qa = ia[t, self.q_row[a][q]]
            qa = qa[:, 0] + self.q_u[a][q, None] * (qa[:, 1] - qa[:, 0])
            allow = torch.maximum(allow, _depth(qa, self.sphere_r[a][q], ib[t, k, 0], ib[t, k, 1],
                                                self.radius[b][k]).clamp_min(0.0))
        return allow

    def _refresh(self, det: list):
        """Per block, search again the frames where its two characters moved, together, as far as that frame
        allows since their last search (exact: no entry left out can overlap before that), then pick again the
        hot entries of the frames that moved by ``HOT`` · h̄ since theirs. Frame by frame: a solve that moves a
        few frames far leaves the others' entries as they are."""
        any_block = False
        flat = [e.reshape(-1, 2, 3) for e in det]
        every = torch.arange(self.num_frames, device=self.device)
        if not self.own:
            if self._drift is None:
                self._drift = [torch.zeros(self.num_frames, dtype=self.dtype, device=self.device) for _ in det]
            else:
                self._drift = [d + largest_moves(e, p) for d, e, p in zip(self._drift, det, self._prev)]
            self._prev = det

        def drift(a, b):
            """(T,), (T,) copies of the two characters' move sums now (``_drift``), or None in an own barrier."""
            return None if self._drift is None else (self._drift[a].clone(), self._drift[b].clone())

        def catch_up(at, a, b, frames):
            """A block's two move sums ``at`` (at its last search or hot pick) set to now at ``frames``."""
            for x, d in zip(at or (), (a, b)):
                x[frames] = self._drift[d][frames]

        def moved(ref, a, b):
            """(T,) the sum of the two characters' largest capsule-end moves at each frame since ``ref``."""
            self.measured += 1
            if a == b:
                return 2.0 * largest_moves(det[a], ref[0])
            return largest_moves(det[a], ref[0]) + largest_moves(det[b], ref[1])

        def due(ref, at, a, b, allowance):
            """(F,) the frames to search again: ``refresh_due`` of the two characters' moves since ``ref`` over
            ``allowance`` (T,). None when their moves summed evaluation by evaluation since then (``_drift``, ``at``
            its values at ``ref``; at least the moves, by the triangle inequality) keep within every allowance."""
            if at is not None and bool((self._drift[a] - at[0] + self._drift[b] - at[1] < 0.999 * allowance).all()):
                return None
            return torch.nonzero(refresh_due(moved(ref, a, b) / allowance), as_tuple=True)[0]

        def keep_others(entries, rows, frames):
            """``entries`` and ``rows`` without those at ``frames``."""
            out = torch.ones(self.num_frames, dtype=torch.bool, device=self.device)
            out[frames] = False
            sel = torch.nonzero(out[entries[0]], as_tuple=True)[0]
            return tuple(x.index_select(0, sel) for x in entries), tuple(r.index_select(0, sel) for r in rows)

        for i, (a, b, _, _, margin, _, hot_slack) in enumerate(self.blocks):
            ref = self._ref[i]
            frames = every if ref is None else due(ref, self._drift_ref[i], a, b, self._reach[i])
            if frames is not None and frames.numel():
                cand, reach = self._candidates(i, det, frames)
                t, q, k, _ = cand
                rows = (t * det[a].shape[1] + self.q_row[a][q], t * det[b].shape[1] + k)
                if ref is None:
                    self._ref[i] = (det[a].clone(), det[b].clone())
                    self._reach[i] = reach
                    self._cand[i], self._rows[i] = cand, rows
                    self._drift_ref[i] = drift(a, b)
                else:
                    old, old_rows = keep_others(self._cand[i], self._rows[i], frames)
                    self._cand[i] = tuple(torch.cat([x, y]) for x, y in zip(old, cand))
                    self._rows[i] = tuple(torch.cat([x, y]) for x, y in zip(old_rows, rows))
                    ref[0][frames], ref[1][frames] = det[a][frames], det[b][frames]
                    self._reach[i][frames] = reach
                    catch_up(self._drift_ref[i], a, b, frames)
                self.block_refreshes += 1
                any_block = True
            if not self._cand[i][0].numel():    # no candidates (two characters metres apart): no hot entries
                self._hot[i], self._hot_ref[i] = (self._cand[i], self._rows[i]), None
                continue
            # hot entries: a candidate further than HOT · h̄ below its allowed depth cannot reach it before
            # the two characters have moved, together, by that much at its frame (exact, as the candidates)
            hot_ref = self._hot_ref[i]
            if hot_ref is None:
                hot_frames = every
            else:
                moving = due(hot_ref, self._hot_drift[i], a, b, hot_slack)
                stale = torch.zeros(self.num_frames, dtype=torch.bool, device=self.device)
                for f in (moving, frames):                              # frames: their candidates were searched
                    if f is not None:
                        stale[f] = True
                hot_frames = torch.nonzero(stale, as_tuple=True)[0]
            if hot_frames.numel():
                if hot_ref is None or hot_frames.numel() == self.num_frames:
                    cand, rows = self._cand[i], self._rows[i]
                    kept = None
                else:
                    mask = torch.zeros(self.num_frames, dtype=torch.bool, device=self.device)
                    mask[hot_frames] = True
                    sel = torch.nonzero(mask[self._cand[i][0]], as_tuple=True)[0]
                    cand = tuple(x.index_select(0, sel) for x in self._cand[i])
                    rows = tuple(r.index_select(0, sel) for r in self._rows[i])
                    kept = keep_others(*self._hot[i], hot_frames)
                d = self._depths(flat, a, b, cand, rows)
                hot = torch.nonzero(d - cand[3] > -hot_slack, as_tuple=True)[0]
                cand = tuple(x.index_select(0, hot) for x in cand)
                rows = tuple(r.index_select(0, hot) for r in rows)
                if kept is not None:
                    cand = tuple(torch.cat([x, y]) for x, y in zip(kept[0], cand))
                    rows = tuple(torch.cat([x, y]) for x, y in zip(kept[1], rows))
                self._hot[i] = (cand, rows)
                if hot_ref is None:
                    self._hot_ref[i] = (det[a].clone(), det[b].clone())
                    self._hot_drift[i] = drift(a, b)
                else:
                    hot_ref[0][hot_frames], hot_ref[1][hot_frames] = det[a][hot_frames], det[b][hot_frames]
                    catch_up(self._hot_drift[i], a, b, hot_frames)
                self.hot_refreshes += 1
        self.refreshes += int(any_block)

    def _centred(self, ends: list) -> list:
        """``ends`` (per member, (T, B, 2, 3)) detached and shifted per frame, where the candidates are searched and
        their moves measured (``weights.centred``): an own block's by its character's centroid (a body that moves
        as a whole keeps its depths), blocks between characters by the mean of the characters' centroids."""
        det = [e.detach() for e in ends]
        if self.own:
            return [centred(e) for e in det]
        shift = torch.stack([frame_centroids(e) for e in det]).mean(0)                           # (T, 3)
        return [centred(e, shift) for e in det]

    def _depths(self, flat: list, a: int, b: int, cand: tuple, rows: tuple) -> torch.Tensor:
        """(E,) depths of block (a, b)'s entries ``cand`` (t, sphere, capsule, allow) whose capsule ends are the
        rows ``rows`` of ``flat`` (per member, (T·B, 2, 3))."""
        _, q, k, _ = cand
        ea = flat[a].index_select(0, rows[0])                                                 # (E, 2, 3)
        u = self.q_u[a][q, None]
        e = flat[b].index_select(0, rows[1])
        return _depth(ea[:, 0] + u * (ea[:, 1] - ea[:, 0]), self.sphere_r[a][q], e[:, 0], e[:, 1],
                      self.radius[b][k])

    def weighted(self, ends: list) -> torch.Tensor:
        """w_barrier · Σ_blocks Σ relu(d − allow)² / (T·(1 % h̄)²) at the rows of ends (T, R_c, 2, 3) of every
        member (differentiable w.r.t. them; rows past a member's capsules and bulge points are ignored)."""
        ends = [e if e.shape[1] == len(g) else e[:, :len(g)] for e, g in zip(ends, self.row_seg)]
        with torch.no_grad():
            self._refresh(self._centred(ends))
        total = ends[0].new_zeros(())
        count = 0
        flat = [e.reshape(-1, 2, 3) for e in ends]                # (T·B, 2, 3): gathers whose backward is index_add
        #: per block, the frames (of its first member) of the entries deeper than allowed at this evaluation
        self.last_frames = []
        for (a, b, _, unit, *_), (cand, rows) in zip(self.blocks, self._hot):
            if not cand[0].numel():
                continue
            d = self._depths(flat, a, b, cand, rows)
            excess = (d - cand[3]).clamp_min(0.0)
            deep = excess.detach() > 0
            count += int(deep.sum())
            self.last_frames.append(cand[0][deep])
            total = total + excess.square().sum() / (self.num_frames * unit)
        self.last_entries = count
        return self.weight * total


__all__ = ["MARGIN", "PartnerBarrier", "SPHERES", "own_barrier"]
