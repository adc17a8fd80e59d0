"""core.rig.chains (the solver's fast FK + LBS) and core.character.track (a clip evaluated once) against the reference
implementation: core.rig.kinematics.ForwardKinematics + core.rig.skinning.skin_mesh."""

import numpy as np
import pytest
import torch

from core.contacts.feet import foot_vertices
from core.rig.kinematics import forward_kinematics
from core.rig.chains import KeyVertexRig, VariableChain, VertexChain
from core.rig.rotations import quat_to_matrix, sixd_to_matrix
from core.rig.skinning import skin_mesh
from core.character.track import ClipTrack
from tests.core.synth import make_humanoid, walk_motion


def _reference(ch, motion, ids):
    """World positions and normals (T, V, 3) by the reference FK + LBS."""
    pose = forward_kinematics(ch.skeleton, motion.rotations, motion.locations)
    p, n = skin_mesh(ch.skeleton, ch.mesh, pose, ids)
    M = ch.skeleton.object_matrix
    A = M[:3, :3]
    R = A / np.linalg.norm(A, axis=0)
    n = n.numpy() @ R.T
    return p.numpy() @ A.T + M[:3, 3], n / np.linalg.norm(n, axis=-1, keepdims=True)


def _character():
    obj = np.diag([0.5, 0.7, 0.6, 1.0])        # non-uniform scale: normals must follow the rotation only
    obj[:3, 3] = (1.0, -2.0, 0.3)
    return make_humanoid(object_matrix=obj)


def test_key_vertex_rig_matches_the_reference():
    ch = make_humanoid(object_matrix=np.diag([0.5, 0.5, 0.5, 1.0]))
    m = walk_motion(ch, frames=5)
    rig = KeyVertexRig(ch, torch.float64)
    p, n = rig(quat_to_matrix(torch.as_tensor(m.rotations)), torch.as_tensor(m.locations))
    ref, ref_n = _reference(ch, m, ch.keyverts.vertex_ids)
    np.testing.assert_allclose(p.numpy(), ref, atol=1e-9)
    np.testing.assert_allclose(n.numpy(), ref_n, atol=1e-9)
    assert p.shape == (5, len(ch.keyverts), 3)


def test_stacked_rig_concatenates_its_characters():
    a, b = make_humanoid(), make_humanoid(scale=0.8, name="b")
    ma, mb = walk_motion(a, frames=4), walk_motion(b, frames=4, seed=3)
    rig = KeyVertexRig([a, b], torch.float64)
    p, _ = rig([quat_to_matrix(torch.as_tensor(ma.rotations)), quat_to_matrix(torch.as_tensor(mb.rotations))],
               [torch.as_tensor(ma.locations), torch.as_tensor(mb.locations)])
    np.testing.assert_allclose(p[:, :len(a.keyverts)].numpy(), _reference(a, ma, a.keyverts.vertex_ids)[0], atol=1e-9)
    np.testing.assert_allclose(p[:, len(a.keyverts):].numpy(), _reference(b, mb, b.keyverts.vertex_ids)[0], atol=1e-9)
    assert rig.character.tolist() == [0] * len(a.keyverts) + [1] * len(b.keyverts)


def _turned_character():
    """An armature object turned about a tilted axis and scaled non-uniformly: its normals' matrix R (the
    columns of the object matrix normalised) is not a multiple of the identity, nor orthogonal."""
    c, s = np.cos(0.7), np.sin(0.7)
    turn = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ np.array([[1.0, 0.0, 0.0], [0.0, c, -s],
                                                                               [0.0, s, c]])
    obj = np.eye(4)
    obj[:3, :3] = turn @ np.diag([0.9, 1.3, 0.6]) @ turn.T
    obj[:3, 3] = (0.4, 1.0, -0.2)
    return make_humanoid(object_matrix=obj)


