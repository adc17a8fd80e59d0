"""Key-vertex gizmos: one sphere per key vertex of the edited character, coloured by limb.

Drag a sphere: it follows the mouse in the view plane; on release it snaps to the nearest vertex of the mesh
*surface* as the viewer sees it (deformed by the current pose: BVH ``find_nearest`` on the evaluated mesh,
then the closest vertex of the hit polygon; a KDTree when the mesh has no faces), becomes *locked* (a
re-transfer keeps it) and its stored vertex index changes. One undo step per drag.

The viewport side (GizmoGroup, Gizmo drawing and picking) needs a real window. Everything it calls is plain
and headless-testable: ``make_handlers(obj_name, i)`` (get/set of the world position), ``begin_drag`` /
``end_drag`` and ``snap_world_to_vertex``. Handlers look objects and items up by name on every call, never
holding bpy structs (undo would invalidate them).
"""

import bpy
import numpy as np
from bpy.types import Gizmo, GizmoGroup
from mathutils import Matrix, Vector

#: RGB per limb (core.humanoid.LIMBS); left is warm, right is cool, centre is neutral.
LIMB_COLORS = {
    "torso": (0.85, 0.85, 0.85), "head": (0.95, 0.85, 0.25),
    "left_arm": (0.95, 0.45, 0.25), "left_hand": (0.95, 0.25, 0.35),
    "left_leg": (0.85, 0.55, 0.15), "left_foot": (0.75, 0.35, 0.10),
    "right_arm": (0.25, 0.60, 0.95), "right_hand": (0.35, 0.35, 0.95),
    "right_leg": (0.20, 0.75, 0.70), "right_foot": (0.10, 0.55, 0.50),
}
DEFAULT_COLOR = (0.7, 0.7, 0.7)
ACTIVE_COLOR = (1.0, 1.0, 1.0)
#: Sphere radius at keyvert_size 1, in pixels-ish gizmo units (scale_basis).
BASE_SIZE = 0.12


def limb_color(limb: str):
    return LIMB_COLORS.get(limb, DEFAULT_COLOR)


# ------------------------------------------------------------------------------------------------------------
# Key-vertex storage (H3's reconform_addon.keyverts) seen from here
# ------------------------------------------------------------------------------------------------------------
def _kv():
    from . import keyverts

    return keyverts


#: Object property holding the key-vertex collection (``reconform_addon.keyverts``; blender.md §5).
DEFAULT_PROP_NAME = "reconform_keyverts"


def _prop_name() -> str:
    try:
        return getattr(_kv(), "PROP_NAME", DEFAULT_PROP_NAME)
    except ImportError:
        return DEFAULT_PROP_NAME


def keyvert_items(obj):
    """The key-vertex collection of a mesh object (items with ``index``, ``name``, ``limb``, ``locked``), or
    None when ``obj`` is None or the key-vertex storage is not registered."""
    return getattr(obj, _prop_name(), None) if obj is not None else None


def keyvert_holder(arm):
    """The mesh object of armature ``arm`` that holds its key vertices, or None.

    ``reconform_addon.keyverts.holder_mesh`` decides when it exists; otherwise the first deformed mesh with
    stored key vertices.
    """
    if arm is None:
        return None
    try:
        holder = getattr(_kv(), "holder_mesh", None)
    except ImportError:
        holder = None
    if holder is not None:
        return holder(arm)
    from .bridge import find_meshes

    for ob in find_meshes(arm):
        items = keyvert_items(ob)
        if items is not None and len(items):
            return ob
    return None


# ------------------------------------------------------------------------------------------------------------
# Evaluated (deformed) geometry, cached per object until the depsgraph changes it
# ------------------------------------------------------------------------------------------------------------
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
    if obj_name is None:
        _GEOM.clear()
    else:
        _GEOM.pop(obj_name, None)


@bpy.app.handlers.persistent
def _on_depsgraph_update(scene, depsgraph):
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
def _on_frame_change(scene, depsgraph=None):
    _GEOM.clear()


@bpy.app.handlers.persistent
def _on_load(*_args):
    """A file is being loaded: cached geometry and drag positions belong to the old file's objects (a new
    object with the same name must not be drawn or snapped on them)."""
    _GEOM.clear()
    _DRAG.clear()


# ------------------------------------------------------------------------------------------------------------
# Snapping and handlers (headless-testable)
# ------------------------------------------------------------------------------------------------------------
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


def _item_object(obj, item):
    """The mesh object an item's vertex index refers to: ``item.mesh`` when set, else the holder ``obj``."""
    name = getattr(item, "mesh", "")
    return bpy.data.objects.get(name) if name else obj


