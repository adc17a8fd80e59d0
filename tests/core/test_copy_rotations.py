"""core.pipeline.copy_rotations and core.rig.tpose on synthetic humanoids: exactness across rolls, units, object transforms,
facing, rest poses (T vs A) and proportions."""

import re

import numpy as np
import pytest
import torch

from core.bonemap import detect_bone_map
from core.contacts.ground import STAND_BAND
from core.pipeline.copy_rotations import copy_rotations, standing_frames
from core.character.frame import foot_points, hip_height, lowest_foot_z
from core.errors import CoreError
from core.rig.kinematics import ForwardKinematics, Pose, forward_kinematics, to_world
from core.rig.rotations import quat_to_matrix, rotation_angle_deg
from core.rig.tpose import body_frame, body_frame_matrix, tpose_basis, tpose_world
from core.types import Character, Motion, Skeleton

from core.character.track import ClipTrack

from .rigs import make_skeleton, object_matrix, quat_multiply, random_motion
from .synth import make_humanoid, walk_motion

CHAINS = [(f"{s}_{a}", f"{s}_{b}") for s in ("left", "right") for a, b in
          (("shoulder", "upper_arm"), ("upper_arm", "lower_arm"), ("lower_arm", "hand"), ("upper_leg", "lower_leg"),
           ("lower_leg", "foot"), ("foot", "toes"))] + [("hips", "spine"), ("spine", "chest"), ("neck", "head")]
LIMB_CHAINS = [c for c in CHAINS if any(k in c[0] for k in ("arm", "leg"))]


def char(skeleton):
    return Character(skeleton, None, detect_bone_map(skeleton).bone_map)


def world(c, m):
    p = to_world(c.skeleton.object_matrix, forward_kinematics(c.skeleton, m.rotations, m.locations))
    return p.rotations.numpy(), p.positions.numpy()


def directions(c, m, chains):
    _, P = world(c, m)
    s, bm = c.skeleton, c.bone_map
    return np.stack([P[:, s.index(bm[b])] - P[:, s.index(bm[a])] for a, b in chains], 1)


def facing(c):
    return body_frame_matrix(body_frame(c.skeleton, c.bone_map))


@pytest.fixture(scope="module")
def source():
    c = char(make_skeleton("mixamo", name="src"))
    return c, random_motion(c.skeleton, frames=16, seed=1)


TARGETS = {
    "same": dict(style="mixamo"),
    "rolls": dict(style="unreal", roll_seed=11),
    "cm_units": dict(style="unreal", object_matrix=object_matrix(0.01)),
    "fbx_axes": dict(style="rigify", object_matrix=object_matrix(1.0, x_deg=90), roll_seed=2),
    "a_pose": dict(style="cc", arm_angle=45, roll_seed=5),
    "extra_root": dict(style="unreal", extra_root=True, arm_angle=40),
    "turned": dict(style="vrm", object_matrix=object_matrix(1.0, z_deg=90, translation=(2, 1, 0)), turn_world=True),
    "turned_cm_a": dict(style="cmu", object_matrix=object_matrix(0.01, z_deg=-120), turn_world=True, arm_angle=50),
}


@pytest.mark.parametrize("label", sorted(TARGETS))
def test_bone_directions_match_source_after_facing(source, label):
    src, mot = source
    tgt = char(make_skeleton(**TARGETS[label]))
    out = copy_rotations(src, mot, tgt)
    assert out.rotations.shape == (mot.num_frames, tgt.skeleton.num_bones, 4)
    A = facing(tgt) @ facing(src).T
    ds = directions(src, mot, CHAINS) @ A.T
    dt = directions(tgt, out, CHAINS)
    assert rotation_angle_deg(ds, dt).max() < 1e-4
    # world rotations relative to the T-pose are the same (rolls cancel out)
    Rs, _ = world(src, mot)
    Rt, _ = world(tgt, out)
    Ws, _ = tpose_world(src.skeleton, tpose_basis(src.skeleton, src.bone_map))
    Wt, _ = tpose_world(tgt.skeleton, tpose_basis(tgt.skeleton, tgt.bone_map))
    for c in ("hips", "left_lower_arm", "right_foot", "head"):
        i, j = src.skeleton.index(src.bone_map[c]), tgt.skeleton.index(tgt.bone_map[c])
        Ds = A @ Rs[:, i] @ Ws[i].T @ A.T
        Dt = Rt[:, j] @ Wt[j].T
        assert np.abs(Ds - Dt).max() < 1e-9


