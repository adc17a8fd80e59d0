"""The Conflicts panel's data: turning ``core.conflicts`` results into list rows, the sliders into per-part
weights for Re-solve, and the operator that centres the sliders."""

from __future__ import annotations

import bpy

from .common import Done, run, settings_of


def conflict_fields(c) -> dict:
    """Normalise a ``core.conflicts.Conflict`` (dataclass / namedtuple / dict) to the panel's fields."""
    get = (lambda k, d=None: c.get(k, d)) if isinstance(c, dict) else (lambda k, d=None: getattr(c, k, d))
    terms = get("terms") or (get("term_a"), get("term_b"))
    cos = get("cosine", get("cos", 0.0))
    frames = get("frames", ())
    if isinstance(frames, str):
        frames_text = frames
    elif frames is not None and len(frames) == 2:  # (first, last) span
        a, b = int(frames[0]), int(frames[1])
        frames_text = f"{a}-{b}" if b > a else f"{a}"
    else:
        frames_text = format_frames(list(frames) if frames is not None else [])
    sev = get("severity")
    if sev is None:
        sev = max(0.0, min(1.0, -float(cos)))
    return dict(body_part=str(get("body_part", get("part", ""))), term_a=str(terms[0]), term_b=str(terms[1]),
                cosine=float(cos), severity=float(sev), frames=frames_text)


def format_frames(frames, limit: int = 6) -> str:
    """'12-18, 40, 52-60' from a list of frame numbers (sorted, merged into runs, at most ``limit`` runs)."""
    fr = sorted({int(f) for f in frames})
    runs = []
    for f in fr:
        if runs and f == runs[-1][1] + 1:
            runs[-1][1] = f
        else:
            runs.append([f, f])
    parts = [f"{a}-{b}" if b > a else f"{a}" for a, b in runs[:limit]]
    if len(runs) > limit:
        parts.append(f"… (+{len(runs) - limit})")
    return ", ".join(parts)


def fill_conflicts(s, conflicts):
    """Replace the panel's conflict list (sliders start centred)."""
    s.conflicts.clear()
    rows = sorted((conflict_fields(c) for c in conflicts), key=lambda r: -r["severity"])
    for r in rows:
        it = s.conflicts.add()
        for k, v in r.items():
            setattr(it, k, v)
        it.name = f"{r['body_part']}: {r['term_a']} / {r['term_b']}"
    s.conflicts_index = 0


def slider_part_weights(s) -> dict:
    """{(body part, term): factor} from the conflict sliders (``core.conflicts.resolution_weights``; sliders
    left at 0.5 change nothing)."""
    from ...core.conflicts import Conflict, merge_part_weights, resolution_weights

    out = []
    for c in s.conflicts:
        if abs(c.balance - 0.5) < 1e-6:
            continue
        conflict = Conflict(c.body_part, c.term_a, c.term_b, c.cosine, c.severity, ())
        out.append(resolution_weights(conflict, c.balance))
    return merge_part_weights(*out)


def reset_sliders(s) -> Done:
    """Centre every conflict slider (a Re-solve then changes no weight)."""
    for c in s.conflicts:
        c.balance = 0.5
    return Done()


class RECONFORM_OT_reset_conflicts(bpy.types.Operator):
    """Centre every conflict slider"""

    bl_idname = "reconform.reset_conflicts"
    bl_label = "Reset Sliders"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        return run(self, reset_sliders, settings_of(context))


classes = (RECONFORM_OT_reset_conflicts,)
