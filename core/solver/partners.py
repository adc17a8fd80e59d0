"""The terms between characters of a joint solve (ReConForM §6.1): L_dist, L_dir, L_pen on key-vertex pairs of
two different characters, and L_dir on the gaze pairs (an eye key vertex and a partner's key vertex inside its
gaze cone).

Each character keeps every term of its own solve (``objective.Objective``, built by its ``SolveJob``); this
module adds what joins them, on the stacked key vertices of all characters (K characters, N_c each, in the
order of the group). The pair entries come from ``core.contacts.partners.PartnerPairs`` (exact, sparse), the gaze from
``core.contacts.gaze``; both use the mixed weight W_src + α·stopgrad(W_tgt) of Eq. 2, the target's weights read from
the current state without gradient.

Balancing (docs/solver.md "Multi-character"): every character pair's dist, dir and pen, and every character's
gaze term, is divided by its own reference scale (its value at the start, floored as a character's own terms
are, with at least ``FLOOR_ENTRIES`` full-weight entries per frame), so a couple holding hands on every frame
and a couple that touches once weigh alike, and five dancers do not dilute one another.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

from ..contacts.gaze import (GAZE_MAX_DEG, GAZE_WINDOW_S, cone_weight, gaze_directions, gaze_setup,
                             head_frames_batched, window_mean, window_mean_plan)
from ..errors import CoreError
from .losses import cosine
from ..rig.vec3 import dot3, norm3, sq_norm3
from ..contacts.partners import PartnerPairs
from ..descriptors.weights import MIN_FRACTION, refresh_due
from . import objective
from .pair_terms import focused_square, pair_terms
from .settings import PARTNER_TERM

PAIR_TERMS = ("dist", "dir", "pen")
#: GAZE_TERM's values (``PartnerObjective._gaze``)
GAZE_TERMS = ("look", "direction")
#: the gaze term: "look" keeps the angle between each character's gaze and its eye → partner direction by turning
#: its head; "direction": the paper's L_dir on the eye → partner direction, which both bodies move to keep
#: (docs/solver.md "Gaze")
GAZE_TERM = "look"
#: the contact state (``SolverSettings.contact_state``) on the pairs between the characters too, on the partner
#: L_dist's scale: hands held more often, but each character's own contacts kept less (docs/solver.md
#: "Multi-character")
PARTNER_CONTACT_STATE = False
#: the floor of a character pair's scale counts at least this many full-weight entries per frame
FLOOR_ENTRIES = 1.0
#: gaze candidates are refreshed once a target's gaze turned by this many degrees, or a key vertex moved by
#: this share of the mean target height, since the last refresh (``PartnerObjective._gaze_entries``)
GAZE_SLACK_DEG = 2.0
GAZE_SLACK_DIST = 0.01
#: a character pair's reference scale is its initial value, or what it would be with its RMS distance error at
#: this many d_min when it starts farther (None: the initial value; docs/solver.md "Multi-character")
SCALE_CAP = 1.0


class PartnerObjective:
    """Terms between the characters of a group.

    Args:
        settings: the group's SolverSettings (w_partner, w_gaze and the L_sem weights).
        members: the characters' set-up ``SolveJob``s (their source key vertices, heights, key-vertex order,
            per-part factors), in the group's order.
    """

    def __init__(self, settings, members):
        self.settings = settings
        self.notes = []
        m0 = members[0]
        self.fps = m0.fps
        self.dtype, self.device = m0.dtype, m0.device
        src_p = [m.objective.src_p for m in members]
        src_n = [m.objective.src_n for m in members]
        self.pairs = PartnerPairs(src_p, src_n, [m.h_src for m in members], [m.h_tgt for m in members],
                                  scale=objective.SCALE_PAIR_TERMS)
        self.offsets = self.pairs.offsets
        self.heights = np.asarray([m.h_tgt for m in members])
        self.vertex_scale = self._vertex_scales(members)
        # gaze, batched over the characters that look (those whose source and target have the head key vertices,
        # when w_gaze > 0): looker c's eye (global index) looks at every key vertex of the other characters (M of
        # them, padded with its own eye, masked out, when characters have different key-vertex counts)
        src_all = torch.cat(src_p, 1)
        N = int(self.offsets[-1])
        off = [int(o) for o in self.offsets]
        gs, gt, self.lookers = [], [], []
        for c, m in enumerate(members):
            if settings.w_gaze <= 0:
                break
            try:
                g_s = gaze_setup(m.source, m.source_motion, m.source_track)
                g_t = gaze_setup(m.target, order=m.keyvert_order)
            except CoreError as ex:            # no face key vertices (a custom set): this character does not look
                self.notes.append(f"no gaze for '{m.target.name}': {ex}")
                continue
            gs.append(g_s)
            gt.append(g_t)
            self.lookers.append(c)
        L = len(self.lookers)
        self.eyes = torch.as_tensor([off[c] + g.eye for c, g in zip(self.lookers, gs)], dtype=torch.long,
                                    device=self.device)                                              # (L,)
        self.tgt_eyes = torch.as_tensor([off[c] + g.eye for c, g in zip(self.lookers, gt)], dtype=torch.long,
                                        device=self.device)
        self.tgt_head = torch.as_tensor([[off[c] + h for h in g.head] for c, g in zip(self.lookers, gt)],
                                        dtype=torch.long, device=self.device).reshape(L, 3)
        self.tgt_local = torch.as_tensor(np.stack([g.local for g in gt]) if gt else np.zeros((0, 3)),
                                         dtype=self.dtype, device=self.device)
        M = N - min(self.sizes())
        others = np.zeros((L, M), np.int64)
        valid = np.zeros((L, M), bool)
        for k, (c, g) in enumerate(zip(self.lookers, gs)):
            o = [v for v in range(N) if not off[c] <= v < off[c + 1]]
            others[k, :len(o)] = o
            others[k, len(o):] = off[c] + g.eye
            valid[k, :len(o)] = True
        self.others = torch.as_tensor(others, device=self.device)                                    # (L, M)
        self._others_flat = self.others.reshape(-1)
        self.valid = None if valid.all() else torch.as_tensor(valid, dtype=self.dtype, device=self.device)
        T = src_all.shape[0]
        self._window = window_mean_plan(T, int(round(self.fps * GAZE_WINDOW_S / 2.0)), self.dtype, self.device)
        if L:
            g_src = torch.stack([gaze_directions(src_p[c], g, self.fps) for c, g in zip(self.lookers, gs)], 1)
            self.look_src = self._look(src_all, self.eyes, g_src)                                    # (T, L, M)
            self.look_dir = src_all[:, self.others] - src_all[:, self.eyes][:, :, None]            # (T, L, M, 3)
            # (T, L, M) cosine between each source gaze and its eye → key-vertex direction ("look" gaze term)
            self.look_cos = dot3(self.look_dir, g_src[:, :, None]) / norm3(self.look_dir).clamp_min(1e-9)
        else:
            self.look_src = torch.zeros((T, 0, M), dtype=self.dtype, device=self.device)
            self.look_dir = torch.zeros((T, 0, M, 3), dtype=self.dtype, device=self.device)
            self.look_cos = torch.zeros((T, 0, M), dtype=self.dtype, device=self.device)
        self._src_gaze = self._gaze_ref = self._gaze_cand = None
        self._gaze_slack_rad = math.radians(GAZE_SLACK_DEG)
        self._gaze_limit_cos = math.cos(math.radians(GAZE_MAX_DEG + GAZE_SLACK_DEG))
        self._gaze_limit_sin = math.sin(math.radians(GAZE_MAX_DEG + GAZE_SLACK_DEG))
        self._gaze_dist_slack = GAZE_SLACK_DIST * float(self.heights.mean())
        self.gaze_refreshes = 0
        self.scales = None
        #: the constants of the pair terms and of the gaze as they are at the set-up (an experiment patches them)
        self.contact_focus, self.contact_margin = objective.CONTACT_FOCUS, objective.CONTACT_MARGIN
        self.gaze_term = GAZE_TERM
        if GAZE_TERM not in GAZE_TERMS:
            raise CoreError(f"GAZE_TERM must be one of {', '.join(GAZE_TERMS)}, not '{GAZE_TERM}'.")

    def _vertex_scales(self, members) -> dict:
        """{term: (Ntot,) per-key-vertex multiplier or None} of the pair terms between the characters: each
        member's per-part factors of the "partner" term (``SolverSettings.part_weights``; a member's own dist, dir
        and pen factors act on its own pairs only)."""
        parts = [m.objective.vertex_scale[PARTNER_TERM] for m in members]
        both = None if all(v is None for v in parts) else torch.cat(
            [torch.ones(m.num_keyverts, dtype=self.dtype, device=self.device) if v is None else v
             for m, v in zip(members, parts)])
        return {term: both for term in PAIR_TERMS}

    def with_members(self, members, p: torch.Tensor, n: torch.Tensor) -> "PartnerObjective":
        """A copy for ``members``, the same characters at other per-part weights (a group's re-solve,
        ``core.solver.continued.continued_group``): the source entries, the gaze set-up and the candidate caches
        are shared, the per-key-vertex multipliers and the reference scales computed again at the stacked
        copy-rotations key vertices ``p``, ``n`` (T, Ntot, 3)."""
        out = copy.copy(self)
        out.vertex_scale = out._vertex_scales(members)
        with torch.no_grad():
            out.set_initial(p, n)
        return out

    def shared_vertices(self) -> np.ndarray:
        """(T, Ntot) bool: the key vertices that a term between the characters acts on from the start, frame by
        frame: those of the source entries (``PartnerPairs.source_vertices``), and where a looker looks at a
        partner's key vertex in the source, its eye and that key vertex."""
        out = self.pairs.source_vertices()
        if self.look_src.numel():
            t, c, m = (x.cpu().numpy() for x in torch.nonzero(self.look_src > 0, as_tuple=True))
            out[t, self.tgt_eyes.cpu().numpy()[c]] = True
            out[t, self.others.cpu().numpy()[c, m]] = True
        return out

    # -- set-up at the initial state ----------------------------------------------------------------------------

    def set_initial(self, p: torch.Tensor, n: torch.Tensor):
        """Reference scales from the stacked copy-rotations key vertices p, n (T, Ntot, 3), α = 0; returns the
        raw values {term: (blocks,) or (K,) tensor}."""
        T = p.shape[0]
        with torch.no_grad():
            ps, block = self.pairs.active(None, 0.0)
            raw = {k: torch.zeros(len(self.pairs.blocks), dtype=self.dtype, device=self.device) for k in PAIR_TERMS}
            for b in range(len(self.pairs.blocks)):
                sel = torch.nonzero(block == b, as_tuple=True)[0]
                sub = type(ps)(*(f.index_select(0, sel) for f in ps))
                vals = pair_terms(p, n, 0.0, sub, {k: self._pscale(k, sub) for k in PAIR_TERMS},
                                  self.contact_focus)
                for k in PAIR_TERMS:
                    raw[k][b] = vals[k]
            e, c = self._gaze(p, None, 0.0)
            gaze_raw = torch.zeros(len(self.eyes), dtype=self.dtype, device=self.device).index_add_(0, c, e)
        ref = 0.01 * torch.as_tensor([0.5 * (self.heights[a] + self.heights[b]) for a, b in self.pairs.blocks],
                                     dtype=self.dtype, device=self.device)
        w2 = torch.zeros(len(self.pairs.blocks), dtype=self.dtype, device=self.device)
        w2.index_add_(0, block, ps.w_src.square())
        wd2 = torch.zeros_like(w2).index_add_(0, block, focused_square(ps.w_src, self.contact_focus))
        count = torch.clamp(w2, min=FLOOR_ENTRIES * T)
        count_d = torch.clamp(wd2, min=FLOOR_ENTRIES * T)
        cos10 = (1.0 - math.cos(math.radians(10.0))) ** 2
        floors = {"dist": count_d * ref ** 2, "dir": count * cos10, "pen": 2.0 * count * ref ** 2}
        # a character pair whose contacts start far apart (RMS distance error above SCALE_CAP · d_min) is scaled as
        # if they started that far: it starts above 1, in proportion, instead of being worth as little as one
        # that is nearly right (module docstring, "Balancing")
        factor = torch.ones_like(w2)
        if SCALE_CAP:
            rms2 = raw["dist"] / wd2.clamp_min(1e-12)
            cap2 = (SCALE_CAP * MIN_FRACTION * 100.0 * ref) ** 2            # ref = 1 % of the mean height
            factor = torch.where(rms2 > cap2, cap2 / rms2.clamp_min(1e-12), factor)
        self.scales = {k: torch.maximum(raw[k] * factor, floors[k]).clamp_min(1e-12) for k in PAIR_TERMS}
        g2 = self.look_src.square().sum((0, 2)).clamp(min=FLOOR_ENTRIES * T)
        self.scales["gaze"] = torch.maximum(gaze_raw, g2 * cos10).clamp_min(1e-12)
        return dict(raw, gaze=gaze_raw)

    def _pscale(self, term, ps):
        m = self.vertex_scale[term]
        return None if m is None else 0.5 * (m[ps.i] + m[ps.j])

    # -- evaluation -------------------------------------------------------------------------------------------------

    def sizes(self) -> list:
        """Key vertices per character."""
        return list(np.diff(self.offsets))

    def _look(self, p: torch.Tensor, eyes: torch.Tensor, gaze: torch.Tensor) -> torch.Tensor:
        """(T, K, M) cone weights of each character's others seen from its eye ``eyes`` (K,) along ``gaze``
        (T, K, 3), at stacked positions p (T, Ntot, 3); 0 on padding."""
        T, (K, M) = p.shape[0], self.others.shape
        v = p.index_select(1, self._others_flat).view(T, K, M, 3) - p.index_select(1, eyes)[:, :, None]
        cos = dot3(v, gaze[:, :, None]) / norm3(v).clamp_min(1e-9)
        w = cone_weight(cos)
        return w if self.valid is None else w * self.valid

    def target_gaze(self, p: torch.Tensor) -> torch.Tensor:
        """(T, K, 3) unit gaze directions of the targets at stacked key vertices p (T, Ntot, 3) (``core.contacts.gaze``)."""
        frames = head_frames_batched(p, self.tgt_head)                                            # (T, K, 3, 3)
        g = window_mean((frames @ self.tgt_local[..., None])[..., 0], plan=self._window)
        return g / g.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    def _gaze_entries(self, p_det, alpha: float, gaze=None):
        """(t, c, m, w): the gaze entries (frame, looker, index into its ``others``) whose mixed cone weight
        w = W_src + α·W_tgt is non-zero, the targets' cones read at ``p_det`` (T, Ntot, 3) without gradient.

        The target test runs on candidates, as the pair set's does: at a refresh, the entries whose target angle
        is below a_max + ``GAZE_SLACK_DEG`` + asin(2·D / |p_j − p_eye|) (D = ``GAZE_SLACK_DIST`` of the mean
        target height), and the source's. While no target gaze has turned by more than GAZE_SLACK_DEG and no key
        vertex has moved by more than D since, the angle of any other entry is still above a_max, so the
        candidates hold every non-zero weight: the set is exact. Refreshed frame by frame: only the frames where
        that no longer holds are searched again. ``gaze``: the targets' gazes (T, L, 3) at ``p_det`` when the caller
        has them (``target_gaze``), read without gradient."""
        if self._src_gaze is None:
            t, c, m = torch.nonzero(self.look_src > 0, as_tuple=True)
            self._src_gaze = (t, c, m, self.look_src[t, c, m])
        if alpha <= 0 or p_det is None or not self.lookers:
            return self._src_gaze
        with torch.no_grad():
            return self._target_gaze_entries(p_det.detach(), alpha, None if gaze is None else gaze.detach())

    def _target_gaze_entries(self, p_det, alpha: float, gaze=None):
        g = self.target_gaze(p_det) if gaze is None else gaze                                     # (T, L, 3)
        if self._gaze_ref is None:
            frames = None
        else:   # frame by frame: a frame whose gazes all turned less than the slack and whose key vertices all moved
            # less than D keeps its candidates; once one does not, the frames past half their slack go along
            # (``refresh_due``: fewer, larger refreshes, as exact)
            turned = torch.acos(dot3(g, self._gaze_ref[0]).amin(1).clamp(-1.0, 1.0)) / self._gaze_slack_rad
            moved = sq_norm3(p_det - self._gaze_ref[1]).amax(1).sqrt() / self._gaze_dist_slack
            frames = torch.nonzero(refresh_due(torch.maximum(turned, moved)), as_tuple=True)[0]
        if frames is None or frames.numel():
            self._refresh_gaze(p_det, g, frames)
        t, c, m, w_src, fj, fe = self._gaze_cand
        flat = p_det.reshape(-1, 3)
        v = flat.index_select(0, fj) - flat.index_select(0, fe)
        w = w_src + alpha * cone_weight(dot3(v, g[t, c]) / norm3(v).clamp_min(1e-9))
        keep = torch.nonzero(w > 0, as_tuple=True)[0]
        return t[keep], c[keep], m[keep], w[keep]

    def _refresh_gaze(self, p_det, g, frames):
        """The gaze candidates of ``frames`` (F,) (every frame when None) found again at ``p_det`` (T, Ntot, 3)
        and target gazes ``g`` (T, L, 3), the other frames' kept, in (frame, looker, other) order."""
        T, (L, M) = p_det.shape[0], self.others.shape
        sub = torch.arange(T, device=self.device) if frames is None else frames
        p, gs = p_det.index_select(0, sub), g.index_select(0, sub)
        v = p.index_select(1, self._others_flat).view(-1, L, M, 3) - p.index_select(1, self.tgt_eyes)[:, :, None]
        dist = norm3(v).clamp_min(1e-9)
        # angle < limit + asin(r), r = 2·D / dist (every key vertex within 2·D of the eye when r ≥ 1), as cosines:
        # cos angle > cos limit · √(1 − r²) − sin limit · r
        ratio = (2.0 * self._gaze_dist_slack / dist).clamp(max=1.0)
        bound = self._gaze_limit_cos * (1.0 - ratio.square()).sqrt() - self._gaze_limit_sin * ratio
        look_src = self.look_src.index_select(0, sub)
        cand = (dot3(v, gs[:, :, None]) > bound * dist) | (ratio >= 1.0) | (look_src > 0)
        if self.valid is not None:
            cand &= self.valid > 0
        f, c, m = torch.nonzero(cand, as_tuple=True)
        t = sub.index_select(0, f)
        if frames is None:
            self._gaze_ref = (g.clone(), p_det.clone())
        else:
            self._gaze_ref[0][frames], self._gaze_ref[1][frames] = g[frames], p_det[frames]
            keep = torch.ones(T, dtype=torch.bool, device=self.device)
            keep[frames] = False
            old = torch.nonzero(keep[self._gaze_cand[0]], as_tuple=True)[0]
            t, c, m = (torch.cat([x.index_select(0, old), y]) for x, y in zip(self._gaze_cand[:3], (t, c, m)))
            order = torch.argsort((t * L + c) * M + m)
            t, c, m = t[order], c[order], m[order]
        N = p_det.shape[1]
        self._gaze_cand = (t, c, m, self.look_src[t, c, m], t * N + self.others[c, m], t * N + self.tgt_eyes[c])
        self.gaze_refreshes += 1

    def _gaze(self, p, p_det, alpha: float):
        """((E,) squared weighted gaze errors of the gaze entries, (E,) their looking character): each eye and
        the others' key vertices where the mixed cone weight is non-zero.

        "look" (``gaze_term``, GAZE_TERM): S_cos(gaze, eye → key vertex) of the target against the source's, the
        eye → key-vertex direction read without gradient, so only the looker's head turns (a tall character looks
        down at a partner the source looked up at). "direction": the paper's 1 − S_cos between the source's and
        the target's eye → key-vertex directions, which both characters' bodies move to keep. ``p_det``: the same
        positions without gradient (the target cones are read there); the "look" term's gazes at ``p``, computed
        once, serve both."""
        look = self.gaze_term == "look"
        g = self.target_gaze(p) if look else None                                                  # (T, L, 3)
        t, c, m, w = self._gaze_entries(p_det, alpha, g)
        N = p.shape[1]
        flat = p.reshape(-1, 3)
        tgt_dir = flat.index_select(0, t * N + self.others[c, m]) - flat.index_select(0, t * N + self.tgt_eyes[c])
        if look:
            d = tgt_dir.detach()
            cos_t = dot3(g[t, c], d) / norm3(d).clamp_min(1e-9)
            return (w * (cos_t - self.look_cos[t, c, m])).square(), c
        return (w * (1.0 - cosine(self.look_dir[t, c, m], tgt_dir))).square(), c

    def raw_entries(self, p: torch.Tensor, alpha: float):
        """The active (PairSet, block) at stacked key vertices p (T, Ntot, 3) (read without gradient)."""
        return self.pairs.active(p, alpha)

    def weighted(self, p: torch.Tensor, n: torch.Tensor, alpha: float, entries=None) -> dict:
        """{'partner_dist', 'partner_dir', 'partner_pen', 'gaze': weight · Σ raw / scale} at the stacked key
        vertices p, n (T, Ntot, 3) of the current state (differentiable w.r.t. them)."""
        s = self.settings
        ps, block = self.raw_entries(p, alpha) if entries is None else entries
        self.last_entries = len(ps)
        scale = {}
        for k in PAIR_TERMS:
            inv = (1.0 / self.scales[k]).index_select(0, block)
            v = self._pscale(k, ps)
            scale[k] = inv if v is None else inv * v
        vals = pair_terms(p, n, alpha, ps, scale, self.contact_focus,
                          state_margin=self.contact_margin if s.contact_state and PARTNER_CONTACT_STATE else None)
        out = {f"partner_{k}": s.weight(k) * s.w_partner * vals[k] for k in PAIR_TERMS}
        if "state" in vals:     # the contact state between the characters too, on partner L_dist's scale
            out["partner_dist"] = out["partner_dist"] + s.weight("dist") * s.w_partner * s.contact_state * vals["state"]
        e, c = self._gaze(p, p.detach(), alpha)
        self.last_gaze_entries = int(e.numel())
        out["gaze"] = s.weight("dir") * s.w_gaze * (e / self.scales["gaze"].index_select(0, c)).sum()
        return out


__all__ = ["FLOOR_ENTRIES", "GAZE_TERMS", "PAIR_TERMS", "PartnerObjective"]
