"""core.body: the parametric skinned humanoid (closed surface, weights, poses, morphology, fitting)."""

import numpy as np
import pytest

from core.body import SHORT_HEAVY, BodyParams, body_model, fit_body_to_skeleton, make_body
from core.errors import CoreError
from core.rig.humanoid import REQUIRED_BONES, limb_of
from core.rig.kinematics import forward_kinematics
from core.rig.skinning import rest_pose_vertices, skin_mesh
from core.rig.tpose import tpose_basis
from core.types import Skeleton


@pytest.fixture(scope="module")
def neutral():
    return make_body(BodyParams(name="neutral"))


@pytest.fixture(scope="module")
def neutral_a():
    return make_body(BodyParams(name="neutral"), pose="A")


def _edges(mesh):
    q = mesh.face_indices.reshape(-1, 4)
    return np.concatenate([q[:, [0, 1]], q[:, [1, 2]], q[:, [2, 3]], q[:, [3, 0]]])


def test_surface_is_closed_oriented_and_a_sphere(neutral):
    _, mesh, _ = neutral
    assert np.all(mesh.face_sizes == 4)
    e = _edges(mesh)
    _, counts = np.unique(np.sort(e, 1), axis=0, return_counts=True)
    assert (counts == 2).mean() > 0.999          # closed: every edge between two faces (a handful non-manifold)
    _, dcounts = np.unique(e, axis=0, return_counts=True)
    assert (dcounts == 1).mean() > 0.999         # consistently oriented: each directed edge once
    V, E, F = mesh.num_verts, len(counts), len(mesh.face_sizes)
    assert V - E + F == 2                        # one closed genus-0 surface
    assert 5000 < V < 12000


def test_normals_point_outwards(neutral):
    _, mesh, _ = neutral
    g = body_model(BodyParams(name="neutral")).grad(mesh.rest_verts)
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    assert np.mean((g * mesh.rest_normals).sum(1) > 0.5) > 0.99


def test_height_soles_and_mirror_symmetry(neutral):
    skel, mesh, bone_map = neutral
    z = mesh.rest_verts[:, 2]
    assert abs(z.max() - 1.75) < 0.005 and abs(z.min()) < 0.005
    assert set(REQUIRED_BONES) <= set(skel.names) and all(bone_map[b] == b for b in skel.names)
    from scipy.spatial import cKDTree
    d, _ = cKDTree(mesh.rest_verts).query(mesh.rest_verts * [-1, 1, 1])
    assert d.max() < 1e-6
    # soles are flat: the lowest 2 % of the foot vertices face down
    low = z < 0.004
    assert low.sum() > 20 and np.mean(mesh.rest_normals[low, 2] < -0.7) > 0.9


def test_skin_weights_smooth_and_never_cross_sides(neutral):
    skel, mesh, _ = neutral
    wv = mesh.weight_values
    assert np.allclose(wv.sum(1), 1.0) and (wv >= 0).all()
    W = mesh.dense_weights(skel.num_bones)
    right = np.array([n.startswith("right_") for n in skel.names])
    left = np.array([n.startswith("left_") for n in skel.names])
    x = mesh.rest_verts[:, 0]
    assert W[x > 0.12][:, right].max() == 0.0 and W[x < -0.12][:, left].max() == 0.0
    # joints blend: around the left elbow both arm bones share vertices
    ua, la = skel.index("left_upper_arm"), skel.index("left_lower_arm")
    both = (W[:, ua] > 0.2) & (W[:, la] > 0.2)
    assert both.sum() > 20
    # every limb has vertices whose strongest bone lies in it
    limbs = {limb_of(skel.names[b]) for b in np.argmax(W, 1)}
    assert len(limbs) == 10


def test_a_pose_rest_and_back_to_t_pose(neutral, neutral_a):
    (_, mT, _), (skA, mA, bmA) = neutral, neutral_a
    # arms point down in the A rest pose
    hand = skA.rest_global[skA.index("left_hand"), :3, 3]
    shoulder = skA.rest_global[skA.index("left_upper_arm"), :3, 3]
    d = hand - shoulder
    assert np.degrees(np.arctan2(-d[2], d[0])) == pytest.approx(45.0, abs=0.5)
    # tpose_basis + FK + LBS bring the A-pose body back onto the T-pose body (same topology)
    q = tpose_basis(skA, bmA)
    pose = forward_kinematics(skA, q, np.zeros((skA.num_bones, 3)))
    pos, _ = skin_mesh(skA, mA, pose)
    err = np.linalg.norm(pos.numpy() - mT.rest_verts, axis=1)
    assert np.median(err) < 1e-6 and err.max() < 0.03


