"""Key-vertex gizmos, headless: snapping to the deformed surface (``bridge.geometry``), the get/set/release
handlers, locking, undo safety (handlers look data up by name), and the gizmo classes' registration. Drawing
and picking need a real viewport and are not tested here."""

import math

import numpy as np
import pytest

from .ui_helpers import ui

bpy = pytest.importorskip("bpy")


def _bent_column(name="Col"):
    """A 2 m quad column along +Z skinned to two bones; the upper bone is posed 90 deg about X.
    Returns (armature, mesh object)."""
    arm = bpy.data.objects.new(name + "_rig", bpy.data.armatures.new(name + "_rig"))
    bpy.context.scene.collection.objects.link(arm)
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode='EDIT')
    lo = arm.data.edit_bones.new("lower")
    lo.head, lo.tail = (0, 0, 0), (0, 0, 1)
    up = arm.data.edit_bones.new("upper")
    up.head, up.tail, up.parent = (0, 0, 1), (0, 0, 2), lo
    bpy.ops.object.mode_set(mode='OBJECT')
    verts, faces = [], []
    rings = 9
    for k in range(rings):
        z = 2.0 * k / (rings - 1)
        verts += [(-0.1, -0.1, z), (0.1, -0.1, z), (0.1, 0.1, z), (-0.1, 0.1, z)]
        if k:
            b = 4 * (k - 1)
            faces += [(b + i, b + (i + 1) % 4, b + 4 + (i + 1) % 4, b + 4 + i) for i in range(4)]
    me = bpy.data.meshes.new(name)
    me.from_pydata(verts, [], faces)
    ob = bpy.data.objects.new(name, me)
    bpy.context.scene.collection.objects.link(ob)
    ob.parent = arm
    g_lo, g_up = ob.vertex_groups.new(name="lower"), ob.vertex_groups.new(name="upper")
    for i, v in enumerate(verts):
        (g_up if v[2] > 1.0 + 1e-6 else g_lo).add([i], 1.0, 'REPLACE')
    ob.modifiers.new("Armature", 'ARMATURE').object = arm
    pb = arm.pose.bones["upper"]
    pb.rotation_mode = 'XYZ'
    pb.rotation_euler = (math.radians(90), 0, 0)
    bpy.context.view_layer.update()
    return arm, ob


def test_gizmo_classes_register(addon):
    gz = ui(addon, "gizmos")
    for cls in gz.classes:
        assert "bl_rna" in cls.__dict__, cls.__name__
    assert gz.RECONFORM_GGT_keyverts.bl_options >= {'3D', 'PERSISTENT'}
    tris = gz._icosphere_tris(1)
    assert len(tris) == 80 * 3 and all(abs(np.linalg.norm(p) - 1) < 1e-6 for p in tris)
    assert len({gz.limb_color(limb) for limb in core_limbs(addon)}) == len(core_limbs(addon))


def core_limbs(addon):
    import importlib

    return importlib.import_module(addon.__name__ + ".core.rig.humanoid").LIMBS


def test_evaluated_geometry_follows_the_pose(geo, clean_scene):
    geo.invalidate()
    arm, ob = _bent_column()
    g = geo.evaluated_geometry(ob)
    assert g.topology_matches and g.co.shape == (36, 3)
    top = g.co[32:36].mean(0)   # the top ring bent forward: about (0, -1, 1) instead of (0, 0, 2)
    assert top == pytest.approx([0.0, -1.0, 1.0], abs=0.11)
    # cached until the pose changes
    assert geo.evaluated_geometry(ob) is g
    arm.pose.bones["upper"].rotation_euler = (0, 0, 0)
    bpy.context.view_layer.update()
    geo.on_frame_change(bpy.context.scene)    # what Blender calls on frame change; depsgraph handler likewise
    g2 = geo.evaluated_geometry(ob)
    assert g2 is not g and g2.co[32:36].mean(0) == pytest.approx([0, 0, 2], abs=1e-5)


