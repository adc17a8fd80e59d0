import numpy as np
import pytest
import torch

from core.descriptors.pose import height
from core.contacts.terrain import HeightField, ground_height


def test_height_field_is_bilinear_and_differentiable():
    hf = HeightField.from_function(lambda x, y: 0.5 * x + 0.25 * y, (-2, 2), (-2, 2), resolution=9)
    x = torch.tensor([0.3, -1.1], requires_grad=True)
    y = torch.tensor([0.7, 1.9], requires_grad=True)
    z = hf(x, y)
    assert z.tolist() == pytest.approx([0.5 * 0.3 + 0.25 * 0.7, 0.5 * -1.1 + 0.25 * 1.9], abs=1e-6)
    z.sum().backward()
    assert x.grad.tolist() == pytest.approx([0.5, 0.5]) and y.grad.tolist() == pytest.approx([0.25, 0.25])
    p = torch.tensor([[[0.3, 0.7, 1.0]]])
    assert height(p, hf)[0, 0] == pytest.approx(1.0 - 0.325, abs=1e-6)


def test_ground_height_takes_a_level_levels_per_frame_or_a_field():
    x = torch.zeros((4, 3), dtype=torch.float64)
    y = torch.ones((4, 3), dtype=torch.float64)
    assert torch.equal(ground_height(0.25, x, y), torch.full((4, 3), 0.25, dtype=torch.float64))
    levels = np.arange(10.0)
    g = ground_height(levels, x, y, slice(3, 7))          # rows 3..6 of a 10-frame clip
    np.testing.assert_array_equal(g.numpy(), np.repeat(np.arange(3.0, 7.0)[:, None], 3, 1))
    hf = HeightField.from_function(lambda a, b: a + b, (-1, 1), (-1, 2), resolution=5)
    np.testing.assert_allclose(ground_height(hf, x, y).numpy(), 1.0, atol=1e-12)


# --------------------------------------------------------------------------------------------------------------
# A ground object's surface -> a height field (core.contacts.terrain.sampling)
# --------------------------------------------------------------------------------------------------------------

from core.errors import CoreError  # noqa: E402
from core.contacts.terrain import GroundSurface, check_covers, sample_ground, vertical_hits  # noqa: E402
from core.contacts.terrain.shapes import bumps, ramp, stairs  # noqa: E402

RNG = np.random.default_rng(3)


def _points(region, n=4000):
    x0, x1, y0, y1 = region
    return RNG.uniform([x0, y0], [x1, y1], (n, 2))


def test_vertical_hits_agree_with_a_point_by_point_test():
    V = RNG.uniform(-1, 1, (30, 3))
    F = RNG.integers(0, 30, (40, 3))
    F = F[(F[:, 0] != F[:, 1]) & (F[:, 1] != F[:, 2]) & (F[:, 0] != F[:, 2])]
    xs, ys = np.linspace(-1, 1, 13), np.linspace(-1, 1, 11)
    cells, z, _ = vertical_hits(V, F, xs, ys)
    got = sorted(zip(cells.tolist(), np.round(z, 9).tolist()))
    want = []
    for t in F:
        a, b, c = V[t]
        M = np.array([[b[0] - a[0], c[0] - a[0]], [b[1] - a[1], c[1] - a[1]]])
        if abs(np.linalg.det(M)) < 1e-12:
            continue
        for i, x in enumerate(xs):
            for j, y in enumerate(ys):
                u, v = np.linalg.solve(M, [x - a[0], y - a[1]])
                if u >= -1e-9 and v >= -1e-9 and u + v <= 1 + 1e-9:
                    want.append((i * len(ys) + j, round(float(a[2] + u * (b[2] - a[2]) + v * (c[2] - a[2])), 9)))
    assert got == sorted(want) and len(want) > 50


