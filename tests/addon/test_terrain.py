"""The target's ground object (bridge.terrain, pipeline, panel): any mesh object, as the viewport shows it
(modifiers, scale, rotation), becomes the height field the target walks on; bad grounds get a one-line message
naming them; the report and the panel name the ground used."""

import importlib
import math

import numpy as np
import pytest

from core.body import BodyParams, make_body
from tools.make_demo_scene import build_character

from .ui_helpers import draw_panel, generated_pair, ui

bpy = pytest.importorskip("bpy")

FRAMES = 12


def _mods(addon):
    get = lambda name: importlib.import_module(f"{addon.__name__}.{name}")  # noqa: E731
    return (get("reconform_addon.bridge.terrain"), get("reconform_addon.pipeline"), get("core.contacts.terrain"),
            get("reconform_addon.bridge"))


def _plane_object(name, size=(2.0, 1.0), location=(0, 0, 0)):
    w, d = size
    me = bpy.data.meshes.new(name)
    me.from_pydata([(0, 0, 0), (w, 0, 0), (w, d, 0), (0, d, 0)], [], [(0, 1, 2, 3)])
    ob = bpy.data.objects.new(name, me)
    ob.location = location
    bpy.context.scene.collection.objects.link(ob)
    return ob


def test_ground_is_the_evaluated_mesh_with_its_modifier_scale_and_rotation(addon, clean_scene):
    terrain, _, core_terrain, _ = _mods(addon)
    # a 2 x 1 m plane, repeated 3 times along its x by an Array modifier, scaled (1.5, 2) and tilted 15° about
    # x: a ramp 9 m wide and 2 m deep rising along y
    ob = _plane_object("Ramp", location=(1.0, -2.0, 0.3))
    arr = ob.modifiers.new("Array", 'ARRAY')
    arr.count = 3
    ob.scale = (1.5, 2.0, 1.0)
    ob.rotation_euler = (math.radians(15), 0, 0)
    bpy.context.view_layer.update()
    surf = terrain.read_ground(ob)
    assert surf.name == "Ramp" and len(surf.triangles) == 6          # 3 quads: the modifier's copies count
    x0, x1, y0, y1, z0, z1 = surf.bounds
    assert (x0, x1) == pytest.approx((1.0, 10.0)) and (y0, y1) == pytest.approx((-2.0, -2.0 + 2 * math.cos(
        math.radians(15))))
    field, rep = core_terrain.sample_ground(surf, (1.2, 9.8, -1.9, -0.3))
    rng = np.random.default_rng(0)
    xy = rng.uniform([1.2, -1.9], [9.8, -0.3], (2000, 2))
    analytic = 0.3 + (xy[:, 1] + 2.0) * math.tan(math.radians(15))
    assert np.abs(field.at(xy) - analytic).max() < 1e-6              # the third copy (x > 7 m) included
    assert rep.holes == 0 and rep.overhangs == 0


def test_ground_follows_a_modifier_that_moves_its_surface(addon, clean_scene):
    terrain, _, core_terrain, _ = _mods(addon)
    ob = _plane_object("Lifted", size=(2.0, 2.0))
    disp = ob.modifiers.new("Displace", 'DISPLACE')        # no texture: every vertex moves by strength along z
    disp.strength, disp.direction, disp.mid_level = 0.25, 'Z', 0.0
    surf = terrain.read_ground(ob)
    field, _ = core_terrain.sample_ground(surf, (0.2, 1.8, 0.2, 1.8))
    assert np.allclose(field.heights, 0.25)


def test_bad_grounds_get_one_line_naming_them(addon, clean_scene):
    terrain, _, _, bridge = _mods(addon)
    me = bpy.data.meshes.new("Dots")
    me.from_pydata([(0, 0, 0), (1, 0, 0), (1, 1, 0)], [(0, 1)], [])
    dots = bpy.data.objects.new("Dots", me)
    bpy.context.scene.collection.objects.link(dots)
    with pytest.raises(bridge.BridgeError, match="Ground 'Dots' has no faces"):
        terrain.read_ground(dots)
    lamp = bpy.data.objects.new("Lamp", bpy.data.lights.new("Lamp", 'POINT'))
    with pytest.raises(bridge.BridgeError, match="Ground 'Lamp' is a light, not a mesh"):
        terrain.read_ground(lamp)
    sk, mesh, _ = make_body(BodyParams(name="g", resolution=0.03), pose="T")
    arm = build_character("Hero", sk, mesh, 0.0)
    with pytest.raises(bridge.BridgeError, match="Ground 'Hero_body' is part of character 'Hero'"):
        terrain.read_ground(bpy.data.objects["Hero_body"], characters=(arm,))
    with pytest.raises(bridge.BridgeError, match="No ground object named 'Nope'"):
        terrain.find_ground("Nope")


