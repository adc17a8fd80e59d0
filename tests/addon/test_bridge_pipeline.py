"""pipeline.retarget in-process on real data (copy_rotations): source untouched, every bone keyed on every
frame, the written Action reads back as the result, a failure after writing leaves nothing behind."""

import importlib
import json

import numpy as np
import pytest

from tests.addon.bridge_helpers import action_snapshot, assert_same_snapshot, modules

bpy = pytest.importorskip("bpy")

pytestmark = pytest.mark.assets


@pytest.fixture
def pipe(addon):
    return importlib.import_module(addon.__name__ + ".reconform_addon.pipeline")


@pytest.fixture
def setup_file(addon):
    return importlib.import_module(addon.__name__ + ".reconform_addon.setup_file")


@pytest.fixture
def pair(addon, assets):
    br, _ = modules(addon)
    bpy.ops.wm.read_homefile(use_empty=True)
    src = br.find_armature(br.import_file(assets / "motions" / "cmu_salsa_61_05_follow.bvh"))
    tgt = br.find_armature(br.import_file(assets / "characters" / "orangejuice_male_base_mesh.glb"))
    return br, src, tgt


@pytest.mark.assets
def test_retarget_copy_rotations_writes_new_action_only(pipe, pair):
    br, src, tgt = pair
    before = action_snapshot(src.animation_data.action)
    n_actions = len(bpy.data.actions)
    lines = []
    res = pipe.retarget(src, tgt, frame_start=100, frame_end=111, report=lines.append)
    assert_same_snapshot(before, action_snapshot(src.animation_data.action))
    assert len(bpy.data.actions) == n_actions + 1
    assert tgt.animation_data.action == res.action and tgt.animation_data.action_slot == res.action.slots[0]
    rep = res.report
    json.dumps(rep, allow_nan=False)
    assert (rep["frame_start"], rep["frame_end"], rep["frames"]) == (100, 111, 12)
    assert rep["source_action"] == src.animation_data.action.name and rep["action"] == res.action.name
    assert rep["target"]["mapped"] >= 15 and any("wrote Action" in ln for ln in lines)
    sk = br.read_skeleton(tgt)
    from bpy_extras import anim_utils
    bag = anim_utils.action_get_channelbag_for_slot(res.action, res.action.slots[0])
    assert len(bag.fcurves) == 7 * sk.num_bones
    for fc in bag.fcurves:
        assert [k.co[0] for k in fc.keyframe_points] == list(range(100, 112))
    back = br.read_motion(tgt, sk)
    np.testing.assert_allclose(np.abs((back.rotations * res.motion.rotations).sum(-1)), 1.0, atol=1e-6)
    free = [j for j, b in enumerate(tgt.data.bones) if not b.use_connect]
    np.testing.assert_allclose(back.locations[:, free], res.motion.locations[:, free], atol=1e-5)


@pytest.mark.assets
def test_failure_after_write_removes_the_action(pipe, pair, monkeypatch):
    br, src, tgt = pair
    names = set(bpy.data.actions.keys())

    def boom(*a, **k):
        raise RuntimeError("report failed")
    run_report = importlib.import_module(pipe.__name__.rsplit(".", 1)[0] + ".run_report")
    monkeypatch.setattr(run_report.json, "dumps", boom)     # the json module itself: every dumps fails
    with pytest.raises(RuntimeError, match="report failed"):
        pipe.retarget(src, tgt, frame_start=1, frame_end=4)
    assert set(bpy.data.actions.keys()) == names
    assert tgt.animation_data is None or tgt.animation_data.action is None


@pytest.mark.assets
def test_bad_inputs_write_nothing(pipe, setup_file, pair, tmp_path):
    br, src, tgt = pair
    names = set(bpy.data.actions.keys())
    with pytest.raises(br.BridgeError, match="Unknown method 'magic'"):
        pipe.retarget(src, tgt, method="magic")
    with pytest.raises(br.BridgeError, match="deforms no mesh"):
        pipe.retarget(tgt, src, method="reconform")
    core_errors = importlib.import_module(pipe.__name__.rsplit(".", 2)[0] + ".core.errors")
    with pytest.raises(core_errors.CoreError, match="Nothing mapped on 'metarig'"):
        pipe.retarget(src, tgt, setup={"target": {"bone_map": {"hips": "no_such_bone"}}})
    bad = tmp_path / "setup.json"
    bad.write_text("{not json")
    with pytest.raises(br.BridgeError, match="Cannot read set-up"):
        setup_file.load_setup(bad)
    assert set(bpy.data.actions.keys()) == names


@pytest.mark.assets
def test_setup_bone_map_is_reused(pipe, setup_file, pair, tmp_path):
    br, src, tgt = pair
    detected = pipe.prepare_character(tgt, keyvert_count=0).bone_map
    path = tmp_path / "setup.json"
    path.write_text(json.dumps({"target": {"bone_map": {k: v for k, v in detected.items() if "index" not in k}},
                                "bone_maps": {src.name: {"hips": "hip"}}}))
    setup = setup_file.load_setup(path)
    assert setup_file.setup_bone_map(setup, "source", src.name) == {"hips": "hip"}
    ch = pipe.prepare_character(tgt, bone_map=setup_file.setup_bone_map(setup, "target", tgt.name), keyvert_count=0)
    assert ch.bone_map and all("index" not in k for k in ch.bone_map)
    assert ch.mesh is not None and ch.keyverts is None