def test_ramp_heights_equal_the_analytic_ramp_within_the_grid_error():
    g = ramp(start=(0.3, 0.2), direction=(1.0, 0.0), approach=1.0, length=2.5, angle_deg=15.0)
    region = (0.5, 4.3, -0.5, 0.9)                    # both kinks (x = 1.3 and 3.8 m) inside
    hf, rep = sample_ground(g.surface, region)
    s = rep.spacing
    assert s == pytest.approx(0.02) and rep.holes == 0 and rep.overhangs == 0 and not rep.capped
    xy = _points(region)
    err = np.abs(hf.at(xy) - g.height(xy[:, 0], xy[:, 1]))
    # exact on the planes; at the two kinks bilinear interpolation is off by at most slope * spacing / 4
    assert err.max() <= np.tan(np.radians(15)) * s / 4 + 1e-9
    assert np.median(err) < 1e-9


def test_step_heights_lie_on_or_above_the_analytic_steps_and_equal_them_away_from_the_edges():
    g = stairs(start=(0.0, 0.0), direction=(0.0, -1.0), approach=1.0, steps=6, tread=0.3, rise=0.18)
    region = (-0.5, 0.5, -3.01, -0.5)                 # the risers fall between samples, not on them
    for dilate in (True, False):
        hf, rep = sample_ground(g.surface, region, dilate=dilate)
        s = rep.spacing
        xy = _points(region, 20000)
        true = g.height(xy[:, 0], xy[:, 1])
        err = hf.at(xy) - true
        dist = np.abs(((-xy[:, 1]) - 1.0 + 1e-12) / 0.3 - np.round(((-xy[:, 1]) - 1.0) / 0.3)) * 0.3   # to a riser
        far = dist > 2 * s + 1e-9
        assert np.abs(err[far]).max() < 1e-9                       # exact beyond two cells of an edge
        assert np.abs(err).max() <= 0.18 + 1e-9
        if dilate:   # the field never lies under a tread: a foot on it is never inside a step
            assert err.min() >= -1e-9
        else:        # without raising the edges, half a cell beyond each edge lies under the step
            assert err.min() < -0.05


def test_gradients_at_step_edges_exist_and_are_finite():
    g = stairs(start=(0.0, 0.0), direction=(0.0, -1.0), approach=1.0, steps=3, tread=0.3, rise=0.17)
    hf, rep = sample_ground(g.surface, (-0.3, 0.3, -2.2, -0.5))
    s = rep.spacing
    # points on the risers, on grid lines around them, and just beside them
    yy = np.array([-(1.0 + 0.3 * k) + d for k in range(3) for d in (0.0, -s, s, -s / 2, s / 2, 1e-7, -1e-7)])
    y = torch.tensor(yy, dtype=torch.float64, requires_grad=True)
    x = torch.full_like(y, 0.013).requires_grad_(True)
    hf(x, y).sum().backward()
    assert torch.isfinite(y.grad).all() and torch.isfinite(x.grad).all()
    assert y.grad.abs().max() <= 0.17 / s + 1e-6                  # one rise per cell at most
    assert y.grad.abs().max() > 1.0                                # the edge is steep, not flattened


def test_bumpy_ground_matches_its_mesh_between_samples():
    g = bumps(start=(0.0, 0.0), direction=(0.0, -1.0), length=3.0, width=1.0, spacing=0.025)
    hf, rep = sample_ground(g.surface, (-0.4, 0.4, -2.8, -0.2))
    # the mesh's own heights on a 3 mm grid (exact: its triangles), against the field between its samples
    xs, ys = np.linspace(-0.3, 0.3, 201), np.linspace(-1.6, -1.0, 201)
    cells, z, _ = vertical_hits(g.surface.vertices, g.surface.triangles, xs, ys)
    mesh = np.full(len(xs) * len(ys), -np.inf)
    np.maximum.at(mesh, cells, z)
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    err = np.abs(hf.at(np.stack([X.ravel(), Y.ravel()], 1)) - mesh)
    # bilinear samples every 2 cm of a mesh with creases every 2.5 cm (4 cm bumps): measured max 3.0 mm on
    # these 40 000 points, median 0.3 mm
    assert err.max() < 4e-3 and np.median(err) < 0.6e-3 and rep.holes == 0
    assert np.ptp(hf.heights) > 0.08


