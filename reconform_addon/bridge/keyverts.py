"""Key vertices stored on the character's mesh objects ⇄ ``core.KeyVertexSet``.

``Object.reconform_keyverts`` (``properties.RECONFORM_PG_keyvert``) holds one item per key vertex: ``index``
into that mesh object's vertices, ``name``, ``limb``, ``locked``, ``co`` = cached rest-pose local coordinate,
``mesh`` = name of the mesh object the vertex belongs to when it is not the holder itself. Items are saved in
the .blend, can be edited by hand (gizmos lock what they move) and a re-transfer keeps the locked ones.

A character's key vertices live on one *holder* mesh: the deformed mesh carrying most of them (the body).
Indices in a core ``KeyVertexSet`` address the merged ``SkinnedMesh`` of all the armature's meshes
(``read_skinned_mesh``); ``store``/``load`` convert between the two with the part offsets.

Key vertices are stored on local meshes only (``library.storage_blocker``: Blender keeps no add-on items on a
library override, and drops them from a linked mesh on save); they are read from linked meshes as usual.
``snapshot``/``restore`` let a writer put back what was stored when a later step fails.
"""

from __future__ import annotations

import bpy
import numpy as np

from ...core.types import KeyVertexSet
from .errors import BridgeError
from .library import storage_blocker
from .read import find_meshes


def items(obj):
    """The key-vertex collection of mesh object ``obj`` (None when ``obj`` is None)."""
    return obj.reconform_keyverts if obj is not None else None


def holder_mesh(arm):
    """The mesh object of armature ``arm`` that holds its key vertices, or None (no armature, none stored)."""
    if arm is None:
        return None
    for ob in find_meshes(arm):
        if len(ob.reconform_keyverts):
            return ob
    return None


def item_object(holder, item):
    """The mesh object an item's vertex index refers to: ``item.mesh`` when set, else the ``holder``."""
    return bpy.data.objects.get(item.mesh) if item.mesh else holder


def _part_offsets(mesh):
    """{part name: first merged index} of a merged core.SkinnedMesh."""
    out = {}
    for p, name in enumerate(mesh.part_names):
        idx = np.nonzero(mesh.part == p)[0]
        if len(idx):
            out[name] = int(idx[0])
    return out


def _cache_rest_co(item, src, fallback):
    """``item.co`` = the rest position of its vertex on ``src`` (else on ``fallback``) when the index is valid."""
    for ob in (src, fallback):
        if ob is not None and ob.type == 'MESH' and 0 <= item.index < len(ob.data.vertices):
            item.co = ob.data.vertices[item.index].co
            return


def store_keyverts(mesh_obj, kvset: KeyVertexSet, part_offset: int = 0, part_of=None):
    """Write ``kvset`` onto ``mesh_obj.reconform_keyverts`` (replacing its items).

    Args:
        mesh_obj: the holder mesh object.
        kvset: KeyVertexSet with ids into a merged mesh where ``mesh_obj`` starts at ``part_offset``.
        part_of: optional callable merged id -> (object name, local index) for vertices on other objects.
    """
    its = mesh_obj.reconform_keyverts
    its.clear()
    for name, limb, vid, locked in zip(kvset.names, kvset.limbs, kvset.vertex_ids, kvset.locked):
        it = its.add()
        it.name, it.limb, it.locked = name, limb, bool(locked)
        obj_name, local = (mesh_obj.name, int(vid) - part_offset) if part_of is None else part_of(int(vid))
        it.mesh = "" if obj_name == mesh_obj.name else obj_name
        it.index = local
        _cache_rest_co(it, bpy.data.objects.get(obj_name), mesh_obj)


def load_keyverts(mesh_obj, part_offset: int = 0, offsets=None, eye: str = "face_center"):
    """KeyVertexSet from ``mesh_obj.reconform_keyverts`` (ids shifted by ``part_offset``), or None if empty.

    ``offsets`` ({object name: merged offset}) resolves items stored for vertices of other mesh objects;
    an item pointing to an object not in it makes the result None (stale storage).
    """
    its = mesh_obj.reconform_keyverts
    if len(its) == 0:
        return None
    ids = []
    for it in its:
        if it.mesh:
            if offsets is None or it.mesh not in offsets:
                return None
            ids.append(offsets[it.mesh] + it.index)
        else:
            ids.append(part_offset + it.index)
    return KeyVertexSet(tuple(it.name for it in its), tuple(it.limb for it in its), np.array(ids, np.int64),
                        np.array([it.locked for it in its], bool), eye)


