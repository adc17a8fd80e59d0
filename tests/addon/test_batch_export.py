"""tools/retarget.py --export, read back with the bpy wheel's own importers: each file carries exactly the
retargeted clip (one per character, named as its Action by --name-template), over the frames asked, at the
source's frame rate, and its joints stand where the result .blend puts them (1 mm) on every frame; FBX presets
write the axes and units they say; --root-motion in-place keeps the root over its first position."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT

bpy = pytest.importorskip("bpy")
pytestmark = pytest.mark.slow   # each run of the command is a new process (torch import: seconds)
TOOL = ROOT / "tools" / "retarget.py"
FRAMES = (3, 10)
FPS = 30
MM = 1e-3


def build_scene(d) -> None:
    """good.blend: Walker (playing 'Walk', 12 frames at 30 fps) and Heavy; walker.bvh: the walk alone (a motion);
    pairs.blend: two such pairs. Runs in its own process (``scene``)."""
    import importlib
    from tests.addon.generated import generated_pair
    from tools.extension import disable_addon, enable_addon

    mod, repo = enable_addon("batch_export")
    br = importlib.import_module(mod.__name__ + ".reconform_addon.bridge")
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.context.scene.render.fps, bpy.context.scene.render.fps_base = FPS, 1.0
    walker, _ = generated_pair(br, frames=12)
    bpy.ops.wm.save_as_mainfile(filepath=str(d / "good.blend"), copy=True)
    for ob in bpy.context.view_layer.objects:
        ob.select_set(False)
    walker.select_set(True)
    bpy.context.view_layer.objects.active = walker
    assert bpy.ops.export_anim.bvh(filepath=str(d / "walker.bvh"), frame_start=1, frame_end=12) == {'FINISHED'}
    generated_pair(br, frames=12, names=("Walker2", "Tall"))
    bpy.ops.wm.save_as_mainfile(filepath=str(d / "pairs.blend"), copy=True)
    disable_addon("batch_export", repo)


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    d = tmp_path_factory.mktemp("batch_export")
    code = ("import os, pathlib, sys; sys.path.insert(0, sys.argv[1]); "
            "from tests.addon.test_batch_export import build_scene; build_scene(pathlib.Path(sys.argv[2])); "
            "os._exit(0)")
    (d / "user").mkdir()
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(d / "user"))
    p = subprocess.run([sys.executable, "-c", code, str(ROOT), str(d)], capture_output=True, text=True,
                       timeout=600, env=env, cwd=str(ROOT))
    assert p.returncode == 0, p.stderr[-3000:]
    return d


def run_tool(*args, timeout=300):
    env = dict(os.environ)
    env.pop("BLENDER_USER_RESOURCES", None)
    p = subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=str(ROOT))
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def one_pair(scene):
    """One copy-rotations run exporting every format (and the FBX presets): {name: path}."""
    d = scene / "one"
    files = {"blend": d / "res.blend", "fbx": d / "res.fbx", "glb": d / "res.glb", "gltf": d / "g" / "res.gltf",
             "bvh": d / "res.bvh", "unity": d / "unity" / "res.fbx", "unreal": d / "unreal" / "res.fbx",
             "report": d / "res.json"}
    common = ["--blend", scene / "good.blend", "--source", "Walker", "--target", "Heavy", "--frames", *FRAMES,
              "--name-template", "{source}_{target}"]
    rc, so, se = run_tool(*common, "--out", files["blend"], "--report", files["report"],
                          *[a for k in ("fbx", "glb", "gltf", "bvh") for a in ("--export", files[k])])
    assert rc == 0, se
    for preset in ("unity", "unreal"):
        rc, so, se = run_tool(*common, "--export", files[preset], "--fbx-preset", preset)
        assert rc == 0, se
    return files


def _fresh(fps=FPS):
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.context.scene.render.fps, bpy.context.scene.render.fps_base = fps, 1.0


def joints(arm, frames, space="WORLD") -> np.ndarray:
    """(F, J, 3) positions of ``arm``'s bone heads (bones sorted by name) on ``frames``, in the world or (space
    'ARMATURE') in the armature's own space."""
    scene = bpy.context.scene
    names = sorted(b.name for b in arm.pose.bones)
    out = []
    for f in frames:
        scene.frame_set(f)
        M = arm.matrix_world if space == "WORLD" else arm.matrix_world.inverted() @ arm.matrix_world
        out.append([tuple(M @ arm.pose.bones[n].head) for n in names])
    return np.array(out)


