"""Evaluated (deformed) mesh geometry for the key-vertex gizmos: world-space vertices as numpy, snapping.

``evaluated_geometry(obj)`` reads a mesh object's vertices as the viewport shows them (posed), in world space,
and caches them per object until the depsgraph, the frame or a file load changes them (``gizmos`` registers
``on_depsgraph_update`` / ``on_frame_change`` and calls ``invalidate``). ``snap_world_to_vertex`` finds the
vertex of the deformed *surface* nearest to a world point: BVH ``find_nearest`` gives the polygon, the closest
vertex of that polygon wins; meshes without faces use a KDTree.
"""

from __future__ import annotations

import bpy
import numpy as np
from mathutils import Vector

from . import keyverts

#: {object name: (frame, _Geometry)}.
_GEOM: dict = {}


class _Geometry:
    """World-space evaluated vertices (V, 3) of a mesh object, its BVH over polygons and a KDTree."""

    def __init__(self, co_world: np.ndarray, polys: list, topology_matches: bool):
        self.co = co_world
        self.polys = polys
        self.topology_matches = topology_matches
        self._bvh = None
        self._kd = None

    @property
    def bvh(self):
        if self._bvh is None and self.polys:
            from mathutils.bvhtree import BVHTree

            self._bvh = BVHTree.FromPolygons([tuple(v) for v in self.co], self.polys, all_triangles=False)
        return self._bvh

    @property
    def kdtree(self):
        if self._kd is None:
            from mathutils.kdtree import KDTree

            kd = KDTree(len(self.co))
            for i, v in enumerate(self.co):
                kd.insert(v, i)
            kd.balance()
            self._kd = kd
        return self._kd


def evaluated_geometry(obj, depsgraph=None) -> _Geometry:
    """Deformed vertices of ``obj`` in world space as the viewport shows them (cached).

    When modifiers change the topology (e.g. Subdivision), indices would not match the stored ones, so the
    mesh's own vertices are used instead (undeformed), and ``topology_matches`` is False.
    """
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    key = obj.name_full
    frame = bpy.context.scene.frame_current
    cached = _GEOM.get(key)
    if cached is not None and cached[0] == frame:
        return cached[1]
    me0 = obj.data
    n0 = len(me0.vertices)
    ob_e = obj.evaluated_get(depsgraph)
    me = ob_e.to_mesh()
    try:
        match = len(me.vertices) == n0
        src = me if match else me0
        co = np.empty(len(src.vertices) * 3, np.float64)
        src.vertices.foreach_get("co", co)
        co = co.reshape(-1, 3)
        mw = np.array(ob_e.matrix_world if match else obj.matrix_world)
        co = co @ mw[:3, :3].T + mw[:3, 3]
        polys = [tuple(p.vertices) for p in src.polygons]
    finally:
        ob_e.to_mesh_clear()
    g = _Geometry(co, polys, match)
    _GEOM[key] = (frame, g)
    return g


def invalidate(obj_name: str = None):
    """Forget the cached geometry of one object (by ``name_full``), or of all."""
    if obj_name is None:
        _GEOM.clear()
    else:
        _GEOM.pop(obj_name, None)


@bpy.app.handlers.persistent
def on_depsgraph_update(scene, depsgraph):
    """``depsgraph_update_post``: drop the geometry of objects whose shape or placement changed."""
    if not _GEOM:
        return
    for upd in depsgraph.updates:
        if upd.is_updated_geometry or upd.is_updated_transform:
            idb = upd.id
            if isinstance(idb, bpy.types.Object):
                # an armature change moves its meshes: drop everything cached
                if idb.type == 'ARMATURE':
                    _GEOM.clear()
                    return
                _GEOM.pop(idb.original.name_full if hasattr(idb, "original") else idb.name_full, None)


@bpy.app.handlers.persistent
def on_frame_change(scene, depsgraph=None):
    """``frame_change_post``: every pose may have changed."""
    _GEOM.clear()


def snap_world_to_vertex(obj, p_world, depsgraph=None):
    """Nearest vertex of ``obj``'s surface to world point ``p_world``.

    BVH ``find_nearest`` gives the closest surface point and its polygon; the polygon's vertex closest to that
    point wins. Meshes without faces use a KDTree over the vertices. Returns (vertex index, world co (3,)).
    """
    g = evaluated_geometry(obj, depsgraph)
    p = Vector(tuple(float(x) for x in p_world))
    bvh = g.bvh
    if bvh is not None:
        loc, _nrm, poly, _dist = bvh.find_nearest(p)
        if poly is not None:
            vids = np.asarray(g.polys[poly])
            d = np.linalg.norm(g.co[vids] - np.asarray(loc), axis=1)
            i = int(vids[int(np.argmin(d))])
            return i, g.co[i].copy()
    _co, i, _d = g.kdtree.find(p)
    return int(i), g.co[int(i)].copy()


def snap_to_nearest(objs, p_world, depsgraph=None):
    """(object, vertex index): the vertex nearest to ``p_world`` over the surfaces of the mesh objects ``objs``
    (``snap_world_to_vertex`` on each; the first wins a tie)."""
    best = None
    for ob in objs:
        idx, co = snap_world_to_vertex(ob, p_world, depsgraph)
        d = float(np.linalg.norm(co - np.asarray(p_world, dtype=np.float64)))
        if best is None or d < best[0]:
            best = (d, ob, idx)
    return best[1], best[2]


def key_vertex_world(obj, i: int, depsgraph=None) -> np.ndarray:
    """World position (3,) of key vertex ``i`` stored on ``obj``, on the deformed mesh."""
    it = obj.reconform_keyverts[i]
    src = keyverts.item_object(obj, it)
    if src is None:
        raise IndexError(f"Key vertex '{it.name}' of '{obj.name}' lives on mesh '{it.mesh}', which is gone: "
                         "transfer the key vertices again.")
    g = evaluated_geometry(src, depsgraph)
    vid = int(it.index)
    if not 0 <= vid < len(g.co):
        raise IndexError(f"Key vertex '{it.name}' of '{obj.name}' points at vertex {vid}, "
                         f"but the mesh has {len(g.co)}: transfer the key vertices again.")
    return g.co[vid].copy()