def key_vertex_world(obj, i: int, depsgraph=None) -> np.ndarray:
    """World position (3,) of key vertex ``i`` stored on ``obj``, on the deformed mesh."""
    items = keyvert_items(obj)
    it = items[i]
    src = _item_object(obj, it)
    if src is None:
        raise IndexError(f"Key vertex '{it.name}' of '{obj.name}' lives on mesh '{it.mesh}', which is gone: "
                         "transfer the key vertices again.")
    g = evaluated_geometry(src, depsgraph)
    vid = int(it.index)
    if not 0 <= vid < len(g.co):
        raise IndexError(f"Key vertex '{it.name}' of '{obj.name}' points at vertex {vid}, "
                         f"but the mesh has {len(g.co)}: transfer the key vertices again.")
    return g.co[vid].copy()


#: Free drag positions {(object name, item index): world point}; written to bpy only on release.
_DRAG: dict = {}


def make_handlers(obj_name: str, i: int):
    """(get, set) for a gizmo's 'offset' target: the key vertex's world position.

    ``set`` only records where the drag is (nothing in bpy changes until ``end_drag``), so Esc during a drag
    restores the scene by construction.
    """

    def get():
        p = _DRAG.get((obj_name, i))
        if p is not None:
            return tuple(p)
        obj = bpy.data.objects.get(obj_name)
        if obj is None:
            return (0.0, 0.0, 0.0)
        try:
            return tuple(key_vertex_world(obj, i))
        except (IndexError, AttributeError, TypeError):
            return (0.0, 0.0, 0.0)

    def set_(value):
        _DRAG[(obj_name, i)] = np.array(value, dtype=np.float64)

    return get, set_


def begin_drag(obj_name: str, i: int):
    _DRAG.pop((obj_name, i), None)


def end_drag(obj_name: str, i: int, cancel: bool = False):
    """Release: snap the dragged point to the surface, store the new vertex, lock it. Returns the new index or
    None (cancelled, or nothing was dragged)."""
    p = _DRAG.pop((obj_name, i), None)
    if cancel or p is None:
        return None
    obj = bpy.data.objects.get(obj_name)
    if obj is None:
        return None
    item = keyvert_items(obj)[i]
    # snap onto the holder (the body) or the mesh the vertex is on now, whichever surface is nearer
    best = None
    other = _item_object(obj, item)
    for cand in [obj] + ([other] if other is not None and other != obj else []):
        idx, co = snap_world_to_vertex(cand, p)
        d = float(np.linalg.norm(co - p))
        if best is None or d < best[0]:
            best = (d, cand, idx)
    _d, target, idx = best
    item.index = idx
    if hasattr(item, "mesh"):
        item.mesh = "" if target == obj else target.name
    item.locked = True
    _kv_touched(obj)
    return idx


def _kv_touched(obj):
    """Tell the key-vertex storage an item was edited by hand (when it wants to know)."""
    try:
        fn = getattr(_kv(), "on_edited", None)
    except ImportError:
        return
    if fn is not None:
        fn(obj)


def set_active(scene, obj_name: str, i: int):
    s = scene.reconform
    s.keyvert_active = i
    s.keyvert_active_object = obj_name


