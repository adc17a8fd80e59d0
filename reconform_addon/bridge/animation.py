"""Read the animation playing on an armature into a core ``Motion``: its Action's slot and F-curves evaluated
directly, or the pose sampled frame by frame where drivers, NLA tracks, constraints or an animated object play
(``read_motion``); ``action_fcurves`` serves the writer too. Spaces as ``read`` (docs/conventions.md).
"""

from __future__ import annotations

import re

import bpy
import numpy as np

from ...core.rig.rotations_np import axis_angle_to_quat, euler_to_quat, matrix_to_quat
from ...core.types import Motion, Skeleton
from . import clip
from .errors import BridgeError
from .read import check_armature, mat_array

_PATH_RE = re.compile(r'pose\.bones\["((?:[^"\\]|\\.)*)"\]\.(\w+)$')


def _active_slot(arm_obj, action):
    """The slot of ``action`` that animates ``arm_obj`` (None on Blender without slots, or when no slot animates
    objects): the assigned one, else the one named after the object, else the first object slot with bone
    curves, else the first object slot. An Action imported from glTF has one slot per animated ID (the
    armature, shape keys, ...), in no particular order."""
    if not hasattr(action, "slots"):
        return None
    ad = arm_obj.animation_data
    if ad is not None and ad.action == action and ad.action_slot is not None:
        return ad.action_slot
    for slot in action.slots:
        if slot.identifier == "OB" + arm_obj.name:
            return slot
    obj_slots = [s for s in action.slots if s.target_id_type in {'OBJECT', 'UNSPECIFIED'}]
    from bpy_extras import anim_utils
    for slot in obj_slots:
        bag = anim_utils.action_get_channelbag_for_slot(action, slot)
        if bag is not None and any(fc.data_path.startswith("pose.bones[") for fc in bag.fcurves):
            return slot
    return obj_slots[0] if obj_slots else None


def _check_animates_objects(arm_obj, action):
    """Raise BridgeError when ``action`` has no slot that can animate the armature object."""
    if hasattr(action, "slots") and len(action.slots):
        if _active_slot(arm_obj, action) is None:
            kinds = ", ".join(f"'{s.name_display}' ({s.target_id_type.lower()})" for s in action.slots)
            raise BridgeError(f"Action '{action.name}' does not animate objects (its slots: {kinds}): pick an "
                              f"Action that animates '{arm_obj.name}'.")
    elif getattr(action, "id_root", 'OBJECT') not in {'OBJECT', 'NONE', None}:
        raise BridgeError(f"Action '{action.name}' does not animate objects: pick an armature Action.")


def action_fcurves(arm_obj, action) -> list:
    """The F-curves of ``action`` that animate ``arm_obj`` (slotted API on 4.4+, legacy list before)."""
    slot = _active_slot(arm_obj, action)
    if slot is None:
        return list(getattr(action, "fcurves", ()))
    from bpy_extras import anim_utils
    bag = anim_utils.action_get_channelbag_for_slot(action, slot)
    return list(bag.fcurves) if bag is not None else []


def _needs_sampling(arm_obj) -> str:
    """Why the pose is not just the active Action's channels ('' when it is)."""
    for pb in arm_obj.pose.bones:
        if any(c.enabled and c.influence > 0 for c in pb.constraints):
            return f"bone '{pb.name}' has constraints"
    ad = arm_obj.animation_data
    if ad is None:
        return ""
    for fc in ad.drivers:
        if fc.data_path.startswith("pose.bones") and not fc.mute:
            return f"driver on {fc.data_path}"
    if ad.action is not None and (ad.action_blend_type != 'REPLACE' or ad.action_influence < 1.0):
        return "the Action blends with the NLA"
    if ad.use_nla:
        for track in ad.nla_tracks:
            if track.mute:
                continue
            for strip in track.strips:
                if not strip.mute and (strip.action is None or strip.action != ad.action):
                    return f"NLA track '{track.name}' plays"
    return ""


_OBJECT_PATHS = {"location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle", "scale",
                 "delta_location", "delta_rotation_euler", "delta_rotation_quaternion", "delta_scale"}


