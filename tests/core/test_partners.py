"""Key-vertex pairs between characters (core.contacts.partners) and gaze (core.contacts.gaze): descriptors and weights on cases
computed by hand, the sparse set against the dense definition, the broad phase, and the stop-gradient on the
partner's target weights (ReConForM §6.1)."""

import math

import numpy as np
import pytest
import torch

from core.descriptors.pose import dist_matrix
from core.contacts.gaze import cone_weight, gaze_directions, gaze_setup, head_frames, window_mean
from core.contacts.partners import PartnerPairs, _closer_than, box_distance
from core.solver.pair_terms import pair_terms
from core.rig.vec3 import sq_norm3
from core.descriptors.weights import interaction_weight
from tests.core.synth import make_humanoid, with_face


def _stack(*chars):
    return [torch.as_tensor(np.asarray(c, float)[None]) for c in chars]


def test_partner_descriptors_and_weights_by_hand():
    # character 0 (h = 1.0): key vertices at the origin and at (0, 0, 1); character 1 (h = 2.0): at (0.1, 0, 0)
    # and at (5, 0, 0). Mean height 1.5: d_min = 0.075, d_max = 0.225.
    p = _stack([[0, 0, 0], [0, 0, 1]], [[0.1, 0, 0], [5, 0, 0]])
    n = _stack([[1, 0, 0], [0, 0, 1]], [[-1, 0, 0], [0, 1, 0]])
    pp = PartnerPairs(p, n, [1.0, 2.0], [1.0, 2.0])
    ps, block = pp.active(None, 0.0)
    assert pp.blocks == [(0, 1)]
    assert len(ps) == 1                                      # only (origin, (0.1, 0, 0)) is within d_max
    assert (int(ps.t[0]), int(ps.i[0]), int(ps.j[0]), int(block[0])) == (0, 0, 2, 0)
    assert float(ps.src_dist[0]) == pytest.approx(0.1)
    assert ps.src_dir[0].tolist() == pytest.approx([0.1, 0, 0])
    assert float(ps.src_pen_ij[0]) == pytest.approx(0.1)     # n_0 = +x, p_2 − p_0 = +0.1 x
    assert float(ps.src_pen_ji[0]) == pytest.approx(0.1)     # n_2 = −x, p_0 − p_2 = −0.1 x
    assert float(ps.w_src[0]) == pytest.approx(1 - (0.1 - 0.075) / 0.15)
    assert float(ps.src_dmin[0]) == pytest.approx(0.075)
    assert (float(ps.tgt_dmin[0]), float(ps.tgt_dmax[0])) == pytest.approx((0.075, 0.225))


def test_partner_pairs_are_exactly_the_nonzero_mixed_weights():
    rng = np.random.default_rng(3)
    K, T, N = 3, 6, 5
    src = [torch.as_tensor(rng.uniform(0, 0.6, size=(T, N, 3))) for _ in range(K)]
    nrm = [torch.nn.functional.normalize(torch.as_tensor(rng.normal(size=(T, N, 3))), dim=-1) for _ in range(K)]
    hs, ht = np.array([1.0, 1.4, 1.8]), np.array([1.2, 0.9, 2.0])
    pp = PartnerPairs(src, nrm, hs, ht)
    tgt = torch.as_tensor(rng.uniform(0, 0.6, size=(T, K * N, 3)))
    owner = np.repeat(np.arange(K), N)
    ds, dt = dist_matrix(torch.cat(src, 1)), dist_matrix(tgt)
    for alpha in (0.0, 0.4):
        want = set()
        for t in range(T):
            for i in range(K * N):
                for j in range(i + 1, K * N):
                    a, b = owner[i], owner[j]
                    if a == b:
                        continue
                    ws = interaction_weight(ds[t, i, j], 0.05 * (hs[a] + hs[b]) / 2, 0.15 * (hs[a] + hs[b]) / 2)
                    wt = interaction_weight(dt[t, i, j], 0.05 * (ht[a] + ht[b]) / 2, 0.15 * (ht[a] + ht[b]) / 2)
                    if ws > 0 or alpha * wt > 0:
                        want.add((t, i, j))
        ps, _ = pp.active(tgt, alpha)
        got = set(zip(ps.t.tolist(), ps.i.tolist(), ps.j.tolist()))
        assert got == want
        assert len(got) == len(ps)                       # no duplicates


