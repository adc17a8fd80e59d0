"""Every character and motion file in ../shared/assets: import, read, check against Blender and INVENTORY.

One session-scoped pass imports each file into a fresh scene and reads it (short frame ranges); the tests
then assert on what that pass recorded.
"""

import json
import time

import numpy as np
import pytest

from tests.addon.bridge_helpers import action_snapshot, core_module, modules, pose_matrices
from tests.conftest import ASSETS

bpy = pytest.importorskip("bpy")

FILES = sorted(str(p.relative_to(ASSETS)) for sub in ("characters", "motions") if (ASSETS / sub).is_dir()
               for p in (ASSETS / sub).iterdir())
N_FRAMES = 24


def _read_one(br, kin, path, rel):
    rec = {}
    bpy.ops.wm.read_homefile(use_empty=True)
    t = time.perf_counter()
    notes = []
    objs = br.import_file(path, report=notes.append)
    rec["import_s"] = time.perf_counter() - t
    rec["notes"] = notes
    arm = br.find_armature(objs)
    rec["armature"] = arm.name
    rec["scale"] = float(arm.matrix_world.to_scale()[0])
    sk = br.read_skeleton(arm)
    rec["bones"] = sk.num_bones
    rec["rest_err"] = float(np.abs(sk.rest_global - np.array([np.array(b.matrix_local)
                                                               for b in arm.data.bones])).max())
    meshes = br.find_meshes(arm)
    rec["meshes"] = [m.name for m in meshes]
    if meshes:
        mesh = br.read_skinned_mesh(arm, sk)
        world = mesh.rest_verts @ sk.object_matrix[:3, :3].T + sk.object_matrix[:3, 3]
        rec["verts"] = mesh.num_verts
        rec["height"] = float(np.ptp(world[:, 2]))
        rec["weights_ok"] = bool(np.allclose(mesh.weight_values.sum(1), 1.0))
        rec["K"] = mesh.weight_bones.shape[1]
    ad = arm.animation_data
    if ad is not None and ad.action is not None:
        src = ad.action
        before = action_snapshot(src)
        start = int(src.frame_range[0])
        motion = br.read_motion(arm, sk, frame_start=start, frame_end=start + N_FRAMES - 1)
        rec["fps"] = motion.fps
        rec["range"] = tuple(src.frame_range)
        p = kin.forward_kinematics(sk, motion.rotations, motion.locations)
        errs = []
        for t in (0, N_FRAMES // 2, N_FRAMES - 1):
            bpy.context.scene.frame_set(start + t)
            G = pose_matrices(arm)
            errs.append(float(np.abs(p.positions[t].numpy() - G[:, :3, 3]).max()))
            errs.append(float(np.abs(p.rotations[t].numpy() - G[:, :3, :3]).max()))
        rec["fk_err"] = max(errs)
        rec["scale_played"] = float(arm.matrix_world.to_scale()[0])  # after frame changes (keyed object scale)
        # largest per-frame extent of the joints (world metres once the unit rule applied)
        # (root bones excluded: BVH roots such as 'joint_Root' stay at the origin while the body walks away)
        rec["size"] = float(np.ptp(p.positions.numpy()[:, sk.parents >= 0], axis=1).max() * abs(rec["scale"]))
        sampled = br.read_motion(arm, sk, frame_start=start, frame_end=start + 4, sample=True)
        ps = kin.forward_kinematics(sk, sampled.rotations, sampled.locations)
        rec["sampled_err"] = float(np.abs(ps.positions.numpy() - p.positions[:5].numpy()).max())
        new = br.write_motion(arm, sk, motion, "roundtrip")
        back = br.read_motion(arm, sk)
        rec["written"] = new.name != src.name and ad.action == new
        rec["rt_rot"] = float(np.abs(np.abs((back.rotations * motion.rotations).sum(-1)) - 1).max())
        pb = kin.forward_kinematics(sk, back.rotations, back.locations)
        rec["rt_pos"] = float(np.abs(pb.positions.numpy() - p.positions.numpy()).max())
        after = action_snapshot(src)
        rec["source_unchanged"] = before.keys() == after.keys() and all(
            np.array_equal(v, after[k]) for k, v in before.items())
    return rec


@pytest.fixture(scope="session")
def asset_reads(addon, assets):
    br, _ = modules(addon)
    kin = core_module(addon, "rig.kinematics")
    return {rel: _read_one(br, kin, str(assets / rel), rel) for rel in FILES}


@pytest.fixture(scope="session")
def inventory(assets):
    return json.loads((assets / "inventory.json").read_text())


@pytest.mark.assets
def test_every_asset_file_is_covered(assets):
    assert len(FILES) >= 23
    assert {f.split("/")[0] for f in FILES} == {"characters", "motions"}


@pytest.mark.slow
@pytest.mark.assets
@pytest.mark.parametrize("rel", FILES)
def test_asset_reads_match_blender_and_inventory(asset_reads, inventory, rel):
    rec = asset_reads[rel]
    inv = inventory[rel]["armatures"][0]
    assert rec["armature"] == inv["name"]
    assert rec["bones"] == inv["bone_count"]
    assert rec["rest_err"] < 1e-5
    if rel.startswith("characters/"):
        assert rec["verts"] == inv["mesh_vertices"]
        assert rec["height"] == pytest.approx(inv["mesh_height_m"], abs=0.01)
        assert rec["weights_ok"] and 4 <= rec["K"] <= 8
    else:
        assert rec["meshes"] == []


@pytest.mark.assets
@pytest.mark.slow
@pytest.mark.assets
@pytest.mark.parametrize("rel", [f for f in FILES if f.startswith("motions/")] +
                         ["characters/mesh2motion_mannequin_ymca.glb"])
def test_asset_motion_fk_round_trip_and_source_untouched(asset_reads, inventory, rel):
    rec = asset_reads[rel]
    scale = abs(rec["scale"])
    # core FK of what the bridge read equals Blender's evaluated pose (armature units; 1e-5 relative)
    assert rec["fk_err"] < 1e-5 * max(1.0, 1.0 / scale)
    assert rec["sampled_err"] < 1e-5 * max(1.0, 1.0 / scale)
    assert rec["written"] and rec["source_unchanged"]
    assert rec["scale_played"] == pytest.approx(rec["scale"])  # the unit scale survives playback
    assert rec["rt_rot"] < 1e-6 and rec["rt_pos"] < 1e-5 * max(1.0, 1.0 / scale)
    act = inventory[rel]["actions"][0] if "actions" in inventory[rel] else None
    if act:
        assert rec["range"] == (act["start"], act["end"])
    if "bvh_header" in inventory[rel]:
        assert rec["fps"] == pytest.approx(inventory[rel]["bvh_header"]["fps"], rel=1e-3)


@pytest.mark.slow
@pytest.mark.assets
def test_unit_rule_puts_motions_in_metres(asset_reads):
    for rel, rec in asset_reads.items():
        if not rel.startswith("motions/"):
            continue
        if rel.startswith("motions/NC_bandai"):
            assert rec["scale"] == pytest.approx(0.01), rel  # centimetres
        elif rel.startswith("motions/cmu_salsa"):
            assert rec["scale"] == pytest.approx(1.0), rel  # already metres
        else:
            assert rec["scale"] == pytest.approx(0.0254 / 0.45, rel=1e-6), rel  # CMU ASF units
        assert 1.0 < rec["size"] < 2.6, (rel, rec["size"])  # a human-sized extent in metres
    for rel, rec in asset_reads.items():
        if rel.startswith("characters/"):
            assert rec["scale"] == 1.0 and not rec["notes"]


@pytest.mark.assets
def test_import_errors_name_the_file_and_leave_scene_unchanged(addon, assets, tmp_path):
    br, _ = modules(addon)
    bpy.ops.wm.read_homefile(use_empty=True)
    br.import_file(assets / "motions" / "NC_bandai_walk_normal_001.bvh")
    names = sorted(o.name for o in bpy.data.objects)
    missing = tmp_path / "nope.fbx"
    with pytest.raises(br.BridgeError, match=f"Cannot import '{missing}': file not found"):
        br.import_file(missing)
    for ext in (".fbx", ".glb", ".bvh", ".blend"):
        bad = tmp_path / f"garbage{ext}"
        bad.write_bytes(b"this is not a " + ext.encode() + b" file\n" * 20)
        with pytest.raises(br.BridgeError, match=f"Cannot import '{bad}'"):
            br.import_file(bad)
        assert sorted(o.name for o in bpy.data.objects) == names
    with pytest.raises(br.BridgeError, match="unsupported file type '.stl'"):
        br.import_file(tmp_path / "x.stl")


@pytest.mark.assets
def test_import_blend_appends_objects(addon, assets, tmp_path):
    br, _ = modules(addon)
    bpy.ops.wm.read_homefile(use_empty=True)
    br.import_file(assets / "characters" / "mh_teen_girl.glb")
    out = tmp_path / "girl.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(out), copy=True)
    bpy.ops.wm.read_homefile(use_empty=True)
    new = br.import_file(out)
    arm = br.find_armature(new)
    assert arm.name == "mh_teen_girl_rig" and arm.name in bpy.context.scene.objects
    assert [m.name for m in br.find_meshes(arm)] == ["mh_teen_girl"]
    with pytest.raises(br.BridgeError, match="No object named 'Nobody'"):
        br.find_armature(new, "Nobody")
    assert br.find_armature(None, "mh_teen_girl") == arm  # a mesh name gives its armature


def test_gltf_frame_rate_from_the_densest_sampler(addon, tmp_path):
    br, _ = modules(addon)
    doc = {"asset": {"version": "2.0"},
           "accessors": [{"count": 11, "min": [0.0], "max": [0.5]},      # 20 keys per second
                         {"count": 2, "min": [0.0], "max": [0.5]}],      # a constant channel: two keys
           "animations": [{"samplers": [{"input": 1}, {"input": 0}], "channels": []}]}
    path = tmp_path / "anim.gltf"
    path.write_text(json.dumps(doc))
    assert br.gltf_frame_rate(str(path)) == pytest.approx(20.0)
    doc["animations"][0]["samplers"] = [{"input": 1}]
    path.write_text(json.dumps(doc))
    assert br.gltf_frame_rate(str(path)) is None                       # two keys say nothing of a rate
    path.write_text(json.dumps({"asset": {"version": "2.0"}}))
    assert br.gltf_frame_rate(str(path)) is None                       # no animation
    path.write_text("not json")
    assert br.gltf_frame_rate(str(path)) is None


@pytest.mark.assets
def test_gltf_clip_comes_in_at_its_own_key_rate(addon, assets):
    """A glTF clip keyed at 24 fps imported into a 120 fps scene: the scene takes the clip's rate, so the clip
    keeps its 30 frames instead of 5x as many interpolated ones (set_scene_fps=False keeps the scene's rate)."""
    br, _ = modules(addon)
    path = assets / "characters" / "mesh2motion_mannequin_ymca.glb"
    assert br.gltf_frame_rate(str(path)) == pytest.approx(24.0)
    lines = []
    for set_fps in (True, False):
        bpy.ops.wm.read_homefile(use_empty=True)
        r = bpy.context.scene.render
        r.fps, r.fps_base = 120, 1.0
        br.import_file(path, set_scene_fps=set_fps, report=lines.append)
        act = bpy.data.actions["YMCA"]
        if set_fps:
            assert r.fps / r.fps_base == pytest.approx(24.0) and tuple(act.frame_range) == (1.0, 30.0)
            assert any("keyed at 24 fps" in ln for ln in lines)
        else:
            assert r.fps == 120 and act.frame_range[1] > 140