def result_joints(blend, armature="Heavy", space="WORLD"):
    bpy.ops.wm.open_mainfile(filepath=str(blend))
    arm = bpy.data.objects[armature]
    return joints(arm, range(FRAMES[0], FRAMES[1] + 1), space), arm.animation_data.action.name


def reimport(path):
    """The armatures and Actions the bpy wheel's importer makes of ``path`` (a fresh 30 fps scene)."""
    _fresh()
    ext = path.suffix.lower()
    if ext == ".fbx":   # anim_offset 0: the file's frames as they are (the importer adds 1 by default)
        assert bpy.ops.import_scene.fbx(filepath=str(path), anim_offset=0.0) == {'FINISHED'}
    elif ext == ".bvh":   # no start frame in a BVH file: its first frame on the first frame asked; Blender's
        # exporter writes the armature's own space, Z up: read it without turning it
        assert bpy.ops.import_anim.bvh(filepath=str(path), frame_start=FRAMES[0], axis_forward='Y',
                                       axis_up='Z') == {'FINISHED'}
    else:
        assert bpy.ops.import_scene.gltf(filepath=str(path), disable_bone_shape=True) == {'FINISHED'}
    arms = [o for o in bpy.data.objects if o.type == 'ARMATURE']
    return arms, list(bpy.data.actions)


@pytest.mark.parametrize("fmt", ["fbx", "glb", "gltf", "bvh", "unity", "unreal"])
def test_an_export_reads_back_as_the_result(one_pair, fmt):
    space = "ARMATURE" if fmt == "bvh" else "WORLD"   # a BVH file has no object transform
    want, action = result_joints(one_pair["blend"], space=space)
    assert action == "Walker_Heavy"
    arms, actions = reimport(one_pair[fmt])
    try:
        assert len(arms) == 1 and len(actions) == 1, [a.name for a in actions]   # one clip: no frozen source copy
        act = actions[0]
        if fmt != "bvh":   # a BVH file carries no clip name; FBX's importer prefixes the armature's
            assert act.name in ("Walker_Heavy", f"{arms[0].name}|Walker_Heavy"), act.name
        assert tuple(round(v) for v in act.frame_range) == FRAMES
        got = joints(arms[0], range(FRAMES[0], FRAMES[1] + 1), space)
        assert got.shape == want.shape
        err = np.abs(got - want).max()
        assert err < MM, f"{fmt}: joints {err * 1000:.3f} mm from the result"
    finally:
        _fresh()


def test_exports_play_at_the_source_rate(one_pair):
    """glTF key times, the BVH frame time and the FBX time mode all say the source's 30 fps."""
    text = one_pair["bvh"].read_text()
    assert f"Frame Time: {1 / FPS:.6f}" in text and "Frames: 8" in text
    doc = json.loads(one_pair["gltf"].read_text())
    assert [a["name"] for a in doc["animations"]] == ["Walker_Heavy"]
    times = doc["accessors"][doc["animations"][0]["samplers"][0]["input"]]
    assert times["count"] == 8 and times["min"][0] == pytest.approx(FRAMES[0] / FPS, abs=1e-4)
    assert times["max"][0] == pytest.approx(FRAMES[1] / FPS, abs=1e-4)
    assert _global_settings(one_pair["fbx"])["TimeMode"] == 6          # FBX's eFrames30


def _global_settings(path) -> dict:
    """The FBX file's GlobalSettings (axes, time mode, unit) and the armature node's scale ('ArmatureScale')."""
    from io_scene_fbx import parse_fbx
    from io_scene_fbx.import_fbx import (elem_find_first, elem_props_get_integer, elem_props_get_number,
                                         elem_props_get_vector_3d)
    root, _ = parse_fbx.parse(str(path))
    props = elem_find_first(elem_find_first(root, b"GlobalSettings"), b"Properties70")
    out = {k: elem_props_get_integer(props, k.encode(), None) for k in ("UpAxis", "UpAxisSign", "FrontAxis",
                                                                       "FrontAxisSign", "TimeMode")}
    out["UnitScaleFactor"] = elem_props_get_number(props, b"UnitScaleFactor", None)
    model = next(e for e in elem_find_first(root, b"Objects").elems
                 if e.id == b"Model" and e.props[1].startswith(b"Heavy\x00"))
    scale = elem_props_get_vector_3d(elem_find_first(model, b"Properties70"), b"Lcl Scaling", (1.0, 1.0, 1.0))
    out["ArmatureScale"] = tuple(scale)
    return out


