"""Foot contact and foot lock: the solver's foot model (docs/solver.md "Foot contact", "Foot lock").

ReConForM's L_height and L_sliding act on key vertices near the floor. Bodies differ in how far a key vertex
sits above the sole, so where the source's foot is grounded the model matches the *sole* instead: the target's
lowest sole point is put at the source foot's height above its floor (scaled like the other heights), and
that foot's key vertices keep their copy-rotations height above that point instead of the source's raw
heights. Where the source's foot is locked (its lowest point stands still near its floor), the target's sole
points near its floor must move as the source foot does (nearly not at all).

Source side: each foot's soft lowest point and its windowed horizontal velocity (``core.contacts.feet``), read once from
the source's ``ClipTrack``. Target side: its sole points (``core.contacts.feet.spread_sole_points``), evaluated with the
key vertices at every step.
"""

from __future__ import annotations

import numpy as np
import torch

from ..descriptors.pose import height
from ..contacts.feet import LOCK_WINDOW_S, SOFT_LOW, SOLE_BAND, soft_lowest, spread_sole_points, window_bounds
from ..character.track import ClipTrack
from ..types import Motion
from ..descriptors.weights import MAX_FRACTION


#: frames sampled to choose the target's sole points
SOLE_FRAMES = 400
#: sole points per foot under the floor barrier and the foot terms (0: key vertices only; docs/solver.md "Ground")
SOLE_POINTS = 40
#: a source foot whose lowest point is within CONTACT_MIN of h_c of its ground is in contact (weight 1),
#: fading to 0 at CONTACT_MAX (twice the grounded band of docs/metrics.md, 1 %: docs/solver.md "Foot contact")
CONTACT_MIN, CONTACT_MAX = 0.02, 0.04
#: a source foot whose lowest point moves slower than LOCK_MIN of h_c per second (over core.contacts.feet.LOCK_WINDOW_S,
#: as the foot-locked metric of docs/metrics.md) is locked (weight 1), fading to 0 at LOCK_MAX
LOCK_MIN, LOCK_MAX = 0.005, 0.01
#: where the source foot has a lock weight λ, the target sole's windowed speed above this share of h_c per s is
#: charged too, × (1 − λ), in the lock term (0: off; measured: docs/solver.md "A speed cap on the locked feet")
LOCK_CAP = 0.008


def target_soles(character, motion: Motion) -> tuple:
    """(vertex ids (S,), foot (S,) 0 left / 1 right): ``character``'s ``SOLE_POINTS`` sole points per foot, chosen on
    ``motion`` (copy-rotations': docs/solver.md "Ground") at ``SOLE_FRAMES`` evenly sampled frames; none at 0."""
    if SOLE_POINTS <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    T = motion.num_frames
    frames = np.unique(np.linspace(0, T - 1, min(T, SOLE_FRAMES)).round().astype(np.int64))
    sampled = Motion(motion.rotations[frames], motion.locations[frames], motion.fps)
    return sole_points(ClipTrack(character, sampled), SOLE_POINTS)[:2]


def sole_points(track: ClipTrack, count: int, max_frames: int = None) -> tuple:
    """Up to ``count`` sole points per foot of a clip's character (``core.contacts.feet.spread_sole_points`` on at most
    ``max_frames`` evenly sampled frames): (vertex ids (S,), foot (S,) 0 left / 1 right, index of each point
    among its foot's vertices (S,))."""
    ch = track.character
    band = SOLE_BAND * float(ch.height) if ch.height else SOLE_BAND * 1.7
    T = track.num_frames
    frames = None
    if max_frames is not None and T > max_frames:
        frames = np.unique(np.linspace(0, T - 1, max_frames).round().astype(np.int64))
    ids, sides, local = [], [], []
    for k, fid in enumerate(track.foot_ids):
        if not len(fid):
            continue
        z = (track.foot_points[k] if frames is None else track.foot_points[k][frames])[..., 2]
        keep = spread_sole_points(z, ch.mesh.rest_verts[fid], band, count)
        ids.append(fid[keep])
        sides.append(np.full(len(keep), k, np.int64))
        local.append(keep)
    if not ids:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(ids), np.concatenate(sides), np.concatenate(local)