# ------------------------------------------------------------------------------------------------------------
# Viewport classes
# ------------------------------------------------------------------------------------------------------------
def _icosphere_tris(subdiv: int = 1):
    """Unit icosphere triangles as a flat list of (x, y, z) for ``new_custom_shape('TRIS', ...)``."""
    t = (1.0 + 5 ** 0.5) / 2.0
    v = [(-1, t, 0), (1, t, 0), (-1, -t, 0), (1, -t, 0), (0, -1, t), (0, 1, t), (0, -1, -t), (0, 1, -t),
         (t, 0, -1), (t, 0, 1), (-t, 0, -1), (-t, 0, 1)]
    v = [Vector(p).normalized() for p in v]
    f = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2),
         (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5), (2, 4, 11),
         (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    tris = [(v[a], v[b], v[c]) for a, b, c in f]
    for _ in range(subdiv):
        nxt = []
        for a, b, c in tris:
            ab, bc, ca = (a + b).normalized(), (b + c).normalized(), (c + a).normalized()
            nxt += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        tris = nxt
    return [tuple(p) for tri in tris for p in tri]


class RECONFORM_GT_keyvert(Gizmo):
    """A sphere on one key vertex; drag in the view plane, snap on release."""

    bl_idname = "RECONFORM_GT_keyvert"
    bl_target_properties = ({"id": "offset", "type": 'FLOAT', "array_length": 3},)

    __slots__ = ("shape", "obj_name", "kv_index", "init_value", "init_mouse")

    def setup(self):
        if not hasattr(self, "shape"):
            self.shape = self.new_custom_shape('TRIS', _icosphere_tris(1))

    def _sync_matrix(self):
        p = Vector(self.target_get_value("offset"))
        self.matrix_basis = Matrix.Translation(p)

    def draw(self, context):
        self._sync_matrix()
        self.draw_custom_shape(self.shape)

    def draw_select(self, context, select_id):
        self._sync_matrix()
        self.draw_custom_shape(self.shape, select_id=select_id)

    def invoke(self, context, event):
        self.init_value = Vector(self.target_get_value("offset"))
        self.init_mouse = (event.mouse_region_x, event.mouse_region_y)
        begin_drag(self.obj_name, self.kv_index)
        set_active(context.scene, self.obj_name, self.kv_index)
        return {'RUNNING_MODAL'}

    def modal(self, context, event, tweak):
        from bpy_extras import view3d_utils

        region, rv3d = context.region, context.region_data
        if rv3d is None:
            return {'RUNNING_MODAL'}
        mouse = (event.mouse_region_x, event.mouse_region_y)
        p = view3d_utils.region_2d_to_location_3d(region, rv3d, mouse, self.init_value)
        self.target_set_value("offset", tuple(p))
        context.area.header_text_set("Key vertex: release to snap to the surface, Esc cancels")
        return {'RUNNING_MODAL'}

    def exit(self, context, cancel):
        context.area.header_text_set(None)
        idx = end_drag(self.obj_name, self.kv_index, cancel=cancel)
        if idx is not None:
            bpy.ops.ed.undo_push(message="Move Key Vertex")
            context.area.tag_redraw()


class RECONFORM_GGT_keyverts(GizmoGroup):
    bl_idname = "RECONFORM_GGT_keyverts"
    bl_label = "ReConForM Key Vertices"
    bl_space_type = 'VIEW_3D'
    bl_region_type = 'WINDOW'
    bl_options = {'3D', 'PERSISTENT', 'SHOW_MODAL_ALL', 'SELECT'}

    @staticmethod
    def _holder(context):
        s = getattr(context.scene, "reconform", None)
        if s is None or not s.show_keyverts or context.mode != 'OBJECT':
            return None
        arm = s.character(s.keyvert_role)
        try:
            obj = keyvert_holder(arm)
        except Exception:  # noqa: BLE001 - never break the viewport
            return None
        items = keyvert_items(obj)
        return obj if items is not None and len(items) else None

    @classmethod
    def poll(cls, context):
        return cls._holder(context) is not None

    def _signature(self, context, obj):
        s = context.scene.reconform
        return (obj.name_full, len(keyvert_items(obj)), s.keyvert_size)

    def setup(self, context):
        self._build(context)

    def refresh(self, context):
        obj = self._holder(context)
        if obj is None:
            return
        if getattr(self, "_sig", None) != self._signature(context, obj):
            self._build(context)
        self._style(context, obj)

    def draw_prepare(self, context):
        obj = self._holder(context)
        if obj is not None:
            self._style(context, obj)

    def _build(self, context):
        self.gizmos.clear()
        obj = self._holder(context)
        if obj is None:
            self._sig = None
            return
        for i in range(len(keyvert_items(obj))):
            gz = self.gizmos.new(RECONFORM_GT_keyvert.bl_idname)
            gz.obj_name, gz.kv_index = obj.name_full, i
            get, set_ = make_handlers(obj.name_full, i)
            gz.target_set_handler("offset", get=get, set=set_)
            gz.use_draw_modal = True
        self._sig = self._signature(context, obj)
        self._style(context, obj)

    def _style(self, context, obj):
        s = context.scene.reconform
        items = keyvert_items(obj)
        for gz in self.gizmos:
            i = gz.kv_index
            if i >= len(items):
                continue
            it = items[i]
            active = s.keyvert_active_object == obj.name_full and s.keyvert_active == i
            gz.color = ACTIVE_COLOR if active else limb_color(it.limb)
            gz.alpha = 1.0 if active else (0.9 if it.locked else 0.6)
            gz.color_highlight = (1.0, 1.0, 1.0)
            gz.alpha_highlight = 1.0
            gz.scale_basis = BASE_SIZE * s.keyvert_size * (1.5 if active else 1.0)


classes = (RECONFORM_GT_keyvert, RECONFORM_GGT_keyverts)


def register():
    if _on_depsgraph_update not in bpy.app.handlers.depsgraph_update_post:
        bpy.app.handlers.depsgraph_update_post.append(_on_depsgraph_update)
    if _on_frame_change not in bpy.app.handlers.frame_change_post:
        bpy.app.handlers.frame_change_post.append(_on_frame_change)
    if _on_load not in bpy.app.handlers.load_pre:
        bpy.app.handlers.load_pre.append(_on_load)


def unregister():
    for lst, fn in ((bpy.app.handlers.depsgraph_update_post, _on_depsgraph_update),
                    (bpy.app.handlers.frame_change_post, _on_frame_change),
                    (bpy.app.handlers.load_pre, _on_load)):
        while fn in lst:
            lst.remove(fn)
    _GEOM.clear()
    _DRAG.clear()