def _plane(z, x0, x1, y0, y1, up=True):
    V = np.array([(x0, y0, z), (x1, y0, z), (x1, y1, z), (x0, y1, z)], float)
    F = np.array([(0, 1, 2), (0, 2, 3)])
    return V, (F if up else F[:, ::-1])


def _merge(*parts):
    V, F, n = [], [], 0
    for v, f in parts:
        V.append(v)
        F.append(f + n)
        n += len(v)
    return np.concatenate(V), np.concatenate(F)


def test_holes_are_filled_from_their_neighbours_and_reported():
    V, F = _merge(_plane(0.0, 0, 1, 0, 2), _plane(0.1, 1.3, 3, 0, 2))       # a 30 cm gap between two slabs
    hf, rep = sample_ground(GroundSurface("Gap", V, F), (0.2, 2.8, 0.5, 1.5), dilate=False)
    assert rep.holes > 0 and 0.1 < rep.holes / rep.samples < 0.2 and rep.beyond == 0
    assert np.isfinite(hf.heights).all()
    gap = hf.at(np.array([[1.15, 1.0]]))[0]
    assert 0.0 <= gap <= 0.1 + 1e-12                                      # filled between its neighbours
    assert f"{rep.holes} holes" in rep.line() and rep.as_dict()["holes"] == rep.holes
    # beside the object (its extent seen from above ends at y = 2): filled from its edge, counted apart
    hf, rep = sample_ground(GroundSurface("Gap", V, F), (0.2, 0.8, 1.0, 2.5), dilate=False,
                            probes=np.array([[[0.5, 1.5]], [[0.5, 2.4]]]))
    assert rep.holes == 0 and rep.beyond > 0 and rep.hole_frames == 1 and "beyond its edge" in rep.line()
    assert np.allclose(hf.heights, 0.0)


def test_a_ground_that_does_not_cover_the_footprint_raises_naming_it():
    V, F = _plane(0.0, 0, 1, 0, 1)
    surf = GroundSurface("Doormat", V, F)
    with pytest.raises(CoreError, match="Ground 'Doormat' has no surface under the clip's footprint"):
        sample_ground(surf, (5, 6, 5, 6))
    _, rep = sample_ground(surf, (0.5, 3, 0.5, 3))              # beyond its edge: filled, counted, no error
    assert rep.holes == 0 and rep.beyond > 0.8 * rep.samples
    V2, F2 = _merge(_plane(0.0, 0, 0.1, 0, 3), _plane(0.0, 2.9, 3, 0, 3))     # two strips 3 m apart
    with pytest.raises(CoreError, match="Ground 'Rails' has a surface under only"):
        sample_ground(GroundSurface("Rails", V2, F2), (0.0, 3.0, 0.5, 2.5))
    path = np.stack([np.linspace(0.5, 2.5, 20), np.full(20, 0.5)], 1)
    with pytest.raises(CoreError, match=r"Ground 'Doormat' does not cover the clip's footprint.*15 of 20 frames"):
        check_covers(surf, path)
    check_covers(surf, path[:5])


def test_overhangs_use_the_top_surface_below_the_ceiling_and_are_reported():
    # a bridge deck (top at 2.3, underside at 2.0) over ground at 0: free space of 2 m under it
    deck = _merge(_plane(2.3, 0, 1, 0, 1), _plane(2.0, 0, 1, 0, 1, up=False))
    V, F = _merge(_plane(0.0, -1, 2, -1, 2), deck)
    hf, rep = sample_ground(GroundSurface("Bridge", V, F), (-0.5, 1.5, -0.5, 1.5))
    assert hf.at(np.array([[0.5, 0.5]]))[0] == pytest.approx(2.3)
    assert rep.overhangs > 0.2 * rep.samples
    low, rep2 = sample_ground(GroundSurface("Bridge", V, F, ceiling=1.5), (-0.5, 1.5, -0.5, 1.5))
    assert low.at(np.array([[0.5, 0.5]]))[0] == pytest.approx(0.0) and rep2.overhangs == 0
    # a closed box standing on the ground is not an overhang (no free space under its top)
    box = _merge(_plane(0.3, 0, 1, 0, 1), _plane(0.0, 0, 1, 0, 1, up=False))
    V, F = _merge(_plane(0.0, -1, 2, -1, 2), box)
    _, rep3 = sample_ground(GroundSurface("Box", V, F), (-0.5, 1.5, -0.5, 1.5))
    assert rep3.overhangs == 0


