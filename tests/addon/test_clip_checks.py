"""The source clip is checked once, up front (reconform_addon/bridge/clip.py, issue 15 items 2, 3 and 6): keys
that are not numbers or absurdly large are named by Action, F-curve and frame (keyed, through a curve modifier,
or through a driver on the sampled path); a frame range outside the Action is refused with the Action's own
range, one reaching past it clamped with a note; an Action whose first slot animates shape keys (as glTF
imports make them) is read through the armature's slot. Nothing here changes the source Action."""

import numpy as np
import pytest

from tests.addon.bridge_helpers import (action_snapshot, assert_same_snapshot, key_random_motion, make_rig,
                                        modules, new_action)

bpy = pytest.importorskip("bpy")


@pytest.fixture
def br(addon, clean_scene):
    return modules(addon)[0]


@pytest.fixture
def rig(br):
    """A rig playing 'Src' on frames 1..10 (every bone keyed in several rotation modes)."""
    arm, _ = make_rig()
    act, bag = new_action(arm, "Src")
    key_random_motion(arm, bag, frames=range(1, 11))
    return arm, act, bag, br.read_skeleton(arm)


def _fcurve(bag, bone, prop, index):
    return next(fc for fc in bag.fcurves if fc.data_path == f'pose.bones["{bone}"].{prop}' and fc.array_index == index)


@pytest.mark.parametrize("value, what", [(float("nan"), "a NaN"), (float("inf"), "an infinite"),
                                         (1e30, "an absurd (1e+30")])
def test_bad_key_is_named_by_action_fcurve_and_frame(br, rig, value, what):
    arm, act, bag, sk = rig
    kp = _fcurve(bag, "bone.01", "location", 1).keyframe_points
    co = np.empty(2 * len(kp), np.float32)
    kp.foreach_get("co", co)
    co[2 * 4 + 1] = value                            # the key at frame 5 (bulk write: RNA would clamp inf)
    kp.foreach_set("co", co)
    before = action_snapshot(act)
    with pytest.raises(br.BridgeError) as e:
        br.read_motion(arm, sk)
    msg = str(e.value)
    assert msg.startswith("Action 'Src': pose.bones[\"bone.01\"].location[1] has " + what), msg
    assert "key at frame 5:" in msg and "Graph Editor" in msg
    assert_same_snapshot(before, action_snapshot(act))
    # a range that leaves the key out (and its neighbours) reads fine
    assert br.read_motion(arm, sk, frame_start=7, frame_end=10).num_frames == 4


def test_absurd_rotation_key_and_sound_large_travel(br, rig):
    arm, act, bag, sk = rig
    # a location 500 skeleton sizes away is a long walk, not a broken key
    size = max(np.ptp([tuple(b.head_local) + tuple(b.tail_local) for b in arm.data.bones], 0))
    _fcurve(bag, "bone.00", "location", 0).keyframe_points[2].co[1] = 500 * size
    assert br.read_motion(arm, sk).num_frames == 10
    fc = next(fc for fc in bag.fcurves if fc.data_path.endswith("rotation_euler"))
    fc.keyframe_points[6].co[1] = -3e7
    with pytest.raises(br.BridgeError, match=r"rotation_euler\[\d\] has an absurd \(-3e\+07, beyond ±1e\+04"):
        br.read_motion(arm, sk)


def test_curve_modifier_value_is_checked_after_evaluation(br, rig):
    arm, act, bag, sk = rig
    fc = _fcurve(bag, "side", "location", 2)
    mod = fc.modifiers.new('GENERATOR')
    mod.coefficients = (1e30, 0.0)
    with pytest.raises(br.BridgeError, match=r'pose.bones\["side"\].location\[2\] evaluates to an absurd .* '
                                             r'at frame 1 \(check its modifiers\)'):
        br.read_motion(arm, sk)


def test_driver_on_the_sampled_path_names_bone_and_frame(br, rig):
    arm, act, bag, sk = rig
    fc = arm.driver_add('pose.bones["side"].location', 0)
    fc.driver.expression = "1e30 if frame > 6 else 0"
    with pytest.raises(br.BridgeError, match=r"Armature 'Rig': bone 'side' evaluates to a non-finite or absurd pose "
                                             r"at frame 7 "):
        br.read_motion(arm, sk)


