"""The source clip checked once, up front, where its F-curves are known: the frame range against the Action's
own, and keys that are not numbers or absurdly large. Used by ``animation.read_motion``; every failure is one
BridgeError naming the Action, the F-curve data path and the frame.

Rules (docs/bridge.md, "Reading the motion"):
- **Frame range.** A requested range is compared with the Action's own (``Action.frame_range``, rounded; its
  manual range when one is set). A range that does not overlap it is refused; a range that overlaps it is
  clamped to it with a note. A clip whose curves repeat (a Cycles modifier) plays outside its keys, so any
  range is taken as asked.
- **Keys.** Every key (value and Bézier handles) that shapes the requested frames — the keys inside the range
  and the nearest one on each side — must be a finite number; keys of location curves must lie within
  ``ABSURD_SIZES`` times the skeleton's size of the origin, keys of rotation and scale curves within
  ``ABSURD_VALUE``. A value beyond these bounds is a broken file or a unit mix-up, never a motion.
- **Evaluated values.** What the clip evaluates to on the requested frames (curve modifiers, constraints,
  drivers, NLA included) obeys the same bounds (``check_channel``, ``check_pose``).
"""

from __future__ import annotations

import numpy as np

from .errors import BridgeError

#: A location further than this many skeleton sizes from its origin is refused (for a 1.8 m character: 18 km;
#: Blender stores keys in float32, which resolves 2 mm there and nothing useful beyond).
ABSURD_SIZES = 1e4
#: Rotation (radians or quaternion components) and scale keys beyond ± this value are refused (1 600 turns).
ABSURD_VALUE = 1e4

_LOCATION = ("location", "delta_location")
_ROTATION = ("rotation_euler", "rotation_quaternion", "rotation_axis_angle", "delta_rotation_euler",
             "delta_rotation_quaternion")
_SCALE = ("scale", "delta_scale")


def skeleton_size(arm_obj) -> float:
    """Largest side of the bounding box of the rest bones' heads and tails, in armature units (> 0)."""
    bones = arm_obj.data.bones
    n = len(bones)
    pts = np.empty(n * 6, dtype=np.float32)
    bones.foreach_get("head_local", pts[:n * 3])
    bones.foreach_get("tail_local", pts[n * 3:])
    pts = pts.reshape(-1, 3)
    return max(float((pts.max(0) - pts.min(0)).max()), 1e-6)


def _bound(data_path: str, size: float, object_scale: float):
    """The magnitude bound of a channel and what it is, or (None, '') for channels that are not transforms."""
    prop = data_path.rsplit(".", 1)[-1]
    if prop in _LOCATION:
        scale = object_scale if not data_path.startswith("pose.") else 1.0
        return ABSURD_SIZES * size * scale, f"{ABSURD_SIZES:g} times the skeleton's size"
    if prop in _ROTATION or prop in _SCALE:
        return ABSURD_VALUE, f"{ABSURD_VALUE:g}"
    return None, ""


def repeats(fcurves) -> bool:
    """True when one of ``fcurves`` repeats past its keys (a Cycles modifier)."""
    return any(m.type == 'CYCLES' and not m.mute for fc in fcurves for m in fc.modifiers)


def resolve_range(action, fcurves, frame_start=None, frame_end=None, say=None) -> tuple:
    """(start, end) integer frames to read from ``action`` for a requested range (None: the Action's own).

    A range outside the Action's own is refused, one reaching past it clamped, with a line to ``say``."""
    lo, hi = action.frame_range
    lo, hi = int(round(lo)), int(round(hi))
    start = lo if frame_start is None else int(frame_start)
    end = hi if frame_end is None else int(frame_end)
    own = f"Action '{action.name}' has frames {lo}..{hi}"
    if end < start:
        raise BridgeError(f"Frame range {start}..{end} is empty ({own}): give START <= END.")
    if (frame_start is None and frame_end is None) or repeats(fcurves):
        return start, end
    if end < lo or start > hi:
        raise BridgeError(f"Frames {start}..{end} lie outside the clip ({own}): pick a range inside it.")
    a, b = max(start, lo), min(end, hi)
    if (a, b) != (start, end):
        (say or (lambda msg: None))(f"Frames {start}..{end} reach outside the clip ({own}): retargeting frames "
                                    f"{a}..{b}.")
    return a, b


