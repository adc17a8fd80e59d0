"""core.rig (the solver's fast FK + LBS) and core.track (a clip evaluated once) against the reference
implementation: core.kinematics.ForwardKinematics + core.skinning.skin_mesh."""

import numpy as np
import pytest
import torch

from core.feet import foot_vertices
from core.kinematics import forward_kinematics
from core.rig import KeyVertexRig, VariableChain, VertexChain
from core.rotations import quat_to_matrix, sixd_to_matrix
from core.skinning import skin_mesh
from core.track import ClipTrack
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


def ref_feet(ch, m, ids):
    return _reference(ch, m, ids)[0][..., 2].min(-1)
