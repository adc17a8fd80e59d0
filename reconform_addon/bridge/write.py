"""Write a core.Motion as a NEW Action (slotted Action API, one code path for Blender 4.5 and 5.x)."""

from __future__ import annotations

import bpy
import numpy as np

from ...core.rig.rotations_np import quat_make_continuous
from ...core.types import Motion, Skeleton
from .errors import BridgeError
from .animation import action_fcurves

HAS_SLOTS = hasattr(bpy.types, "ActionSlot")  # Blender 4.4+


def _new_action(arm_obj, name: str):
    """A new Action (Blender makes ``name`` unique) with one slot for ``arm_obj``; returns (action, slot, bag)."""
    act = bpy.data.actions.new(name)
    if not HAS_SLOTS:  # pragma: no cover - Blender < 4.4 is not supported by the manifest
        return act, None, act
    slot = act.slots.new(id_type='OBJECT', name=arm_obj.name)
    bag = act.layers.new("Layer").strips.new(type='KEYFRAME').channelbag(slot, ensure=True)
    return act, slot, bag


def assign_action(arm_obj, action, slot=None):
    """Make ``action`` (with ``slot``) the active Action of ``arm_obj``."""
    ad = arm_obj.animation_data or arm_obj.animation_data_create()
    ad.action = action
    if HAS_SLOTS and action is not None:
        ad.action_slot = slot if slot is not None else (action.slots[0] if len(action.slots) else None)


def write_motion(arm_obj, skeleton: Skeleton, motion: Motion, name: str, interpolation: str = 'LINEAR',
                 assign: bool = True):
    """Write ``motion`` onto ``arm_obj`` as a NEW Action named ``name`` (made unique) and assign it with its slot.

    Every bone gets rotation_quaternion (sign-continuous over time) and location keys on every frame
    ``motion.frame_start + t``; written bones are switched to QUATERNION rotation mode and unit scale.
    Nothing else in the file changes; if writing fails, the new Action is removed and the bones restored.
    Returns the Action.
    """
    if getattr(arm_obj, "type", None) != 'ARMATURE':
        raise BridgeError(f"Object '{getattr(arm_obj, 'name', arm_obj)}' is not an armature: "
                          "pick the character's armature.")
    pbones = arm_obj.pose.bones
    if tuple(pb.name for pb in pbones) != tuple(skeleton.names):
        raise BridgeError(f"Armature '{arm_obj.name}' does not match skeleton '{skeleton.name}': "
                          "re-read the armature before writing.")
    T, J = motion.num_frames, skeleton.num_bones
    if motion.rotations.shape[1] != J:
        raise BridgeError(f"Motion has {motion.rotations.shape[1]} bones, armature '{arm_obj.name}' has {J}.")
    if T == 0:
        raise BridgeError(f"Motion for '{arm_obj.name}' has no frames.")
    quats = np.asarray(motion.rotations, dtype=np.float64)
    if not (np.isfinite(quats).all() and np.isfinite(motion.locations).all()):
        raise BridgeError(f"Motion for '{arm_obj.name}' contains NaN or infinite values; nothing was written.")
    quats = quats / np.maximum(np.linalg.norm(quats, axis=-1, keepdims=True), 1e-12)
    quats = quat_make_continuous(quats, axis=0)
    locs = np.asarray(motion.locations, dtype=np.float64)

    old_state = assignment_state(arm_obj)
    act = None
    try:
        act, slot, bag = _new_action(arm_obj, name)
        frames = motion.frame_start + np.arange(T, dtype=np.float64)
        co = np.empty((T, 2), dtype=np.float32)
        co[:, 0] = frames
        ival = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items[interpolation].value
        ivals = np.full(T, ival, dtype=np.int32)
        for b, pb in enumerate(pbones):
            pb.rotation_mode = 'QUATERNION'
            pb.scale = (1.0, 1.0, 1.0)
            grp = bag.groups.new(pb.name)
            base = f'pose.bones["{bpy.utils.escape_identifier(pb.name)}"]'
            for prop, arr, n in (("rotation_quaternion", quats, 4), ("location", locs, 3)):
                for i in range(n):
                    fc = bag.fcurves.new(f"{base}.{prop}", index=i)
                    fc.group = grp
                    kp = fc.keyframe_points
                    kp.add(T)
                    co[:, 1] = arr[:, b, i]
                    kp.foreach_set("co", co.ravel())
                    kp.foreach_set("interpolation", ivals)
                    fc.update()
        if assign:
            assign_action(arm_obj, act, slot)
        return act
    except Exception:
        remove_action(arm_obj, act, old_state)
        raise