class FootModel:
    """The foot terms of one solve.

    Args:
        settings: SolverSettings (foot_contact_weight, foot_lock); the bands CONTACT_MIN / _MAX and
            LOCK_MIN / _MAX, the cap LOCK_CAP.
        src_low: (T, 2) source feet's soft lowest points above the source's floor (metres; NaN: no foot).
        src_vel: (T, 2, 2) their horizontal velocities (m/s).
        sole_side: (S,) int64 0 / 1, the foot of each target sole point.
        keyvert_side: (N,) int64 foot of each target key vertex (-1 elsewhere).
        h_src, h_tgt: heights h_c; ratio: what source heights and speeds are scaled by (h_tgt / h_src or 1).
        fps: frame rate; dtype, device: the solve's.
        ground: the target's ground: the level 0, or a terrain f(x, y) (``SolveJob(terrain=...)``).
    Attributes (None where off): contact_w (T, 2), contact_h (T, 2), height_match_w (T, N); lock_w (T, 2),
        lock_vel (T, 2, 2); cap_w (T, 2) the weight of the target sole's speed cap (``LOCK_CAP``: 1 − lock_w where
        lock_w > 0, else 0) and cap (m/s).
    """

    def __init__(self, settings, src_low: np.ndarray, src_vel: np.ndarray, sole_side: np.ndarray,
                 keyvert_side: np.ndarray, h_src: float, h_tgt: float, ratio: float, fps: float, dtype, device,
                 ground=0.0):
        self.settings = settings
        self.h_src, self.h_tgt, self.fps = float(h_src), float(h_tgt), float(fps)
        self.ground = ground
        self.sole_side = torch.as_tensor(sole_side, device=device)
        self.contact_w = self.contact_h = self.height_match_w = None
        self.lock_w = self.cap_w = None
        self.cap_init = 0.0               # the speed cap's share of the initial lock term (``set_initial``)
        self.foot_rel_init = None
        T = src_low.shape[0]
        if settings.foot_contact_weight > 0:
            # matched not below the floor, scaled like the other heights; a source foot sunk deeper than the
            # band is not taken as standing on this floor (its clip's ground lies elsewhere)
            self.contact_h = torch.as_tensor(np.nan_to_num(np.clip(src_low, 0.0, None)) * ratio, dtype=dtype,
                                             device=device)                              # (T, 2)
            low = np.nan_to_num(np.abs(src_low), nan=np.inf)
            lo_, hi_ = (float(x) * self.h_src for x in (CONTACT_MIN, CONTACT_MAX))
            g = np.clip(1.0 - (low - lo_) / max(hi_ - lo_, 1e-12), 0.0, 1.0)
            self.contact_w = torch.as_tensor(g, dtype=dtype, device=device)              # (T, 2)
            m = np.ones((T, len(keyvert_side)))
            for k in (0, 1):
                m[:, keyvert_side == k] = 1.0 - g[:, k:k + 1]
            self.height_match_w = torch.as_tensor(m, dtype=dtype, device=device)         # (T, N)
            self.keyvert_side = torch.as_tensor(keyvert_side, device=device)             # (N,) -1/0/1
        if settings.foot_lock > 0:
            speed = np.linalg.norm(src_vel, axis=-1)                                      # (T, 2)
            lo_, hi_ = (float(x) * self.h_src for x in (LOCK_MIN, LOCK_MAX))
            lk = np.clip(1.0 - (speed - lo_) / max(hi_ - lo_, 1e-12), 0.0, 1.0)
            near = np.nan_to_num(np.abs(src_low), nan=np.inf) <= MAX_FRACTION * self.h_src
            lk = np.where(near & np.isfinite(speed), lk, 0.0)
            self.lock_w = torch.as_tensor(lk, dtype=dtype, device=device)                 # (T, 2)
            if LOCK_CAP > 0:
                # where the source foot has a lock weight, the cap takes over as that weight fades (1 − λ): at the
                # top of the band, where the velocity match holds loosely; nothing where λ = 1
                self.cap_w = torch.as_tensor(np.where(lk > 0, 1.0 - lk, 0.0), dtype=dtype, device=device)  # (T, 2)
                self.cap = float(LOCK_CAP) * self.h_tgt
            self.lock_vel = torch.as_tensor(np.nan_to_num(src_vel) * ratio, dtype=dtype, device=device)
            lo, hi = window_bounds(T, self.fps, LOCK_WINDOW_S)
            self._lock_lo = torch.as_tensor(lo, device=device)
            self._lock_hi = torch.as_tensor(hi, device=device)
            self._lock_dt = torch.as_tensor(np.maximum(hi - lo, 1) / self.fps, dtype=dtype, device=device)

    def events(self) -> np.ndarray:
        """Sorted frames where a source foot's contact or lock weight crosses ½ (a foot landing or lifting off,
        a lock starting or ending): where the residual needs its finest knots (``Parametrisation``)."""
        out = set()
        for w in (self.contact_w, self.lock_w):
            if w is not None and w.shape[0] > 1:
                on = (w >= 0.5).cpu().numpy()
                out.update(np.nonzero((on[1:] != on[:-1]).any(1))[0] + 1)
        return np.asarray(sorted(out), dtype=np.int64)

    def sole_lows(self, sole: torch.Tensor, hs: torch.Tensor = None) -> torch.Tensor:
        """Height of each foot's lowest sole point (T, 2) from sole points (T, S, 3): a soft minimum
        (``core.contacts.feet.soft_lowest``, temperature SOFT_LOW × h_c), so that on a flat sole, where several points
        are nearly as low, the gradient is shared instead of jumping from one point to the next. ``hs``: the sole
        points' heights (T, S) when the caller has them."""
        hs = height(sole, self.ground) if hs is None else hs
        big = torch.finfo(hs.dtype).max
        return torch.stack([soft_lowest(torch.where(self.sole_side == k, hs, big), SOFT_LOW * self.h_tgt)
                            for k in (0, 1)], -1)

    def relief(self, p: torch.Tensor, sole: torch.Tensor, hs: torch.Tensor):
        """(T, N) terrain height under each foot key vertex minus the terrain under its foot's support point
        (0 off the feet), or None on a level ground. Added to the key vertices' heights above their sole, it
        measures them in z: a foot that overhangs a step's edge keeps its shape instead of reaching down to the
        lower tread. p: (T, N, 3) key vertices; sole: (T, S, 3) sole points and hs (T, S) their heights. The
        support point's terrain is the sole points' terrain averaged with the soft-minimum's weights."""
        if not callable(self.ground):
            return None
        f_kv = self.ground(p[..., 0], p[..., 1])                                         # (T, N)
        f_s = sole[..., 2] - hs                                                          # (T, S)
        tau = SOFT_LOW * self.h_tgt
        support = []
        for k in (0, 1):
            logits = torch.where(self.sole_side == k, -hs / tau, torch.full_like(hs, -torch.inf))
            support.append((torch.softmax(logits, -1) * f_s).sum(-1))
        idx = self.keyvert_side.clamp(min=0)
        corr = f_kv - torch.stack(support, -1).index_select(1, idx)
        return torch.where(self.keyvert_side >= 0, corr, torch.zeros_like(corr))

    def foot_relative(self, h: torch.Tensor, lows: torch.Tensor, relief: torch.Tensor = None) -> torch.Tensor:
        """Heights (T, N) of the key vertices above their own foot's lowest sole point (0 off the feet);
        ``relief``: the ``relief`` correction on a terrain."""
        idx = self.keyvert_side.clamp(min=0)
        rel = h - lows.index_select(1, idx)
        if relief is not None:
            rel = rel + relief
        return torch.where(self.keyvert_side >= 0, rel, torch.zeros_like(rel))

    def set_initial(self, p_init: torch.Tensor, sole_init: torch.Tensor):
        """Remember the copy-rotations heights of the foot key vertices above their sole (``p_init`` (T, N, 3)
        key vertices, ``sole_init`` (T, S, 3) sole points of the initial motion)."""
        if self.contact_w is not None:
            h, hs = height(p_init, self.ground), height(sole_init, self.ground)
            self.foot_rel_init = self.foot_relative(h, self.sole_lows(sole_init, hs), self.relief(p_init, sole_init,
                                                                                                  hs))
        if self.cap_w is not None and sole_init.shape[0] > 1:
            with torch.no_grad():      # the cap's share of the initial lock term (summed as lock_loss sums it)
                match, cap = self.lock_terms(sole_init)
                self.cap_init = float((match + cap) - match)

    def contact_terms(self, h: torch.Tensor, lows: torch.Tensor, scale=None, relief=None):
        """(floor term, height term) of foot contact: Σ (w (lowest sole point − source foot height))², and
        Σ ((1 − height match weight)(height above the sole − copy-rotations'))² over the foot key vertices.
        h: (T, N) key-vertex heights; lows: (T, 2) ``sole_lows`` of the sole points; scale: optional (N,)
        per-key-vertex factors; relief: (T, N) ``relief`` on a terrain."""
        floor = (self.contact_w * (lows - self.contact_h)).square().sum()
        rel = self.foot_relative(h, lows, relief)
        r2 = ((1.0 - self.height_match_w) * (rel - self.foot_rel_init)).square()
        return floor, (r2 if scale is None else r2 * scale).sum()

    def lock_loss(self, sole: torch.Tensor, hs: torch.Tensor = None, lows: torch.Tensor = None) -> torch.Tensor:
        """The foot-lock term: ``lock_terms``' velocity match, plus its speed cap where ``LOCK_CAP`` is on."""
        match, cap = self.lock_terms(sole, hs, lows)
        return match if cap is None else match + cap

    def lock_terms(self, sole: torch.Tensor, hs: torch.Tensor = None, lows: torch.Tensor = None) -> tuple:
        """Foot lock, (velocity match, speed cap or None). The match: Σ over frames and sole points of lock weight ×
        |horizontal velocity − the source foot's|² (m²/s²; the source's lowest foot point's velocity, scaled like
        L_sliding's: nearly 0 where it is locked).

        sole: (T, S, 3) sole points; hs: their heights (T, S) and lows: ``sole_lows`` (T, 2) when the caller
        has them. The velocity is the mean over LOCK_WINDOW_S (central difference, as the source's speed),
        which ignores the capture jitter that a smooth residual cannot remove anyway. A point counts where it
        is within 1 % h_c of its foot's lowest sole point (the part of the sole that carries the weight;
        stop-gradient), times the source foot's lock weight. The speed cap (``LOCK_CAP``; None when off): Σ cap
        weight × (speed − cap)² over the same points where their speed is above the cap (``cap_w``: the lock
        weight's complement on the frames that have one)."""
        hs = height(sole, self.ground) if hs is None else hs                              # (T, S)
        side = self.sole_side
        with torch.no_grad():
            lows = self.sole_lows(sole, hs) if lows is None else lows.detach()                # (T, 2)
            rho = (1.0 - (hs - lows.index_select(1, side)) / (0.01 * self.h_tgt)).clamp(0.0, 1.0)
            w = self.lock_w.index_select(1, side) * rho                                   # (T, S)
        d = sole.index_select(0, self._lock_hi)[..., :2] - sole.index_select(0, self._lock_lo)[..., :2]
        vt = d / self._lock_dt[:, None, None]                                             # (T, S, 2)
        v = vt - self.lock_vel.index_select(1, side)
        match = (w * v.square().sum(-1)).sum()
        if self.cap_w is None:
            return match, None
        over = (vt.square().sum(-1) + 1e-12).sqrt() - self.cap
        return match, (self.cap_w.index_select(1, side) * rho * over.clamp(min=0.0).square()).sum()

    def lock_scale(self, raw_lock: float) -> float:
        """Reference scale of the lock term: its initial value without the speed cap's share (so that the cap adds
        to the velocity match instead of diluting it), floored at 0.5 % h_c / s on every locked point."""
        w = float(self.lock_w.sum()) * max(int((self.sole_side == 0).sum()), 1)
        return max(float(raw_lock) - self.cap_init, w * (0.005 * self.h_tgt) ** 2, 1e-12)