@pytest.mark.parametrize("make", [_character, _turned_character, make_humanoid])
def test_vertex_chain_and_variable_chain_match_the_reference(make):
    ch = make()
    m = walk_motion(ch, frames=6)
    sk = ch.skeleton
    ids = np.arange(0, ch.mesh.num_verts, 7)
    hips = sk.index(ch.bone_map["hips"])
    chain = VertexChain(ch, ids, torch.float64, "cpu", [hips])
    R = quat_to_matrix(torch.as_tensor(m.rotations))
    L = torch.as_tensor(m.locations)
    p, n = chain.vertices(R, L)
    ref, ref_n = _reference(ch, m, ids)
    np.testing.assert_allclose(p.numpy(), ref, atol=1e-9)
    np.testing.assert_allclose(n.numpy(), ref_n, atol=1e-9)
    # vary a few bones' rotations and the hips location: VariableChain must equal the full evaluation
    opt = [chain.position[sk.index(ch.bone_map[c])] for c in ("spine", "left_upper_arm", "right_lower_leg")]
    root = chain.position[hips]
    Rn, Ln = R[:, chain.needed_t], L[:, chain.needed_t]
    var = VariableChain(chain, Rn, Ln, opt, root)
    g = torch.Generator().manual_seed(0)
    D = sixd_to_matrix(torch.tensor([1.0, 0, 0, 0, 1.0, 0], dtype=torch.float64)
                       + 0.3 * torch.randn((6, len(opt), 6), generator=g, dtype=torch.float64))   # (T, Jo, 3, 3)
    R2 = Rn.clone()
    R2[:, opt] = Rn[:, opt] @ D
    L2 = Ln.clone()
    L2[:, root] += 0.1 * torch.randn((6, 3), generator=g, dtype=torch.float64)
    want_p, want_n = chain.vertices_needed(R2, L2)
    local = (chain.rest_rot[opt][:, None] @ R2[:, opt].transpose(0, 1))            # (Jo, T, 3, 3)
    got_p, got_n = var(local, L2[:, root])
    np.testing.assert_allclose(got_p.numpy(), want_p.numpy(), atol=1e-9)
    np.testing.assert_allclose(got_n.numpy(), want_n.numpy(), atol=1e-9)


def test_clip_track_matches_the_reference():
    ch = _character()
    m = walk_motion(ch, frames=7)
    tr = ClipTrack(ch, m)
    pose = forward_kinematics(ch.skeleton, m.rotations, m.locations)
    M = ch.skeleton.object_matrix
    np.testing.assert_allclose(tr.world_positions, pose.positions.numpy() @ M[:3, :3].T + M[:3, 3], atol=1e-12)
    ids = np.arange(0, ch.mesh.num_verts, 5)
    p, n = tr.vertices(ids, normals=True)
    ref, ref_n = _reference(ch, m, ids)
    np.testing.assert_allclose(p, ref, atol=1e-12)
    np.testing.assert_allclose(n, ref_n, atol=1e-12)
    np.testing.assert_allclose(tr.vertices(ids, frames=[2, 5]), ref[[2, 5]], atol=1e-12)
    kp, kn = tr.keyverts
    np.testing.assert_allclose(kp, _reference(ch, m, ch.keyverts.vertex_ids)[0], atol=1e-12)
    left, right = foot_vertices(ch)
    assert len(left) and len(right) and not set(left) & set(right)
    np.testing.assert_allclose(tr.lowest_foot, np.minimum(ref_feet(ch, m, left), ref_feet(ch, m, right)), atol=1e-12)
    calls = []
    assert tr.memo("k", lambda: calls.append(1) or 5) == 5 and tr.memo("k", lambda: calls.append(1) or 6) == 5
    assert calls == [1]


