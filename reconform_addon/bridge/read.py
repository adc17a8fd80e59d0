"""Read an armature and the meshes it deforms into ``core`` types (the animation playing on it: ``animation``).

Spaces (docs/conventions.md): everything is returned in the armature's *armature space* (Blender's
``bone.matrix_local`` space); ``Skeleton.object_matrix`` is ``arm.matrix_world``.
"""

from __future__ import annotations

import bpy
import numpy as np

from ...core.types import Skeleton, SkinnedMesh
from .errors import BridgeError

#: Skin influences kept per vertex are between these bounds (the mesh's own maximum in between).
MIN_INFLUENCES = 4
MAX_INFLUENCES = 8


def check_armature(arm_obj):
    if arm_obj is None:
        raise BridgeError("No armature given: select an armature object.")
    if getattr(arm_obj, "type", None) != 'ARMATURE':
        raise BridgeError(f"Object '{arm_obj.name}' is a {arm_obj.type.lower()}, not an armature: "
                          "pick the character's armature.")


def mat_array(seq, prop: str) -> np.ndarray:
    """(N, 4, 4) float64 from a bpy collection's 4x4 matrix property (foreach_get is column-major)."""
    n = len(seq)
    buf = np.empty(n * 16, dtype=np.float32)
    seq.foreach_get(prop, buf)
    return buf.reshape(n, 4, 4).transpose(0, 2, 1).astype(np.float64)


def read_skeleton(arm_obj) -> Skeleton:
    """The armature's bones as a core.Skeleton (rest matrices, parents, object matrix)."""
    check_armature(arm_obj)
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
    rest_global = mat_array(bones, "matrix_local")
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
    rigid parts (``rigid_bone``: parented to a bone through empties or other objects, or constrained to one).

    Only the objects of the armature's scene (``_scene_objects``): a mesh the same armature deforms in another
    scene of the file (a proxy, a variant for another shot) is not part of the character here."""
    check_armature(arm_obj)
    return sorted((ob for ob in _scene_objects(arm_obj) if _deformed_by(ob, arm_obj)), key=lambda o: o.name)


def _scene_objects(arm_obj):
    """The objects of the current scene when ``arm_obj`` is in it, else of the scenes it is in, else (an armature
    in no scene, as a script may build one) every object of the file."""
    scene = getattr(bpy.context, "scene", None)
    if scene is not None and scene.objects.get(arm_obj.name) == arm_obj:
        return scene.objects
    scenes = arm_obj.users_scene
    if not scenes:
        return bpy.data.objects
    return {ob for s in scenes for ob in s.objects}


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
    check_armature(arm_obj)
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
