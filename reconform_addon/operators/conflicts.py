"""The Conflicts panel's data: turning ``core.solver.conflicts`` results into list rows, the sliders into per-part
weights for Re-solve, and the operator that centres the sliders."""

from __future__ import annotations

import dataclasses

import bpy

from .common import Done, run, settings_of


#: conflicts listed before the rest is folded (Show All)
SHOWN = 3


def conflict_fields(c, character: str = "") -> dict:
    """A ``core.solver.conflicts.Conflict`` (or a dict of its fields) as the panel's fields: spans as text, the first
    frame for jumping; ``character``: the target it belongs to after a joint retarget ('' for one pair)."""
    f = c if isinstance(c, dict) else dataclasses.asdict(c)
    spans = [(int(a), int(b)) for a, b in f["spans"]]
    return dict(character=character, body_part=f["body_part"], term_a=f["term_a"], term_b=f["term_b"],
                cosine=float(f["cosine"]), severity=float(f["severity"]), score=float(f["score"]),
                frames=format_spans(spans), first_frame=spans[0][0] if spans else 0)


def format_spans(spans, limit: int = 6) -> str:
    """'12-18, 40, 52-60' from (first, last) frame spans (at most ``limit`` of them, then '… (+n)')."""
    parts = [f"{a}-{b}" if b > a else f"{a}" for a, b in spans[:limit]]
    if len(spans) > limit:
        parts.append(f"… (+{len(spans) - limit})")
    return ", ".join(parts)


def format_frames(frames, limit: int = 6) -> str:
    """'12-18, 40, 52-60' from a list of frame numbers (sorted, merged into runs, at most ``limit`` runs)."""
    runs = []
    for f in sorted({int(f) for f in frames}):
        if runs and f == runs[-1][1] + 1:
            runs[-1][1] = f
        else:
            runs.append([f, f])
    return format_spans(runs, limit)


def fill_conflicts(s, conflicts):
    """Replace the panel's conflict list with ``conflicts`` in their ranking order (the costliest first, as
    ``core.solver.conflicts.detect_conflicts`` sorts them); sliders start centred, the list starts folded."""
    fill_rows(s, [conflict_fields(c) for c in conflicts])


def fill_group_conflicts(s, members):
    """The panel's conflict list after a joint retarget: ``members`` [(target name, its conflicts)], every
    character's in one ranking (``core.solver.conflicts.ranked_across``, as the batch report lists them), each row
    naming its character."""
    from ...core.solver.conflicts import ranked_across

    fill_rows(s, [conflict_fields(c, name) for name, c in ranked_across(members)])


def fill_rows(s, rows):
    """The conflict list from rows of ``conflict_fields``, in their order."""
    s.conflicts.clear()
    for r in rows:
        it = s.conflicts.add()
        for k, v in r.items():
            setattr(it, k, v)
        who = f"{r['character']}: " if r["character"] else ""
        it.name = f"{who}{r['body_part']}: {r['term_a']} / {r['term_b']}"
    s.conflicts_index = 0
    s.show_all_conflicts = False


def slider_part_weights(s, character: str = "") -> dict:
    """{(body part, term): factor} from the conflict sliders of ``character``'s rows ('': a single pair's;
    ``core.solver.conflicts.resolution_weights``; sliders left at 0.5 change nothing)."""
    from ...core.solver.conflicts import Conflict, merge_part_weights, resolution_weights

    out = []
    for c in s.conflicts:
        if abs(c.balance - 0.5) < 1e-6 or c.character != character:
            continue
        conflict = Conflict(c.body_part, c.term_a, c.term_b, c.cosine, c.severity)
        out.append(resolution_weights(conflict, c.balance))
    return merge_part_weights(*out)


def reset_sliders(s) -> Done:
    """Centre every conflict slider (a Re-solve then changes no weight)."""
    for c in s.conflicts:
        c.balance = 0.5
    return Done()


def jump_to_frame(scene, frame: int) -> Done:
    """Make ``frame`` the scene's current frame (a conflict's span, from the list)."""
    scene.frame_set(int(frame))
    return Done()


class RECONFORM_OT_jump_to_conflict(bpy.types.Operator):
    """Go to this conflict's first frame"""

    bl_idname = "reconform.jump_to_conflict"
    bl_label = "Go to Frame"
    bl_options = {'REGISTER', 'UNDO'}

    frame: bpy.props.IntProperty(name="Frame")

    def execute(self, context):
        return run(self, jump_to_frame, context.scene, self.frame)


class RECONFORM_OT_reset_conflicts(bpy.types.Operator):
    """Centre every conflict slider"""

    bl_idname = "reconform.reset_conflicts"
    bl_label = "Reset Sliders"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        return run(self, reset_sliders, settings_of(context))


classes = (RECONFORM_OT_jump_to_conflict, RECONFORM_OT_reset_conflicts)
