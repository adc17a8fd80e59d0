"""The residual's knots: the general cubic B-spline basis, the grid refined at the source feet's events
(``parametrisation.EVENT_KNOTS``) and the events themselves (docs/solver.md "Knots at the feet's events")."""

import numpy as np
import pytest
import torch

from core.solver import SolverSettings, bspline_basis
from core.solver.footing import FootModel
from core.solver.knots import MIN_EVENT_SPAN, knot_basis, refined_knots
from core.solver.parametrisation import Parametrisation


@pytest.mark.parametrize("frames, spacing", [(50, 3.0), (75, 12.0), (316, 12.0), (40, 2.4), (7, 3.0), (101, 6.0)])
def test_the_general_basis_on_a_uniform_grid_is_the_uniform_basis(frames, spacing):
    knots = refined_knots(frames, spacing, [], MIN_EVENT_SPAN)
    np.testing.assert_allclose(knot_basis(frames, knots), bspline_basis(frames, spacing), rtol=0, atol=1e-12)


def test_spans_within_one_span_of_an_event_are_halved():
    knots = refined_knots(316, 12.0, [50, 200], 3.0)
    inner = knots[3:-3]
    steps = np.diff(inner)
    assert inner[0] == 0.0 and inner[-1] >= 315
    halved = inner[:-1][steps == 6.0]
    # 50 lies in [48, 60): the spans from 36 to 72 are halved; 200 in [192, 204): those from 180 to 216
    assert sorted(set((halved // 12 * 12).tolist())) == [36, 48, 60, 180, 192, 204]
    assert set(steps.tolist()) == {6.0, 12.0}
    B = knot_basis(316, knots)
    assert B.shape == (316, len(knots) - 4) and B.shape[1] == bspline_basis(316, 12.0).shape[1] + 6
    np.testing.assert_allclose(B.sum(1), 1.0, atol=1e-12)
    assert B.min() >= 0.0 and ((B > 0).sum(1) <= 4).all()


def test_a_half_shorter_than_the_shortest_span_is_not_made():
    assert np.array_equal(refined_knots(90, 3.0, [10, 40], 3.0), refined_knots(90, 3.0, [], 3.0))
    assert len(refined_knots(90, 3.0, [10, 40], 1.5)) > len(refined_knots(90, 3.0, [], 1.5))


def _param(frames, fps, events, span):
    eye = torch.eye(3, dtype=torch.float64)
    return Parametrisation(eye.expand(frames, 2, 3, 3), eye.expand(2, 3, 3), torch.zeros(frames, 3, dtype=eye.dtype),
                           eye.expand(frames, 3, 3), 1.7, fps, 0.1, events, span)


def test_the_parametrisation_takes_the_refined_grid_at_120_fps_only():
    """0.1 s spans: 12 frames at 120 fps, halved near the events; 3 frames at 30 fps, left whole (MIN_EVENT_SPAN)."""
    fine, plain = _param(240, 120.0, [60, 61, 150], 0.05), _param(240, 120.0, [], 0.05)
    assert fine.num_controls > plain.num_controls
    assert np.array_equal(_param(240, 120.0, [60], 0.0).basis, plain.basis)          # 0: a uniform grid
    assert np.array_equal(_param(60, 30.0, [20, 40], 0.05).basis, bspline_basis(60, 3.0))
    # the band holds every non-zero weight: the spline of the control points is the basis' product
    ctrl = torch.randn(fine.num_controls, 5, dtype=torch.float64)
    np.testing.assert_allclose(fine.spline(ctrl).numpy(), fine.basis @ ctrl.numpy(), atol=1e-12)


def test_the_feet_events_are_where_a_contact_or_a_lock_weight_crosses_one_half():
    h = 1.0
    T = 12
    low = np.full((T, 2), 0.01 * h)
    low[5:9, 0] = 0.2 * h                                 # the left foot lifts off at 5 and lands at 9
    vel = np.zeros((T, 2, 2))
    vel[:3, 1, 0] = 0.05 * h                              # the right foot stops sliding at 3
    feet = FootModel(SolverSettings(), low, vel, np.array([0, 1]), np.array([-1]), h, h, 1.0, 30.0, torch.float64,
                     "cpu")
    assert feet.events().tolist() == [3, 5, 9]


@pytest.mark.parametrize("frames, spacing", [(50, 3.0), (75, 12.0), (7, 3.0), (101, 2.4), (30, 1.0), (3, 3.0)])
def test_a_band_is_its_basis(frames, spacing):
    """``uniform_band`` holds the uniform basis' non-zero entries (no dense matrix built), ``band_of`` reads them
    back from any basis, and ``Band.controls`` are the columns with a weight on the given frames."""
    from core.solver.knots import band_of, uniform_band
    band = uniform_band(frames, spacing)
    B = band.dense()
    np.testing.assert_allclose(B.sum(1), 1.0, atol=1e-12)
    again = band_of(B)
    np.testing.assert_array_equal(again.dense(), B)
    rng = np.random.default_rng(0)
    pick = rng.random(frames) < 0.3
    np.testing.assert_array_equal(band.controls(pick), (B[pick] != 0).any(0))
    identity = B.shape[0] == B.shape[1] and np.array_equal(B, np.eye(frames))
    assert (band.tensors(torch.float64, "cpu") is None) == identity and (identity or band.cols.shape[1] == 4)


@pytest.mark.parametrize("frames, spacing, events", [(50, 3.0, ()), (49, 3.0, ()), (316, 12.0, (50, 200)),
                                                     (13, 4.0, ()), (40, 1.0, ())])
def test_the_band_least_squares_is_the_pseudo_inverses(frames, spacing, events):
    """``Band.fitter`` (normal equations from the rows' non-zero entries) gives the pseudo-inverse's fit, also
    where a control at an end of the grid shapes no frame (49 frames, 3-frame spans: the last one)."""
    from core.solver.knots import band_of
    B = knot_basis(frames, refined_knots(frames, spacing, events, 3.0)) if events else bspline_basis(frames, spacing)
    band = band_of(B)
    y = torch.as_tensor(np.random.default_rng(1).standard_normal((frames, 5)))
    want = torch.linalg.pinv(torch.as_tensor(B)) @ y
    np.testing.assert_allclose(band.fitter()(y).numpy(), want.numpy(), atol=1e-9)
    np.testing.assert_allclose(band.apply(want).numpy(), (torch.as_tensor(B) @ want).numpy(), atol=1e-12)