def test_self_retarget_is_identity_up_to_ground(source):
    src, mot = source
    out = copy_rotations(src, mot, src)
    q_in, q_out = quat_to_matrix(mot.rotations), quat_to_matrix(out.rotations)
    mapped = [src.skeleton.index(b) for b in src.bone_map.values()]
    assert np.abs(q_in[:, mapped] - q_out[:, mapped]).max() < 1e-9
    _, P_in = world(src, mot)
    _, P_out = world(src, out)
    shift = P_out - P_in
    assert np.abs(shift - shift[:1, :1]).max() < 1e-9          # one constant offset for every bone and frame
    assert np.abs(shift[0, 0, :2]).max() < 1e-9                # ... and it is vertical
    np.testing.assert_allclose(np.linalg.norm(out.rotations, axis=-1), 1.0, atol=1e-12)
    assert (np.sum(out.rotations[1:] * out.rotations[:-1], -1) >= 0).all()      # sign-continuous


def test_root_scaled_by_hip_height_and_feet_on_ground(source):
    src, mot = source
    tall = char(make_skeleton("unreal", proportions={"hips": 1.3, "left_lower_leg": 1.3, "right_lower_leg": 1.3,
                                                     "left_foot": 1.3, "right_foot": 1.3},
                              object_matrix=object_matrix(0.01)))
    out = copy_rotations(src, mot, tall)
    r = hip_height(tall, tpose_basis(tall.skeleton, tall.bone_map)) / hip_height(src, tpose_basis(src.skeleton,
                                                                                                    src.bone_map))
    assert 1.25 < r < 1.35
    _, Ps = world(src, mot)
    _, Pt = world(tall, out)
    hs, ht = src.skeleton.index("mixamorig:Hips"), tall.skeleton.index("pelvis")
    np.testing.assert_allclose(Pt[:, ht] - Pt[:1, ht], (Ps[:, hs] - Ps[:1, hs]) * r, atol=1e-9)
    feet = [tall.skeleton.index(n) for n in ("foot_l", "foot_r", "ball_l", "ball_r")]
    assert abs(Pt[0, feet, 2].min()) < 1e-9


def test_target_facing_turns_root_motion(source):
    src, mot = source
    tgt = char(make_skeleton("unreal", object_matrix=object_matrix(1.0, z_deg=90), turn_world=True))
    out = copy_rotations(src, mot, tgt)
    _, Ps = world(src, mot)
    _, Pt = world(tgt, out)
    ds = Ps[-1, 0] - Ps[0, 0]
    dt = Pt[-1, tgt.skeleton.index("pelvis")] - Pt[0, tgt.skeleton.index("pelvis")]
    A = facing(tgt) @ facing(src).T
    r = hip_height(tgt, tpose_basis(tgt.skeleton, tgt.bone_map)) / hip_height(src, tpose_basis(src.skeleton,
                                                                                               src.bone_map))
    np.testing.assert_allclose(dt, (A @ ds) * r, atol=1e-9)
    assert abs(A[0, 1]) > 0.99                                  # really turned by 90 degrees


def test_a_pose_source_onto_t_pose_target():
    src = char(make_skeleton("mixamo", arm_angle=45, roll_seed=9))
    mot = random_motion(src.skeleton, frames=8, seed=4)
    tgt = char(make_skeleton("unreal"))
    out = copy_rotations(src, mot, tgt)
    # the source's rest (A-pose) maps to the target's A-pose: rest in, arms 45 degrees down out
    rest = Motion.rest(1, src.skeleton.num_bones)
    out_rest = copy_rotations(src, rest, tgt)
    d = directions(tgt, out_rest, [("left_upper_arm", "left_lower_arm")])[0, 0]
    d_src = directions(src, rest, [("left_upper_arm", "left_lower_arm")])[0, 0]
    below = lambda v: np.degrees(np.arcsin(-v[2] / np.linalg.norm(v)))
    assert abs(below(d) - below(d_src)) < 1e-6 and below(d) > 40
    assert rotation_angle_deg(directions(src, mot, LIMB_CHAINS), directions(tgt, out, LIMB_CHAINS)).max() < 1e-4


