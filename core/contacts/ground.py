"""The source's ground (docs/solver.md "Ground"): where a source clip's floor is.

The target stands on world z = 0 (or a ``terrain.HeightField``). A source clip may float above z = 0,
stand sunk into it, or drift vertically over the clip (inertial capture, video capture, clips re-rooted by
hand). The solver reads the source's heights above its ground, so a wrong ground turns planted feet into
lifted ones or the reverse. Readings, all from the lowest foot point per frame:

- ``estimate_ground``: one level for the whole clip (a low percentile of the per-frame lowest foot point);
- ``track_ground``: one level per frame, following a slow drift (a running low percentile over a window of
  a few seconds picks the frames where a foot is down, then a local line through their lowest points);
- ``auto_ground``: z = 0 where the clip already stands on it (its estimated level within half the grounded
  band of 0, its tracked level drifting less than that), else the tracked level (the default, chosen by
  measurement: docs/solver.md "Ground");
- a number, or a ``(T,)`` array given by the caller.

``ground_levels`` turns a ``SolverSettings.source_ground`` value into a float or a ``(T,)`` array, reading
the clip's ``core.character.track.ClipTrack``. ``core.metrics.advice.floor_advice`` reads a solve's metrics and says
when another reading would suit the clip.
"""

from __future__ import annotations

import numpy as np

from ..errors import CoreError
from .feet import SIDES, window_bounds
from ..character.track import ClipTrack

#: one level for the clip: this percentile over frames of the lowest foot point (the inventory uses 3 %)
ESTIMATE_PERCENTILE = 3.0
#: drift tracking (``running_ground``): window, percentile of the rough level, band of the contact frames
TRACK_WINDOW_S = 2.0
TRACK_PERCENTILE = 5.0
TRACK_BAND_M = 0.02
#: ``track_ground``'s contact band as a share of the character's height h_c (2 cm at 1.7 m)
TRACK_BAND = 0.012
#: a foot slower than this share of h_c per second is still (the foot-locked metric's threshold)
LOCKED_SPEED = 0.01
#: ``planted_soles``: a planted foot's lowest vertex within PLANT_BAND of h_c of its 5th percentile, moving slower
#: than 1 % h_c/s (the foot-locked speed of docs/metrics.md); its soles are lifted when their heights over those
#: frames spread less than PLANT_SPREAD of h_c and stand within PLANT_MAX of h_c of z = 0
PLANT_BAND, PLANT_SPREAD, PLANT_MAX = 0.01, 0.005, 0.02
#: ``auto_ground``: the clip stands on z = 0 when its estimated level lies within AUTO_TOLERANCE of h_c of it and
#: its tracked level drifts less than that (half the grounded band of docs/metrics.md, 1 %)
AUTO_TOLERANCE = 0.005
#: share of h_c: a source stands on its floor at a frame where its lowest foot point is this close to it
STAND_BAND = 0.01
#: the values ``SolverSettings.source_ground`` accepts as text
GROUND_MODES = ("auto", "zero", "estimate", "track")


def estimate_ground(track: ClipTrack, percentile: float = ESTIMATE_PERCENTILE) -> float:
    """Ground level (world z, metres) of a clip from its lowest foot contacts.

    The lowest point of the feet is taken per frame (``ClipTrack.lowest_foot``, the feet of ``core.contacts.feet``); the
    ground is the ``percentile`` of those minima over the clip, which ignores a few airborne or glitched frames.
    """
    return float(np.percentile(track.lowest_foot, percentile))


def _windows(x: np.ndarray, k: int) -> np.ndarray:
    """(T, 2k + 1) centred windows of ``x`` (T,), NaN beyond the clip's ends."""
    padded = np.concatenate([np.full(k, np.nan), x, np.full(k, np.nan)])
    return np.lib.stride_tricks.sliding_window_view(padded, 2 * k + 1)


def window_percentile(x: np.ndarray, k: int, q: float) -> np.ndarray:
    """(T,) the ``q`` percentile of ``x`` (T,) over the centred window of frames t − k .. t + k clamped to the
    clip: ``np.nanpercentile(_windows(x, k), q, axis=1)`` (its default 'linear' method, the same arithmetic), all
    rows at once instead of numpy's row-by-row loop over windows that hold NaN."""
    w = np.sort(_windows(np.asarray(x, dtype=np.float64), k), axis=1)          # the NaN beyond the clip last
    n = np.isfinite(w).sum(1)
    index = (n - 1) * (q / 100.0)
    below = np.floor(index)
    t = index - below
    rows = np.arange(len(w))
    a = w[rows, below.astype(np.int64)]
    b = w[rows, np.minimum(below.astype(np.int64) + 1, n - 1)]
    d = b - a
    return np.where(t >= 0.5, b - d * (1.0 - t), a + d * t)                    # numpy's _lerp


