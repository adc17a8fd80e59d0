"""Writing Actions: new slotted Action, every bone keyed on every frame, exact round trip, source untouched,
nothing left behind on failure."""

import numpy as np
import pytest

from tests.addon.bridge_helpers import (action_snapshot, assert_same_snapshot, core_module, key_random_motion,
                                        make_rig, modules, new_action, pose_matrices)

bpy = pytest.importorskip("bpy")


@pytest.fixture
def br(addon, clean_scene):
    return modules(addon)[0]


def _random_motion(addon, J, T=12, seed=1, frame_start=5):
    types = core_module(addon, "types")
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(T, J, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    q[1::2] *= -1  # sign flips between frames: the writer must make them continuous
    return types.Motion(q, rng.normal(size=(T, J, 3)) * 0.1, fps=30.0, frame_start=frame_start)


def test_write_then_read_round_trip(addon, br):
    arm, _ = make_rig()
    for pb in arm.pose.bones:
        pb.rotation_mode = 'XYZ'
    sk = br.read_skeleton(arm)
    m = _random_motion(addon, sk.num_bones)
    act = br.write_motion(arm, sk, m, "Result")
    ad = arm.animation_data
    assert ad.action == act and ad.action_slot == act.slots[0]
    assert act.slots[0].identifier == "OB" + arm.name
    assert all(pb.rotation_mode == 'QUATERNION' for pb in arm.pose.bones)
    back = br.read_motion(arm, sk)
    assert (back.frame_start, back.num_frames) == (5, 12)
    np.testing.assert_allclose(np.abs((back.rotations * m.rotations).sum(-1)), 1.0, atol=1e-6)
    # connected bones ignore location (Blender), the others reproduce it
    free = [j for j, b in enumerate(arm.data.bones) if not b.use_connect]
    np.testing.assert_allclose(back.locations[:, free], m.locations[:, free], atol=1e-6)
    # and Blender's evaluated pose equals core FK of what was written
    kin = core_module(addon, "rig.kinematics")
    p = kin.forward_kinematics(sk, back.rotations, back.locations)
    for t in (0, 5, 11):
        bpy.context.scene.frame_set(5 + t)
        G = pose_matrices(arm)
        np.testing.assert_allclose(p.positions[t].numpy(), G[:, :3, 3], atol=1e-5)
        np.testing.assert_allclose(p.rotations[t].numpy(), G[:, :3, :3], atol=1e-5)


def test_every_bone_keyed_every_frame_sign_continuous(addon, br):
    arm, _ = make_rig()
    sk = br.read_skeleton(arm)
    m = _random_motion(addon, sk.num_bones, T=20)
    act = br.write_motion(arm, sk, m, "Result")
    from bpy_extras import anim_utils
    bag = anim_utils.action_get_channelbag_for_slot(act, act.slots[0])
    curves = {(fc.data_path, fc.array_index): fc for fc in bag.fcurves}
    assert len(curves) == 7 * sk.num_bones
    frames = np.arange(5, 25, dtype=np.float32)
    for name in sk.names:
        q = []
        for prop, n in (("rotation_quaternion", 4), ("location", 3)):
            for i in range(n):
                fc = curves[(f'pose.bones["{name}"].{prop}', i)]
                co = np.empty(2 * len(fc.keyframe_points), np.float32)
                fc.keyframe_points.foreach_get("co", co)
                np.testing.assert_array_equal(co[0::2], frames)
                if prop == "rotation_quaternion":
                    q.append(co[1::2])
        q = np.stack(q, 1)
        assert ((q[1:] * q[:-1]).sum(1) >= 0).all()
    assert {g.name for g in bag.groups} == set(sk.names)


def test_source_action_unchanged_and_unique_names(addon, br):
    arm, _ = make_rig()
    sk = br.read_skeleton(arm)
    src, bag = new_action(arm, "Source")
    key_random_motion(arm, bag, frames=range(1, 9))
    before = action_snapshot(src)
    m = br.read_motion(arm, sk)
    a1 = br.write_motion(arm, sk, m, "Source")  # same name as the source: gets a new unique name
    a2 = br.write_motion(arm, sk, m, "Source")
    assert len({src.name, a1.name, a2.name}) == 3 and src.name == "Source"
    assert_same_snapshot(before, action_snapshot(src))


def test_failed_write_leaves_nothing(addon, br):
    arm, _ = make_rig()
    sk = br.read_skeleton(arm)
    src, bag = new_action(arm, "Source")
    key_random_motion(arm, bag, frames=range(1, 5))
    modes = [pb.rotation_mode for pb in arm.pose.bones]
    n_actions = len(bpy.data.actions)
    m = _random_motion(addon, sk.num_bones)
    m.locations[3, 2, 1] = np.nan
    with pytest.raises(br.BridgeError, match="NaN"):
        br.write_motion(arm, sk, m, "Bad")
    wrong = _random_motion(addon, sk.num_bones + 1)
    with pytest.raises(br.BridgeError, match="bones"):
        br.write_motion(arm, sk, wrong, "Bad")
    with pytest.raises(KeyError):  # an invalid interpolation fails inside the write: rolled back
        br.write_motion(arm, sk, _random_motion(addon, sk.num_bones), "Bad", interpolation="NOPE")
    assert len(bpy.data.actions) == n_actions
    assert arm.animation_data.action == src and arm.animation_data.action_slot == src.slots[0]
    assert [pb.rotation_mode for pb in arm.pose.bones] == modes


def test_remove_action_restores_previous(addon, br):
    from importlib import import_module
    write = import_module(br.__name__ + ".write")
    arm, _ = make_rig()
    sk = br.read_skeleton(arm)
    src, bag = new_action(arm, "Source")
    key_random_motion(arm, bag, frames=range(1, 5))
    modes = [pb.rotation_mode for pb in arm.pose.bones]
    assert set(modes) != {'QUATERNION'}
    prev = write.assignment_state(arm)
    act = br.write_motion(arm, sk, br.read_motion(arm, sk), "New")
    assert {pb.rotation_mode for pb in arm.pose.bones} == {'QUATERNION'}
    write.remove_action(arm, act, prev)
    assert "New" not in bpy.data.actions
    assert arm.animation_data.action == src and arm.animation_data.action_slot == src.slots[0]
    assert [pb.rotation_mode for pb in arm.pose.bones] == modes