def test_missing_mapping_is_a_clear_error(source):
    src, mot = source
    bad = char(make_skeleton("unreal"))
    bad.bone_map.pop("left_foot")
    with pytest.raises(CoreError, match="Target armature 'unreal'.*left_foot"):
        copy_rotations(src, mot, bad)
    with pytest.raises(CoreError, match="Source motion has 3 bones"):
        copy_rotations(src, Motion.rest(2, 3), char(make_skeleton("unreal")))


# ---- core.rig.tpose -------------------------------------------------------------------------------------------------

def test_tpose_of_a_t_pose_character_is_identity():
    """Baking the T-pose into the rest pose gives a character whose T-pose is its rest pose."""
    sk = make_skeleton("unreal", roll_seed=4, arm_angle=35, object_matrix=object_matrix(0.01, x_deg=90))
    bm = detect_bone_map(sk).bone_map
    q = tpose_basis(sk, bm)
    assert np.abs(np.abs(q[:, 0]) - 1).max() > 0.01            # the A-pose really moved
    rest = sk.rest_local.copy()
    rest[:, :3, :3] = rest[:, :3, :3] @ quat_to_matrix(q)
    baked = Skeleton("baked", sk.names, sk.parents, rest, sk.object_matrix)
    q2 = tpose_basis(baked, bm)
    assert np.abs(np.abs(q2[:, 0]) - 1).max() < 1e-12


@pytest.mark.parametrize("arm_angle", [30, 45, 70])
def test_tpose_makes_arms_horizontal_legs_vertical_and_keeps_feet(arm_angle):
    sk = make_skeleton("mixamo", arm_angle=arm_angle, roll_seed=2, object_matrix=object_matrix(0.01, z_deg=30),
                       turn_world=True)
    c = char(sk)
    q = tpose_basis(sk, c.bone_map)
    W, P = tpose_world(sk, q)
    W0, _ = tpose_world(sk, np.tile([1.0, 0, 0, 0], (sk.num_bones, 1)))
    left = body_frame(sk, c.bone_map).left
    idx = lambda n: sk.index(c.bone_map[n])
    for side, sign in (("left", 1), ("right", -1)):
        for a, b in (("upper_arm", "lower_arm"), ("lower_arm", "hand"), ("hand", "middle_1")):
            d = P[idx(f"{side}_{b}")] - P[idx(f"{side}_{a}")]
            assert rotation_angle_deg(d, sign * left) < 1e-6
        for a, b in (("upper_leg", "lower_leg"), ("lower_leg", "foot")):
            d = P[idx(f"{side}_{b}")] - P[idx(f"{side}_{a}")]
            assert rotation_angle_deg(d, np.array([0, 0, -1.0])) < 1e-6
        np.testing.assert_allclose(W[idx(f"{side}_foot")], W0[idx(f"{side}_foot")], atol=1e-9)
    np.testing.assert_allclose(W[idx("spine")], W0[idx("spine")], atol=1e-9)


def lying(style="unreal", name="lying"):
    """``style``'s humanoid whose rest pose lies on its back (bones turned -90° about X in armature space, the
    head towards +Y) with an identity object matrix: nothing stands it up."""
    sk = make_skeleton(style, name=name)
    R = np.eye(4)
    R[:3, :3] = quat_to_matrix(np.array([np.cos(np.pi / 4), -np.sin(np.pi / 4), 0, 0]))
    G = R @ sk.rest_global
    rest_local = np.stack([G[j] if p < 0 else np.linalg.inv(G[p]) @ G[j] for j, p in enumerate(sk.parents)])
    return Skeleton(name, sk.names, sk.parents, rest_local, np.eye(4))


