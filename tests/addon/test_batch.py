"""tools/retarget.py, run as a subprocess with the bpy wheel: one full run with every output, and each bad
input (one-line message, non-zero exit, nothing written, input .blend unchanged)."""

import hashlib
import importlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.addon.bridge_helpers import modules
from tests.conftest import ROOT

bpy = pytest.importorskip("bpy")
TOOL = ROOT / "tools" / "retarget.py"


def run_tool(*args, timeout=300):
    env = dict(os.environ)
    env.pop("BLENDER_USER_RESOURCES", None)
    p = subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=str(ROOT))
    return p.returncode, p.stdout, p.stderr


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture(scope="module")
def scene_blend(addon, assets, tmp_path_factory):
    """A .blend with a BVH mocap ('walk'), a character ('mh_teen_girl_rig') and 'Stick', a one-bone armature
    with a mesh (nothing humanoid to map)."""
    br, _ = modules(addon)
    bpy.ops.wm.read_homefile(use_empty=True)
    br.import_file(assets / "motions" / "NC_bandai_walk_normal_001.bvh")
    br.import_file(assets / "characters" / "mh_teen_girl.glb")
    arm = bpy.data.objects.new("Stick", bpy.data.armatures.new("Stick"))
    bpy.context.scene.collection.objects.link(arm)
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode='EDIT')
    eb = arm.data.edit_bones.new("Bone")
    eb.tail = (0, 0, 1)
    bpy.ops.object.mode_set(mode='OBJECT')
    me = bpy.data.meshes.new("stick")
    me.from_pydata([(0, 0, 0), (0.1, 0, 0), (0, 0, 1)], [], [(0, 1, 2)])
    ob = bpy.data.objects.new("stick_body", me)
    bpy.context.scene.collection.objects.link(ob)
    ob.vertex_groups.new(name="Bone").add([0, 1, 2], 1.0, 'REPLACE')
    ob.modifiers.new("Armature", 'ARMATURE').object = arm
    path = tmp_path_factory.mktemp("batch") / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path), copy=True)
    bpy.ops.wm.read_homefile(use_empty=True)
    return path


@pytest.mark.slow
@pytest.mark.assets
def test_batch_full_run_from_files(addon, assets, tmp_path):
    out, rep = tmp_path / "out" / "result.blend", tmp_path / "report.json"
    fbx, bvh = tmp_path / "result.fbx", tmp_path / "result.bvh"
    rc, so, se = run_tool("--source", assets / "motions" / "NC_bandai_walk_normal_001.bvh",
                          "--target", assets / "characters" / "mh_female_curvy_mixamorig.glb",
                          "--frames", 5, 16, "--name", "Walk on curvy", "--out", out, "--report", rep,
                          "--export", fbx, "--export", bvh)
    assert rc == 0, se
    assert "wrote Action 'Walk on curvy'" in so and "progress" in so
    assert fbx.stat().st_size > 0 and bvh.stat().st_size > 0
    report = json.loads(rep.read_text())
    assert report["method"] == "copy_rotations" and report["frames"] == 12
    assert (report["frame_start"], report["frame_end"]) == (5, 16)
    assert report["source_action"] == "NC_bandai_walk_normal_001"
    assert report["target"]["armature"] == "mh_female_curvy_mixamorig_rig" and report["target"]["mapped"] >= 20
    assert report["source"]["unmapped"] == ["joint_Root"]
    # the saved file holds the new Action, keyed for every bone of the target on every frame
    with bpy.data.libraries.load(str(out)) as (src, dst):
        assert "Walk on curvy" in src.actions and "NC_bandai_walk_normal_001" in src.actions
        dst.actions = ["Walk on curvy"]
    act = dst.actions[0]
    try:
        from bpy_extras import anim_utils
        bag = anim_utils.action_get_channelbag_for_slot(act, act.slots[0])
        assert len(bag.fcurves) == 7 * 52
        frames = set()
        for fc in bag.fcurves:
            co = np.empty(2 * len(fc.keyframe_points), np.float32)
            fc.keyframe_points.foreach_get("co", co)
            frames.add(tuple(co[0::2]))
        assert frames == {tuple(np.arange(5, 17, dtype=np.float32))}
    finally:
        bpy.data.actions.remove(act)


