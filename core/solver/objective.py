"""The ReConForM objective (ReConForM §4.2, Eq. 1): w_reg L_reg + w_smooth L_smooth + w_sem L_sem, with the
adaptive weights of §4.1 mixed source→target (Eq. 2), each term divided by a reference scale (docs/solver.md
"Balancing"), plus the floor barrier and the foot model (``footing``).

``Objective`` holds everything fixed during a solve (source descriptors, weights, reference scales, per-part
factors) and evaluates the terms at target key-vertex positions and normals. Loss functions themselves are in
``core.solver.losses``, weights in ``core.descriptors.weights``, descriptors in ``core.descriptors.pose``.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

from ..descriptors.pose import height, sliding
from ..errors import CoreError
from .losses import (capped_gain, floor_barrier, height_loss, jerk, jerk_budgets, jerk_excess_loss, jerk_totals,
                     reg_loss, sliding_loss, smooth_loss)
from ..descriptors.weights import MAX_FRACTION, MIN_FRACTION, ActivePairs, allowed_pairs, floor_weight
from .pair_terms import focused_square, pair_terms
from .settings import PART_WEIGHT_TERMS, TERMS, part_weights_from

#: the contact state leaves a source contact alone on a frame where the surface barrier finds a probe near one key
#: vertex inside the other's segment (``surface.SurfaceGate``): the contact is held on the mesh, and pulling the key
#: vertices closer would press one body part into the other. Off: measured, it moves the zoo's one contact-depth
#: failure to another case (docs/decisions.md "The contact state reads key vertices, not the surfaces, yet")
CONTACT_HELD_ON_SURFACE = False
#: L_reg ties the hips' height to copy-rotations' (only their horizontal path is free); False: L_reg reads past the
#: hips' whole offset (an experiment, off: docs/decisions.md "L_reg ties the hips' height to copy-rotations'")
REG_TIES_HIPS_HEIGHT = True
#: the jerk budget's allowance for round-off, a share of each budget
JERK_BUDGET_SLACK = 1e-4
#: the jerk budget's windows (seconds; ``SolverSettings.jerk_budget``, docs/solver.md "Jerk")
JERK_BUDGET_S = 1.0
#: the share of a window's budget over which its hinge rounds off (``losses.jerk_excess_loss``'s ``knee``)
JERK_BUDGET_KNEE = 0.5
#: the key vertices' and body points' jerk budgets are also at most the source's own jerk there × h_tgt / h_src
#: (False: copy-rotations' alone)
JERK_BUDGET_SOURCE = True
#: the jerk budget's weight × this in a point's windows where the source's own jerk there (× h_tgt / h_src) caps its
#: budget below copy-rotations' (JERK_BUDGET_SOURCE): where the target's proportions make copy-rotations jerkier than
#: the source, the solve is held to the source's smoothness more firmly (1: every window alike; docs/solver.md "Jerk")
JERK_BUDGET_CAPPED_GAIN = 1.5
#: L_smooth's added jerk of the sole points beside the key vertices', × this (no key vertex sits on the toes)
SMOOTH_SOLES = 1.0
#: L_smooth's added jerk of the body points (the capsules' ends, at the joints), × this (0: off; measured, the
#: jerk budget does better: docs/solver.md "Jerk")
SMOOTH_JOINTS = 0.0
#: the hips offset's jerk in L_smooth, × this, once per key vertex and sole point
SMOOTH_ROOT = 3.0
#: "added": L_smooth charges the jerk each point adds to copy-rotations'; "absolute": the jerk itself (the
#: printed L_smooth, for experiments; docs/solver.md)
SMOOTH_MODE = "added"
#: the floor of L_sliding's reference scale, in h_c / s of sliding (docs/solver.md "Balancing")
SLIDING_FLOOR = 0.1
#: L_dist's weight × (1 + CONTACT_FOCUS · W_src): the source's contacts matched closer than its far pairs
CONTACT_FOCUS = 3.0
#: the contact state (``SolverSettings.contact_state``) keeps each pair as far from d_min as the source, up to
#: this share of d_min (docs/solver.md "Pair terms: the contact state")
CONTACT_MARGIN = 0.1
#: pair distances and penetrations compared scaled by h_tgt / h_src (False: raw, the paper's form; a scaled copy
#: of the source then pays for its size)
SCALE_PAIR_TERMS = True
#: where a fitted source body (a skeleton-only source) holds a key vertex behind another's surface, L_pen only
#: keeps the target's from being behind it: the overlap is the fit's, not the capture's (docs/solver.md)
FITTED_PEN_SURFACE = True
#: where a fitted source body holds a key vertex behind another's surface, L_dist only keeps the target's pair at
#: least as far apart as the source's, never pulls it closer: the overlap is the fit's (docs/solver.md)
FITTED_DIST_APART = True
#: a fitted source's key vertex behind a hand's surface (``surface.THIN_PARTS``), where the surface barrier reads the
#: two segments' mesh (``surface.seen_pairs``), puts no L_pen on the target's: the mesh's depth keeps it out, not a
#: half-space that lies past the hand (L_dist keeps FITTED_DIST_APART's rule there; docs/solver.md "Pair terms")
FITTED_PEN_ON_MESH = True
#: the same for a captured source body's overlaps (skinned). Off: hands press less into each other, but a same-body
#: retarget drifts and reports conflicts (docs/decisions.md "A captured body's overlaps are still matched by L_dist")
CAPTURED_DIST_APART = False


#: the sole points' floor barrier × (1 + (SOLE_FLOOR_GAIN − 1) α²) (1: off; ramped, since at full strength from the
#: first step it lifts a body whose copy-rotations feet start under the floor far above it; in α², so that the
#: objective stays quadratic in α, as Progress.relative's yardstick needs). docs/solver.md "Floor terms",
#: docs/decisions.md "The sole points' floor barrier ten times stronger" (10 000 costs the stairs their feet and a
#: re-solve its optimum; 10, the default since 2026-11-27)
SOLE_FLOOR_GAIN = 10.0


class Objective:
    """The terms of one solve.

    Args:
        settings: SolverSettings.
        src_p, src_n: (T, N, 3) source key-vertex positions and unit normals (world, fixed).
        src_ground: the source's floor: a level, or a (T, 1) tensor of levels per frame.
        h_src, h_tgt: the characters' heights; fps: frame rate.
        limbs: (N,) limb of each key vertex (for per-part factors and the allowed pairs).
        feet: the FootModel, or None.
        source_fitted: the source's body is a fitted template (``SkinnedMesh.fitted``): with
            FITTED_PEN_SURFACE an entry it holds behind a surface (M_pen^src < 0) only keeps the target's key
            vertex from being behind it (``losses.pen_loss``), and L_dist the pair from being closer than the
            source's (``FITTED_DIST_APART``).
        head: the head's attitude term (``head.HeadAttitude``, anchored at ``set_initial``; reported in L_reg), or
            None.
        body_rows: how many of the carried body points L_smooth and the jerk budget read (None: all).
        ground: the target's ground: the level 0, or a terrain f(x, y) (``SolveJob(terrain=...)``).
        reg_lift: (T,) metres, how far L_reg's anchor rises where the source's floor drifts
            (``root_start.floor_drift_lift``), or None.
    """

    def __init__(self, settings, src_p, src_n, src_ground, h_src: float, h_tgt: float, fps: float, limbs,
                 feet=None, source_fitted: bool = False, head=None, body_rows: int = None, ground=0.0, reg_lift=None):
        s = settings
        #: the body points L_smooth and the jerk budget read: the first ``body_rows`` carried points (the capsule ends
        #: and bulge points; the surface barrier's probes and field frames, which follow, are the barrier's alone)
        self.body_rows = body_rows
        self.settings = s
        self.h_src, self.h_tgt, self.fps = float(h_src), float(h_tgt), float(fps)
        #: L_smooth's ε (m/s³): a 10 µm third difference, below float32 noise of visible motion, above round-off
        self.jerk_eps = 1e-5 * self.fps ** 3
        self.ground = ground
        self.limbs = tuple(limbs)
        self.feet = feet
        dt, dev = src_p.dtype, src_p.device
        self.dtype, self.device = dt, dev
        self.src_p, self.src_n = src_p, src_n
        self.src_h = height(src_p, src_ground)
        self.src_vel = sliding(src_p, self.fps)
        self.wf_src = floor_weight(self.src_h, MIN_FRACTION * self.h_src, MAX_FRACTION * self.h_src)
        # what the target's heights / horizontal velocities are compared with: the source's scaled to the target's
        # height (docs/solver.md "Floor terms"); a source vertex under the floor at floor level (its penetration is
        # not copied)
        ratio = self.h_tgt / self.h_src
        self.ratio = ratio
        self.src_h_cmp = self.src_h.clamp(min=0.0) * ratio
        self.src_vel_cmp = self.src_vel * ratio
        self.vertex_scale = self._vertex_scales()
        mask = allowed_pairs(self.limbs, None)
        N = len(self.limbs)
        self.pairs = ActivePairs(src_p, src_n, np.full(N, self.h_src), np.full(N, self.h_tgt), mask,
                                 scale=SCALE_PAIR_TERMS)
        self.surface_pen = bool(source_fitted and FITTED_PEN_SURFACE)
        self.apart = (self.surface_pen and FITTED_DIST_APART) or (not source_fitted and CAPTURED_DIST_APART)
        self.pairs_allowed = int(mask.sum())
        self.reg_free = torch.as_tensor([1.0, 1.0, 0.0 if REG_TIES_HIPS_HEIGHT else 1.0], dtype=dt, device=dev)
        #: (T, 3) the rise of L_reg's anchor (``reg_lift`` on z; untied, the hips' height is read past anyway), or None
        self.reg_lift = None if reg_lift is None or not REG_TIES_HIPS_HEIGHT else \
            torch.as_tensor(np.asarray(reg_lift)[:, None] * [0.0, 0.0, 1.0], dtype=dt, device=dev)
        # L_smooth's and the pair terms' constants as they are at the set-up (an experiment patches them first)
        self.smooth_weights = {"p": 1.0, "sole": SMOOTH_SOLES, "body": SMOOTH_JOINTS}
        self.smooth_root, self.contact_focus, self.contact_margin = SMOOTH_ROOT, CONTACT_FOCUS, CONTACT_MARGIN
        if SMOOTH_MODE not in ("added", "absolute"):
            raise CoreError(f"SMOOTH_MODE must be 'added' or 'absolute', not '{SMOOTH_MODE}'.")
        self.absolute_jerk = SMOOTH_MODE == "absolute"
        self.p_init = self.jerk_ref = self.sole_jerk_init = self.body_jerk_init = self.jerk_budgets = None
        self.jerk_gains = None
        #: ``surface.SurfaceGate`` of the contact state (CONTACT_HELD_ON_SURFACE), set by a job with a surface barrier
        self.surface_gate = None
        #: (N, N) bool ``surface.seen_pairs`` (FITTED_PEN_ON_MESH), set by a job with a surface barrier, or None
        self.pen_seen = None
        self.scales = None
        #: the head's attitude term (``head.HeadAttitude``), or None
        self.head = head

    def with_settings(self, settings) -> "Objective":
        """A copy at other ``settings`` whose per-part weights may differ (``core.solver.continued``): the
        source's descriptors, the foot model and the pair caches are shared, the per-key-vertex multipliers are
        computed again; call ``set_initial`` on it for its reference scales."""
        out = copy.copy(self)
        out.settings = settings
        out.vertex_scale = out._vertex_scales()
        return out

    # -- set-up at the initial state -------------------------------------------------------------------------

    def set_initial(self, p_init: torch.Tensor, n_init: torch.Tensor, sole_init, body_init=None, src_body=None):
        """The copy-rotations key vertices (T, N, 3), sole points (T, S, 3) or None and body points (T, P, 3) or
        None: the regularisation's anchor, the added-jerk references, and the reference scales of every term
        (α = 0). ``src_body``: the source's body points and which have one (``capsules.source_body_points``), or
        None: with JERK_BUDGET_SOURCE they cap the body points' jerk budget as the source's key vertices cap
        the key vertices'."""
        s = self.settings
        T = p_init.shape[0]
        self.p_init = p_init
        if self.surface_gate is not None:   # it starts empty: a re-solve that continues a set-up starts as a new one
            self.surface_gate.reset()
        if self.body_rows is not None:
            body_init = None if body_init is None else body_init[:, :self.body_rows]
            src_body = None if src_body is None else (src_body[0][:, :self.body_rows], src_body[1][:self.body_rows])
        if self.head is not None:          # the head's attitude: copy-rotations' head frames
            self.head = self.head.anchored(p_init)
        #: L_smooth's reference (T−3, N, 3): copy-rotations' jerk
        self.jerk_ref = None if T < 4 else jerk(p_init, self.fps)
        # copy-rotations' jerk of the sole points (T−3, S, 3) and body points (T−3, P, 3), where L_smooth reads it
        read, w = T >= 4 and not self.absolute_jerk, self.smooth_weights
        self.sole_jerk_init = jerk(sole_init, self.fps) if sole_init is not None and read and w["sole"] else None
        self.body_jerk_init = jerk(body_init, self.fps) if body_init is not None and read and w["body"] else None
        #: the jerk budget's windows and per point (key vertices, sole points, body points) its budget (W, ·), or None
        self.budget_window = max(1, int(round(JERK_BUDGET_S * self.fps)))
        self.jerk_budgets = self.jerk_gains = None
        if s.jerk_budget and T >= 4:       # copy-rotations' jerk there, nor the source's own (JERK_BUDGET_SOURCE)
            inits = (p_init, sole_init, body_init)
            own = [None if x is None else jerk_totals(x, self.fps, self.budget_window, self.jerk_eps) for x in inits]
            self.jerk_budgets = jerk_budgets(inits, self.fps, self.budget_window, self.jerk_eps,
                                             (self.src_p, src_body) if JERK_BUDGET_SOURCE else None,
                                             self.h_tgt / self.h_src, JERK_BUDGET_SLACK, totals=own)
            #: the budgets side by side (W, N + S + P), as ``_smooth`` sums them
            self.jerk_budget_all = torch.cat([b for b in self.jerk_budgets if b is not None], 1)
            if JERK_BUDGET_SOURCE and JERK_BUDGET_CAPPED_GAIN != 1.0:
                #: per point and window the budget's weight factor (W, ·), beside each budget, and side by side
                self.jerk_gains = tuple(None if b is None else capped_gain(b, o * (1.0 + JERK_BUDGET_SLACK),
                                                                           JERK_BUDGET_CAPPED_GAIN)
                                        for b, o in zip(self.jerk_budgets, own))
                self.jerk_gain_all = torch.cat([g for g in self.jerk_gains if g is not None], 1)
        if self.feet is not None and sole_init is not None:
            self.feet.set_initial(p_init, sole_init)
        with torch.no_grad():
            self.init_pairs = self.pairs.active(None, 0.0)
            zero = torch.zeros((T, 3), dtype=self.dtype, device=self.device)
            raw = self.raw_terms(p_init, n_init, 0.0, self.init_pairs, sole_init, zero, body=body_init)
        self.scales = self._reference_scales(raw)
        return raw

    def _vertex_scales(self) -> dict:
        """{term: (N,) multiplier or None} from settings.part_weights {(part, term): factor} (checked by
        ``settings.part_weights_from``), for every term of PART_WEIGHT_TERMS ("partner" is read by the joint solve's
        ``partners.PartnerObjective``)."""
        out = {t: None for t in PART_WEIGHT_TERMS}
        limbs = np.asarray(self.limbs)
        for (part, term), factor in part_weights_from(self.settings.part_weights).items():
            m = out[term] if out[term] is not None else np.ones(len(limbs))
            m = m.copy()
            m[limbs == part] *= float(factor)
            out[term] = m
        return {t: (None if m is None else torch.as_tensor(m, dtype=self.dtype, device=self.device))
                for t, m in out.items()}

    def _reference_scales(self, raw: dict) -> dict:
        """Reference scale of each term: its initial value, floored by the value a small uniform residual
        would give (docs/solver.md "Balancing")."""
        h = self.h_tgt
        T, N = self.p_init.shape[:2]
        ps = self.init_pairs
        w2 = float(ps.w_src.square().sum()) if len(ps) else 0.0
        wd2 = float(focused_square(ps.w_src, self.contact_focus).sum()) if len(ps) else 0.0
        wf2 = float(self.wf_src.square().sum())
        ref = 0.01 * h   # 1 % of the target's height
        floors = {
            "reg": T * N * ref ** 2,
            "smooth": max(T - 3, 1) * N * 1.0 * h,            # 1 h_c / s³ per key vertex and frame
            "dist": wd2 * ref ** 2,
            "dir": w2 * (1.0 - math.cos(math.radians(10.0))) ** 2,
            "pen": 2.0 * w2 * ref ** 2,
            "height": wf2 * ref ** 2,
            "sliding": wf2 * (SLIDING_FLOOR * h) ** 2,        # foot sliding, h_c / s
        }
        out = {}
        with torch.no_grad():
            raw = dict(raw, smooth=float(smooth_loss(self.p_init, self.fps)))  # absolute initial jerk
        for k in TERMS:
            init = 0.0 if k == "reg" else float(raw[k])
            out[k] = max(init, floors[k], 1e-12)
        # floor barrier: fixed scale, "1" = one point per frame 1 % h_c below the floor
        out["floor"] = T * ref ** 2
        if "lock" in raw:
            out["lock"] = self.feet.lock_scale(raw["lock"])
        return out

    # -- evaluation ------------------------------------------------------------------------------------------

    def raw_terms(self, p, n, alpha: float, pairset, sole, root_world, dense: dict = None, body=None) -> dict:
        """Unweighted, unnormalised terms at key-vertex positions p (T, N, 3), normals n (T, N, 3), sole points
        (T, S, 3) or None, with the hips moved by ``root_world`` (T, 3) metres from copy-rotations; ``dense``:
        ``dense_terms`` at the same arguments when the caller has them (a GPU's graph, core/solver/graphed.py);
        ``body``: the body points (T, P, 3) or None."""
        out = self.dense_terms(p, alpha, sole, root_world, body) if dense is None else dict(dense)
        out.update(self._pair_terms(p, n, alpha, pairset))
        return out

    def _smooth(self, p, sole, root_world, body) -> torch.Tensor:
        """L_smooth at key vertices p (T, N, 3), sole points (T, S, 3) or None, the hips' offset (T, 3) and body
        points (T, P, 3) or None: the added jerk of each kind of point, the hips' once per point, and the jerk
        budget's excess; one third difference of all the points together."""
        s = self.settings
        vs = self.vertex_scale
        eps = self.jerk_eps
        if p.shape[0] < 4:
            return p.sum() * 0.0
        absolute, weights = self.absolute_jerk, self.smooth_weights
        budgets = self.jerk_budgets or (None, None, None)
        # the points whose jerk some part reads, differentiated together: (T − 3, N + S + P, 3)
        kinds = [(k, x) for k, x, b in zip(("p", "sole", "body"), (p, sole, body), budgets)
                 if x is not None and (weights[k] or b is not None)]
        j_all = jerk(torch.cat([x for _, x in kinds], 1) if len(kinds) > 1 else p, self.fps)
        j = dict.fromkeys(("p", "sole", "body"))
        at = 0
        for k, x in kinds:
            j[k] = j_all[:, at:at + x.shape[1]]
            at += x.shape[1]
        out = smooth_loss(p, self.fps, vs["smooth"], eps=eps, reference=None if absolute else self.jerk_ref,
                          j=j["p"])
        if weights["sole"] and sole is not None:
            # the sole points (the toes, the heels) move most where the foot terms correct a frame, and no key
            # vertex sits on the toes: their added jerk too (docs/solver.md "Jerk")
            out = out + weights["sole"] * smooth_loss(sole, self.fps, None, eps=eps, j=j["sole"],
                                                  reference=None if absolute else self.sole_jerk_init)
        if self.smooth_root:
            # the hips' offset from copy-rotations moves every point with it: its jerk is added to all of them
            # unless a limb takes it back, so it counts once per point (docs/solver.md "Jerk")
            points = p.shape[1] + (0 if sole is None else sole.shape[1])
            out = out + self.smooth_root * points * smooth_loss(root_world[:, None, :], self.fps, None, eps=eps)
        if weights["body"] and body is not None:
            # the joint-jerk measure reads the joints, between the key vertices: the body points (the capsules'
            # ends, at the joints) add their added jerk too (docs/solver.md "Jerk")
            out = out + weights["body"] * smooth_loss(body, self.fps, None, eps=eps, j=j["body"],
                                                      reference=None if absolute else self.body_jerk_init)
        if self.jerk_budgets is not None:
            # no point spends more jerk in a window than copy-rotations' there (docs/solver.md "Jerk"):
            # every kind of point that has a budget, in one sum
            have = [(j[k], b) for k, b in zip(("p", "sole", "body"), budgets) if j[k] is not None and b is not None]
            every = len(have) == len(kinds)         # (the usual case: the budgets' kinds are the points read)
            jb = j_all if every else torch.cat([x for x, _ in have], 1)
            all_kinds = len(have) == sum(b is not None for b in budgets)
            budget = self.jerk_budget_all if all_kinds else torch.cat([b for _, b in have], 1)
            scale = vs["smooth"]
            if scale is not None and jb.shape[1] > scale.shape[0]:
                scale = torch.cat([scale, scale.new_ones(jb.shape[1] - scale.shape[0])])
            if self.jerk_gains is not None:    # firmer where the source caps the budget (JERK_BUDGET_CAPPED_GAIN)
                gains = zip(("p", "sole", "body"), self.jerk_gains)
                gain = self.jerk_gain_all if all_kinds else torch.cat(
                    [g for k, g in gains if g is not None and j[k] is not None], 1)
                scale = gain if scale is None else gain * scale
            out = out + s.jerk_budget * jerk_excess_loss(p, self.fps, budget, self.budget_window, scale,
                                                         eps=eps, j=jb, knee=JERK_BUDGET_KNEE)
        return out

    def dense_terms(self, p, alpha, sole, root_world, body=None) -> dict:
        """The terms over every frame's key vertices, sole points and body points (reg, smooth, height, floor,
        sole_contact, sliding, lock): shapes fixed for the whole solve, unlike the pair terms', so on a GPU they are
        recorded in the CUDA graph with the pose map (``graphed.py``: nothing here may read a value back to Python);
        ``alpha`` a float or a 0-dim tensor; ``body`` (T, P, 3) or None."""
        vs = self.vertex_scale
        ht = self.h_tgt
        if body is not None and self.body_rows is not None:
            body = body[:, :self.body_rows]
        out = {}
        shift = root_world * self.reg_free    # what L_reg reads past: the hips' path, and their height if untied
        if self.reg_lift is not None:         # or the rise that puts copy-rotations back on a drifting floor
            shift = shift + self.reg_lift
        out["reg"] = reg_loss(p - shift[:, None, :], self.p_init, vs["reg"])
        if self.head is not None:
            out["head"] = self.head.loss(p)
        out["smooth"] = self._smooth(p, sole, root_world, body)
        # height & sliding (dense over key vertices: (T, N))
        h = height(p, self.ground)
        wf = self.wf_src + alpha * floor_weight(h, MIN_FRACTION * ht, MAX_FRACTION * ht).detach()
        # L_height = floor barrier + W_floor-weighted match; the barrier (key vertices and sole points) is
        # balanced on its own scale (docs/solver.md "Balancing") and reported inside 'height'
        feet = self.feet
        hm = None if feet is None else feet.height_match_w
        wh = wf if hm is None else wf * hm
        out["height"] = height_loss(h, self.src_h_cmp, wh, vs["height"]) - floor_barrier(h, vs["height"])
        out["floor"] = floor_barrier(h, vs["height"])
        hs = lows = None
        if sole is not None:
            hs = height(sole, self.ground)                                          # (T, S)
            a = torch.as_tensor(alpha, dtype=hs.dtype, device=hs.device)     # α as a graph holds it: the same rounding
            out["floor"] = out["floor"] + (1.0 + (SOLE_FLOOR_GAIN - 1.0) * a * a) * floor_barrier(hs)
            if feet is not None and feet.contact_w is not None:
                lows = feet.sole_lows(sole, hs)                                     # (T, 2)
                out["sole_contact"], hgt = feet.contact_terms(h, lows, vs["height"], feet.relief(p, sole, hs))
                out["height"] = out["height"] + hgt
        vel = sliding(p, self.fps)
        out["sliding"] = sliding_loss(vel, self.src_vel_cmp, wf[:-1], vs["sliding"])
        if feet is not None and feet.lock_w is not None and sole is not None and sole.shape[0] > 1:
            out["lock"] = feet.lock_loss(sole, hs, lows)
        return out

    def _pair_terms(self, p, n, alpha: float, pairset) -> dict:
        """L_dist, L_dir, L_pen on the sparse active set of (frame, i, j) entries (``weights.ActivePairs``)."""
        vs = self.vertex_scale

        def pscale(term):
            m = vs[term]
            return None if m is None else 0.5 * (m[pairset.i] + m[pairset.j])
        held = None
        if self.surface_gate is not None and self.settings.contact_state and len(pairset):
            held = self.surface_gate.held(pairset)
        seen = None if self.pen_seen is None else (self.pen_seen[pairset.i, pairset.j],
                                                   self.pen_seen[pairset.j, pairset.i])
        return pair_terms(p, n, alpha, pairset, {t: pscale(t) for t in ("dist", "dir", "pen")},
                          self.contact_focus, self.surface_pen,
                          self.contact_margin if self.settings.contact_state else None, held, self.apart, seen)

    def weighted(self, raw: dict) -> dict:
        """{term: weight · raw / scale}; the floor barrier and the foot contact are reported inside 'height', the
        foot lock inside 'sliding' (each is about the same thing)."""
        s = self.settings
        out = {k: s.weight(k) * raw[k] / self.scales[k] for k in TERMS}
        out["height"] = out["height"] + s.weight("height") * raw["floor"] / self.scales["floor"]
        if "head" in raw:       # the head's attitude (head.py: on its own fixed scale), reported in L_reg
            out["reg"] = out["reg"] + s.w_head * raw["head"]
        if "sole_contact" in raw:   # foot contact: the lowest sole points at the source feet's heights, same scale
            out["height"] = out["height"] + (s.weight("height") * s.foot_contact_weight * raw["sole_contact"]
                                             / self.scales["floor"])
        self.last_contact_state = None     #: the weighted contact state of this call (0-dim), or None
        if "state" in raw:      # the contact state, on L_dist's scale (docs/solver.md "Pair terms")
            self.last_contact_state = s.weight("dist") * s.contact_state * raw["state"] / self.scales["dist"]
            out["dist"] = out["dist"] + self.last_contact_state
        if "lock" in raw:
            out["sliding"] = out["sliding"] + s.weight("sliding") * s.foot_lock * raw["lock"] / self.scales["lock"]
        return out


def start_objective(start_loss: tuple, alpha: float) -> float:
    """Copy-rotations' objective at ``alpha`` from its values at α = 0, ½ and 1 (``SolveJob.start_loss``): the
    parabola through the three (exact, every term being of degree ≤ 2 in α)."""
    s0, sh, s1 = start_loss
    a = float(alpha)
    return 2 * (a - 0.5) * (a - 1) * s0 - 4 * a * (a - 1) * sh + 2 * a * (a - 0.5) * s1