def test_a_huge_ground_is_sampled_within_the_cap_over_the_footprint_only():
    V, F = _plane(0.0, -500, 500, -500, 500)                              # a square kilometre
    surf = GroundSurface("Valley", V, F)
    hf, rep = sample_ground(surf, (-2, 4, -1, 1))                         # the clip's footprint
    assert rep.grid == (301, 101) and not rep.capped
    hf, rep = sample_ground(surf, (-400, 400, -400, 400), max_samples=100_000)
    assert rep.capped and rep.samples <= 100_000 and rep.spacing > 2.0
    assert hf.heights.nbytes <= 8 * 100_000


def test_a_ground_turned_off_the_axes_has_no_false_holes_in_its_bounding_box_corners():
    """Holes are counted inside the object's outline seen from above (its convex hull), not its bounding box: a
    square turned 45° leaves the corners of its box empty, and those are beyond its edge, not holes. A gap cut
    inside the same outline is still a hole."""
    def square(turn, cut=False):
        n = 41
        u, w = np.meshgrid(np.linspace(-1, 1, n), np.linspace(-1, 1, n), indexing="ij")
        c, s_ = np.cos(turn), np.sin(turn)
        V = np.stack([c * u - s_ * w, s_ * u + c * w, np.zeros_like(u)], -1).reshape(-1, 3)
        F = []
        for i in range(n - 1):
            for j in range(n - 1):
                if cut and abs(u[i, j] + 0.025) < 0.2 and abs(w[i, j] + 0.025) < 0.2:
                    continue
                a = i * n + j
                F += [(a, a + n, a + n + 1), (a, a + n + 1, a + 1)]
        return GroundSurface("Turned", V, np.asarray(F))
    region = (-1.4, 1.4, -1.4, 1.4)
    _, rep = sample_ground(square(np.pi / 4), region, dilate=False)
    assert rep.holes == 0 and rep.beyond > 0
    _, rep = sample_ground(square(np.pi / 4, cut=True), region, dilate=False)
    assert rep.holes > 0 and rep.holes < 0.05 * rep.samples
    _, rep = sample_ground(square(0.0), region, dilate=False)           # axis-aligned: as before
    assert rep.holes == 0 and rep.beyond > 0


def test_the_outline_hull_holds_every_point_on_its_left_and_drops_inner_and_collinear_points():
    """``sampling._convex_hull`` (the outline of a ground seen from above): counter-clockwise, made of input points,
    every point on or left of every edge; a square's inner and edge-middle points are not vertices."""
    from core.contacts.terrain.sampling import _convex_hull
    rng = np.random.default_rng(3)
    for pts in (rng.normal(size=(500, 2)), rng.uniform(-1, 1, size=(40, 2)) * [3.0, 0.2]):
        hull = _convex_hull(pts)
        a, b = hull, np.roll(hull, -1, axis=0)
        side = ((b - a)[:, None, 0] * (pts[None, :, 1] - a[:, None, 1])
                - (b - a)[:, None, 1] * (pts[None, :, 0] - a[:, None, 0]))          # (H, N) z of the 2D cross
        assert (side >= -1e-8).all()                    # its points are rounded to 1e-9
        assert all(np.any(np.all(np.isclose(pts, v), 1)) for v in hull)
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5], [0.5, 0.0], [1.0, 0.25], [0.2, 0.7]], float)
    hull = _convex_hull(square)
    assert sorted(map(tuple, hull)) == [(0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (1.0, 1.0)]
    assert 0.5 * np.sum(hull[:, 0] * np.roll(hull[:, 1], -1) - np.roll(hull[:, 0], -1) * hull[:, 1]) == 1.0