def test_a_sliced_track_is_the_track_of_the_slice_and_shares_what_was_computed():
    """ClipTrack.slice(a, b): every quantity equals a fresh track's on motion.slice(a, b); what the clip's track had
    computed (bone and skinning transforms, key-vertex paths, the lowest foot) is carried as views, not computed
    again, and the rest (foot points here) is computed on the slice."""
    ch = _character()
    m = walk_motion(ch, frames=12)
    whole = ClipTrack(ch, m)
    whole.world_positions, whole.keyverts, whole.lowest_foot        # computed on the whole clip first
    part = whole.slice(3, 9)
    fresh = ClipTrack(ch, m.slice(3, 9))
    assert part.motion.frame_start == m.frame_start + 3 and part.num_frames == 6
    assert {"_fk", "_skin", "world_positions", "keyverts", "lowest_foot"} <= set(part.__dict__)
    assert "foot_points" not in part.__dict__ and not part._memo
    assert part.arm_rotations.data_ptr() == whole.arm_rotations[3:].data_ptr()         # a view, not a copy
    np.testing.assert_allclose(part.world_positions, fresh.world_positions, atol=1e-12)
    np.testing.assert_allclose(part.arm_rotations.numpy(), fresh.arm_rotations.numpy(), atol=1e-12)
    for a, b in zip(part.keyverts, fresh.keyverts):
        np.testing.assert_allclose(a, b, atol=1e-12)
    np.testing.assert_allclose(part.lowest_foot, fresh.lowest_foot, atol=1e-12)
    for a, b in zip(part.foot_points, fresh.foot_points):
        np.testing.assert_allclose(a, b, atol=1e-12)


def ref_feet(ch, m, ids):
    return _reference(ch, m, ids)[0][..., 2].min(-1)


def test_carried_points_follow_their_bones_on_variable_and_constant_bones():
    ch = _character()
    m = walk_motion(ch, frames=6)
    sk = ch.skeleton
    ids = np.arange(0, ch.mesh.num_verts, 7)
    hips = sk.index(ch.bone_map["hips"])
    bones = [sk.index(ch.bone_map[c]) for c in ("left_lower_arm", "head", "right_foot", "left_lower_arm")]
    local = np.array([[0.0, 0.1, 0.0], [0.02, 0.05, -0.03], [0.0, 0.0, 0.0], [0.01, 0.2, 0.0]])
    chain = VertexChain(ch, ids, torch.float64, "cpu", [hips], points=(bones, local))
    R = quat_to_matrix(torch.as_tensor(m.rotations))
    L = torch.as_tensor(m.locations)
    # by hand: the bone's world transform applied to the point in its frame
    pose = forward_kinematics(sk, m.rotations, m.locations)
    M = sk.object_matrix
    G = pose.rotations.numpy()[:, bones], pose.positions.numpy()[:, bones]
    want = (np.einsum("tpij,pj->tpi", G[0], local) + G[1]) @ M[:3, :3].T + M[:3, 3]
    np.testing.assert_allclose(chain.points(R, L).numpy(), want, atol=1e-9)
    # the key vertices are unchanged by the points
    np.testing.assert_allclose(chain.vertices(R, L)[0].numpy(), _reference(ch, m, ids)[0], atol=1e-9)
    # VariableChain whose only variable bone is the left upper arm (its rotation and its location): the points
    # on the forearm are read from it every call, those on the head and the foot are constant
    opt = [chain.position[sk.index(ch.bone_map["left_upper_arm"])]]
    root = opt[0]
    Rn, Ln = R[:, chain.needed_t], L[:, chain.needed_t]
    var = VariableChain(chain, Rn, Ln, opt, root)
    D = sixd_to_matrix(torch.tensor([1.0, 0.3, 0, -0.2, 1.0, 0.1], dtype=torch.float64)).expand(6, 1, 3, 3)
    R2 = Rn.clone()
    R2[:, opt] = Rn[:, opt] @ D
    local_opt = (chain.rest_rot[opt][:, None] @ R2[:, opt].transpose(0, 1))
    var(local_opt, Ln[:, root])
    assert var.pt_var == [0, 3]
    Rf = R.clone()
    Rf[:, chain.needed_t] = R2
    np.testing.assert_allclose(var.last_points.numpy(), chain.points(Rf, L).numpy(), atol=1e-9)
    assert not np.allclose(var.last_points[:, 0].numpy(), want[:, 0])       # the arm's point moved
    np.testing.assert_allclose(var.last_points[:, 1:3].numpy(), want[:, 1:3], atol=1e-9)
