import numpy as np
import pytest
import torch

from core.descriptors.pose import dir_matrix, dist_matrix, height, pair_descriptors, pen_matrix, sliding
from core.descriptors.weights import ActivePairs, allowed_pairs, alpha_ramp, floor_weight, interaction_weight, mix_weights

P = torch.tensor([[[0.0, 0.0, 0.0], [3.0, 4.0, 0.0], [0.0, 0.0, -2.0]]])  # (1, 3, 3)
NRM = torch.tensor([[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])


def test_dense_pair_descriptors_by_hand():
    d = dist_matrix(P)[0]
    assert d[0, 1] == pytest.approx(5.0) and d[1, 0] == pytest.approx(5.0)
    assert d[0, 2] == pytest.approx(2.0) and float(d[1, 1]) == 0.0
    assert dir_matrix(P)[0, 0, 1].tolist() == [3.0, 4.0, 0.0]
    pen = pen_matrix(P, NRM)[0]
    assert pen[0, 2] == pytest.approx(-2.0)     # vertex 2 lies 2 below vertex 0 along n_0 = +z
    assert pen[1, 0] == pytest.approx(-3.0)     # n_1 = +x, p_0 - p_1 = (-3, -4, 0)
    assert pen[0, 1] == pytest.approx(0.0)      # asymmetric
    assert pen[2, 1] == pytest.approx(4.0)


def test_sparse_pairs_match_dense():
    rng = np.random.default_rng(0)
    p = torch.as_tensor(rng.normal(size=(4, 6, 3)))
    n = torch.nn.functional.normalize(torch.as_tensor(rng.normal(size=(4, 6, 3))), dim=-1)
    t = torch.tensor([0, 1, 3, 3])
    i = torch.tensor([0, 2, 5, 1])
    j = torch.tensor([1, 4, 0, 3])
    d = pair_descriptors(p, n, t, i, j)
    assert torch.allclose(d.dist, dist_matrix(p)[t, i, j], atol=1e-6)
    assert torch.allclose(d.dir, dir_matrix(p)[t, i, j])
    assert torch.allclose(d.pen, pen_matrix(p, n)[t, i, j])


def test_height_and_sliding_by_hand():
    p = torch.tensor([[[1.0, 2.0, 0.5]], [[1.3, 2.4, -0.1]], [[1.3, 2.4, 0.0]]])  # (3, 1, 3)
    assert height(p)[:, 0].tolist() == pytest.approx([0.5, -0.1, 0.0])
    assert height(p, 0.2)[0, 0] == pytest.approx(0.3)
    v = sliding(p, fps=10.0)
    assert v.shape == (2, 1, 2)
    assert v[0, 0].tolist() == pytest.approx([3.0, 4.0])   # (0.3, 0.4) per frame at 10 fps; z ignored
    assert v[1, 0].tolist() == pytest.approx([0.0, 0.0])
    assert sliding(p, 10.0, pad=True).shape == (3, 1, 2)


def test_weights_ramp_clamp_and_mix():
    d = torch.tensor([0.0, 0.05, 0.10, 0.15, 0.3])
    assert interaction_weight(d, 0.05, 0.15).tolist() == pytest.approx([1, 1, 0.5, 0, 0])
    assert floor_weight(torch.tensor([-0.1, 0.1]), 0.05, 0.15).tolist() == pytest.approx([1, 0.5])
    assert [alpha_ramp(s, 5) for s in range(5)] == pytest.approx([0, 0.25, 0.5, 0.75, 1])
    assert [alpha_ramp(s, 5, end=0.5) for s in range(5)] == pytest.approx([0, 0.5, 1, 1, 1])   # then held at 1
    assert alpha_ramp(0, 1) == 1.0
    w_t = torch.tensor([0.5, 1.0], requires_grad=True)
    w_s = torch.tensor([1.0, 0.0], requires_grad=True)
    w = mix_weights(w_s, w_t, 0.5)
    assert w.tolist() == pytest.approx([1.25, 0.5])
    w.sum().backward()
    assert w_t.grad is None                       # stop-gradient on the target weight
    assert w_s.grad.tolist() == [1.0, 1.0]


def test_allowed_pairs_masks_diagonal_and_same_limb():
    m = allowed_pairs(["a", "a", "b"])
    assert m.tolist() == [[False, False, True], [False, False, True], [False, False, False]]
    m2 = allowed_pairs(["a", "a", "b"], exclude_same_limb=False)
    assert m2[0, 1] and not m2.diagonal().any() and not m2[1, 0]
    m3 = allowed_pairs(["a", "a"], character=[0, 1])  # same limb name, different characters: allowed
    assert m3[0, 1]


def test_active_pairs_cover_every_nonzero_weight():
    rng = np.random.default_rng(2)
    T, N = 6, 8
    src = torch.as_tensor(rng.uniform(0, 1, size=(T, N, 3)))
    tgt = torch.as_tensor(rng.uniform(0, 1, size=(T, N, 3)))
    nrm = torch.nn.functional.normalize(torch.as_tensor(rng.normal(size=(T, N, 3))), dim=-1)
    hs, ht = np.full(N, 2.0), np.full(N, 3.0)
    mask = allowed_pairs(["x"] * N, exclude_same_limb=False)
    ap = ActivePairs(src, nrm, hs, ht, mask, margin=0.0)
    ps = ap.build(tgt)
    got = set(zip(ps.t.tolist(), ps.i.tolist(), ps.j.tolist()))
    ds, dt = dist_matrix(src), dist_matrix(tgt)
    want = {(t, i, j) for t in range(T) for i in range(N) for j in range(i + 1, N)
            if ds[t, i, j] < 0.15 * 2.0 or dt[t, i, j] < 0.15 * 3.0}
    assert got == want and len(want) > 0
    src_only = ap.build(None)
    assert len(src_only) < len(ps)
    assert torch.all(ps.w_src[ps.src_dist >= 0.3] == 0) and torch.all(ps.w_src[ps.src_dist <= 0.1] == 1)


def test_active_pairs_exact_set_is_the_nonzero_mixed_weight():
    rng = np.random.default_rng(3)
    T, N = 5, 9
    src = torch.as_tensor(rng.uniform(0, 1, size=(T, N, 3)))
    tgt = torch.as_tensor(rng.uniform(0, 1, size=(T, N, 3)))
    nrm = torch.nn.functional.normalize(torch.as_tensor(rng.normal(size=(T, N, 3))), dim=-1)
    hs, ht = np.full(N, 2.0), np.full(N, 3.0)
    mask = allowed_pairs(["x"] * N, exclude_same_limb=False)
    ap = ActivePairs(src, nrm, hs, ht, mask)
    ds, dt = dist_matrix(src), dist_matrix(tgt)
    for alpha in (0.0, 0.5):
        ps = ap.active(tgt, alpha)
        got = set(zip(ps.t.tolist(), ps.i.tolist(), ps.j.tolist()))
        w = ((1 - (ds - 0.1) / 0.2).clamp(0, 1) + alpha * (1 - (dt - 0.15) / 0.3).clamp(0, 1))
        want = {(t, i, j) for t in range(T) for i in range(N) for j in range(i + 1, N) if w[t, i, j] > 0}
        assert got == want and len(want) > 0
        np.testing.assert_allclose(ps.src_dist.numpy(), ds[ps.t, ps.i, ps.j].numpy(), rtol=1e-6)
    assert len(ap.active(tgt, 0.0)) < len(ap.active(tgt, 0.5))


def _random_active_pairs(seed: int, T: int, N: int = 10):
    """(generator, ActivePairs on random source positions of two 5-vertex limbs, a random target (T, N, 3))."""
    g = torch.Generator().manual_seed(seed)
    src = torch.rand((T, N, 3), generator=g, dtype=torch.float64)
    nrm = torch.nn.functional.normalize(torch.randn((T, N, 3), generator=g, dtype=torch.float64), dim=-1)
    h = np.full(N, 1.0)
    pairs = ActivePairs(src, nrm, h, h, allowed_pairs(["a"] * (N // 2) + ["b"] * (N - N // 2), None, True))
    return g, pairs, torch.rand((T, N, 3), generator=g, dtype=torch.float64)


def _full_test(pairs, tgt):
    """The PairSet of the full (T, P) test: the source pair within s_max or the target pair within t_max."""
    def d2(p):
        return (p[:, pairs.jj] - p[:, pairs.ii]).square().sum(-1)
    t, k = torch.nonzero((d2(pairs.src_p) < pairs.s_max.square()) | (d2(tgt) < pairs.t_max.square()), as_tuple=True)
    return pairs._pairset(t, k)


def test_active_pairs_reuse_candidates_and_stay_exact():
    """ActivePairs.active filters cached candidates between refreshes: at every step it must return exactly
    the entries (and order) of the full (T, P) test: source-active or target pair closer than t_max."""
    T, N = 12, 10
    g, pairs, tgt = _random_active_pairs(0, T, N)
    for step in range(30):
        # small moves most steps, a jump now and then (forces a refresh)
        tgt = tgt + (0.3 if step % 10 == 9 else 0.004) * torch.randn((T, N, 3), generator=g, dtype=torch.float64)
        got = pairs.active(tgt, 0.5)
        assert all(torch.equal(a, b) for a, b in zip(got, _full_test(pairs, tgt)))
    assert 1 < pairs.refreshes < 30              # candidates were reused, and refreshed after the jumps
    d_s = (pairs.src_p[:, pairs.jj] - pairs.src_p[:, pairs.ii]).square().sum(-1)
    assert torch.equal(pairs.active(None, 0.0).t, torch.nonzero(d_s < pairs.s_max.square(), as_tuple=True)[0])


def test_active_pairs_refresh_only_the_frames_that_moved_and_stay_exact():
    """A few frames jump while the others barely move: only those frames' candidates are searched again (the
    others kept), and the result is still the full (T, P) test's entries in its (frame, pair) order."""
    T, N = 20, 10
    g, pairs, tgt = _random_active_pairs(5, T, N)
    pairs.active(tgt, 0.5)
    kept_frames = 0
    for step in range(12):
        jump = torch.zeros((T, 1, 1), dtype=torch.float64)
        jump[torch.randperm(T, generator=g)[:3]] = 0.015      # near the slack (5 % of the height): the bound matters
        tgt = tgt + (0.002 + jump) * torch.randn((T, N, 3), generator=g, dtype=torch.float64)
        before = pairs._ref.clone()
        got = pairs.active(tgt, 0.5)
        kept_frames += int((pairs._ref == before).all(-1).all(-1).sum())
        assert all(torch.equal(a, b) for a, b in zip(got, _full_test(pairs, tgt)))
    assert kept_frames > 12 * T // 2           # most frames kept their candidates at most steps

    # at the bound: one frame's pair moves from beyond t_limit (t_max + 5 % of h) to within t_max, each end by
    # 0.031, past half the slack (0.025): the frame must be searched again
    far = torch.as_tensor([[0.0, 0.0, 0.0], [3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 3.0]], dtype=torch.float64)
    src = far.expand(4, 4, 3).clone()
    pairs = ActivePairs(src, torch.zeros_like(src), np.full(4, 1.0), np.full(4, 1.0), allowed_pairs(list("abcd")))
    tgt = src.clone()
    tgt[2, 1] = torch.as_tensor([0.21, 0.0, 0.0], dtype=torch.float64)        # t_max 0.15, t_limit 0.20
    assert len(pairs.active(tgt, 0.5)) == 0
    tgt[2, 0, 0], tgt[2, 1, 0] = 0.031, 0.21 - 0.031                               # 0.148 apart: inside t_max
    got = pairs.active(tgt, 0.5)
    assert (got.t.tolist(), got.i.tolist(), got.j.tolist()) == ([2], [0], [1])


def test_active_pairs_keep_their_candidates_when_frames_move_as_a_whole():
    """The candidates depend on distances within a frame only: frames translated as a whole by far more than the
    slack (a root that slides) are not searched again, and the set is still the full test's; the same
    translation hiding a real move past the bound (one pair's ends each 0.031 closer) is still found."""
    T, N = 12, 10
    g, pairs, tgt = _random_active_pairs(3, T, N)
    pairs.active(tgt, 0.5)
    refreshes = pairs.refreshes
    for step in range(6):
        shift = torch.randn((T, 1, 3), generator=g, dtype=torch.float64)           # ~1 m per frame, 20 × the slack
        tgt = tgt + shift + 1e-4 * torch.randn((T, N, 3), generator=g, dtype=torch.float64)
        got = pairs.active(tgt, 0.5)
        assert all(torch.equal(a, b) for a, b in zip(got, _full_test(pairs, tgt)))
    assert pairs.refreshes == refreshes

    far = torch.as_tensor([[0.0, 0.0, 0.0], [3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 3.0]], dtype=torch.float64)
    src = far.expand(4, 4, 3).clone()
    pairs = ActivePairs(src, torch.zeros_like(src), np.full(4, 1.0), np.full(4, 1.0), allowed_pairs(list("abcd")))
    tgt = src.clone()
    tgt[2, 1] = torch.as_tensor([0.21, 0.0, 0.0], dtype=torch.float64)
    assert len(pairs.active(tgt, 0.5)) == 0
    tgt[2, 0, 0], tgt[2, 1, 0] = 0.031, 0.21 - 0.031
    tgt[2] += torch.as_tensor([4.0, -2.0, 1.0], dtype=torch.float64)
    got = pairs.active(tgt, 0.5)
    assert (got.t.tolist(), got.i.tolist(), got.j.tolist()) == ([2], [0], [1])


def test_pair_terms_scaled_to_the_target_size():
    """scale=True: the source's distances and penetrations (and d_min) × the pair's target/source height, the
    weights and directions unchanged; a pair at 0.8 d_min of the source is at 0.8 d_min of the target."""
    rng = np.random.default_rng(4)
    T, N = 4, 6
    src = torch.as_tensor(rng.uniform(0, 0.5, size=(T, N, 3)))
    nrm = torch.nn.functional.normalize(torch.as_tensor(rng.normal(size=(T, N, 3))), dim=-1)
    hs, ht = np.full(N, 2.0), np.full(N, 3.0)
    mask = allowed_pairs(["x"] * N, exclude_same_limb=False)
    raw = ActivePairs(src, nrm, hs, ht, mask).active(None, 0.0)
    big = ActivePairs(src, nrm, hs, ht, mask, scale=True).active(None, 0.0)
    assert len(raw) == len(big) > 0 and torch.equal(raw.t, big.t) and torch.equal(raw.j, big.j)
    for f in ("src_dist", "src_pen_ij", "src_pen_ji", "src_dmin"):
        np.testing.assert_allclose(getattr(big, f).numpy(), 1.5 * getattr(raw, f).numpy(), rtol=1e-12)
    for f in ("src_dir", "w_src", "tgt_dmin", "tgt_dmax"):
        assert torch.equal(getattr(big, f), getattr(raw, f))
    np.testing.assert_allclose((big.src_dist / big.tgt_dmin).numpy(), (raw.src_dist / raw.src_dmin).numpy())


def test_contact_focus_weighs_the_sources_contacts_by_hand():
    """L_dist with contact_focus c: each entry's weight W × (1 + c·W_src). Two entries, a contact (W_src 1) and a
    far pair (W_src 0.25), both 1 cm off: at c = 3 the contact's squared error counts (1 + 3)² = 16 times, the far
    pair's (1 + 0.75)² ≈ 3 times, and the reference-scale floor weighs them the same way (focused_square)."""
    from core.solver.pair_terms import focused_square, pair_terms
    from core.descriptors.weights import PairSet
    p = torch.zeros((1, 4, 3), dtype=torch.float64)
    p[0, 1, 0], p[0, 3, 0], p[0, 2, 0] = 0.06, 5.0 + 0.13, 5.0
    n = torch.zeros_like(p)
    n[..., 2] = 1.0
    t, i, j = torch.tensor([0, 0]), torch.tensor([0, 2]), torch.tensor([1, 3])
    w_src = torch.tensor([1.0, 0.25], dtype=torch.float64)
    ps = PairSet(t, i, j, torch.tensor([0.05, 0.12], dtype=torch.float64), torch.zeros((2, 3), dtype=torch.float64),
                 torch.zeros(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64), w_src,
                 torch.full((2,), 0.1, dtype=torch.float64), torch.full((2,), 0.1, dtype=torch.float64),
                 torch.full((2,), 0.3, dtype=torch.float64))
    none = {"dist": None, "dir": None, "pen": None}
    plain = float(pair_terms(p, n, 0.0, ps, none)["dist"])
    focused = float(pair_terms(p, n, 0.0, ps, none, focus=3.0)["dist"])
    assert plain == pytest.approx(0.01 ** 2 * (1.0 + 0.25 ** 2))
    assert focused == pytest.approx(0.01 ** 2 * (4.0 ** 2 + (0.25 * 1.75) ** 2))
    np.testing.assert_allclose(focused_square(w_src, 3.0).numpy(), [16.0, (0.25 * 1.75) ** 2])


def test_the_contact_state_leaves_a_contact_the_surfaces_hold_but_keeps_a_gap_open():
    """``pair_terms``' ``held`` (the surface gate, core.solver.surface.SurfaceGate): a source contact (r < 1) that the
    surfaces hold pays no contact state however far its key vertices are; a source gap (r > 1) still pays for being
    inside d_min, held or not; an entry not held pays as before (by hand: (W·g)² with b = clamp(r, 0.9, 1.1))."""
    from core.solver.pair_terms import pair_terms
    from core.descriptors.weights import PairSet
    p = torch.zeros((1, 4, 3), dtype=torch.float64)
    p[0, 1, 0], p[0, 2, 0], p[0, 3, 0] = 0.15, 5.0, 5.05   # a contact 15 cm apart, a gap 5 cm apart (d_min 10 cm)
    n = torch.zeros_like(p)
    n[..., 2] = 1.0
    one = torch.ones(2, dtype=torch.float64)
    ps = PairSet(torch.tensor([0, 0]), torch.tensor([0, 2]), torch.tensor([1, 3]),
                 torch.tensor([0.05, 0.2], dtype=torch.float64), torch.zeros((2, 3), dtype=torch.float64),
                 0 * one, 0 * one, one, 0.1 * one, 0.1 * one, 0.3 * one)
    none = {"dist": None, "dir": None, "pen": None}
    charged = (0.15 - 0.09) ** 2 + (0.11 - 0.05) ** 2     # contact: beyond 0.9·d_min; gap: inside 1.1·d_min
    assert float(pair_terms(p, n, 0.0, ps, none, state_margin=0.1)["state"]) == pytest.approx(charged)
    held = torch.tensor([True, True])
    assert float(pair_terms(p, n, 0.0, ps, none, state_margin=0.1, held=held)["state"]) == \
        pytest.approx((0.11 - 0.05) ** 2)
    held = torch.tensor([False, True])
    assert float(pair_terms(p, n, 0.0, ps, none, state_margin=0.1, held=held)["state"]) == pytest.approx(charged)


@pytest.mark.parametrize("apart", [True, False])
def test_a_source_overlap_keeps_l_dist_from_pulling_closer_when_apart(apart):
    """A source holding a key vertex behind another's surface (M_pen^src < 0): with ``apart`` (``Objective.apart``:
    a fitted body with ``objective.FITTED_DIST_APART``, a captured one with ``CAPTURED_DIST_APART``) L_dist charges
    the target's pair only for being closer than the source's, never for being farther; without it, or for a pair
    the source holds in front of the surface, both ways. Four entries at source distance 5 cm: behind / in front,
    target 8 cm / 3 cm."""
    from core.descriptors.weights import PairSet
    from core.solver import pair_terms
    p = torch.zeros((1, 8, 3), dtype=torch.float64)
    for k, d in enumerate((0.08, 0.03, 0.08, 0.03)):
        p[0, 2 * k, 1] = p[0, 2 * k + 1, 1] = 10.0 * k
        p[0, 2 * k + 1, 0] = d
    n = torch.zeros_like(p)
    n[..., 2] = 1.0
    E = 4
    f64 = dict(dtype=torch.float64)
    ps = PairSet(torch.zeros(E, dtype=torch.long), torch.tensor([0, 2, 4, 6]), torch.tensor([1, 3, 5, 7]),
                 torch.full((E,), 0.05, **f64), torch.zeros((E, 3), **f64),
                 torch.tensor([-0.01, -0.01, 0.01, 0.01], **f64), torch.zeros(E, **f64), torch.ones(E, **f64),
                 torch.full((E,), 0.1, **f64), torch.full((E,), 0.1, **f64), torch.full((E,), 0.3, **f64))
    none = {"dist": None, "dir": None, "pen": None}

    def dist(entries, surface):
        sub = PairSet(*(f[entries] for f in ps))
        return float(pair_terms.pair_terms(p, n, 0.0, sub, none, surface_pen=surface, apart=apart)["dist"])
    far, near = 0.03 ** 2, 0.02 ** 2
    for surface in (True, False):                                         # L_pen's rule does not enter L_dist
        assert dist([0], surface) == pytest.approx(0.0 if apart else far)   # behind the surface, farther: free
        assert dist([1], surface) == pytest.approx(near)                    # behind, closer: kept as far
        assert dist([2], surface) == pytest.approx(far) and dist([3], surface) == pytest.approx(near)  # in front


def test_an_overlap_the_surface_barrier_reads_charges_no_l_pen():
    """A fitted source's entry behind a surface (M_pen^src < 0) on segments whose mesh the surface barrier reads
    (``seen``, ``surface.seen_pairs``): L_pen charges nothing there however far behind the target's key vertex is (the
    barrier, not the half-space, keeps the parts apart), while the same entry unseen charges the target's being
    behind; L_dist keeps the fitted body's rule either way (only a pair closer than the source's is charged).
    Source 5 cm apart with j 1 cm behind i's surface; target 8 cm apart, j 2 cm behind."""
    from core.descriptors.weights import PairSet
    from core.solver.pair_terms import pair_terms
    f64 = dict(dtype=torch.float64)
    p = torch.zeros((1, 2, 3), **f64)
    p[0, 1] = torch.tensor([0.0, 0.08 * (1 - 0.25 ** 2) ** 0.5, -0.02], **f64)     # |p_j − p_i| = 8 cm, 2 cm behind
    n = torch.zeros_like(p)
    n[..., 2] = 1.0                                    # both face up: i is 2 cm in front of j's surface
    one = torch.ones(1, **f64)
    ps = PairSet(torch.zeros(1, dtype=torch.long), torch.tensor([0]), torch.tensor([1]), 0.05 * one,
                 torch.zeros((1, 3), **f64), -0.01 * one, 0.01 * one, one, 0.1 * one, 0.1 * one, 0.3 * one)
    none = {"dist": None, "dir": None, "pen": None}
    yes, no = torch.tensor([True]), torch.tensor([False])
    unseen = pair_terms(p, n, 0.0, ps, none, surface_pen=True, apart=True, seen=(no, no))
    seen = pair_terms(p, n, 0.0, ps, none, surface_pen=True, apart=True, seen=(yes, no))
    assert float(unseen["pen"]) == pytest.approx(0.02 ** 2 + (0.01 - 0.02) ** 2)   # behind: relu(2 cm)²; ji copied
    assert float(seen["pen"]) == pytest.approx((0.01 - 0.02) ** 2)                   # only the ji entry is left
    assert float(seen["dist"]) == float(unseen["dist"]) == pytest.approx(0.0)        # farther than the source: free
    # without the fitted body's rules (a captured source) ``seen`` changes nothing
    plain = [pair_terms(p, n, 0.0, ps, none, seen=s) for s in ((no, no), (yes, yes))]
    assert float(plain[0]["pen"]) == pytest.approx(float(plain[1]["pen"]))