def test_fbx_presets_write_their_axes_and_units(one_pair):
    """blender (Blender's defaults): Y up, centimetres, the armature scaled 100; unity (Y up) and unreal (Z up):
    the unit applied to the data, the file's unit the metre (UnitScaleFactor 100), the armature at scale 1."""
    blender, unity, unreal = (_global_settings(one_pair[k]) for k in ("fbx", "unity", "unreal"))
    assert (blender["UpAxis"], blender["UnitScaleFactor"]) == (1, pytest.approx(1.0))
    assert blender["ArmatureScale"] == pytest.approx((100.0, 100.0, 100.0))
    assert (unity["UpAxis"], unity["UpAxisSign"], unity["UnitScaleFactor"]) == (1, 1, pytest.approx(100.0))
    assert (unreal["UpAxis"], unreal["UpAxisSign"], unreal["UnitScaleFactor"]) == (2, 1, pytest.approx(100.0))
    assert unity["ArmatureScale"] == unreal["ArmatureScale"] == pytest.approx((1.0, 1.0, 1.0))


def test_root_motion_in_place(scene, one_pair, tmp_path):
    """--root-motion in-place: the hips keep their first horizontal position on every frame (the result .blend
    and the export alike) where the kept clip travels; their height and the pose around them are unchanged; the
    report says which bone."""
    out, glb, rep = tmp_path / "p.blend", tmp_path / "p.glb", tmp_path / "p.json"
    rc, so, se = run_tool("--blend", scene / "good.blend", "--source", "Walker", "--target", "Heavy",
                          "--frames", *FRAMES, "--root-motion", "in-place", "--out", out, "--export", glb,
                          "--report", rep)
    assert rc == 0, se
    assert any("root motion removed (bone 'hips'" in n for n in json.loads(rep.read_text())["notes"])
    kept, _ = result_joints(one_pair["blend"])
    names = sorted(b.name for b in bpy.data.objects["Heavy"].pose.bones)
    h = names.index("hips")
    assert np.ptp(kept[:, h, 1]) > 0.05                     # the clip as solved walks forward
    for path in (out, glb):
        if path.suffix == ".blend":
            got, _ = result_joints(path)
        else:
            got = joints(reimport(path)[0][0], range(FRAMES[0], FRAMES[1] + 1))
        assert np.abs(got[:, h, :2] - got[0, h, :2]).max() < MM
        assert np.abs(got[:, h, 2] - kept[:, h, 2]).max() < MM
        assert np.abs((got - got[:, h:h + 1]) - (kept - kept[:, h:h + 1])).max() < MM
    _fresh()


def test_several_characters_export_each_clip(scene, tmp_path):
    """Two pairs together: a .glb holds one animation per character, named as its Action; {target} in a path
    writes one file per character (a BVH holds one skeleton)."""
    glb, bvh = tmp_path / "both.glb", tmp_path / "{target}.bvh"
    rc, so, se = run_tool("--blend", scene / "pairs.blend", "--source", "Walker", "--target", "Heavy",
                          "--source", "Walker2", "--target", "Tall", "--name-template", "{source}_{target}",
                          "--export", glb, "--export", bvh)
    assert rc == 0, se
    doc_names = sorted(a.name for a in reimport(glb)[1])
    assert doc_names == ["Walker2_Tall", "Walker_Heavy"]
    assert sorted(os.listdir(tmp_path)) == ["Heavy.bvh", "Tall.bvh", "both.glb"]
    rc, so, se = run_tool("--blend", scene / "pairs.blend", "--source", "Walker", "--target", "Heavy",
                          "--source", "Walker2", "--target", "Tall", "--export", tmp_path / "x.bvh")
    assert rc == 1 and "put {target} in the path" in se, se
    _fresh()