def test_snap_goes_to_the_deformed_surface_not_the_rest_pose(geo, clean_scene):
    geo.invalidate()
    arm, ob = _bent_column()
    g = geo.evaluated_geometry(ob)
    # a point just outside the bent part's surface near vertex 34 (deformed); in rest pose nothing is there
    target = g.co[34]
    nrm = np.array([0.0, 0.0, 1.0]) if target[2] > 1.05 else np.array([1.0, 0.0, 0.0])
    idx, co = geo.snap_world_to_vertex(ob, target + 0.03 * nrm + np.array([0.01, 0.0, 0.0]))
    assert idx == 34 and co == pytest.approx(g.co[34])
    # the snapped vertex is a vertex of the polygon nearest to the point (surface first)
    p = g.co[20] * 0.5 + g.co[21] * 0.5 + np.array([0.0, -0.05, 0.0])
    idx, _ = geo.snap_world_to_vertex(ob, p)
    assert idx in (20, 21)


def test_snap_without_faces_uses_the_nearest_vertex(geo, clean_scene):
    geo.invalidate()
    me = bpy.data.meshes.new("cloud")
    pts = np.random.default_rng(0).normal(size=(200, 3))
    me.from_pydata([tuple(p) for p in pts], [], [])
    ob = bpy.data.objects.new("cloud", me)
    clean_scene.collection.objects.link(ob)
    ob.location = (5, 0, 0)
    bpy.context.view_layer.update()
    q = pts[17] + np.array([5.001, 0, 0])
    idx, co = geo.snap_world_to_vertex(ob, q)
    assert idx == 17 and co == pytest.approx(pts[17] + [5, 0, 0], abs=1e-5)


def test_topology_changing_modifier_falls_back_to_mesh_vertices(geo, clean_scene):
    geo.invalidate()
    arm, ob = _bent_column()
    ob.modifiers.new("Sub", 'SUBSURF').levels = 1
    bpy.context.view_layer.update()
    g = geo.evaluated_geometry(ob)
    assert not g.topology_matches and len(g.co) == len(ob.data.vertices)
    idx, _ = geo.snap_world_to_vertex(ob, np.array(ob.data.vertices[5].co) + [0.0, -0.02, 0.0])
    assert idx == 5


# ------------------------------------------------------------------------------------------ drag handlers
@pytest.fixture
def kv_items(addon):
    """The gizmo module, with the real key-vertex storage (``Object.reconform_keyverts``) registered."""
    assert "reconform_keyverts" in bpy.types.Object.bl_rna.properties
    return ui(addon, "gizmos")


@pytest.fixture
def geo(addon):
    return ui(addon, "bridge.geometry")


def _with_keyverts(ob, ids, limbs=("left_hand", "torso")):
    for i, (vid, limb) in enumerate(zip(ids, limbs)):
        it = ob.reconform_keyverts.add()
        it.name, it.index, it.limb = f"kv{i}", vid, limb


def test_handlers_get_set_release_snap_and_lock(kv_items, geo, clean_scene):
    gz = kv_items
    geo.invalidate()
    arm, ob = _bent_column()
    _with_keyverts(ob, (34, 3))
    g = geo.evaluated_geometry(ob)
    get, set_ = gz.make_handlers(ob.name, 0)
    assert np.allclose(get(), g.co[34])             # on the posed surface
    gz.begin_drag(ob.name, 0)
    drop = g.co[21] + np.array([0.0, -0.04, 0.0])    # dragged next to vertex 21
    set_(tuple(drop))
    assert np.allclose(get(), drop)                  # follows the mouse while dragging...
    assert ob.reconform_keyverts[0].index == 34 and not ob.reconform_keyverts[0].locked  # ...writing nothing
    idx = gz.end_drag(ob.name, 0)
    it = ob.reconform_keyverts[0]
    assert idx == 21 and it.index == 21 and it.locked
    assert np.allclose(get(), g.co[21])
    assert ob.reconform_keyverts[1].index == 3 and not ob.reconform_keyverts[1].locked  # others untouched


