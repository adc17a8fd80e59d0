"""A skeleton-only source gets a body of its own size, also when its rest pose is not a standing humanoid
(the Bandai-Namco BVH rest pose lies on its side: the body is stood up from the clip's first frame)."""

import numpy as np
import pytest

from .real_assets import import_armature, mod

pytestmark = pytest.mark.assets


@pytest.mark.parametrize("motion", ["NC_bandai_walk_normal_001.bvh", "NC_bandai_kick_normal_001.bvh",
                                    "cmu_07_01_walk.fbx"])
def test_fitted_body_height_follows_the_skeleton(addon, assets, clean_scene, motion):
    pipeline = mod(addon, "reconform_addon.pipeline")
    kin = mod(addon, "core.kinematics")
    arm = import_armature(addon, assets, motion)
    notes = []
    ch = pipeline.prepare_character(arm, keyvert_count=41, report=notes.append)
    assert any("fitted a template body" in n for n in notes), notes
    assert ch.mesh is not None and len(ch.keyverts) == 41
    first = pipeline.read_motion(arm, ch.skeleton, frame_start=int(arm.animation_data.action.frame_range[0]) + 1,
                                 frame_end=int(arm.animation_data.action.frame_range[0]) + 1)
    pose = kin.to_world(ch.skeleton.object_matrix,
                        kin.forward_kinematics(ch.skeleton, first.rotations, first.locations))
    z = pose.positions[0, :, 2].numpy()
    joint_span = float(z.max() - z.min())  # feet joints to head joint, standing
    # the skin reaches above the head joint and below the ankles: taller than the joint span, not by much
    assert 1.0 < ch.height / joint_span < 1.35, (ch.height, joint_span)
    # and the fitted body stands upright in the clip's first frame: head key vertex above the feet ones
    kv = {n: i for i, n in enumerate(ch.keyverts.names)}
    skin = mod(addon, "core.skinning")
    pos, _ = skin.skin_mesh(ch.skeleton, ch.mesh, kin.forward_kinematics(ch.skeleton, first.rotations,
                                                                         first.locations),
                            ch.keyverts.vertex_ids)
    M = ch.skeleton.object_matrix
    zk = (pos[0].numpy() @ M[:3, :3].T + M[:3, 3])[:, 2]
    heads = [kv[n] for n in kv if n.startswith("head") or n == "face_center"]
    feet = [kv[n] for n, limb in zip(ch.keyverts.names, ch.keyverts.limbs) if limb.endswith("_foot")]
    assert np.min(zk[heads]) > np.max(zk[feet]) + 0.5 * ch.height


@pytest.mark.parametrize("motion", ["NC_bandai_walk_normal_001.bvh", "NC_bandai_slash_normal_001.bvh"])
def test_reference_frame_of_a_lying_rest_pose_has_both_feet_flat(addon, assets, clean_scene, motion):
    """Bandai rest poses lie down: the T-pose is built from the frame where both feet are flat on the floor,
    not from a mid-step frame (which would tilt every retargeted foot)."""
    pipeline = mod(addon, "reconform_addon.pipeline")
    kin = mod(addon, "core.kinematics")
    cr = mod(addon, "core.copy_rotations")
    arm = import_armature(addon, assets, motion)
    ch = pipeline.prepare_character(arm, keyvert_count=0)
    clip = pipeline.read_motion(arm, ch.skeleton)
    k = cr.reference_frame(ch, clip)
    assert k is not None and 0 <= k < clip.num_frames
    pose = kin.to_world(ch.skeleton.object_matrix,
                        kin.forward_kinematics(ch.skeleton, clip.rotations, clip.locations))
    z = pose.positions[..., 2].numpy()
    bm, idx = ch.bone_map, ch.skeleton.index
    for side in ("left", "right"):
        for part in ("foot", "toes"):
            zz = z[:, idx(bm[f"{side}_{part}"])]
            # at the reference frame each foot and toe joint is within 1.5 % of the body's size of its lowest
            assert zz[k] - zz.min() < 0.015 * (z.max() - z.min()), (side, part, zz[k] - zz.min())
