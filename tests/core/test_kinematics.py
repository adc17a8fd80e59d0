import numpy as np
import torch

from core.rig.kinematics import ForwardKinematics, forward_kinematics, global_matrices, to_world
from core.rig.rotations import quat_normalize, quat_to_matrix, sixd_to_matrix
from core.rig.skinning import SkinningMatrices, skin_mesh, skin_vertices
from core.types import Motion
from tests.core.helpers import box_mesh, chain_skeleton, random_tree_skeleton
from tests.core.rigs import make_skeleton, object_matrix


def _reference_fk(skel, quats, locs):
    """Blender's formula, bone by bone: G_j = G_p @ rest_local_j @ basis_j."""
    T = quats.shape[0]
    out = np.zeros((T, skel.num_bones, 4, 4))
    for t in range(T):
        for j, p in enumerate(skel.parents):
            B = np.eye(4)
            B[:3, :3] = quat_to_matrix(quats[t, j])
            B[:3, 3] = locs[t, j]
            L = skel.rest_local[j] @ B
            out[t, j] = L if p < 0 else out[t, p] @ L
    return out


def test_identity_pose_is_rest_pose():
    skel = random_tree_skeleton(15)
    m = Motion.rest(3, skel.num_bones)
    pose = forward_kinematics(skel, m.rotations, m.locations)
    G = skel.rest_global
    np.testing.assert_allclose(pose.rotations.numpy(), np.broadcast_to(G[:, :3, :3], (3,) + G[:, :3, :3].shape), atol=1e-12)
    np.testing.assert_allclose(pose.positions.numpy(), np.broadcast_to(G[:, :3, 3], (3, skel.num_bones, 3)), atol=1e-12)


def test_fk_matches_bone_by_bone_reference():
    skel = random_tree_skeleton(20, seed=3)
    rng = np.random.default_rng(1)
    q = quat_normalize(rng.normal(size=(5, 20, 4)))
    loc = rng.normal(size=(5, 20, 3)) * 0.1
    ref = _reference_fk(skel, q, loc)
    pose = forward_kinematics(skel, q, loc)
    np.testing.assert_allclose(pose.rotations.numpy(), ref[..., :3, :3], atol=1e-10)
    np.testing.assert_allclose(pose.positions.numpy(), ref[..., :3, 3], atol=1e-10)


def _posed_global_loop(skeleton, basis=None):
    """The former core.rig.tpose.posed_global: a numpy FK loop over (J, 4) basis rotations, zero locations."""
    J = skeleton.num_bones
    B = np.tile(np.eye(4), (J, 1, 1))
    if basis is not None:
        B[:, :3, :3] = quat_to_matrix(np.asarray(basis, dtype=np.float64))
    out = np.empty((J, 4, 4))
    for j, p in enumerate(skeleton.parents):
        local = skeleton.rest_local[j] @ B[j]
        out[j] = local if p < 0 else out[p] @ local
    return out


def test_global_matrices_equal_the_numpy_loop():
    rng = np.random.default_rng(7)
    skels = [random_tree_skeleton(20, seed=3), chain_skeleton(6),
             make_skeleton("mixamo", arm_angle=40, roll_seed=5, object_matrix=object_matrix(0.01, x_deg=90),
                           units=100.0)]
    for skel in skels:
        G = global_matrices(skel)
        assert G.shape == (skel.num_bones, 4, 4) and G.dtype == np.float64
        np.testing.assert_allclose(G, _posed_global_loop(skel), rtol=0, atol=1e-12)
        np.testing.assert_allclose(G, skel.rest_global, rtol=0, atol=1e-12)
        for _ in range(5):
            q = rng.normal(size=(skel.num_bones, 4))               # not unit: normalised like quat_to_matrix
            np.testing.assert_allclose(global_matrices(skel, q), _posed_global_loop(skel, q), rtol=0, atol=1e-12)
    q = quat_normalize(rng.normal(size=(skels[0].num_bones, 4)))
    np.testing.assert_array_equal(global_matrices(skels[0], torch.as_tensor(q)), global_matrices(skels[0], q))