def overwrite_keys(arm_obj, action, skeleton: Skeleton, motion: Motion):
    """Set the keys of ``action`` (written by ``write_motion``: a key on every frame) on the frames of ``motion``
    to its values, in place: the live preview's window. Each bone's quaternions keep the sign of the key just
    before the window (no flip between neighbouring keys); frames the Action has no key on are left alone.
    Raises BridgeError when the Action lacks a bone's channels."""
    T = motion.num_frames
    names = tuple(pb.name for pb in arm_obj.pose.bones)
    if names != tuple(skeleton.names) or motion.rotations.shape[:2] != (T, len(names)):
        raise BridgeError(f"Armature '{arm_obj.name}' does not match the live window's skeleton '{skeleton.name}'.")
    quats = np.asarray(motion.rotations, dtype=np.float64)
    quats = quat_make_continuous(quats / np.maximum(np.linalg.norm(quats, axis=-1, keepdims=True), 1e-12), axis=0)
    locs = np.asarray(motion.locations, dtype=np.float64)
    curves = {}
    for fc in action_fcurves(arm_obj, action):
        curves[(fc.data_path, fc.array_index)] = fc
    f0 = float(motion.frame_start)
    for b, name in enumerate(names):
        base = f'pose.bones["{bpy.utils.escape_identifier(name)}"]'
        rot = [curves.get((f"{base}.rotation_quaternion", i)) for i in range(4)]
        loc = [curves.get((f"{base}.location", i)) for i in range(3)]
        if None in rot or None in loc:
            raise BridgeError(f"Action '{action.name}' has no rotation or location keys for bone '{name}' of "
                              f"'{arm_obj.name}': it was not written by ReConForM.")
        cos = []
        for fc in rot + loc:
            co = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
            fc.keyframe_points.foreach_get("co", co)
            cos.append(co.reshape(-1, 2))
        idx = np.rint(cos[0][:, 0] - f0).astype(np.int64)
        inside = (idx >= 0) & (idx < T) & (np.abs(cos[0][:, 0] - f0 - idx) < 1e-3)
        before = np.nonzero(idx < 0)[0]
        q = quats[:, b]
        if len(before):   # the sign of the key just before the window
            k = before[np.argmax(cos[0][before, 0])]
            if sum(float(cos[i][k, 1]) * q[0, i] for i in range(4)) < 0.0:
                q = -q
        for fc, co, values in zip(rot + loc, cos, [q[:, i] for i in range(4)] + [locs[:, b, i] for i in range(3)]):
            co[inside, 1] = values[idx[inside]]
            fc.keyframe_points.foreach_set("co", co.ravel())
            fc.update()


def assignment_state(arm_obj) -> tuple:
    """What ``write_motion`` changes on ``arm_obj`` besides adding an Action: ((action, slot) or None, the pose
    bones' (rotation_mode, scale)); ``remove_action`` puts it back."""
    ad = arm_obj.animation_data
    assigned = (ad.action, getattr(ad, "action_slot", None)) if ad is not None else None
    return assigned, [(pb.rotation_mode, tuple(pb.scale)) for pb in arm_obj.pose.bones]


def remove_action(arm_obj, action, previous=None):
    """Undo a write: unassign and delete ``action``; ``previous`` = ``assignment_state`` taken before it."""
    assigned, bones = previous if previous is not None else (None, None)
    ad = arm_obj.animation_data
    if ad is not None and action is not None and ad.action == action:
        if assigned is not None and assigned[0] is not None:
            assign_action(arm_obj, assigned[0], assigned[1])
        else:
            ad.action = None
    if previous is not None and assigned is None and ad is not None and not ad.nla_tracks and not ad.drivers:
        arm_obj.animation_data_clear()   # it had no animation data before the write
    if action is not None and action.name in bpy.data.actions:
        bpy.data.actions.remove(action)
    for pb, (mode, scale) in zip(arm_obj.pose.bones, bones or ()):
        pb.rotation_mode = mode
        pb.scale = scale