def _local_line(y: np.ndarray, w: np.ndarray, k: int) -> np.ndarray:
    """(T,) value at each frame t of the least-squares line through the samples ``y`` (T,) of weight ``w`` (T,)
    (0 or 1) on frames t − k .. t + k (clamped to the clip); the weighted mean where one frame or fewer
    carries weight, NaN where none does. A linear drift is followed exactly, the clip's ends included."""
    T = len(y)
    tau = np.arange(T, dtype=np.float64) - 0.5 * (T - 1)      # centred frame index: sums stay well scaled

    def window_sum(x):
        c = np.concatenate([[0.0], np.cumsum(x)])
        lo = np.clip(np.arange(T) - k, 0, T)
        hi = np.clip(np.arange(T) + k + 1, 0, T)
        return c[hi] - c[lo]

    s0, s1, s2 = window_sum(w), window_sum(w * tau), window_sum(w * tau * tau)
    sy, sty = window_sum(w * y), window_sum(w * tau * y)
    out = np.full(T, np.nan)
    has = s0 > 0.5
    out[has] = sy[has] / s0[has]
    det = s0 * s2 - s1 * s1
    line = has & (s0 > 1.5) & (det > 1e-9 * np.maximum(s0 * s2, 1e-300))
    slope = (s0[line] * sty[line] - s1[line] * sy[line]) / det[line]
    out[line] = (sy[line] + slope * (s0[line] * tau[line] - s1[line])) / s0[line]
    return out


def running_ground(lows: np.ndarray, fps: float, window_s: float = TRACK_WINDOW_S,
                   percentile: float = TRACK_PERCENTILE, band: float = TRACK_BAND_M) -> np.ndarray:
    """(T,) ground level per frame from the per-frame lowest foot point ``lows`` (T,), in metres.

    1. A rough level: the ``percentile`` of ``lows`` over the centred window of ``window_s`` seconds (clamped
       to the clip), which ignores the airborne frames of a jump or a stride shorter than the window.
    2. Contact frames: those whose lowest foot point lies within ``band`` of the rough level.
    3. The level: at each frame, the least-squares line through the contact frames' lowest points over the
       same window (a local linear fit: a linear drift is followed without lag, the clip's ends included;
       where a window holds no contact frame the level is interpolated from its neighbours), fitted once more
       over every frame so that it bends smoothly.
    A clip without drift gets a nearly constant level, like ``estimate_ground``.
    """
    lows = np.asarray(lows, dtype=np.float64)
    if lows.ndim != 1 or len(lows) == 0 or not np.all(np.isfinite(lows)):
        raise CoreError("running_ground needs a non-empty (T,) array of finite per-frame lowest foot heights.")
    k = max(1, int(round(window_s * fps / 2.0)))
    rough = window_percentile(lows, k, percentile)
    contact = (lows - rough <= band).astype(np.float64)
    level = _local_line(lows, contact, k)
    ok = np.isfinite(level)
    if not ok.any():
        return rough
    frames = np.arange(len(lows))
    level = np.interp(frames, frames[ok], level[ok])
    # once more over every frame: contact frames entering and leaving a window no longer kink the level
    return _local_line(level, np.ones(len(level)), k)


def track_ground(track: ClipTrack, window_s: float = TRACK_WINDOW_S,
                 percentile: float = TRACK_PERCENTILE) -> np.ndarray:
    """(T,) ground level (world z, metres) per frame of a clip whose floor drifts: ``running_ground`` of its
    lowest foot points, with a contact band of ``TRACK_BAND`` of its height (``TRACK_BAND_M`` without one)."""
    h = track.character.height
    band = TRACK_BAND * float(h) if h else TRACK_BAND_M
    return running_ground(track.lowest_foot, track.fps, window_s, percentile, band)