def test_frame_range_outside_the_action_is_refused_with_its_range(br, rig):
    arm, act, bag, sk = rig
    before = action_snapshot(act)
    for start, end in ((5000, 6000), (-30, -2), (11, 40)):
        with pytest.raises(br.BridgeError, match=rf"Frames {start}\.\.{end} lie outside the clip \(Action 'Src' has "
                                                 r"frames 1\.\.10\): pick a range inside it"):
            br.read_motion(arm, sk, frame_start=start, frame_end=end)
    with pytest.raises(br.BridgeError, match=r"Frame range 8\.\.3 is empty \(Action 'Src' has frames 1\.\.10\)"):
        br.read_motion(arm, sk, frame_start=8, frame_end=3)
    assert_same_snapshot(before, action_snapshot(act))


def test_frame_range_reaching_past_the_action_is_clamped_with_a_note(br, rig):
    arm, act, bag, sk = rig
    full = br.read_motion(arm, sk)
    for (start, end), (a, b) in (((-10, 4), (1, 4)), ((6, 40), (6, 10)), ((-5, 99), (1, 10))):
        notes = []
        m = br.read_motion(arm, sk, frame_start=start, frame_end=end, report=notes.append)
        assert (m.frame_start, m.num_frames) == (a, b - a + 1)
        np.testing.assert_allclose(m.rotations, full.rotations[a - 1:b])
        assert notes == [f"Frames {start}..{end} reach outside the clip (Action 'Src' has frames 1..10): "
                         f"retargeting frames {a}..{b}."]
    # a range inside the clip, or none, gives no note
    notes = []
    br.read_motion(arm, sk, frame_start=2, frame_end=9, report=notes.append)
    br.read_motion(arm, sk, report=notes.append)
    assert notes == []


def test_cycled_clip_plays_outside_its_keys(br, rig):
    arm, act, bag, sk = rig
    for fc in bag.fcurves:
        fc.modifiers.new('CYCLES')
    m = br.read_motion(arm, sk, frame_start=20, frame_end=29)
    assert m.frame_start == 20 and m.num_frames == 10
    assert np.ptp(m.rotations, axis=0).max() > 0.1    # it moves: not a frozen last pose


def test_action_with_a_shape_key_slot_first_is_read_through_the_armatures_slot(br, rig):
    """glTF imports give one Action a slot per animated ID; the first may belong to shape keys."""
    arm, src_act, bag, sk = rig
    expected = br.read_motion(arm, sk)
    me = bpy.data.meshes.new("face")
    me.from_pydata([(0, 0, 2), (0.1, 0, 2), (0, 0.1, 2)], [], [(0, 1, 2)])
    face = bpy.data.objects.new("Face", me)
    bpy.context.scene.collection.objects.link(face)
    face.shape_key_add(name="Basis")
    face.shape_key_add(name="Smile")
    act = bpy.data.actions.new("Clip")
    strip = act.layers.new("Layer").strips.new(type='KEYFRAME')
    key_slot = act.slots.new(id_type='KEY', name="Key")
    fc = strip.channelbag(key_slot, ensure=True).fcurves.new('key_blocks["Smile"].value')
    fc.keyframe_points.add(2)
    fc.keyframe_points.foreach_set("co", [1.0, 0.0, 10.0, 1.0])
    ob_slot = act.slots.new(id_type='OBJECT', name="SomeOtherName")
    ob_bag = strip.channelbag(ob_slot, ensure=True)
    for src_fc in bag.fcurves:            # the same bone curves as 'Src', in the object slot
        n = len(src_fc.keyframe_points)
        co = np.empty(2 * n, np.float32)
        src_fc.keyframe_points.foreach_get("co", co)
        new = ob_bag.fcurves.new(src_fc.data_path, index=src_fc.array_index)
        new.keyframe_points.add(n)
        new.keyframe_points.foreach_set("co", co)
        new.update()
    assert act.slots[0].target_id_type == 'KEY' and getattr(act, "id_root", 'KEY') == 'KEY'
    m = br.read_motion(arm, sk, action=act)   # not assigned: the slot is chosen by its bone curves
    np.testing.assert_allclose(m.rotations, expected.rotations, atol=1e-6)
    np.testing.assert_allclose(m.locations, expected.locations, atol=1e-6)
    shape_only = bpy.data.actions.new("FaceOnly")
    shape_only.slots.new(id_type='KEY', name="Key")
    with pytest.raises(br.BridgeError, match=r"Action 'FaceOnly' does not animate objects \(its slots: 'Key' "
                                             r"\(key\)\): pick an Action that animates 'Rig'"):
        br.read_motion(arm, sk, action=shape_only)
