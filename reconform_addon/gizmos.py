"""Key-vertex gizmos: one sphere per key vertex of the edited character, coloured by limb.

Drag a sphere: it follows the mouse in the view plane; on release it snaps to the nearest vertex of the mesh
*surface* as the viewer sees it (deformed by the current pose: BVH ``find_nearest`` on the evaluated mesh,
then the closest vertex of the hit polygon; a KDTree when the mesh has no faces), becomes *locked* (a
re-transfer keeps it) and its stored vertex index changes. One undo step per drag.

The viewport side (GizmoGroup, Gizmo drawing and picking) needs a real window. Everything it calls is plain
and headless-testable: ``make_handlers(obj_name, i)`` (get/set of the world position), ``begin_drag`` /
``end_drag``; the geometry (deformed vertices, snapping) is ``bridge.geometry`` and the storage of the items
``bridge.keyverts``. Handlers look objects and items up by name on every call, never holding bpy structs
(undo would invalidate them).
"""

import bpy
import numpy as np
from bpy.types import Gizmo, GizmoGroup
from mathutils import Matrix, Vector

from . import handlers
from .bridge import geometry
from .bridge import keyverts as kvstore

#: RGB per limb (core.rig.humanoid.LIMBS); left is warm, right is cool, centre is neutral.
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
# Drag handlers (headless-testable)
# ------------------------------------------------------------------------------------------------------------
@bpy.app.handlers.persistent
def _on_load(*_args):
    """A file is being loaded: cached geometry and drag positions belong to the old file's objects (a new
    object with the same name must not be drawn or snapped on them)."""
    geometry.invalidate()
    _DRAG.clear()


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
            return tuple(geometry.key_vertex_world(obj, i))
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
    if obj is None or kvstore.storage_blocker(obj):   # linked / overridden: the key vertex stays where it is
        return None
    # snap onto the holder (the body) or the mesh the vertex is on now, whichever surface is nearer
    other = kvstore.item_object(obj, obj.reconform_keyverts[i])
    target, idx = geometry.snap_to_nearest([obj] + ([other] if other is not None and other != obj else []), p)
    kvstore.place_item(obj, i, target, idx)
    return idx


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
        try:
            return kvstore.holder_mesh(s.character(s.keyvert_role))
        except Exception:  # noqa: BLE001 - never break the viewport
            return None

    @classmethod
    def poll(cls, context):
        return cls._holder(context) is not None

    def _signature(self, context, obj):
        s = context.scene.reconform
        return (obj.name_full, len(obj.reconform_keyverts), s.keyvert_size)

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
        for i in range(len(obj.reconform_keyverts)):
            gz = self.gizmos.new(RECONFORM_GT_keyvert.bl_idname)
            gz.obj_name, gz.kv_index = obj.name_full, i
            get, set_ = make_handlers(obj.name_full, i)
            gz.target_set_handler("offset", get=get, set=set_)
            gz.use_draw_modal = True
        self._sig = self._signature(context, obj)
        self._style(context, obj)

    def _style(self, context, obj):
        s = context.scene.reconform
        items = obj.reconform_keyverts
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


def _handlers():
    h = bpy.app.handlers
    return ((h.depsgraph_update_post, geometry.on_depsgraph_update), (h.frame_change_post, geometry.on_frame_change),
            (h.load_pre, _on_load))


def register():
    handlers.add(_handlers())


def unregister():
    handlers.remove(_handlers())
    geometry.invalidate()
    _DRAG.clear()
