"""tools/retarget.py on files built here with bpy (issue 15 items 2, 3, 5, 6, 8, 14, 15, 16, 17), each run as a
technical director runs it, in a separate process:

- a BVH source at 30 fps onto a glTF target that carries its own 24 fps clip: the result, the saved scene and
  the report stay at 30 fps; the result file holds the two characters and nothing else (no startup Cube,
  Light, Camera, no bone-shape Icosphere); the new Action is '<clip> to <target>';
- a glTF source whose Action's first slot animates shape keys, picked with ``--action``;
- a .blend whose clip has a 1e30 key, and a frame range outside the clip: exit 1, one ``error:`` line naming
  the Action (and the F-curve and frame, or the clip's range), nothing written, the .blend unchanged;
- empty and garbage .bvh files, an unwritable ``--out`` or ``--report``: exit 1, one line, no traceback,
  nothing written, the outputs checked before any import;
- ``--quiet`` prints nothing on success, the normal mode only the command's own lines, ``--verbose`` the
  importers' messages too;
- every run leaves its temporary folder empty, also after an error and after Ctrl+C (exit 130, one line).
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.addon.generated import generated_pair
from tests.conftest import ROOT

bpy = pytest.importorskip("bpy")
pytestmark = pytest.mark.slow   # each test runs the command in a new process (torch import: 5-15 s)
TOOL = ROOT / "tools" / "retarget.py"
FRAMES = 8


def run_tool(*args, tmp, timeout=300):
    """(exit status, stdout, stderr) of the command with TMPDIR = ``tmp`` (which must stay empty)."""
    env = dict(os.environ, TMPDIR=str(tmp))
    env.pop("BLENDER_USER_RESOURCES", None)
    p = subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=str(ROOT))
    return p.returncode, p.stdout, p.stderr


@pytest.fixture
def tmp(tmp_path):
    """The command's TMPDIR: empty after every run. Only torch's own cache folder may stay: one per user
    ('torchinductor_<user>', made when the solve calls ``torch.use_deterministic_algorithms``), shared and
    reused by every later run, like a cache in the home folder."""
    d = tmp_path / "tmpdir"
    d.mkdir()
    yield d
    left = [n for n in os.listdir(d) if not n.startswith("torchinductor_")]
    assert left == [], "the command left temporary files behind"


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _select_only(*obs):
    for o in bpy.context.view_layer.objects:
        o.select_set(False)
    for o in obs:
        o.select_set(True)
    bpy.context.view_layer.objects.active = obs[0]


def build_files(d) -> dict:
    """walker.bvh (the generated walk, 30 fps), heavy_clip.glb (the heavy character with its own 'Idle' clip
    keyed at 24 fps), walker_face.glb (the walker plus a face mesh whose shape key is animated by the same
    'Walk' Action, its slot first), good.blend and broken.blend (both characters; broken has a 1e30 key).
    Runs in its own process (``files``): the bpy wheel's interpreter hangs at exit once torch was loaded and
    the glTF exporter ran (tools/retarget.py ``_exit``)."""
    import importlib
    from tools.extension import disable_addon, enable_addon

    mod, repo = enable_addon("batch_files")
    br = importlib.import_module(mod.__name__ + ".reconform_addon.bridge")
    out = {}
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = 30, 1.0
    walker, heavy = generated_pair(br, frames=FRAMES)
    out["good"] = d / "good.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(out["good"]), copy=True)
    fc = next(fc for fc in walker.animation_data.action.layers[0].strips[0].channelbags[0].fcurves
              if fc.data_path == 'pose.bones["hips"].location' and fc.array_index == 2)
    fc.keyframe_points[2].co[1] = 1e30
    out["broken"] = d / "broken.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(out["broken"]), copy=True)
    fc.keyframe_points[2].co[1] = fc.keyframe_points[1].co[1]
    _select_only(walker)
    out["bvh"] = d / "walker.bvh"
    assert bpy.ops.export_anim.bvh(filepath=str(out["bvh"]), frame_start=1, frame_end=FRAMES) == {'FINISHED'}
    # the face and its shape key, animated by the walk's own Action (a 'KEY' slot), exported before the walker
    me = bpy.data.meshes.new("face")
    me.from_pydata([(0, 0, 2), (0.1, 0, 2), (0, 0.1, 2)], [], [(0, 1, 2)])
    face = bpy.data.objects.new("AFace", me)
    scene.collection.objects.link(face)
    face.shape_key_add(name="Basis")
    face.shape_key_add(name="Smile")
    act = walker.animation_data.action
    keys = face.data.shape_keys
    ad = keys.animation_data_create()
    ad.action, ad.action_slot = act, act.slots.new(id_type='KEY', name=keys.name)
    for f, v in ((1, 0.0), (FRAMES, 1.0)):
        keys.key_blocks["Smile"].value = v
        keys.key_blocks["Smile"].keyframe_insert("value", frame=f)
    _select_only(walker, bpy.data.objects["Walker_body"], face)
    out["face_glb"] = d / "walker_face.glb"
    bpy.ops.export_scene.gltf(filepath=str(out["face_glb"]), export_format='GLB', use_selection=True,
                              export_animations=True)
    # the target with its own clip, keyed at 24 fps
    scene.render.fps = 24
    idle = bpy.data.actions.new("Idle")
    heavy.animation_data_create().action = idle
    pb = heavy.pose.bones["spine"]
    for f, a in ((1, 0.0), (24, 0.3), (48, 0.0)):
        pb.rotation_euler = (a, 0.0, 0.0)
        pb.keyframe_insert("rotation_euler", frame=f)
    _select_only(heavy, bpy.data.objects["Heavy_body"])
    out["target_glb"] = d / "heavy_clip.glb"
    bpy.ops.export_scene.gltf(filepath=str(out["target_glb"]), export_format='GLB', use_selection=True,
                              export_animations=True)
    disable_addon("batch_files", repo)
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("batch_inputs")
    code = ("import os, pathlib, sys; sys.path.insert(0, sys.argv[1]); "
            "from tests.addon.test_batch_inputs import build_files; "
            "print(sorted(build_files(pathlib.Path(sys.argv[2]))), flush=True); os._exit(0)")
    (d / "user").mkdir()
    (d / "tmp").mkdir()
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(d / "user"), TMPDIR=str(d / "tmp"))
    p = subprocess.run([sys.executable, "-c", code, str(ROOT), str(d)], capture_output=True, text=True,
                       timeout=600, env=env, cwd=str(ROOT))
    assert p.returncode == 0, p.stderr[-3000:]
    names = {"good": "good.blend", "broken": "broken.blend", "bvh": "walker.bvh", "face_glb": "walker_face.glb",
             "target_glb": "heavy_clip.glb"}
    out = {k: d / v for k, v in names.items()}
    assert all(p.is_file() for p in out.values())
    return out


def test_source_rate_governs_and_the_result_holds_only_the_characters(files, tmp, tmp_path):
    out, rep = tmp_path / "res" / "result.blend", tmp_path / "res" / "report.json"
    rc, so, se = run_tool("--source", files["bvh"], "--target", files["target_glb"], "--out", out, "--report", rep,
                          tmp=tmp)
    assert rc == 0 and se == "", se
    # normal mode: only the command's own lines (no importer chatter, no INFO lines)
    lines = so.splitlines()
    assert lines and all(ln.startswith("[reconform ") for ln in lines), so
    report = json.loads(rep.read_text())
    assert report["fps"] == pytest.approx(30.0, abs=1e-3) and report["frames"] == FRAMES
    assert report["action"] == "walker to Heavy" and report["source_action"] == "walker"
    bpy.ops.wm.open_mainfile(filepath=str(out))
    try:
        scene = bpy.context.scene
        assert scene.render.fps / scene.render.fps_base == pytest.approx(30.0, abs=1e-3)
        assert sorted(o.name for o in bpy.data.objects) == ["Heavy", "Heavy_body", "walker"]
        heavy = bpy.data.objects["Heavy"]
        assert heavy.animation_data.action.name == "walker to Heavy"
        assert tuple(heavy.animation_data.action.frame_range) == (1.0, float(FRAMES))
        assert "Idle" in bpy.data.actions          # the target's own clip came with it
    finally:
        bpy.ops.wm.read_homefile(use_empty=True)


def test_gltf_source_action_with_a_shape_key_slot_first(files, tmp, tmp_path):
    rep = tmp_path / "r.json"
    rc, so, se = run_tool("--source", files["face_glb"], "--source-armature", "Walker", "--action", "Walk",
                          "--target", files["target_glb"], "--report", rep, "--quiet", tmp=tmp)
    assert rc == 0 and so == "" and se == "", se      # --quiet: nothing at all on success
    report = json.loads(rep.read_text())
    assert report["source_action"] == "Walk" and report["action"] == "Walk to Heavy"
    assert report["frames"] == FRAMES and report["fps"] == pytest.approx(30.0, abs=1e-3)


def test_verbose_shows_the_importers_messages(files, tmp, tmp_path):
    rc, so, se = run_tool("--source", files["bvh"], "--target", files["target_glb"], "--verbose",
                          "--report", tmp_path / "r.json", tmp=tmp)
    assert rc == 0, se
    assert "parsing bvh" in so + se and "glTF import finished" in so + se   # Blender's importers, shown
    assert "[reconform " in so and "wrote Action 'walker to Heavy'" in so


def _bad(args, message, tmp, tmp_path, scene=None):
    out, rep = tmp_path / "o" / "o.blend", tmp_path / "r.json"
    before = digest(scene) if scene else None
    rc, so, se = run_tool(*args, "--out", out, "--report", rep, tmp=tmp)
    assert rc == 1, se
    assert se.count("\n") == 1 and se.startswith("error: ") and message in se, se
    assert "Traceback" not in so + se and "INFO" not in so
    assert not out.exists() and not rep.exists() and not out.parent.exists()
    if scene:
        assert digest(scene) == before
    return se


def test_absurd_source_key_is_named(files, tmp, tmp_path):
    _bad(["--blend", files["broken"], "--source", "Walker", "--target", "Heavy"],
         "error: Action 'Walk': pose.bones[\"hips\"].location[2] has an absurd (1e+30, beyond ±", tmp, tmp_path,
         scene=files["broken"])


def test_frame_range_outside_the_clip(files, tmp, tmp_path):
    _bad(["--blend", files["good"], "--source", "Walker", "--target", "Heavy", "--frames", 5000, 6000],
         f"Frames 5000..6000 lie outside the clip (Action 'Walk' has frames 1..{FRAMES}): pick a range inside it",
         tmp, tmp_path, scene=files["good"])


def test_empty_and_garbage_bvh(files, tmp, tmp_path):
    empty, garbage = tmp_path / "empty.bvh", tmp_path / "garbage.bvh"
    empty.write_bytes(b"")
    garbage.write_bytes(bytes(np.random.default_rng(0).integers(0, 256, 4000, dtype=np.uint8)))
    _bad(["--source", empty, "--target", files["target_glb"]], f"Cannot import '{empty}': the file is empty.",
         tmp, tmp_path)
    _bad(["--source", garbage, "--target", files["target_glb"]],
         f"Cannot import '{garbage}': not a BVH file (binary data", tmp, tmp_path)


def test_unwritable_outputs_fail_before_any_work(files, tmp, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    args = ["--source", files["bvh"], "--target", files["target_glb"]]
    rc, so, se = run_tool(*args, "--out", a_file / "o.blend", "--report", tmp_path / "r.json", tmp=tmp)
    assert rc == 1 and se == f"error: --out {a_file / 'o.blend'}: '{a_file}' is a file, not a folder.\n"
    assert so == "" and not (tmp_path / "r.json").exists()
    # an unwritable --report: the .blend is not written either
    out = tmp_path / "out.blend"
    rc, so, se = run_tool(*args, "--out", out, "--report", "/proc/reconform/r.json", tmp=tmp)
    assert rc == 1 and se.startswith("error: --report /proc/reconform/r.json: cannot create files in '/proc'")
    assert so == "" and not out.exists()


def test_ctrl_c_prints_one_line_and_cleans_up(files, tmp, tmp_path):
    setup = tmp_path / "setup.json"
    setup.write_text(json.dumps({"settings": {"quality": "fast", "iterations": 20000}}))
    out = tmp_path / "o.blend"
    before = digest(files["good"])
    env = dict(os.environ, TMPDIR=str(tmp))
    env.pop("BLENDER_USER_RESOURCES", None)
    p = subprocess.Popen([sys.executable, str(TOOL), "--blend", str(files["good"]), "--source", "Walker",
                          "--target", "Heavy", "--method", "reconform", "--setup", str(setup), "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(ROOT))
    try:
        t0 = time.time()
        seen = []
        for line in p.stdout:                      # wait until the solver runs
            seen.append(line)
            if "Setting up the solver" in line or time.time() - t0 > 240:
                break
        assert any("Setting up the solver" in ln for ln in seen), "".join(seen)
        time.sleep(3.0)                            # in the middle of 20 000 steps
        p.send_signal(signal.SIGINT)
        so, se = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, se
    assert se == "error: interrupted (SIGINT): nothing was written\n", se
    assert not out.exists() and digest(files["good"]) == before
