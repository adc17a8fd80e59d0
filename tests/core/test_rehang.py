"""Game rigs whose feet are IK bones parented to the root (issue 15, item 7): the legs are detected, the core works
on a re-hung copy of the skeleton (core.rig.rehang), and copy-rotations keeps each foot at the end of its shin."""

import numpy as np
import pytest

from core.bonemap import detect_bone_map
from core.character.complete import CharacterSpec
from core.rig.kinematics import forward_kinematics
from core.rig.rehang import disconnected_bones, rehang
from core.pipeline.retarget import Retarget, RetargetOptions, run
from core.types import Skeleton

from .rigs import make_skeleton, random_motion


def ik_footed(style="unreal", name="game", positions=False):
    """``style``'s humanoid under a 'Root' bone, with both feet (and their toes) hanging from the root instead of
    the shins, rest pose unchanged. ``positions``: bone names that say nothing (detection by position)."""
    sk = make_skeleton(style, extra_root=True, name=name)
    G = sk.rest_global
    parents = sk.parents.copy()
    for side in ("l", "r"):
        parents[sk.index(f"foot_{side}")] = 0
    rest_local = np.stack([G[j] if p < 0 else np.linalg.inv(G[p]) @ G[j] for j, p in enumerate(parents)])
    names = list(sk.names)
    if positions:
        names = [n if n in ("Root",) or n.startswith(("foot_", "ball_", "hand_", "head", "pelvis", "spine"))
                 else f"b{j:02d}" for j, n in enumerate(names)]
    return Skeleton(name, names, parents, rest_local, sk.object_matrix)


def heads(skeleton, motion):
    return forward_kinematics(skeleton, motion.rotations, motion.locations).positions.numpy()


@pytest.mark.parametrize("positions", [False, True])
def test_legs_of_ik_footed_rigs_are_detected(positions):
    sk = ik_footed(positions=positions)
    res = detect_bone_map(sk)
    assert not res.missing_required, res.missing_required
    bm = res.bone_map
    assert bm["left_foot"] == "foot_l" and bm["right_foot"] == "foot_r" and bm["hips"] == "pelvis"
    names = sk.names
    assert sk.parents[names.index(bm["left_lower_leg"])] == names.index(bm["left_upper_leg"])
    if not positions:
        assert (bm["left_upper_leg"], bm["left_lower_leg"], bm["left_toes"]) == ("thigh_l", "calf_l", "ball_l")
    # the ordinary rig is unchanged by the new rule
    plain = make_skeleton("unreal", extra_root=True)
    assert detect_bone_map(plain).bone_map["left_lower_leg"] == "calf_l"
    assert disconnected_bones(plain, detect_bone_map(plain).bone_map) == {}


def test_rehung_skeleton_keeps_every_pose_and_converts_both_ways():
    rig = ik_footed()
    bm = detect_bone_map(rig).bone_map
    moved = disconnected_bones(rig, bm)
    assert {rig.names[j]: rig.names[k] for j, k in moved.items()} == {"foot_l": "calf_l", "foot_r": "calf_r"}
    rh = rehang(rig, bm)
    core = rh.skeleton
    assert core.names[core.parents[core.index("foot_l")]] == "calf_l"
    assert core.names[core.parents[core.index("ball_l")]] == "foot_l"
    assert np.all(core.parents < np.arange(core.num_bones))
    order = [rig.index(n) for n in core.names]
    np.testing.assert_allclose(core.rest_global, rig.rest_global[order], atol=1e-12)
    motion = random_motion(rig, frames=9, seed=4)
    motion.locations[:, rig.index("foot_l")] = [0.05, -0.02, 0.1]     # IK feet carry their own translation
    as_core = rh.to_core(motion)
    np.testing.assert_allclose(heads(core, as_core), heads(rig, motion)[:, order], atol=1e-9)
    back = rh.to_rig(as_core)
    np.testing.assert_allclose(heads(rig, back), heads(rig, motion), atol=1e-9)
    dots = np.abs((back.rotations * motion.rotations).sum(-1))
    np.testing.assert_allclose(dots, 1.0, atol=1e-9)
    np.testing.assert_allclose(back.locations, motion.locations, atol=1e-9)
    assert "foot_l" in rh.describe() and "calf_l" in rh.describe()


def test_copy_rotations_keeps_ik_feet_at_the_end_of_the_shins():
    """The rig the issue reports torn apart (hips 9 m up, feet 2 m under the floor): every foot stays at its shin's
    end, the feet stand on the floor and the hips stay at a human height."""
    source = make_skeleton("mixamo", name="src")
    clip = random_motion(source, frames=20, seed=3, amplitude=0.35)
    target = ik_footed(name="game")
    job = Retarget(CharacterSpec(source, clip=clip), clip, CharacterSpec(target),
                   RetargetOptions(method="copy_rotations", metrics=False))
    out = run(job)
    assert any("foot_l" in n for n in out.notes)
    skeleton, motion = out.for_scene()
    assert skeleton is target
    P = heads(target, motion)                                   # armature space = world (identity object)
    for side in ("l", "r"):
        calf, foot = target.index(f"calf_{side}"), target.index(f"foot_{side}")
        R = forward_kinematics(target, motion.rotations, motion.locations).rotations.numpy()[:, calf]
        rest = np.linalg.inv(target.rest_global[calf]) @ target.rest_global[foot]
        expected = P[:, calf] + (R @ rest[:3, 3])
        np.testing.assert_allclose(P[:, foot], expected, atol=1e-6)
    lowest = P[:, [target.index(n) for n in ("foot_l", "foot_r", "ball_l", "ball_r")], 2].min(1)
    assert abs(lowest[0]) < 1e-3                                 # on the floor at frame 0 (bones stand in for soles)
    hips = P[:, target.index("pelvis"), 2]
    assert np.all((hips > 0.5) & (hips < 1.5))
