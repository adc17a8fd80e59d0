"""Read an armature, the meshes it deforms and the animation playing on it into ``core`` types.

Spaces (docs/conventions.md): everything is returned in the armature's *armature space* (Blender's
``bone.matrix_local`` space); ``Skeleton.object_matrix`` is ``arm.matrix_world``.
"""

from __future__ import annotations

import re

import bpy
import numpy as np

from ...core.rotations_np import axis_angle_to_quat, euler_to_quat, matrix_to_quat
from ...core.types import Motion, Skeleton, SkinnedMesh
from . import clip
from .errors import BridgeError

#: Skin influences kept per vertex are between these bounds (the mesh's own maximum in between).
MIN_INFLUENCES = 4
MAX_INFLUENCES = 8

_PATH_RE = re.compile(r'pose\.bones\["((?:[^"\\]|\\.)*)"\]\.(\w+)$')


def _check_armature(arm_obj):
    if arm_obj is None:
        raise BridgeError("No armature given: select an armature object.")
    if getattr(arm_obj, "type", None) != 'ARMATURE':
        raise BridgeError(f"Object '{arm_obj.name}' is a {arm_obj.type.lower()}, not an armature: "
                          "pick the character's armature.")


def _mat_array(seq, prop: str) -> np.ndarray:
    """(N, 4, 4) float64 from a bpy collection's 4x4 matrix property (foreach_get is column-major)."""
    n = len(seq)
    buf = np.empty(n * 16, dtype=np.float32)
    seq.foreach_get(prop, buf)
    return buf.reshape(n, 4, 4).transpose(0, 2, 1).astype(np.float64)


def read_skeleton(arm_obj) -> Skeleton:
    """The armature's bones as a core.Skeleton (rest matrices, parents, object matrix)."""
    _check_armature(arm_obj)
    bones = arm_obj.data.bones
    if len(bones) == 0:
        raise BridgeError(f"Armature '{arm_obj.name}' has no bones: add bones or pick another armature.")
    names = [b.name for b in bones]
    idx = {n: i for i, n in enumerate(names)}
    parents = np.array([idx[b.parent.name] if b.parent else -1 for b in bones], dtype=np.int64)
    if np.any(parents >= np.arange(len(names))):
        raise BridgeError(f"Armature '{arm_obj.name}': bones are not in parent-first order; "
                          "re-save the file in Blender 4.5+ and try again.")
    if [pb.name for pb in arm_obj.pose.bones] != names:
        raise BridgeError(f"Armature '{arm_obj.name}': pose bones differ from its bones; "
                          "update the scene (leave Edit Mode) and try again.")
    rest_global = _mat_array(bones, "matrix_local")
    rest_local = rest_global.copy()
    has_parent = parents >= 0
    rest_local[has_parent] = np.linalg.inv(rest_global[parents[has_parent]]) @ rest_global[has_parent]
    return Skeleton(arm_obj.name, names, parents, rest_local, np.array(arm_obj.matrix_world, dtype=np.float64))


# ----------------------------------------------------------------------------------------------- meshes

def _followed_bone(ob, arm_obj):
    """The bone of ``arm_obj`` that object ``ob`` itself follows by a full-influence Child Of or Armature
    constraint, or None."""
    bones = arm_obj.data.bones
    for c in getattr(ob, "constraints", ()):
        if not c.enabled or c.influence < 0.999:
            continue
        if c.type == 'CHILD_OF' and c.target == arm_obj and c.subtarget in bones:
            return c.subtarget
        if c.type == 'ARMATURE':
            ts = [t for t in c.targets if t.target == arm_obj and t.subtarget in bones and t.weight > 0]
            if ts:
                return max(ts, key=lambda t: t.weight).subtarget
    return None


def rigid_bone(ob, arm_obj):
    """The bone of ``arm_obj`` that object ``ob`` moves with rigidly, or None: up its parent chain, the first
    object parented to one of the armature's bones (``parent_type`` 'BONE': a robot's head, an empty on a hand
    holding a prop) or following one by a Child Of / Armature constraint. None when the chain reaches the
    armature object itself (or no armature)."""
    seen = set()
    o = ob
    while o is not None and o.name not in seen:
        seen.add(o.name)
        bone = _followed_bone(o, arm_obj)
        if bone is not None:
            return bone
        if o.parent == arm_obj:
            if o.parent_type == 'BONE' and o.parent_bone in arm_obj.data.bones:
                return o.parent_bone
            return None
        o = o.parent
    return None