def _holder_for(arm, character, kvset: KeyVertexSet):
    """(holder mesh object, {name: mesh object}) where ``store`` puts ``kvset``: the mesh holding most of them."""
    mesh = character.mesh
    part_names = list(mesh.part_names)
    objs = {ob.name: ob for ob in find_meshes(arm)}
    counts = np.bincount(mesh.part[kvset.vertex_ids], minlength=len(part_names))
    order = [p for p in np.argsort(-counts, kind="stable") if part_names[p] in objs]
    if not order:
        raise BridgeError(f"Armature '{arm.name}': none of its meshes ({', '.join(part_names)}) can hold key "
                          "vertices.")
    return objs[part_names[order[0]]], objs


def store_blocker(arm, character, kvset: KeyVertexSet) -> str:
    """Why ``store(arm, character, kvset)`` cannot keep the key vertices in this file ('' when it can): the
    holder, or a mesh it would clear, is linked or a library override (``library.storage_blocker``)."""
    holder, objs = _holder_for(arm, character, kvset)
    for ob in [holder] + [o for o in objs.values() if o is not holder and len(o.reconform_keyverts)]:
        why = storage_blocker(ob)
        if why:
            return why
    return ""


def check_can_store(arm) -> None:
    """Raise BridgeError naming the mesh when no mesh of ``arm`` can keep key vertices in this file."""
    why = [storage_blocker(ob) for ob in find_meshes(arm)]
    if why and all(why):
        raise BridgeError(f"Cannot store key vertices on '{arm.name}': {why[0]}. {_WHERE_TO_STORE}")


_WHERE_TO_STORE = ("Key vertices are kept on local meshes only: place them in the character's own file (a "
                   "retarget reads them through the link), or make the mesh local (Object > Relations > Make Local).")


def store(arm, character, kvset: KeyVertexSet):
    """Store a character's key vertices on the mesh holding most of them (clears the other meshes)."""
    why = store_blocker(arm, character, kvset)
    if why:
        raise BridgeError(f"Cannot store key vertices on '{arm.name}': {why}. {_WHERE_TO_STORE}")
    mesh = character.mesh
    offsets = _part_offsets(mesh)
    part_names = list(mesh.part_names)
    holder, objs = _holder_for(arm, character, kvset)

    def part_of(vid):
        name = part_names[mesh.part[vid]]
        return name, vid - offsets[name]

    for ob in objs.values():
        if ob is not holder and len(ob.reconform_keyverts):
            ob.reconform_keyverts.clear()
    store_keyverts(holder, kvset, offsets[holder.name], part_of)
    return holder


_ITEM_FIELDS = ("name", "limb", "index", "locked", "co", "mesh")


def snapshot(arms) -> list:
    """The key vertices stored on the meshes of armatures ``arms``, for ``restore`` (an all-or-nothing write)."""
    out = []
    for arm in arms:
        for ob in find_meshes(arm):
            if not storage_blocker(ob):
                out.append((ob, [tuple(getattr(it, f) if f != "co" else tuple(it.co) for f in _ITEM_FIELDS)
                                 for it in ob.reconform_keyverts]))
    return out


def restore(saved: list) -> None:
    """Put back the key vertices ``snapshot`` saw."""
    for ob, rows in saved:
        its = ob.reconform_keyverts
        its.clear()
        for row in rows:
            it = its.add()
            for f, v in zip(_ITEM_FIELDS, row):
                setattr(it, f, v)


def load(arm, character, n: int | None = None):
    """The KeyVertexSet stored on ``arm``'s meshes (ids into ``character.mesh``), or None: nothing stored, a
    template of another size than ``n`` (when given), or ids outside the mesh (stale storage)."""
    holder = holder_mesh(arm)
    if holder is None or character.mesh is None:
        return None
    offsets = _part_offsets(character.mesh)
    if holder.name not in offsets:
        return None
    kvs = load_keyverts(holder, offsets[holder.name], offsets)
    if kvs is None or (n is not None and len(kvs) != n):
        return None
    if len(kvs.vertex_ids) and (kvs.vertex_ids.min() < 0 or kvs.vertex_ids.max() >= character.mesh.num_verts):
        return None
    return kvs


def on_edited(obj):
    """Items of ``obj`` were edited by hand: refresh their cached rest positions."""
    for it in obj.reconform_keyverts:
        src = bpy.data.objects.get(it.mesh) if it.mesh else obj
        _cache_rest_co(it, src, None)


def place_item(holder, i: int, mesh_obj, vertex_index: int):
    """Key vertex ``i`` of ``holder`` placed by hand on vertex ``vertex_index`` of ``mesh_obj``: stored, locked,
    its cached rest position refreshed."""
    item = holder.reconform_keyverts[i]
    item.index = int(vertex_index)
    item.mesh = "" if mesh_obj == holder else mesh_obj.name
    item.locked = True
    on_edited(holder)
