"""Copy-rotations on the real assets, through the add-on pipeline: every motion onto two characters and every
character from at least two motions (20-frame ranges).

Checked with Blender's own pose evaluation (``scene.frame_set`` + ``pose.bones[].matrix``), not the core FK:
- limb bones (upper/lower arm, upper/lower leg): the world direction head -> head of the mapped canonical child
  equals the source's, turned by the facing alignment A = F_t F_s^T (both T-poses point limbs the same way),
  within 2 degrees;
- every other mapped chain (hips->spine, spine->chest, neck->head, shoulder->upper arm, foot->toes): the target
  direction equals its T-pose direction turned by the source's world rotation relative to its T-pose
  (A W_s(t) W_s^T^-1 A^T d_t^T), within 2 degrees;
- hips displacement = A x source hips displacement x hip-height ratio; the feet are on the ground at the first
  frame; the source Action is unchanged; the new Action keys every mapped bone on every frame.
"""

import numpy as np
import pytest

from .bridge_helpers import action_snapshot, assert_same_snapshot
from .real_assets import CHARACTERS, MOTIONS, import_armature, mod

pytestmark = [pytest.mark.assets, pytest.mark.slow]

FRAMES = 20
PAIRS = [(m, CHARACTERS[(i + k) % len(CHARACTERS)]) for i, m in enumerate(MOTIONS) for k in (0, 3)]
LIMBS = [(f"{s}_{a}", f"{s}_{b}") for s in ("left", "right") for a, b in
         (("upper_arm", "lower_arm"), ("lower_arm", "hand"), ("upper_leg", "lower_leg"), ("lower_leg", "foot"))]
OTHERS = [("hips", "spine"), ("spine", "chest"), ("neck", "head")] + [
    (f"{s}_{a}", f"{s}_{b}") for s in ("left", "right") for a, b in (("shoulder", "upper_arm"), ("foot", "toes"))]


def test_pairs_cover_every_file_twice():
    for m in MOTIONS:
        assert len({c for mm, c in PAIRS if mm == m}) >= 2
    for c in CHARACTERS:
        assert len({m for m, cc in PAIRS if cc == c}) >= 2


def _world_pose(arm):
    """(J, 4, 4) world matrices of the pose bones as Blender evaluates them."""
    J = len(arm.pose.bones)
    buf = np.empty(J * 16, np.float32)
    arm.pose.bones.foreach_get("matrix", buf)
    return np.array(arm.matrix_world) @ buf.reshape(J, 4, 4).transpose(0, 2, 1).astype(np.float64)


def _angle(a, b):
    a = a / np.linalg.norm(a)
    b = b / np.linalg.norm(b)
    return float(np.degrees(np.arccos(np.clip(a @ b, -1, 1))))