def _bad(args, message, tmp_path, scene=None):
    out, rep = tmp_path / "o.blend", tmp_path / "r.json"
    before = digest(scene) if scene else None
    rc, so, se = run_tool(*args, "--out", out, "--report", rep, "--quiet")
    lines = [ln for ln in se.splitlines() if ln.startswith("error:")]
    assert rc == 1, se
    assert len(lines) == 1 and message in lines[0], se
    assert not out.exists() and not rep.exists()
    if scene:
        assert digest(scene) == before


@pytest.mark.slow
@pytest.mark.assets
def test_batch_missing_object(scene_blend, tmp_path):
    _bad(["--blend", scene_blend, "--source", "NoSuchRig", "--target", "mh_teen_girl_rig"],
         "No object named 'NoSuchRig' (armatures available: NC_bandai_walk_normal_001, Stick, mh_teen_girl_rig)",
         tmp_path, scene_blend)


@pytest.mark.slow
@pytest.mark.assets
def test_batch_target_without_mesh_for_reconform(scene_blend, tmp_path):
    _bad(["--blend", scene_blend, "--source", "mh_teen_girl_rig", "--target", "NC_bandai_walk_normal_001",
          "--method", "reconform"], "--target NC_bandai_walk_normal_001: 'NC_bandai_walk_normal_001' is a motion "
         "(a skeleton that moves no mesh, playing 'NC_bandai_walk_normal_001'), not a character with a mesh",
         tmp_path, scene_blend)


@pytest.mark.assets
def test_batch_nothing_mapped(scene_blend, tmp_path):
    _bad(["--blend", scene_blend, "--source", "NC_bandai_walk_normal_001", "--target", "Stick"],
         "Nothing mapped on 'Stick'", tmp_path, scene_blend)


@pytest.mark.slow
@pytest.mark.assets
def test_batch_unreadable_and_missing_files(assets, tmp_path):
    bad = tmp_path / "broken.fbx"
    bad.write_bytes(b"\x00not an fbx\x00" * 50)
    _bad(["--source", bad, "--target", assets / "characters" / "mh_teen_girl.glb"],
         f"Cannot import '{bad}'", tmp_path)
    _bad(["--source", tmp_path / "absent.bvh", "--target", assets / "characters" / "mh_teen_girl.glb"],
         "file not found", tmp_path)


def test_batch_bad_arguments(tmp_path):
    rc, so, se = run_tool("--source", "a", "--target", "b", "--export", tmp_path / "x.obj")
    assert rc == 1 and se == f"error: --export {tmp_path / 'x.obj'}: unsupported format '.obj' (use .fbx, .glb, " \
        ".gltf, .bvh).\n", se


def test_the_set_up_window_entry(addon):
    pl = importlib.import_module(addon.__name__ + ".reconform_addon.pipeline")
    plan = pl.setup_window({"window": 300})
    assert (plan.length, plan.overlap) == (300, 60)
    plan = pl.setup_window({"window": {"frames": 90, "overlap": 20}})
    assert (plan.length, plan.overlap) == (90, 20)
    assert pl.setup_window({}) is None and pl.setup_window({"window": 0}) is None
    for bad, says in (({"window": "long"}, "number of frames"), ({"window": {"frames": 90, "step": 3}}, "step"),
                      ({"window": 4}, "too short"), ({"window": {"frames": 90, "overlap": 60}}, "overlap"),
                      ({"window": 90.5}, "number of frames")):
        with pytest.raises(pl.BridgeError, match=says):
            pl.setup_window(bad)