@pytest.mark.slow
def test_morphology_changes_the_body(neutral):
    _, m0, _ = neutral
    sk, m1, _ = make_body(SHORT_HEAVY)
    assert abs(np.ptp(m1.rest_verts[:, 2]) - SHORT_HEAVY.height) < 0.01
    def belly(m, skel):
        z = skel.rest_global[skel.index("spine"), 2, 3]
        band = np.abs(m.rest_verts[:, 2] - z) < 0.03
        return -m.rest_verts[band, 1].min()
    assert belly(m1, sk) > belly(m0, neutral[0]) + 0.05


def test_bad_params_raise():
    with pytest.raises(CoreError, match="height"):
        BodyParams(height=-1.0)
    with pytest.raises(CoreError, match="pose"):
        make_body(BodyParams(resolution=0.03), pose="X")


def test_fit_body_reproduces_the_template_on_its_own_skeleton(neutral_a):
    from core.keyverts import load_template
    skA, mA, bmA = neutral_a
    tpl = load_template(41)
    fitted = fit_body_to_skeleton(skA, bmA)
    assert np.array_equal(fitted.face_indices, tpl.mesh.face_indices)     # template topology
    assert fitted.weight_bones.max() < skA.num_bones
    # the template was generated with the same parameters: fitting to the A-pose skeleton gives back the A body
    # (posed in the skeleton's rest pose: the fitted body is bound in its T-pose)
    err = np.linalg.norm(rest_pose_vertices(skA, fitted) - mA.rest_verts, axis=1)
    assert np.median(err) < 1e-4 and err.max() < 0.03


@pytest.mark.slow
def test_fit_body_follows_proportions_and_object_scale():
    skL, _, bmL = make_body(BodyParams(arm_length=1.3, leg_length=1.2, height=1.9, name="long"), pose="A")
    # an FBX-like armature: centimetres in armature space, object scale 0.01, moved away from the origin
    rest = skL.rest_local.copy()
    rest[:, :3, 3] *= 100.0
    obj = np.diag([0.01, 0.01, 0.01, 1.0])
    obj[:3, 3] = (3.0, -2.0, 0.0)
    sk_cm = Skeleton("long_cm", skL.names, skL.parents, rest, obj)
    fitted = fit_body_to_skeleton(sk_cm, bmL)
    world = rest_pose_vertices(sk_cm, fitted) * 0.01 + obj[:3, 3]
    assert np.ptp(world[:, 2]) == pytest.approx(1.9, rel=0.04)
    # the hands end where the skeleton's hands are (beyond the wrist, along the arm)
    G = sk_cm.rest_global
    wrist = G[sk_cm.index("left_hand"), :3, 3] * 0.01 + obj[:3, 3]
    hand_v = world[fitted.weight_bones[:, 0] == sk_cm.index("left_hand")]
    assert np.linalg.norm(hand_v.mean(0) - wrist) < 0.12


def test_fit_body_needs_the_core_bones(neutral):
    skel, _, bone_map = neutral
    bm = dict(bone_map)
    del bm["left_foot"]
    with pytest.raises(CoreError, match="left_foot"):
        fit_body_to_skeleton(skel, bm)


def test_a_skeleton_lying_on_its_side_is_stood_up(neutral_a):
    """Some BVH rest poses lie on their side (Bandai-Namco): the fit and the height stand them up first."""
    from core.keyverts import character_height
    from core.types import Character
    skA, mA, bmA = neutral_a
    lie = np.eye(4)
    lie[:3, :3] = [[1, 0, 0], [0, 0, -1], [0, 1, 0]]          # +90 deg about X: head along -Y
    sk_lying = Skeleton("lying", skA.names, skA.parents, skA.rest_local, lie)
    fitted = fit_body_to_skeleton(sk_lying, bmA)
    upright = fit_body_to_skeleton(skA, bmA)
    # armature space: the same body (up to the slight lean of hips -> head, which becomes the vertical)
    assert np.abs(rest_pose_vertices(sk_lying, fitted) - rest_pose_vertices(skA, upright)).max() < 0.01
    assert character_height(Character(sk_lying, fitted, bmA)) == pytest.approx(1.75, abs=0.01)
