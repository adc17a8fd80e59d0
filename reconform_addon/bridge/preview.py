"""The Live preview's temporary Action on a target, and putting the target back as it was.

``write_preview`` writes a Motion as a new Action (``write.write_motion``) marked as a preview (custom property
``PREVIEW_KEY`` = the target's name) and keeps, as JSON on the target (``PREVIOUS_KEY``), what the preview
replaced: the assigned Action and slot, each pose bone's rotation mode and channels. ``restore`` reads it back,
reassigns, deletes the preview and clears the property, so a file saved while a preview was shown still opens
with the target as it was (``restore_all``, which the add-on runs after a file is loaded).
"""

from __future__ import annotations

import json

import bpy

from ...core.types import Motion, Skeleton
from .write import assign_action, assignment_state, remove_action, write_motion

#: on a preview Action: the name of the target it previews on
PREVIEW_KEY = "reconform_live"
#: on a target showing a preview: JSON {'preview', 'action', 'slot', 'bones': [[mode, [sx, sy, sz]], ...],
#: 'pose': [{channel: values}, ...]}
PREVIOUS_KEY = "reconform_live_previous"
#: the pose bone channels put back as they were when a preview ends
POSE_CHANNELS = ("location", "rotation_quaternion", "rotation_euler", "rotation_axis_angle", "scale")


def is_preview(action) -> bool:
    return action is not None and PREVIEW_KEY in action.keys()


def write_preview(arm_obj, skeleton: Skeleton, motion: Motion, name: str):
    """Assign ``motion`` to ``arm_obj`` as a new preview Action named ``name`` (made unique), remembering what it
    replaces on the target; returns the Action. Writing a second preview on the same target keeps the first
    one's memory of the original state (and deletes the first preview)."""
    previous = arm_obj.get(PREVIOUS_KEY)      # an earlier preview: the original state stays what it was
    old = bpy.data.actions.get(json.loads(previous)["preview"]) if previous is not None else None
    state = assignment_state(arm_obj) if previous is None else None
    act = write_motion(arm_obj, skeleton, motion, name)
    act[PREVIEW_KEY] = arm_obj.name
    act.use_fake_user = False
    if previous is None:
        assigned, bones = state
        slot = assigned[1] if assigned is not None else None
        arm_obj[PREVIOUS_KEY] = json.dumps({
            "preview": act.name,
            "action": assigned[0].name if assigned is not None and assigned[0] is not None else None,
            "had_animation_data": assigned is not None,
            "slot": getattr(slot, "identifier", None),
            "bones": [[mode, list(scale)] for mode, scale in bones],
            "pose": [pose_values(pb) for pb in arm_obj.pose.bones]})
    else:
        info = json.loads(previous)
        info["preview"] = act.name
        arm_obj[PREVIOUS_KEY] = json.dumps(info)
        if old is not None and old is not act:
            bpy.data.actions.remove(old)
    return act


def preview_action(arm_obj):
    """The preview Action shown on ``arm_obj`` (None when there is none)."""
    raw = arm_obj.get(PREVIOUS_KEY) if arm_obj is not None else None
    if raw is None:
        return None
    act = bpy.data.actions.get(json.loads(raw)["preview"])
    return act if is_preview(act) else None


def restore(arm_obj) -> bool:
    """Put ``arm_obj`` back as it was before its preview (Action and slot, bone rotation modes and scales) and
    delete the preview Action. Returns False when the target shows no preview."""
    raw = arm_obj.get(PREVIOUS_KEY)
    if raw is None:
        return False
    info = json.loads(raw)
    act = bpy.data.actions.get(info["preview"])
    if not is_preview(act):
        act = None
    original = bpy.data.actions.get(info["action"]) if info.get("action") else None
    slot = None
    if original is not None and info.get("slot") and hasattr(original, "slots"):
        slot = next((s for s in original.slots if s.identifier == info["slot"]), None)
    assigned = (original, slot) if info.get("had_animation_data") else None
    bones = [(mode, tuple(scale)) for mode, scale in info.get("bones", ())]
    if len(bones) != len(arm_obj.pose.bones):
        bones = None
    if act is not None:
        remove_action(arm_obj, act, (assigned, bones or []))
    elif assigned is not None and original is not None:      # the preview is gone already (an undo)
        assign_action(arm_obj, original, slot)
    pose = info.get("pose", ())
    if len(pose) == len(arm_obj.pose.bones):    # the pose as it was (an unassigned Action leaves the last one)
        for pb, values in zip(arm_obj.pose.bones, pose):
            for name, value in values.items():
                setattr(pb, name, value)
    del arm_obj[PREVIOUS_KEY]
    return True


def pose_values(pb) -> dict:
    """A pose bone's channels as plain lists (its location, rotations in every mode, scale)."""
    return {name: list(getattr(pb, name)) for name in POSE_CHANNELS}


def restore_all() -> list:
    """Restore every object showing a preview and delete orphan previews (a file saved while Live was on);
    returns the names of the objects restored."""
    done = [ob.name for ob in bpy.data.objects if ob.type == 'ARMATURE' and PREVIOUS_KEY in ob.keys() and restore(ob)]
    for act in [a for a in bpy.data.actions if is_preview(a)]:
        if act.users == 0 or not any(getattr(ob.animation_data, "action", None) == act for ob in bpy.data.objects):
            bpy.data.actions.remove(act)
    return done