@pytest.fixture(scope="module")
def walk_blend(addon, tmp_path_factory):
    """A generated walker and a heavy target, a step 15 cm high across the target's path ('Step'), and a
    doormat far from it ('Doormat')."""
    generated_pair(addon, FRAMES, stride=0.6)
    low = _plane_object("Step", size=(2.0, 1.0), location=(0.2, -0.6, 0.0))      # y -0.6 .. 0.4 at z = 0
    solid = low.modifiers.new("Solidify", 'SOLIDIFY')   # a modifier the bridge must evaluate (thickness below)
    solid.thickness, solid.offset = 0.05, -1.0
    me = low.data
    me.vertices[0].co.z = me.vertices[1].co.z = 0.15    # the half nearer -y is raised: a 15 cm slope, 1 m deep
    _plane_object("Doormat", size=(0.5, 0.5), location=(20.0, 20.0, 0.0))
    path = tmp_path_factory.mktemp("ground") / "walk.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def test_retarget_onto_a_ground_object_reports_it_and_starts_on_it(addon, walk_blend):
    terrain, pipeline, _, _ = _mods(addon)
    bpy.ops.wm.open_mainfile(filepath=str(walk_blend))
    src, tgt, step = (bpy.data.objects[n] for n in ("Walker", "Heavy", "Step"))
    res = pipeline.retarget(src, tgt, method="copy_rotations", ground=step)
    g = res.report["ground"]
    assert g["object"] == "Step" and g["spacing_m"] == pytest.approx(0.02) and g["grid"][0] * g["grid"][1] > 100
    assert g["overhangs"] == 0 and g["height_range_m"][1] == pytest.approx(0.15, abs=1e-3)
    assert any(n.startswith("ground Step:") for n in res.report["notes"])
    # copy-rotations stands on the ground at frame 0 (the slope under its lowest foot point), then walks on
    # at flat height
    field = res.outcome.terrain
    from core.character.track import ClipTrack
    feet = ClipTrack(res.outcome.target, res.motion).foot_points
    first = np.concatenate([p[0] for p in feet])
    assert (first[:, 2] - field.at(first[:, :2])).min() == pytest.approx(0.0, abs=1e-4)
    # the same retarget on the world floor: its report says so
    flat = pipeline.retarget(src, tgt, method="copy_rotations")
    assert flat.report["ground"] == {"object": None, "floor": "world z = 0"}


def test_a_ground_that_does_not_cover_the_walk_is_named(addon, walk_blend):
    _, pipeline, _, _ = _mods(addon)
    core_errors = importlib.import_module(f"{addon.__name__}.core.errors")
    bpy.ops.wm.open_mainfile(filepath=str(walk_blend))
    src, tgt = bpy.data.objects["Walker"], bpy.data.objects["Heavy"]
    n_actions = len(bpy.data.actions)
    with pytest.raises(core_errors.CoreError, match="Ground 'Doormat' does not cover the clip's footprint"):
        pipeline.retarget(src, tgt, method="copy_rotations", ground=bpy.data.objects["Doormat"])
    assert len(bpy.data.actions) == n_actions                            # nothing written


def test_panel_ground_picker_and_its_report(addon, walk_blend):
    bpy.ops.wm.open_mainfile(filepath=str(walk_blend))
    s = bpy.context.scene.reconform
    s.source, s.target, s.action = bpy.data.objects["Walker"], bpy.data.objects["Heavy"], bpy.data.actions["Walk"]
    s.method = 'RECONFORM'
    s.ground = 'OBJECT'
    panels = ui(addon, "panels")
    drawn = draw_panel(panels.VIEW3D_PT_reconform_solver, bpy.context)
    assert {"ground", "ground_object"} <= set(drawn.props()) and "Pick the mesh the target walks on" in drawn.texts()
    with pytest.raises(RuntimeError, match="Ground is set to Object but no object is picked"):
        bpy.ops.reconform.retarget()                                       # nothing written
    assert s.last_action is None
    s.ground_object = bpy.data.objects["Step"]
    s.method = 'COPY_ROTATIONS'
    assert bpy.ops.reconform.retarget() == {'FINISHED'}
    assert s.last_ground.startswith("Step: ") and "samples every 2 cm" in s.last_ground
    s.ground = 'WORLD'
    assert bpy.ops.reconform.retarget() == {'FINISHED'}
    assert s.last_ground == "World Floor (z = 0)"


def _batch(*args):
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env.pop("BLENDER_USER_RESOURCES", None)
    return subprocess.run([sys.executable, os.path.join(root, "tools", "retarget.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=600, cwd=root, env=env)


@pytest.mark.slow
def test_batch_takes_a_ground_from_the_scene_or_another_file(addon, walk_blend, tmp_path):
    import json
    # the ground in its own file: only the step, renamed
    bpy.ops.wm.open_mainfile(filepath=str(walk_blend))
    for ob in list(bpy.data.objects):
        if ob.name != "Step":
            bpy.data.objects.remove(ob)
    bpy.data.objects["Step"].name = "Landing"
    ground_file = tmp_path / "ground.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(ground_file))
    rep = tmp_path / "r.json"
    base = ["--blend", walk_blend, "--source", "Walker", "--target", "Heavy", "--action", "Walk", "--quiet"]
    r = _batch(*base, "--ground-file", ground_file, "--report", rep)      # the file's only mesh
    assert r.returncode == 0, r.stderr[-2000:]
    g = json.loads(rep.read_text())["ground"]
    assert g["object"] == "Landing" and g["holes"] >= 0 and g["height_range_m"][1] == pytest.approx(0.15, abs=1e-3)
    txt = tmp_path / "r.txt"
    setup = tmp_path / "setup.json"
    setup.write_text(json.dumps({"ground": {"object": "Step", "spacing": 0.04}}))
    r = _batch(*base, "--setup", setup, "--report", txt)                    # the open file's object, by set-up
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ground: Step, " in txt.read_text() and "every 4 cm" in txt.read_text()
    r = _batch(*base, "--ground", "Doormat", "--out", tmp_path / "no.blend")
    assert r.returncode == 1 and not (tmp_path / "no.blend").exists()
    assert r.stderr.strip().splitlines()[-1].startswith("error: Ground 'Doormat' does not cover the clip's footprint")
    r = _batch(*base, "--ground", "Nowhere", "--out", tmp_path / "nowhere.blend")
    assert r.returncode == 1 and "error: No ground object named 'Nowhere'" in r.stderr
    assert not (tmp_path / "nowhere.blend").exists()