def _random_couple(rng, T: int, N: int = 6, K: int = 2):
    """(source positions, normals, PartnerPairs, a random stacked target (T, K·N, 3)) of K random characters."""
    src = [torch.as_tensor(rng.uniform(0, 0.5, size=(T, N, 3))) for _ in range(K)]
    nrm = [torch.nn.functional.normalize(torch.ones(T, N, 3), dim=-1)] * K
    tgt = torch.as_tensor(rng.uniform(0, 0.5, size=(T, K * N, 3)))
    return src, nrm, PartnerPairs(src, nrm, [1.0] * K, [1.0] * K), tgt


def test_candidates_are_refreshed_and_stay_exact():
    rng = np.random.default_rng(5)
    src, nrm, pp, tgt = _random_couple(rng, 4)
    for step in range(12):
        tgt = tgt + torch.as_tensor(rng.normal(scale=0.002, size=tgt.shape))
        ps, block = pp.active(tgt, 1.0)
        fresh, fblock = PartnerPairs(src, nrm, [1.0, 1.0], [1.0, 1.0]).active(tgt, 1.0)
        assert torch.equal(ps.t, fresh.t) and torch.equal(ps.i, fresh.i) and torch.equal(ps.j, fresh.j)
        assert torch.equal(block, fblock)
    assert 1 <= pp.refreshes < 12                        # candidates were reused between refreshes


@pytest.mark.parametrize("K", [2, 3])
def test_candidates_are_refreshed_frame_by_frame_and_stay_exact(K):
    """Some frames jump by about the slack while the others barely move: those frames are searched again, the
    others keep their candidates, and the entries (and order) are a fresh search's (two characters, and three:
    three character pairs' keys); at the bound, a pair whose ends each moved just past half the slack into t_max
    is found."""
    rng = np.random.default_rng(7)
    T = 16
    src, nrm, pp, tgt = _random_couple(rng, T, K=K)
    pp.active(tgt, 1.0)
    kept = 0
    for step in range(10):
        scale = np.full((T, 1, 1), 0.002)
        scale[rng.choice(T, 3, replace=False)] = 0.015
        tgt = tgt + torch.as_tensor(rng.normal(size=tgt.shape) * scale)
        before = pp._ref.clone()
        ps, block = pp.active(tgt, 1.0)
        kept += int((pp._ref == before).all(-1).all(-1).sum())
        fresh, fblock = PartnerPairs(src, nrm, [1.0] * K, [1.0] * K).active(tgt, 1.0)
        assert all(torch.equal(a, b) for a, b in zip(ps, fresh)) and torch.equal(block, fblock)
    assert kept > 10 * T // 2
    far = torch.as_tensor([[[0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0]]], dtype=torch.float64).expand(2, 2, 1, 3)
    src = [far[0] + 0.0, far[1] + torch.as_tensor([3.0, 0.0, 0.0], dtype=torch.float64)]
    n1 = [torch.zeros(2, 1, 3, dtype=torch.float64)] * 2
    pp = PartnerPairs(src, n1, [1.0, 1.0], [1.0, 1.0])
    tgt = torch.cat(src, 1).clone()
    tgt[1, 1] = torch.as_tensor([0.21, 0.0, 0.0], dtype=torch.float64)       # t_max 0.15, t_limit 0.20
    assert len(pp.active(tgt, 1.0)[0]) == 0
    tgt[1, 0, 0], tgt[1, 1, 0] = 0.031, 0.21 - 0.031                            # each end 0.031 > half the slack
    ps, _ = pp.active(tgt, 1.0)
    assert (ps.t.tolist(), ps.i.tolist(), ps.j.tolist()) == ([1], [0], [1])