def _what(v: float, bound: float, meaning: str) -> str:
    if np.isnan(v):
        return "a NaN"
    if not np.isfinite(v):
        return "an infinite"
    return f"an absurd ({v:.3g}, beyond ±{bound:.3g} = {meaning})"


def check_keys(action, fcurves, start: int, end: int, size: float, object_scale: float = 1.0) -> None:
    """Raise BridgeError for the first key shaping frames ``start..end`` of ``fcurves`` (of ``action``) that is
    not finite or beyond its bound (module docstring)."""
    for fc in fcurves:
        if fc.mute:
            continue
        kp = fc.keyframe_points
        n = len(kp)
        if not n:
            continue
        arrs = []
        for prop in ("co", "handle_left", "handle_right"):
            a = np.empty(2 * n, dtype=np.float32)
            kp.foreach_get(prop, a)
            arrs.append(a.reshape(n, 2))
        co = arrs[0]
        i0 = max(int(np.searchsorted(co[:, 0], start, side="left")) - 1, 0)
        i1 = min(int(np.searchsorted(co[:, 0], end, side="right")) + 1, n)
        vals = np.stack([arrs[0][i0:i1, 1], arrs[1][i0:i1, 1], arrs[2][i0:i1, 1]], 1)
        bound, meaning = _bound(fc.data_path, size, object_scale)
        bad = ~np.isfinite(vals) | ~np.isfinite(co[i0:i1, :1])
        if bound is not None:
            bad |= np.abs(np.nan_to_num(vals, nan=0.0, posinf=0.0, neginf=0.0)) > bound
        rows = np.nonzero(bad.any(1))[0]
        if len(rows):
            r = rows[0]
            v = vals[r][bad[r]][0] if np.isfinite(co[i0 + r, 0]) else co[i0 + r, 0]
            raise BridgeError(f"Action '{action.name}': {fc.data_path}[{fc.array_index}] has "
                              f"{_what(v, bound, meaning)} key at frame {co[i0 + r, 0]:g}: fix or delete it (Graph "
                              "Editor), or pick a frame range without it.")


def check_channel(action, fc, values: np.ndarray, frames: np.ndarray, size: float) -> None:
    """Raise BridgeError when F-curve ``fc`` evaluates, on ``frames``, to a value that is not finite or beyond
    its bound (a curve modifier can do that with sound keys)."""
    bound, meaning = _bound(fc.data_path, size, 1.0)
    bad = ~np.isfinite(values)
    if bound is not None:
        bad |= np.abs(np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)) > bound
    if bad.any():
        t = int(np.argmax(bad))
        raise BridgeError(f"Action '{action.name}': {fc.data_path}[{fc.array_index}] evaluates to "
                          f"{_what(values[t], bound, meaning)} value at frame {frames[t]:g} (check its modifiers): "
                          "fix it, or pick a frame range without it.")


def check_pose(arm_obj, names, rotations: np.ndarray, locations: np.ndarray, frames: np.ndarray,
               size: float) -> None:
    """Raise BridgeError naming the bone and frame where a sampled pose ((T, J, 4) rotations, (T, J, 3)
    locations) is not finite or lies beyond the location bound (a constraint, driver or NLA strip gave it)."""
    bound = ABSURD_SIZES * size
    bad = ~np.isfinite(rotations).all(-1) | ~np.isfinite(locations).all(-1)
    bad |= np.abs(np.nan_to_num(locations, nan=0.0, posinf=0.0, neginf=0.0)).max(-1) > bound
    if bad.any():
        t, j = np.argwhere(bad)[0]
        raise BridgeError(f"Armature '{arm_obj.name}': bone '{names[j]}' evaluates to a non-finite or absurd pose "
                          f"at frame {frames[t]:g} (beyond {ABSURD_SIZES:g} times the skeleton's size, or not a "
                          "number; a constraint, driver or NLA strip gives it): fix it, or pick a frame range "
                          "without it.")