def auto_ground(track: ClipTrack) -> float | np.ndarray:
    """The source's own floor (docs/metrics.md "Whose floor"): 0.0 where the clip already stands on z = 0, else
    its ``track_ground`` level (T,): a clip floating, sunk or drifting is read above the floor its feet stand on.

    Standing on z = 0: its ``estimate_ground`` level and the range of its tracked level both within
    ``AUTO_TOLERANCE`` of h_c (not the tracked level itself: averaging the lowest points of a rolling foot, it
    reads a walk on z = 0 up to 1 % h_c above it).
    """
    level = track_ground(track)
    h = track.character.height
    tolerance = AUTO_TOLERANCE * (float(h) if h else 1.7)
    on_zero = abs(estimate_ground(track)) <= tolerance and float(np.ptp(level)) <= tolerance
    return 0.0 if on_zero else level


def planted_soles(track: ClipTrack) -> dict:
    """{side: metres}: how far above z = 0 each foot's sole stands where the clip plants it, for the sides whose
    planted sole stands on one level near z = 0 (a fitted body's soles are moved down by it,
    ``core.character.complete``).

    Planted frames: the foot's lowest vertex (``core.contacts.feet``) within ``PLANT_BAND`` of h_c of its 5th percentile
    and slower than 1 % h_c/s (centred over ``core.contacts.feet.window_bounds``, the foot-locked metric's estimator).
    A side is kept when it has 5 such frames or more, their heights spread (10th to 90th percentile) less than
    ``PLANT_SPREAD`` of h_c (a floor that drifts, or a foot that does not stand flat, is not a body's error) and
    their median is within ``PLANT_MAX`` of h_c of z = 0 (a clip floating or sunk as a whole is read by
    ``source_ground``, not fitted away).
    """
    h = float(track.character.height)
    lo, hi = window_bounds(track.num_frames, track.fps)
    out = {}
    for side, P in zip(SIDES, track.foot_points):
        if P.shape[1] == 0:
            continue
        k = P[..., 2].argmin(1)
        low = P[np.arange(len(k)), k, 2]
        speed = np.linalg.norm(P[hi, k, :2] - P[lo, k, :2], axis=1) / np.maximum(hi - lo, 1) * track.fps
        planted = (low <= np.percentile(low, 5) + PLANT_BAND * h) & (speed < LOCKED_SPEED * h)
        if planted.sum() < 5:
            continue
        p10, p50, p90 = np.percentile(low[planted], [10, 50, 90])
        if p90 - p10 < PLANT_SPREAD * h and abs(p50) < PLANT_MAX * h:
            out[side] = float(p50)
    return out


def ground_levels(track: ClipTrack, ground) -> float | np.ndarray:
    """A ``SolverSettings.source_ground`` value read on a clip: a float (one level, metres) or a ``(T,)``
    float64 array (one level per frame).

    ``ground``: "auto" (``auto_ground``: z = 0 where the clip stands on it, else "track"), "zero" (z = 0),
    "estimate" (``estimate_ground``), "track" (``track_ground``), a number, or a sequence of T numbers (a level
    per frame of the clip).
    """
    if isinstance(ground, str):
        if ground == "auto":
            return auto_ground(track)
        if ground == "zero":
            return 0.0
        if ground == "estimate":
            return estimate_ground(track)
        if ground == "track":
            return track_ground(track)
        raise CoreError(f"source_ground must be one of {', '.join(GROUND_MODES)}, a number or one level per "
                        f"frame, not '{ground}'.")
    if np.ndim(ground) == 0:
        try:
            return float(ground)
        except (TypeError, ValueError):
            raise CoreError(f"source_ground must be one of {', '.join(GROUND_MODES)}, a number or one level "
                            f"per frame, not {ground!r}.") from None
    levels = np.asarray(ground, dtype=np.float64)
    name = track.character.name
    if levels.shape != (track.num_frames,):
        raise CoreError(f"source_ground for '{name}' has {levels.size} levels; the clip has "
                        f"{track.num_frames} frames: give one level per frame.")
    if not np.all(np.isfinite(levels)):
        raise CoreError(f"source_ground for '{name}' has non-finite levels.")
    return levels


def standing_on_floor(above: np.ndarray, height: float, at_most: int) -> np.ndarray:
    """(F,) int64, the frames where a source stands on its floor: its lowest foot point's height ``above`` it (T,)
    within ``STAND_BAND`` of its h_c ``height``, at most ``at_most`` of them evenly spread (the first always kept);
    where copy-rotations stands its target (``core.pipeline.copy_rotations.standing_frames``) and how L_reg's anchor
    finds copy-rotations' height there (``core.solver.root_start.floor_drift_lift``)."""
    standing = np.flatnonzero(np.abs(above) <= STAND_BAND * float(height))
    return standing[np.unique(np.linspace(0, len(standing) - 1, min(len(standing), at_most)).round()
                              .astype(np.int64))]