def test_a_target_lying_at_rest_is_refused_with_what_to_do(source):
    """Issue 15, item 4: a rest pose lying down with no object rotation gave vertical legs under a horizontal
    torso and no warning. It is refused before any slow work, naming the armature and the rotation to apply; with
    that rotation on its object the same rig retargets standing."""
    from core.character.complete import CharacterSpec
    from core.pipeline.retarget import Retarget, RetargetOptions, run

    src, clip = source
    rig = lying()
    job = Retarget(CharacterSpec(src.skeleton, bone_map=src.bone_map), clip, CharacterSpec(rig),
                   RetargetOptions(method="copy_rotations", metrics=False))
    # the rig's head sits a little forward of its hips: 89-90° (the angle is measured, not assumed)
    with pytest.raises(CoreError, match=r"Armature 'lying': its rest pose lies down \(hips to head along world "
                                        r"\+Y, (89|90)° from up\).*rotate the armature object about X by (89|90)°"):
        run(job)
    M = object_matrix(1.0, x_deg=90)        # what the message asks for
    stood = Skeleton("stood", rig.names, rig.parents, rig.rest_local, M)
    out = run(Retarget(CharacterSpec(src.skeleton, bone_map=src.bone_map), clip, CharacterSpec(stood),
                       RetargetOptions(method="copy_rotations", metrics=False)))
    c = Character(stood, None, out.target.bone_map)
    _, P = world(c, out.motion)
    torso = P[:, stood.index("head")] - P[:, stood.index("pelvis")]
    assert np.all(torso[:, 2] > 0.7 * np.linalg.norm(torso, axis=1))      # standing on every frame
    assert not out.notes


def test_a_result_whose_torso_differs_from_the_source_gets_a_note(source):
    from core.pipeline.copy_rotations import posture_note
    from core.character.track import ClipTrack

    src, clip = source
    track = ClipTrack(src, clip)
    tgt = char(make_skeleton("unreal", name="tgt"))
    upright = copy_rotations(src, clip, tgt, track)
    assert posture_note(track, tgt, upright) is None
    tipped = Motion(upright.rotations.copy(), upright.locations.copy(), clip.fps)
    turn = np.array([np.cos(np.pi / 4), np.sin(np.pi / 4), 0, 0])      # the hips turned 90° about their X
    hips = tgt.skeleton.index(tgt.bone_map["hips"])
    tipped.rotations[:, hips] = quat_multiply(tipped.rotations[:, hips], turn)
    note = posture_note(track, tgt, tipped)
    # a 90° turn of the hips; the torso of this rig leans a little at rest, so the measured angle is 85-95°
    m = re.search(r"Target 'tgt': its torso points (\d+)° away", note or "")
    assert m and 85 <= int(m.group(1)) <= 95, note


def test_a_first_frame_off_the_floor_does_not_lift_the_clip():
    """A capture whose first frame is not standing (a T-pose frame held 10 cm up, a take-off): copy-rotations
    stands the target where the source stands on the other frames, not on that frame; a clip that stands at frame
    0 keeps the frame-0 rule (its lowest foot point on the ground there)."""
    src = make_humanoid()
    tgt = make_humanoid(scale=0.8, girth=1.6, leg=0.8, name="tgt")
    walk = walk_motion(src, frames=40)
    frames, above = standing_frames(ClipTrack(src, walk))
    assert frames.tolist() == [0] and above.tolist() == [0.0]              # it stands at frame 0: as before
    raised = Motion(walk.rotations.copy(), walk.locations.copy(), walk.fps)
    hips = src.skeleton.index(src.bone_map["hips"])
    raised.locations[0, hips] += np.linalg.inv(src.skeleton.rest_local[hips, :3, :3]) @ [0.0, 0.0, 0.1]
    frames, above = standing_frames(ClipTrack(src, raised))
    assert frames[0] > 0 and len(frames) > 10 and np.abs(above).max() <= STAND_BAND * src.height

    def lowest(c, m):
        fk = ForwardKinematics(c.skeleton, dtype=torch.float64)
        p = fk(torch.as_tensor(quat_to_matrix(m.rotations)), torch.as_tensor(m.locations))
        return lowest_foot_z(c, Pose(p.rotations, p.positions), foot_points(c))
    plain, lifted = copy_rotations(src, walk, tgt), copy_rotations(src, raised, tgt)
    assert abs(lowest(tgt, plain)[0]) < 1e-7
    # the raised frame does not lift the others: on them the two results stand within a millimetre
    np.testing.assert_allclose(lowest(tgt, lifted)[1:], lowest(tgt, plain)[1:], atol=1e-3)
    assert lowest(tgt, lifted)[0] > 0.05


