"""core.contacts.feet: one definition of the feet (vertices, sole points, lowest point and its speed)."""

import numpy as np
import torch

from core.contacts.feet import (foot_lows_and_velocity, foot_side, foot_vertices, soft_lowest, spread_sole_points,
                       window_bounds)
from core.rig.parts import vertex_segments
from tests.core.synth import make_humanoid


def test_foot_vertices_are_the_foot_and_toe_segments_of_each_side():
    ch = make_humanoid()
    seg, bones, _ = vertex_segments(ch.skeleton, ch.mesh, ch.bone_map)
    left, right = foot_vertices(ch, max_vertices=None)
    assert set(np.asarray(bones)[seg[left]]) == {"left_foot", "left_toes"}
    assert set(np.asarray(bones)[seg[right]]) == {"right_foot", "right_toes"}
    every = np.nonzero(np.isin(np.asarray(bones)[np.maximum(seg, 0)], ["left_foot", "left_toes"]) & (seg >= 0))[0]
    np.testing.assert_array_equal(left, every)
    few = foot_vertices(ch, max_vertices=5)[0]
    assert len(few) == 5 and set(few) <= set(left) and few[0] == left[0] and few[-1] == left[-1]
    side = foot_side(ch, np.concatenate([left[:3], right[:2], [0]]))
    assert side.tolist() == [0, 0, 0, 1, 1, -1]


def test_soft_lowest_is_within_tau_log_n_of_the_minimum():
    h = torch.tensor([[0.3, 0.0, 0.0, 0.1]], dtype=torch.float64)
    lo = float(soft_lowest(h, 0.001))
    assert -0.001 * np.log(4) <= lo <= 0.0 and lo < -0.0006     # two points tie at 0: ~ −τ log 2


def test_foot_lows_and_velocity_follow_the_lowest_point():
    T, fps = 30, 30.0
    t = np.arange(T) / fps
    left = np.zeros((T, 2, 3))
    left[:, 0, 0] = 0.5 * t                 # the low point walks 0.5 m/s in x
    left[:, 1, 2] = 0.2                     # a high point
    right = np.zeros((T, 0, 3))             # no right foot
    low, vel = foot_lows_and_velocity([left, right], 0.0, fps, tau=1e-4)
    np.testing.assert_allclose(low[:, 0], 0.0, atol=1e-12)
    np.testing.assert_allclose(vel[2:-2, 0, 0], 0.5, atol=1e-12)
    assert np.isnan(low[:, 1]).all() and np.isnan(vel[:, 1]).all()
    lo, hi = window_bounds(T, fps)
    assert lo[0] == 0 and hi[-1] == T - 1 and (hi - lo)[5] == 2      # k = round(30 / 15 / 2) = 1 frame
    # the velocity of other points' lowest one (the solver: every foot vertex), the height of ``points``' own
    heel = np.zeros((T, 1, 3))
    heel[:, 0, 2] = -0.01                                            # lower than the sole point, and still
    low2, vel2 = foot_lows_and_velocity([left, right], 0.0, fps, tau=1e-4, speed_points=[np.concatenate(
        [left, heel], 1), right])
    np.testing.assert_array_equal(low2, low)
    np.testing.assert_allclose(vel2[:, 0], 0.0, atol=1e-12)


def testspread_sole_points_cover_a_flat_sole():
    """A foot standing still and flat: every sole vertex is as low as the lowest one, so the sole points
    spread over the whole sole, not the single lowest vertex."""
    gx, gy = np.meshgrid(np.linspace(0.0, 0.25, 11), np.linspace(0.0, 0.1, 5))
    sole = np.stack([gx.ravel(), gy.ravel(), np.zeros(gx.size)], 1)          # (55, 3) flat sole
    top = sole + [0.0, 0.0, 0.08]                                              # the instep, never low
    rest = np.concatenate([sole, top])
    z = np.tile(rest[:, 2], (20, 1)) + 1e-4 * np.arange(len(rest)) / len(rest)   # (F, V), static
    keep = spread_sole_points(z, rest, band=0.005, count=8)
    assert len(keep) == 8 and (keep < len(sole)).all()                        # only sole vertices
    gap = np.linalg.norm(sole[:, None] - sole[keep][None], axis=-1).min(1)   # each sole vertex to its nearest
    assert gap.max() < 0.07                                                    # whole outline covered
    assert np.ptp(sole[keep, 0]) > 0.2 and np.ptp(sole[keep, 1]) > 0.08
    # a rolling foot: only the vertices that are ever near the lowest qualify
    z2 = np.tile(rest[:, 2], (20, 1)) + np.where(rest[:, 0] > 0.2, 0.0, 0.05)[None]
    keep2 = spread_sole_points(z2, rest, band=0.005, count=8)
    assert (rest[keep2, 0] > 0.2).all() and (rest[keep2, 2] == 0).all()