def test_batch_of_one_equals_single_call():
    skel = random_tree_skeleton(10, seed=2)
    rng = np.random.default_rng(0)
    q = quat_normalize(rng.normal(size=(4, 10, 4)))
    loc = rng.normal(size=(4, 10, 3))
    batched = forward_kinematics(skel, q, loc)
    for t in range(4):
        single = forward_kinematics(skel, q[t], loc[t])
        torch.testing.assert_close(single.positions, batched.positions[t])
        one = forward_kinematics(skel, q[t:t + 1], loc[t:t + 1])
        torch.testing.assert_close(one.rotations[0], batched.rotations[t])


def test_fk_and_lbs_gradcheck_float64():
    skel = chain_skeleton(4)
    mesh = box_mesh(skel, 2)
    fk = ForwardKinematics(skel, dtype=torch.float64)
    sm = SkinningMatrices(skel, dtype=torch.float64)
    rng = np.random.default_rng(0)
    d6 = torch.tensor(rng.normal(size=(2, 4, 6)), requires_grad=True)
    loc = torch.tensor(rng.normal(size=(2, 4, 3)) * 0.1, requires_grad=True)

    def f(d6, loc):
        pose = fk(sixd_to_matrix(d6), loc)
        rot, tr = sm(pose)
        pos, nrm = skin_vertices(rot, tr, mesh.rest_verts, mesh.weight_bones, mesh.weight_values, mesh.rest_normals)
        return pos, nrm

    assert torch.autograd.gradcheck(f, (d6, loc), eps=1e-6, atol=1e-5)


def test_lbs_rest_pose_returns_rest_vertices_and_normals():
    skel = random_tree_skeleton(8, seed=5)
    mesh = box_mesh(skel, 3)
    m = Motion.rest(2, skel.num_bones)
    pose = forward_kinematics(skel, m.rotations, m.locations)
    pos, nrm = skin_mesh(skel, mesh, pose)
    np.testing.assert_allclose(pos.numpy(), np.broadcast_to(mesh.rest_verts, pos.shape), atol=1e-10)
    np.testing.assert_allclose(nrm.numpy(), np.broadcast_to(mesh.rest_normals, nrm.shape), atol=1e-10)


def test_lbs_rigid_vertex_follows_its_bone():
    skel = chain_skeleton(3)
    mesh = box_mesh(skel, 1)
    wb = np.array([[1, 0]] * mesh.num_verts)
    wv = np.array([[1.0, 0.0]] * mesh.num_verts)
    q = np.zeros((1, 3, 4)); q[..., 0] = 1
    q[0, 1] = [np.cos(0.4), np.sin(0.4), 0, 0]
    pose = forward_kinematics(skel, q, np.zeros((1, 3, 3)))
    rot, tr = SkinningMatrices(skel, torch.float64)(pose)
    pos, _ = skin_vertices(rot, tr, mesh.rest_verts, wb, wv)
    G0 = skel.rest_global[1]
    local = np.linalg.inv(G0) @ np.c_[mesh.rest_verts, np.ones(mesh.num_verts)].T
    expect = pose.rotations[0, 1].numpy() @ local[:3] + pose.positions[0, 1].numpy()[:, None]
    np.testing.assert_allclose(pos[0].numpy(), expect.T, atol=1e-10)


def test_to_world_removes_scale_from_rotations():
    skel = chain_skeleton(3)
    M = np.diag([0.01, 0.01, 0.01, 1.0])
    M[:3, 3] = (1, 2, 3)
    pose = forward_kinematics(skel, Motion.rest(1, 3).rotations, np.zeros((1, 3, 3)))
    w = to_world(M, pose)
    R = w.rotations.numpy()
    np.testing.assert_allclose(R @ np.swapaxes(R, -1, -2), np.broadcast_to(np.eye(3), R.shape), atol=1e-12)
    np.testing.assert_allclose(w.positions.numpy(), pose.positions.numpy() * 0.01 + [1, 2, 3])


def test_float32_fk_runs_and_keeps_dtype():
    skel = random_tree_skeleton(6)
    fk = ForwardKinematics(skel, dtype=torch.float32)
    pose = fk(torch.eye(3).expand(7, 6, 3, 3), torch.zeros(7, 6, 3))
    assert pose.positions.dtype == torch.float32 and pose.positions.shape == (7, 6, 3)