def object_animated(arm_obj, action) -> bool:
    """True when ``action`` moves the armature OBJECT itself (object transform curves that change over time);
    that motion is then folded into the root bones (``Motion`` holds bone channels only)."""
    for fc in action_fcurves(arm_obj, action):
        if fc.mute or fc.data_path not in _OBJECT_PATHS:
            continue
        n = len(fc.keyframe_points)
        if len(fc.modifiers):
            return True
        if n:
            co = np.empty(2 * n, dtype=np.float32)
            fc.keyframe_points.foreach_get("co", co)
            if np.ptp(co[1::2]) > 1e-6:
                return True
    return False


def _frames(start, end) -> np.ndarray:
    return np.arange(int(start), int(end) + 1, dtype=np.float64)


def _scene_fps(scene) -> float:
    return scene.render.fps / scene.render.fps_base


def read_motion(arm_obj, skeleton: Skeleton, action=None, frame_start=None, frame_end=None,
                sample=None, report=None) -> Motion:
    """The animation of ``arm_obj`` as pose channels per integer frame (core.Motion).

    Reads the F-curves of the Action (``action`` or the active one) directly when nothing else drives the
    pose; samples the evaluated pose per frame (``scene.frame_set``) when constraints, drivers or NLA tracks
    do, or when ``sample`` is True. The frame range defaults to the Action's (the scene's without one);
    ``frame_end`` is included. fps is the scene's ``fps / fps_base``.

    The clip is checked first (``bridge.clip``): a range outside the Action's own is refused (one reaching
    past it is clamped, with a line to ``report``); a key that is not a number or absurdly large raises
    BridgeError naming the Action, the F-curve and the frame; so do evaluated values beyond the same bounds.
    """
    check_armature(arm_obj)
    scene = bpy.context.scene
    ad = arm_obj.animation_data
    active = ad.action if ad is not None else None
    act = action if action is not None else active
    if act is not None:
        _check_animates_objects(arm_obj, act)
        fcurves = action_fcurves(arm_obj, act)
        start, end = clip.resolve_range(act, fcurves, frame_start, frame_end, report)
    elif ad is not None and ad.nla_tracks:
        start = scene.frame_start if frame_start is None else int(frame_start)
        end = scene.frame_end if frame_end is None else int(frame_end)
        if end < start:
            raise BridgeError(f"Armature '{arm_obj.name}': frame range {start}..{end} is empty.")
    else:
        raise BridgeError(f"Armature '{arm_obj.name}' has no animation: assign an Action to it "
                          "(Dope Sheet > Action Editor) or pick one.")
    frames = _frames(start, end)
    size = clip.skeleton_size(arm_obj)
    if act is not None:
        object_scale = float(np.abs(np.array(arm_obj.matrix_world.to_scale())).max())
        clip.check_keys(act, fcurves, start, end, size, object_scale)
    fold = act is not None and object_animated(arm_obj, act)
    if sample is None:
        sample = bool(_needs_sampling(arm_obj)) or fold
    if not sample and act is not None:
        rot, loc = _read_fcurves(arm_obj, skeleton, act, frames, size)
    else:
        rot, loc = _sample_pose(arm_obj, skeleton, act, frames, fold_object=fold)
        clip.check_pose(arm_obj, skeleton.names, rot, loc, frames, size)
    return Motion(rot, loc, fps=_scene_fps(scene), frame_start=start)


def _curve_values(fc, frames: np.ndarray) -> np.ndarray:
    """Value of F-curve ``fc`` at ``frames``: keys read in bulk when they sit on those frames, else evaluate."""
    kp = fc.keyframe_points
    n = len(kp)
    if n and not len(fc.modifiers):
        co = np.empty(n * 2, dtype=np.float32)
        kp.foreach_get("co", co)
        co = co.reshape(n, 2)
        pos = np.searchsorted(co[:, 0], frames)
        if np.all(pos < n) and np.all(np.abs(co[np.minimum(pos, n - 1), 0] - frames) < 1e-4):
            return co[pos, 1].astype(np.float64)
    return np.fromiter((fc.evaluate(f) for f in frames), dtype=np.float64, count=len(frames))