def test_cancelled_drag_changes_nothing(kv_items, geo, clean_scene):
    gz = kv_items
    geo.invalidate()
    arm, ob = _bent_column()
    _with_keyverts(ob, (34, 3))
    get, set_ = gz.make_handlers(ob.name, 1)
    gz.begin_drag(ob.name, 1)
    set_((5.0, 5.0, 5.0))
    assert gz.end_drag(ob.name, 1, cancel=True) is None
    assert ob.reconform_keyverts[1].index == 3 and not ob.reconform_keyverts[1].locked
    assert gz.end_drag(ob.name, 1) is None           # release without a drag: nothing to snap


def test_handlers_survive_reload_because_they_look_up_by_name(kv_items, geo, clean_scene, tmp_path):
    """Undo/redo and file reloads replace every bpy struct; the handlers hold names only."""
    gz = kv_items
    geo.invalidate()
    arm, ob = _bent_column()
    _with_keyverts(ob, (34, 3))
    name = ob.name
    get, set_ = gz.make_handlers(name, 1)
    path = tmp_path / "kv.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    geo.evaluated_geometry(ob)
    gz.begin_drag(name, 1)
    set_(tuple(geo.evaluated_geometry(ob).co[5]))   # a drag in progress when the file is replaced
    assert geo._GEOM and gz._DRAG
    bpy.ops.wm.open_mainfile(filepath=str(path))
    assert not geo._GEOM and not gz._DRAG          # the old file's geometry and drags are forgotten on load
    ob2 = bpy.data.objects[name]
    assert np.allclose(get(), geo.evaluated_geometry(ob2).co[3])
    gz.begin_drag(name, 1)
    set_(tuple(geo.evaluated_geometry(ob2).co[7] + [0.0, -0.03, 0.0]))
    assert gz.end_drag(name, 1) == 7 and ob2.reconform_keyverts[1].locked
    # the object is gone: handlers return a harmless value instead of raising in the draw loop
    bpy.data.objects.remove(ob2)
    assert get() == (0.0, 0.0, 0.0)


def test_stale_vertex_index_is_reported_not_drawn(kv_items, geo, clean_scene):
    gz = kv_items
    geo.invalidate()
    arm, ob = _bent_column()
    _with_keyverts(ob, (999, 3))
    get, _ = gz.make_handlers(ob.name, 0)
    assert get() == (0.0, 0.0, 0.0)
    with pytest.raises(IndexError, match="transfer the key vertices again"):
        geo.key_vertex_world(ob, 0)


def test_active_key_vertex_is_highlighted(kv_items, clean_scene):
    gz = kv_items
    gz.set_active(clean_scene, "Col", 4)
    s = clean_scene.reconform
    assert (s.keyvert_active_object, s.keyvert_active) == ("Col", 4)


def test_item_on_a_second_mesh_and_snapping_back_to_the_body(kv_items, geo, clean_scene):
    """Key vertices may point into another mesh of the character (``item.mesh``); a drag snaps onto the
    nearer of the body and that mesh."""
    gz = kv_items
    geo.invalidate()
    arm, body = _bent_column("Body")
    _arm2, cloth = _bent_column("Cloth")
    cloth.location.x = 1.0                       # a second mesh one metre to the side
    bpy.context.view_layer.update()
    _with_keyverts(body, (34, 3))
    body.reconform_keyverts[1].mesh = cloth.name
    get, set_ = gz.make_handlers(body.name, 1)
    assert np.allclose(get(), geo.evaluated_geometry(cloth).co[3])
    gz.begin_drag(body.name, 1)
    set_(tuple(geo.evaluated_geometry(body).co[9] + [0.0, -0.02, 0.0]))
    assert gz.end_drag(body.name, 1) == 9
    it = body.reconform_keyverts[1]
    assert (it.mesh, it.index, it.locked) == ("", 9, True)
    assert np.allclose(it.co, body.data.vertices[9].co)   # the storage refreshed its cached rest position
