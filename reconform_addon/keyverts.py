"""Key vertices stored on the character: a collection property on its mesh object.

``Object.reconform_keyverts`` holds one item per key vertex (``index`` into that mesh object's vertices,
``name``, ``limb``, ``locked``, ``co`` = cached rest-pose local coordinate, ``mesh`` = name of the mesh object
the vertex belongs to when it is not the holder itself). Items are saved in the .blend, can be edited by hand
(gizmos lock what they move) and a re-transfer keeps the locked ones.

A character's key vertices live on one *holder* mesh: the deformed mesh carrying most of them (the body).
Indices in a core ``KeyVertexSet`` address the merged ``SkinnedMesh`` of all the armature's meshes
(``bridge.read_skinned_mesh``); ``store``/``load`` convert between the two with the part offsets.
"""

from __future__ import annotations

import bpy
import numpy as np
from bpy.props import BoolProperty, CollectionProperty, FloatVectorProperty, IntProperty, StringProperty

from ..core.types import KeyVertexSet

#: Name of the collection property on ``bpy.types.Object``.
PROP_NAME = "reconform_keyverts"


class RECONFORM_PG_keyvert(bpy.types.PropertyGroup):
    """One key vertex of a character (``name`` is the template name, e.g. 'left_palm')."""

    index: IntProperty(name="Vertex", description="Vertex index in the mesh object", default=-1, min=-1)
    limb: StringProperty(name="Limb", description="Body limb of the key vertex (torso, left_hand, ...)")
    locked: BoolProperty(name="Locked", description="Placed by hand: a new transfer keeps it", default=False)
    co: FloatVectorProperty(name="Rest Position", description="Cached rest-pose position (object space)", size=3,
                            subtype='XYZ')
    mesh: StringProperty(name="Mesh", description="Mesh object of the vertex when it is not the holder "
                                                  "(several meshes on one armature)")


classes = (RECONFORM_PG_keyvert,)


def register():
    bpy.types.Object.reconform_keyverts = CollectionProperty(type=RECONFORM_PG_keyvert)


def unregister():
    if hasattr(bpy.types.Object, PROP_NAME):
        del bpy.types.Object.reconform_keyverts


# ------------------------------------------------------------------------------------------------ helpers


def _part_offsets(mesh):
    """{part name: first merged index} of a merged core.SkinnedMesh."""
    out = {}
    for p, name in enumerate(mesh.part_names):
        idx = np.nonzero(mesh.part == p)[0]
        if len(idx):
            out[name] = int(idx[0])
    return out


def store_keyverts(mesh_obj, kvset: KeyVertexSet, part_offset: int = 0, part_of=None):
    """Write ``kvset`` onto ``mesh_obj.reconform_keyverts`` (replacing its items).

    Args:
        mesh_obj: the holder mesh object.
        kvset: KeyVertexSet with ids into a merged mesh where ``mesh_obj`` starts at ``part_offset``.
        part_of: optional callable merged id -> (object name, local index) for vertices on other objects.
    """
    items = getattr(mesh_obj, PROP_NAME)
    items.clear()
    verts = mesh_obj.data.vertices
    for name, limb, vid, locked in zip(kvset.names, kvset.limbs, kvset.vertex_ids, kvset.locked):
        it = items.add()
        it.name, it.limb, it.locked = name, limb, bool(locked)
        obj_name, local = (mesh_obj.name, int(vid) - part_offset) if part_of is None else part_of(int(vid))
        it.mesh = "" if obj_name == mesh_obj.name else obj_name
        it.index = local
        src = bpy.data.objects.get(obj_name)
        if src is not None and src.type == 'MESH' and 0 <= local < len(src.data.vertices):
            it.co = src.data.vertices[local].co
        elif 0 <= local < len(verts):
            it.co = verts[local].co


def load_keyverts(mesh_obj, part_offset: int = 0, offsets=None, eye: str = "face_center"):
    """KeyVertexSet from ``mesh_obj.reconform_keyverts`` (ids shifted by ``part_offset``), or None if empty.

    ``offsets`` ({object name: merged offset}) resolves items stored for vertices of other mesh objects;
    an item pointing to an object not in it makes the result None (stale storage).
    """
    items = getattr(mesh_obj, PROP_NAME, None)
    if items is None or len(items) == 0:
        return None
    ids = []
    for it in items:
        if it.mesh:
            if offsets is None or it.mesh not in offsets:
                return None
            ids.append(offsets[it.mesh] + it.index)
        else:
            ids.append(part_offset + it.index)
    return KeyVertexSet(tuple(it.name for it in items), tuple(it.limb for it in items), np.array(ids, np.int64),
                        np.array([it.locked for it in items], bool), eye)


def holder_mesh(arm):
    """The mesh object of armature ``arm`` that holds its key vertices, or None when none is stored."""
    from .bridge import find_meshes

    for ob in find_meshes(arm):
        items = getattr(ob, PROP_NAME, None)
        if items is not None and len(items):
            return ob
    return None


def store(arm, character, kvset: KeyVertexSet):
    """Store a character's key vertices on the mesh holding most of them (clears the other meshes)."""
    from .bridge import find_meshes

    mesh = character.mesh
    offsets = _part_offsets(mesh)
    part_names = list(mesh.part_names)
    parts = mesh.part[kvset.vertex_ids]
    objs = {ob.name: ob for ob in find_meshes(arm)}
    counts = np.bincount(parts, minlength=len(part_names))
    order = [p for p in np.argsort(-counts, kind="stable") if part_names[p] in objs]
    if not order:
        raise RuntimeError(f"Armature '{arm.name}': none of its meshes ({', '.join(part_names)}) can hold key "
                           f"vertices.")
    holder = objs[part_names[order[0]]]

    def part_of(vid):
        name = part_names[mesh.part[vid]]
        return name, vid - offsets[name]

    for ob in objs.values():
        if ob is not holder and len(getattr(ob, PROP_NAME)):
            getattr(ob, PROP_NAME).clear()
    store_keyverts(holder, kvset, offsets[holder.name], part_of)
    return holder


def load(arm, character):
    """The KeyVertexSet stored on ``arm``'s meshes (ids into ``character.mesh``), or None."""
    holder = holder_mesh(arm)
    if holder is None or character.mesh is None:
        return None
    offsets = _part_offsets(character.mesh)
    if holder.name not in offsets:
        return None
    return load_keyverts(holder, offsets[holder.name], offsets)


def on_edited(obj):
    """A gizmo moved an item: refresh the cached rest positions."""
    items = getattr(obj, PROP_NAME, None)
    if items is None:
        return
    for it in items:
        src = bpy.data.objects.get(it.mesh) if it.mesh else obj
        if src is not None and src.type == 'MESH' and 0 <= it.index < len(src.data.vertices):
            it.co = src.data.vertices[it.index].co