def _read_fcurves(arm_obj, skeleton, action, frames, size):
    T, J = len(frames), skeleton.num_bones
    curves = {}
    for fc in action_fcurves(arm_obj, action):
        if fc.mute:
            continue
        m = _PATH_RE.match(fc.data_path)
        if m:
            name = m.group(1).replace('\\"', '"').replace("\\\\", "\\")
            curves[(name, m.group(2), fc.array_index)] = fc
    rot = np.zeros((T, J, 4))
    loc = np.zeros((T, J, 3))
    for j, name in enumerate(skeleton.names):
        pb = arm_obj.pose.bones[name]
        mode = pb.rotation_mode

        def channel(prop, n, static):
            out = np.empty((T, n))
            for i in range(n):
                fc = curves.get((name, prop, i))
                if fc is not None:
                    out[:, i] = _curve_values(fc, frames)
                    clip.check_channel(action, fc, out[:, i], frames, size)
                else:
                    out[:, i] = static[i]
            return out

        if mode == 'QUATERNION':
            q = channel("rotation_quaternion", 4, tuple(pb.rotation_quaternion))
            rot[:, j] = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        elif mode == 'AXIS_ANGLE':
            rot[:, j] = axis_angle_to_quat(channel("rotation_axis_angle", 4, tuple(pb.rotation_axis_angle)))
        else:
            rot[:, j] = euler_to_quat(channel("rotation_euler", 3, tuple(pb.rotation_euler)), mode)
        if not pb.bone.use_connect:  # Blender ignores the location of connected bones
            loc[:, j] = channel("location", 3, tuple(pb.location))
    return rot, loc


def _sample_pose(arm_obj, skeleton, action, frames, fold_object=False):
    """Evaluate the scene per frame and convert pose matrices back to basis channels (core FK's inverse).

    fold_object: the object's own animation O(t) is folded into the root bones, relative to the skeleton's
    static ``object_matrix`` M0: root' = M0^-1 @ O(t) @ root (world placement kept; object scale changes
    over time are not representable and are dropped)."""
    scene = bpy.context.scene
    ad = arm_obj.animation_data
    old_frame, old_sub = scene.frame_current, scene.frame_subframe
    swap = action is not None and ad is not None and ad.action != action
    if swap:
        old_action, old_slot = ad.action, getattr(ad, "action_slot", None)
    T, J = len(frames), skeleton.num_bones
    G = np.empty((T, J, 4, 4))
    O = np.empty((T, 4, 4))
    try:
        if swap:
            ad.action = action
            if hasattr(ad, "action_slot"):
                ad.action_slot = _active_slot(arm_obj, action)
        for t, f in enumerate(frames):
            scene.frame_set(int(f))
            G[t] = mat_array(arm_obj.pose.bones, "matrix")
            O[t] = np.array(arm_obj.matrix_world, dtype=np.float64)
    finally:
        if swap:
            ad.action = old_action
            if old_action is not None and hasattr(ad, "action_slot"):
                ad.action_slot = old_slot
        scene.frame_set(old_frame, subframe=old_sub)
    parents = skeleton.parents
    if fold_object:
        D = np.linalg.inv(skeleton.object_matrix)[None] @ O
        D[:, :3, :3] /= np.linalg.norm(D[:, :3, :3], axis=1, keepdims=True)
        G = D[:, None] @ G  # every bone moves with the object; only the roots' channels change
    # basis_j = rest_local_j^-1 @ G_parent^-1 @ G_j  (G_parent = identity for roots)
    rel = G.copy()
    has_p = parents >= 0
    # remove the parent's scale so rotations stay orthonormal
    Gp = G[:, parents[has_p]]
    rel[:, has_p] = np.linalg.inv(Gp) @ G[:, has_p]
    basis = np.linalg.inv(skeleton.rest_local)[None] @ rel
    rot = basis[..., :3, :3]
    rot = rot / np.maximum(np.linalg.norm(rot, axis=-2, keepdims=True), 1e-12)  # columns may carry scale
    return matrix_to_quat(rot), basis[..., :3, 3].copy()