def _deformed_by(ob, arm_obj) -> bool:
    if ob.type != 'MESH':
        return False
    for m in ob.modifiers:
        if m.type == 'ARMATURE' and m.object == arm_obj:
            return True
    if ob.parent == arm_obj:
        if ob.parent_type in {'BONE', 'ARMATURE'}:
            return True
        if ob.parent_type == 'OBJECT':
            # Object-parented without a modifier: rigid, counted only when its groups name the bones.
            bone_names = arm_obj.data.bones.keys()
            if any(g.name in bone_names for g in ob.vertex_groups):
                return True
    return rigid_bone(ob, arm_obj) is not None


def find_meshes(arm_obj) -> list:
    """Mesh objects the armature ``arm_obj`` moves, visible or not, sorted by name: Armature modifier users,
    meshes parented to it (Armature Deform, a bone, or the object with vertex groups named after its bones) and
    rigid parts (``rigid_bone``: parented to a bone through empties or other objects, or constrained to one)."""
    _check_armature(arm_obj)
    return sorted((ob for ob in bpy.data.objects if _deformed_by(ob, arm_obj)), key=lambda o: o.name)


def _mesh_arrays(ob, me):
    """Vertices (V,3), normals (V,3), face_indices (L,), face_offsets (F+1,) of mesh datablock ``me``."""
    V = len(me.vertices)
    co = np.empty(V * 3, dtype=np.float32)
    me.vertices.foreach_get("co", co)
    nor = np.empty(V * 3, dtype=np.float32)
    if hasattr(me, "vertex_normals"):
        me.vertex_normals.foreach_get("vector", nor)
    else:  # pragma: no cover - older API
        me.vertices.foreach_get("normal", nor)
    F = len(me.polygons)
    loop_start = np.empty(F, dtype=np.int32)
    me.polygons.foreach_get("loop_start", loop_start)
    loop_total = np.empty(F, dtype=np.int32)
    me.polygons.foreach_get("loop_total", loop_total)
    L = len(me.loops)
    loop_vert = np.empty(L, dtype=np.int32)
    me.loops.foreach_get("vertex_index", loop_vert)
    # polygons normally own consecutive loop ranges; gather in polygon order to be safe
    order = np.concatenate([np.arange(s, s + t) for s, t in zip(loop_start, loop_total)]) if F else \
        np.zeros(0, dtype=np.int64)
    face_indices = loop_vert[order].astype(np.int64)
    face_offsets = np.concatenate([[0], np.cumsum(loop_total)]).astype(np.int64)
    return (co.reshape(V, 3).astype(np.float64), nor.reshape(V, 3).astype(np.float64), face_indices,
            face_offsets)


def _skin_weights(ob, skeleton: Skeleton, arm_obj, V: int):
    """Sparse skin weights of ``ob`` mapped to skeleton bones: (rows, bones, weights) over all influences."""
    bones = arm_obj.data.bones
    gmap = np.full(max(len(ob.vertex_groups), 1), -1, dtype=np.int64)
    for g in ob.vertex_groups:
        b = bones.get(g.name)
        if b is not None and b.use_deform:
            gmap[g.index] = skeleton.names.index(g.name)
    rows, cols, vals = [], [], []
    if (gmap >= 0).any():
        for v in ob.data.vertices:
            for g in v.groups:
                rows.append(v.index)
                cols.append(g.group)
                vals.append(g.weight)
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    vals = np.asarray(vals, dtype=np.float64)
    bone = gmap[cols] if len(cols) else cols
    keep = (bone >= 0) & (vals > 0)
    return rows[keep], bone[keep], vals[keep]


def _top_k(rows, bones, vals, V: int, K: int):
    """Dense (V, K) top-K influences per vertex, renormalised (rows without influence stay 0)."""
    wb = np.zeros((V, K), dtype=np.int64)
    wv = np.zeros((V, K), dtype=np.float64)
    if len(rows):
        order = np.lexsort((-vals, rows))  # by vertex, then by weight descending
        rows, bones, vals = rows[order], bones[order], vals[order]
        first = np.searchsorted(rows, rows, side="left")
        rank = np.arange(len(rows)) - first
        sel = rank < K
        wb[rows[sel], rank[sel]] = bones[sel]
        wv[rows[sel], rank[sel]] = vals[sel]
    s = wv.sum(1, keepdims=True)
    np.divide(wv, s, out=wv, where=s > 0)
    return wb, wv