@pytest.mark.parametrize("motion,char", PAIRS)
def test_copy_rotations_on_real_assets(addon, assets, clean_scene, motion, char):
    import bpy

    pipeline = mod(addon, "reconform_addon.pipeline")
    tpose = mod(addon, "core.rig.tpose")
    cr, frame = mod(addon, "core.pipeline.copy_rotations"), mod(addon, "core.character.frame")
    src_obj = import_armature(addon, assets, motion)
    tgt_obj = import_armature(addon, assets, char)
    src_action = src_obj.animation_data.action
    before = action_snapshot(src_action)
    fs = int(src_action.frame_range[0]) + 3
    fe = fs + FRAMES - 1
    res = pipeline.retarget(src_obj, tgt_obj, method="copy_rotations", frame_start=fs, frame_end=fe)
    assert_same_snapshot(before, action_snapshot(src_action))
    assert tgt_obj.animation_data.action == res.action and src_obj.animation_data.action == src_action

    # the source as the retarget completed it: a skeleton-only source gets a fitted body (its soles then define the
    # hip height, as the target's mesh does; the metrics need that body too)
    src = res.outcome.built["source"].character
    tgt = pipeline.prepare_character(tgt_obj, keyvert_count=0)
    # new Action: a key on every frame for every mapped bone
    from bpy_extras import anim_utils
    bag = anim_utils.action_get_channelbag_for_slot(res.action, tgt_obj.animation_data.action_slot)
    keyed = {}
    for fc in bag.fcurves:
        if fc.data_path.endswith("rotation_quaternion"):
            co = np.empty(2 * len(fc.keyframe_points))
            fc.keyframe_points.foreach_get("co", co)
            keyed[fc.data_path.split('"')[1]] = co[0::2]
    for b in tgt.bone_map.values():
        np.testing.assert_array_equal(keyed[b], np.arange(fs, fe + 1))

    clip = pipeline.read_motion(src_obj, src.skeleton, frame_start=fs, frame_end=fe)
    qs = tpose.tpose_basis(src.skeleton, src.bone_map, frame.reference_basis(src, clip))
    qt = tpose.tpose_basis(tgt.skeleton, tgt.bone_map)
    WsT, _ = tpose.tpose_world(src.skeleton, qs)
    _, PtT = tpose.tpose_world(tgt.skeleton, qt)
    A = tpose.body_frame_matrix(tpose.body_frame(tgt.skeleton, tgt.bone_map, qt)) @ \
        tpose.body_frame_matrix(tpose.body_frame(src.skeleton, src.bone_map, qs)).T
    ratio = frame.hip_height(tgt, qt) / frame.hip_height(src, qs)
    si = {c: src.skeleton.index(b) for c, b in src.bone_map.items()}
    ti = {c: tgt.skeleton.index(b) for c, b in tgt.bone_map.items()}
    hips = []
    worst = 0.0
    for f in (fs, fs + FRAMES // 2, fe):
        bpy.context.scene.frame_set(f)
        Gs, Gt = _world_pose(src_obj), _world_pose(tgt_obj)
        Rs = Gs[:, :3, :3] / np.linalg.norm(Gs[:, :3, :3], axis=1, keepdims=True)
        for a, b in LIMBS:
            if a in si and b in si and a in ti and b in ti:
                ds = Gs[si[b], :3, 3] - Gs[si[a], :3, 3]
                dt = Gt[ti[b], :3, 3] - Gt[ti[a], :3, 3]
                worst = max(worst, _angle(A @ ds, dt))
        for a, b in OTHERS:
            if a in si and b in ti and a in ti and b in ti:
                d_ref = A @ Rs[si[a]] @ WsT[si[a]].T @ A.T @ (PtT[ti[b]] - PtT[ti[a]])
                worst = max(worst, _angle(d_ref, Gt[ti[b], :3, 3] - Gt[ti[a], :3, 3]))
        hips.append((Gs[si["hips"], :3, 3], Gt[ti["hips"], :3, 3]))
    assert worst < 2.0, f"{motion} -> {char}: worst direction error {worst:.3f} deg"
    # feet on the ground at the first frame where the source stands on its floor, as high above it as the
    # source's there × the hip-height ratio (the first frame itself when the source stands there: height 0)
    frames, above = cr.standing_frames(res.outcome.source_track)
    meshes = pipeline.find_meshes(tgt_obj)
    if meshes:
        bpy.context.scene.frame_set(fs + int(frames[0]))
        dg = bpy.context.evaluated_depsgraph_get()
        zmin = min(min((ob.matrix_world @ v.co).z for v in ob.evaluated_get(dg).data.vertices) for ob in meshes)
        if frames[0] == 0:
            assert -0.03 < zmin < 0.01, zmin    # LBS with top-K weights vs Blender: mm apart
            feet = [ti[c] for c in ("left_foot", "right_foot", "left_toes", "right_toes") if c in ti]
            assert _world_pose(tgt_obj)[feet, 2, 3].min() > -1e-3
        else:                                   # one of the frames whose median sets the height
            assert abs(zmin - ratio * above[0]) < 0.03, (zmin, ratio * above[0])
    (s0, t0), (s1, t1) = hips[0], hips[-1]
    np.testing.assert_allclose(t1 - t0, A @ (s1 - s0) * ratio, atol=1e-4 * max(1.0, ratio))