def test_candidates_are_kept_when_the_group_moves_as_a_whole_and_stay_exact():
    """Every character of a frame translated together by far more than the slack: the distances between them are
    unchanged, so no frame is searched again, and the entries are a fresh search's."""
    rng = np.random.default_rng(11)
    T = 8
    src, nrm, pp, tgt = _random_couple(rng, T)
    pp.active(tgt, 1.0)
    refreshes = pp.refreshes
    for step in range(5):
        tgt = tgt + torch.as_tensor(rng.normal(size=(T, 1, 3))) + torch.as_tensor(rng.normal(scale=1e-4,
                                                                                               size=tgt.shape))
        ps, block = pp.active(tgt, 1.0)
        fresh, fblock = PartnerPairs(src, nrm, [1.0, 1.0], [1.0, 1.0]).active(tgt, 1.0)
        assert all(torch.equal(a, b) for a, b in zip(ps, fresh)) and torch.equal(block, fblock)
    assert pp.refreshes == refreshes


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_narrow_phase_product_finds_what_the_difference_test_finds(dtype):
    """``_closer_than`` (a batched product, then the difference test on its candidates) returns exactly the
    pairs of the difference test, far from the origin too (100 m: the product's rounding grows with the norms)
    and with many pairs within rounding of the limit."""
    g = torch.Generator().manual_seed(3)
    for origin in (0.0, 100.0):
        pa = origin + torch.rand((50, 12, 3), generator=g, dtype=torch.float64)
        pb = origin + torch.rand((50, 9, 3), generator=g, dtype=torch.float64)
        d = (pa[:, :, None] - pb[:, None]).norm(dim=-1)
        limit = float(d.median())
        # a quarter of the pairs moved onto the limit, within a few ulps of it
        on = torch.rand(d.shape, generator=g) < 0.25
        u = (pb[:, None] - pa[:, :, None]) / d[..., None]
        jitter = 1.0 + 1e-7 * torch.randn(d.shape, generator=g, dtype=torch.float64)
        near = pa[:, :, None] + u * (limit * jitter)[..., None]
        pa, pb = pa.to(dtype), pb.to(dtype)
        for f, i, j in torch.nonzero(on).tolist()[:200]:
            pb[f, j] = near[f, i, j].to(dtype)
        dense = sq_norm3(pa[:, :, None] - pb[:, None]) < limit * limit
        want = torch.nonzero(dense, as_tuple=True)
        got = _closer_than(pa, pb, limit)
        assert all(torch.equal(x, y) for x, y in zip(got, want)) and 0 < len(got[0]) < dense.numel()


def test_broad_phase_skips_characters_far_apart():
    T, N = 10, 4
    rng = np.random.default_rng(1)
    near0 = torch.as_tensor(rng.uniform(0, 0.3, size=(T, N, 3)))
    near1 = near0 + 0.05
    far = near0 + torch.tensor([20.0, 0.0, 0.0])
    nrm = [torch.nn.functional.normalize(torch.ones(T, N, 3), dim=-1)] * 3
    pp = PartnerPairs([near0, near1, far], nrm, [1.7] * 3, [1.7] * 3)
    assert pp.broad_tests == 3 * T                       # three character pairs, every frame
    assert pp.narrow_blocks == T                         # only the near pair's N_a·N_b distances were computed
    ps, block = pp.active(None, 0.0)
    assert len(ps) > 0 and set(block.tolist()) == {0}    # block 0 = characters (0, 1)
    assert float(box_distance(torch.zeros(3), torch.ones(3), torch.tensor([4.0, 1.0, 1.0]),
                              torch.tensor([5.0, 2.0, 2.0]))) == pytest.approx(3.0)