def read_skinned_mesh(arm_obj, skeleton: Skeleton, mesh_objs=None, report=None) -> SkinnedMesh:
    """All meshes deformed by ``arm_obj`` merged into one core.SkinnedMesh, in rest pose, armature space.

    Vertices come from the evaluated mesh with the armature in REST position (shape keys and modifiers
    before the Armature modifier apply) when the vertex count is unchanged, else from the mesh data.
    Vertices with no deforming weight are rigidly skinned to the bone their object follows (``rigid_bone``: a
    part of a robot or a cartoon parented to a bone, directly or through empties); otherwise their weight row
    is 0 and they are counted in ``report`` (a callable taking one line of text).
    """
    _check_armature(arm_obj)
    meshes = list(mesh_objs) if mesh_objs is not None else find_meshes(arm_obj)
    if not meshes:
        raise BridgeError(f"Armature '{arm_obj.name}' deforms no mesh: add an Armature modifier pointing to it "
                          "on the character's mesh (or parent the mesh with Armature Deform).")
    for ob in meshes:
        if ob.type != 'MESH':
            raise BridgeError(f"Object '{ob.name}' is not a mesh: pass the meshes deformed by '{arm_obj.name}'.")
    report = report or (lambda msg: None)
    view_layer = bpy.context.view_layer
    arm_inv = np.linalg.inv(np.array(arm_obj.matrix_world, dtype=np.float64))
    old_position = arm_obj.data.pose_position
    parts = []
    try:
        arm_obj.data.pose_position = 'REST'
        view_layer.update()
        depsgraph = bpy.context.evaluated_depsgraph_get()
        for ob in meshes:
            ob_eval = ob.evaluated_get(depsgraph)
            me = ob_eval.to_mesh()
            try:
                if len(me.vertices) == len(ob.data.vertices):
                    arrays = _mesh_arrays(ob, me)
                else:
                    report(f"Mesh '{ob.name}': modifiers change its vertex count; using its undeformed mesh data.")
                    arrays = _mesh_arrays(ob, ob.data)
            finally:
                ob_eval.to_mesh_clear()
            to_arm = arm_inv @ np.array(ob.matrix_world, dtype=np.float64)
            parts.append((ob, arrays, to_arm))
    finally:
        arm_obj.data.pose_position = old_position
        view_layer.update()

    verts, normals, faces, offsets, wbs, wvs, part = [], [], [], [], [], [], []
    sparse = []
    K = MIN_INFLUENCES
    for i, (ob, (co, nor, fi, fo), to_arm) in enumerate(parts):
        V = len(co)
        A = to_arm[:3, :3]
        verts.append(co @ A.T + to_arm[:3, 3])
        n = nor @ np.linalg.inv(A)  # inverse-transpose for normals (row vectors)
        normals.append(n / np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12))
        rows, bones, vals = _skin_weights(ob, skeleton, arm_obj, V)
        if len(rows):
            K = max(K, int(np.bincount(rows, minlength=V).max()))
        sparse.append((rows, bones, vals))
        part.append(np.full(V, i, dtype=np.int64))
    K = min(K, MAX_INFLUENCES)
    base = 0
    for i, (ob, (co, nor, fi, fo), to_arm) in enumerate(parts):
        V = len(co)
        wb, wv = _top_k(*sparse[i], V, K)
        empty = wv.sum(1) == 0
        if empty.any():
            bone = rigid_bone(ob, arm_obj)
            if bone in skeleton.names:
                wb[empty, 0] = skeleton.names.index(bone)
                wv[empty, 0] = 1.0
            else:
                report(f"Mesh '{ob.name}': {int(empty.sum())} of {V} vertices have no weight on a deforming bone "
                       f"of '{arm_obj.name}'.")
        wbs.append(wb)
        wvs.append(wv)
        faces.append(fi + base)
        offsets.append(fo[1:] + (offsets[-1][-1] if offsets else 0))
        base += V
    return SkinnedMesh(
        name="+".join(ob.name for ob in meshes),
        rest_verts=np.concatenate(verts),
        rest_normals=np.concatenate(normals),
        face_indices=np.concatenate(faces),
        face_offsets=np.concatenate([[0]] + offsets).astype(np.int64),
        weight_bones=np.concatenate(wbs),
        weight_values=np.concatenate(wvs),
        part=np.concatenate(part),
        part_names=tuple(ob.name for ob in meshes),
    )


# ----------------------------------------------------------------------------------------------- motion

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
    _check_armature(arm_obj)
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
            G[t] = _mat_array(arm_obj.pose.bones, "matrix")
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