def test_where_the_source_stands_is_read_against_the_solves_floor():
    """``source_ground`` (``SolverSettings.source_ground``, the solve's floor) decides where the source stands: a
    walk captured 5 cm above z = 0 stands on its own floor ("auto") from frame 0, and never on z = 0 ("zero"),
    where the frame-0 rule applies; a level at the capture's floor reads as "auto" does."""
    src = make_humanoid()
    tgt = make_humanoid(scale=0.8, girth=1.6, leg=0.8, name="tgt")
    walk = walk_motion(src, frames=40)
    hips = src.skeleton.index(src.bone_map["hips"])
    up = Motion(walk.rotations.copy(), walk.locations.copy(), walk.fps)
    up.locations[:, hips] += np.linalg.inv(src.skeleton.rest_local[hips, :3, :3]) @ [0.0, 0.0, 0.05]
    up.locations[0, hips] += np.linalg.inv(src.skeleton.rest_local[hips, :3, :3]) @ [0.0, 0.0, 0.1]   # frame 0 up
    track = ClipTrack(src, up)
    frames, above = standing_frames(track)                                    # its own floor, 5 cm up
    assert frames[0] > 0 and np.abs(above).max() <= STAND_BAND * src.height
    frames, above = standing_frames(track, "zero")                            # z = 0: it never stands there
    assert frames.tolist() == [0] and above.tolist() == [0.0]
    level, _ = standing_frames(track, float(np.median(track.lowest_foot)))
    assert level[0] > 0
    # the target follows: on its own floor the raised first frame does not lift it, read on z = 0 it does
    own, zero = copy_rotations(src, up, tgt, track), copy_rotations(src, up, tgt, track, source_ground="zero")
    fk = ForwardKinematics(tgt.skeleton, dtype=torch.float64)

    def lowest(m):
        p = fk(torch.as_tensor(quat_to_matrix(m.rotations)), torch.as_tensor(m.locations))
        return lowest_foot_z(tgt, Pose(p.rotations, p.positions), foot_points(tgt))
    assert abs(lowest(zero)[0]) < 1e-7 and lowest(own)[0] > 0.05
    # the one retarget path starts from the copy-rotations of its settings' floor
    from core.pipeline.retarget import Retarget, RetargetOptions, run
    from core.solver import SolverSettings
    for setting, want in (("auto", own), ("zero", zero)):
        opts = RetargetOptions(method="copy_rotations", metrics=False, conflicts=False,
                               settings=SolverSettings(source_ground=setting))
        np.testing.assert_allclose(run(Retarget(src, up, tgt, opts)).init_motion.locations, want.locations, atol=1e-9)


def test_the_flat_pass_stood_on_a_terrain_is_the_terrain_pass():
    """A retarget onto a ground object samples it where copy-rotations on the flat floor puts the feet, then needs
    copy-rotations on the sampled terrain: ``like`` takes the flat pass's rotations and hips path and finds the
    height again, the same result as copying every bone again (on a target whose armature is turned, lifted and
    moved), and refuses a pass of another clip."""
    from core.contacts.terrain import HeightField
    src = make_humanoid()
    tgt = make_humanoid(scale=1.2, girth=1.3, name="tgt", object_matrix=object_matrix(z_deg=40.0,
                                                                                      translation=(0.4, -0.3, 0.2)))
    walk = walk_motion(src, frames=30)
    track = ClipTrack(src, walk)
    ramp = HeightField.from_function(lambda x, y: 0.3 + 0.2 * x - 0.1 * y, (-4, 4), (-4, 4), resolution=33)
    flat = copy_rotations(src, walk, tgt, track)
    full = copy_rotations(src, walk, tgt, track, ground=ramp)
    stood = copy_rotations(src, walk, tgt, track, ground=ramp, like=flat)
    assert np.array_equal(stood.rotations, full.rotations)
    np.testing.assert_allclose(stood.locations, full.locations, atol=1e-6)
    assert np.abs(full.locations - flat.locations).max() > 0.1                 # the ramp lifted it
    with pytest.raises(CoreError, match="not this clip's on this target"):
        copy_rotations(src, walk, tgt, track, ground=ramp, like=copy_rotations(src, walk_motion(src, frames=12), tgt))