@pytest.mark.slow
@pytest.mark.assets
def test_batch_retargets_a_long_clip_in_windows(scene_blend, tmp_path):
    """--window: the clip solved as overlapping windows, one Action for the whole range, the windows and the
    metrics of the stitched clip in the report; a window too short is refused before anything is written."""
    out, rep = tmp_path / "w.blend", tmp_path / "w.json"
    rc, so, se = run_tool("--blend", scene_blend, "--source", "NC_bandai_walk_normal_001",
                          "--target", "mh_teen_girl_rig", "--method", "reconform", "--quality", "fast",
                          "--frames", 1, 120, "--window", 50, "--window-overlap", 10, "--out", out, "--report", rep)
    assert rc == 0, se
    assert "in windows of 50 frames sharing 10" in so and "Window 3/3" in so
    report = json.loads(rep.read_text())
    assert report["frames"] == 120 and report["metrics_solver"]["windows"] == 3
    assert any("3 windows of 50 frames" in n for n in report["notes"])
    m, ref = report["metrics"], report["reference_metrics"]
    assert m["frames"] == 120 and m["floor_pen_mean"] < ref["floor_pen_mean"]
    _bad(["--blend", scene_blend, "--source", "NC_bandai_walk_normal_001", "--target", "mh_teen_girl_rig",
          "--method", "reconform", "--window", 4], "too short", tmp_path, scene_blend)
    rc, so, se = run_tool("--source", "a", "--target", "b", "--window-overlap", 10)
    assert rc == 2 and "--window-overlap needs --window" in se


def test_the_set_up_baseline_metrics_entry(addon):
    sf = importlib.import_module(addon.__name__ + ".reconform_addon.setup_file")
    assert sf.setup_options("reconform", None, {}).baseline_metrics is True
    assert sf.setup_options("reconform", None, {"baseline_metrics": False}).baseline_metrics is False
    with pytest.raises(sf.BridgeError, match="'baseline_metrics' must be true or false"):
        sf.setup_options("reconform", None, {"baseline_metrics": "no"})


def test_the_set_up_refuses_an_unknown_solver_setting_by_name(addon):
    """A set-up's ``settings`` naming no SolverSettings field (a typo, or a choice that is a module constant now)
    fail with the name, before anything runs; the known ones and the quality preset are taken."""
    sf = importlib.import_module(addon.__name__ + ".reconform_addon.setup_file")
    s = sf.setup_options("reconform", None, {"settings": {"quality": "fast", "w_pen": 0.7}}).settings
    assert (s.w_pen, s.iterations) == (0.7, 60)
    with pytest.raises(sf.BridgeError, match="Solver settings: Unknown solver setting smooth_soles: use w_reg"):
        sf.setup_options("reconform", None, {"settings": {"smooth_soles": 1.0, "w_pen": 0.7}})


@pytest.mark.slow
@pytest.mark.assets
def test_batch_without_the_baseline_metrics(scene_blend, tmp_path):
    """--no-baseline-metrics: the result is measured, copy-rotations is not (a library run's time); both reports
    say so rather than show an empty column."""
    out, rep, txt = tmp_path / "n.blend", tmp_path / "n.json", tmp_path / "n.txt"
    args = ["--blend", scene_blend, "--source", "NC_bandai_walk_normal_001", "--target", "mh_teen_girl_rig",
            "--method", "reconform", "--quality", "fast", "--frames", 1, 40, "--no-baseline-metrics"]
    rc, so, se = run_tool(*args, "--out", out, "--report", rep)
    assert rc == 0, se
    report = json.loads(rep.read_text())
    assert report["metrics"]["frames"] == 40 and report["reference_metrics"] is None
    assert all(r["copy_rotations"] is None and r["value"] is not None for r in report["metrics_table"])
    rc, so, se = run_tool(*args, "--report", txt)
    assert rc == 0, se
    text = txt.read_text()
    assert "Floor penetration, mean" in text and "copy-rotations" not in text.split("metrics (")[1].splitlines()[1]