def test_no_gradient_flows_through_the_partner_target_weight():
    # one entry between two characters: L_dist = ((w_src + α·W_tgt) (d_src − d))², W_tgt stop-gradient: dL/dd must
    # be −2 w² (d_src − d) with W_tgt held constant, although here W_tgt changes with d (0.075 < d < 0.225)
    p = torch.tensor([[[0.0, 0.0, 0.0], [0.12, 0.0, 0.0]]], requires_grad=True)
    n = torch.tensor([[[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]])
    src = _stack([[0, 0, 0]], [[0.1, 0, 0]])
    pp = PartnerPairs(src, [n[:, :1], n[:, 1:]], [1.5, 1.5], [1.5, 1.5])
    ps, _ = pp.active(p, 1.0)
    out = pair_terms(p, n, 1.0, ps, {"dist": None, "dir": None, "pen": None})
    out["dist"].backward()
    w = float(ps.w_src[0]) + float(interaction_weight(torch.tensor(0.12), 0.075, 0.225))
    want = -2 * w * w * (0.1 - 0.12)                     # dL/dd; d grows with p_1.x
    assert float(p.grad[0, 1, 0]) == pytest.approx(want, rel=1e-5)
    assert float(p.grad[0, 0, 0]) == pytest.approx(-want, rel=1e-5)


def test_gaze_cone_weight_at_0_3p5_and_10_degrees():
    cos = torch.cos(torch.deg2rad(torch.tensor([0.0, 2.0, 3.5, 5.0, 10.0], dtype=torch.float64)))
    w = cone_weight(cos)
    c2, c5, c35 = (math.cos(math.radians(a)) for a in (2.0, 5.0, 3.5))
    assert w.tolist() == pytest.approx([1.0, 1.0, (c35 - c5) / (c2 - c5), 0.0, 0.0])
    assert float(w[2]) == pytest.approx(0.607, abs=1e-3)   # linear in the cosine (0.5 would be linear in the angle)


def test_head_frames_and_window_mean_by_hand():
    # face 10 cm in front (−y) of the back of the head, top 10 cm above: e1 = −y, e2 = +z, e3 = e1 × e2 = −x
    p = torch.tensor([[[0.0, -0.1, 1.6], [0.0, 0.0, 1.6], [0.0, 0.0, 1.7]]], dtype=torch.float64)
    R = head_frames(p, (0, 1, 2))[0]
    assert R.T.reshape(-1).tolist() == pytest.approx([0, -1, 0, 0, 0, 1, -1, 0, 0])
    x = torch.tensor([[0.0], [3.0], [6.0], [9.0]])
    assert window_mean(x, 1)[:, 0].tolist() == pytest.approx([1.5, 3.0, 6.0, 7.5])


def test_gaze_is_the_body_forward_in_the_t_pose_and_follows_the_head():
    ch = with_face(make_humanoid())
    g = gaze_setup(ch)
    assert ch.keyverts.names[g.eye] == "face_center"
    assert [ch.keyverts.names[k] for k in g.head] == ["face_center", "head_back", "head_top"]
    from core.character.track import ClipTrack
    from core.types import Motion
    head = ch.skeleton.index(ch.bone_map["head"])
    T = 5
    rot = np.zeros((T, ch.skeleton.num_bones, 4))
    rot[..., 0] = 1.0
    # turn the head by 30° about world Z (its rest frame: Y along the bone = world up)
    ang = math.radians(30.0)
    R_rest = ch.skeleton.rest_global[head, :3, :3]
    axis = R_rest.T @ np.array([0.0, 0.0, 1.0])
    rot[:, head] = np.concatenate([[math.cos(ang / 2)], math.sin(ang / 2) * axis])
    p = torch.as_tensor(ClipTrack(ch, Motion(rot, np.zeros((T, ch.skeleton.num_bones, 3)))).keyverts[0])
    d = gaze_directions(p, g, fps=30.0)
    want = np.array([math.sin(ang), -math.cos(ang), 0.0])   # forward −y turned by +30° about z
    assert d[0].tolist() == pytest.approx(want.tolist(), abs=1e-6)
