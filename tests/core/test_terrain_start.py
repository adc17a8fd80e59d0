"""Where the solve starts on a terrain (core.solver.terrain_start): each planted foot on a footing of its
step, the hips raised by the lowest planted foot's rise, the legs bent by two-bone IK to reach."""

import numpy as np
import pytest
import torch

from core.rig.kinematics import forward_kinematics
from core.solver.terrain_start import onto_terrain, smooth_in_time, terrain_lift
from core.contacts.terrain import sample_ground
from core.contacts.terrain.shapes import stairs
from core.types import Motion

from .helpers import translation
from .synth import make_humanoid


def _world(character, motion):
    pose = forward_kinematics(character.skeleton, motion.rotations, motion.locations)
    M = torch.as_tensor(character.skeleton.object_matrix)
    return (pose.positions @ M[:3, :3].T + M[:3, 3]).numpy(), (M[:3, :3] @ pose.rotations).numpy()


@pytest.mark.parametrize("object_matrix", [None, translation(0.5, -1.0, 0.2) @ np.diag([1.3, 1.3, 1.3, 1.0])])
def test_onto_terrain_raises_the_hips_and_bends_each_leg_onto_its_step(object_matrix):
    ch = make_humanoid(object_matrix=object_matrix)
    T = 6
    motion = Motion.rest(T, ch.skeleton.num_bones)
    hips = np.linspace(0.0, 0.1, T)
    rise = np.stack([hips + 0.15, hips], 1)                       # the left foot one 15 cm step higher
    shift = np.zeros((T, 2, 2))
    shift[:, 0] = (0.0, -0.04)                                      # and 4 cm further forward
    out = onto_terrain(ch, motion, hips, rise, shift)
    P0, R0 = _world(ch, motion)
    P1, R1 = _world(ch, out)
    idx = {c: ch.skeleton.index(b) for c, b in ch.bone_map.items()}
    np.testing.assert_allclose(P1[:, idx["hips"]] - P0[:, idx["hips"]], np.stack([0 * hips, 0 * hips, hips], 1),
                               atol=1e-9)
    np.testing.assert_allclose(P1[:, idx["left_foot"]] - P0[:, idx["left_foot"]],
                               np.stack([0 * hips, np.full(T, -0.04), hips + 0.15], 1), atol=1e-6)
    np.testing.assert_allclose(P1[:, idx["right_foot"]] - P0[:, idx["right_foot"]],
                               np.stack([0 * hips, 0 * hips, hips], 1), atol=1e-6)
    for side in ("left", "right"):                               # feet keep their world orientation
        np.testing.assert_allclose(R1[:, idx[f"{side}_foot"]], R0[:, idx[f"{side}_foot"]], atol=1e-6)
        thigh = np.linalg.norm(P1[:, idx[f"{side}_lower_leg"]] - P1[:, idx[f"{side}_upper_leg"]], axis=-1)
        np.testing.assert_allclose(thigh, np.linalg.norm(P0[:, idx[f"{side}_lower_leg"]]
                                                         - P0[:, idx[f"{side}_upper_leg"]], axis=-1), atol=1e-9)
    knee = P1[:, idx["left_lower_leg"]]
    assert (knee[:, 1] < P0[:, idx["left_lower_leg"], 1] - 0.02).all()     # the knee bends forward, not back


def _walk_points(T=60, step=0.36, fps=30.0):
    """Foot points of a walk along -y on flat ground (z from 0): feet 26 cm long, alternating stances of 20
    frames, and the contact weights of those stances."""
    foot = np.stack(np.meshgrid(np.linspace(-0.13, 0.13, 7), np.linspace(-0.04, 0.04, 3), indexing="ij"), -1)
    foot = foot.reshape(-1, 2)[:, ::-1]                                        # long axis along y
    pts, side = [], []
    contact = np.zeros((T, 2))
    for k, x in ((0, 0.1), (1, -0.1)):
        y = np.zeros(T)
        for t in range(T):
            phase = (t + 10 * k) // 20                                       # which stance (k offsets by half)
            y[t] = -step * phase - (k * step / 2)
            contact[t, k] = 1.0 if (t + 10 * k) % 20 < 14 else 0.0
        p = np.zeros((T, len(foot), 3))
        p[..., 0] = x + foot[:, 0]
        p[..., 1] = y[:, None] + foot[:, 1]
        pts.append(p)
        side.append(np.full(len(foot), k))
    return np.concatenate(pts, 1), np.concatenate(side), contact


def test_each_planted_foot_gets_a_footing_on_one_tread():
    g = stairs(start=(0.0, 0.3), direction=(0.0, -1.0), approach=0.7, steps=6, tread=0.3, rise=0.17)
    field, rep = sample_ground(g.surface, (-0.5, 0.5, -2.6, 0.5))
    points, side, contact = _walk_points()
    hips, rise, shift = terrain_lift(points, side, contact, field, 30.0, 1.8)
    assert hips.shape == (60,) and rise.shape == (60, 2) and shift.shape == (60, 2, 2)
    for k in (0, 1):
        on = contact[:, k] > 0.5
        moved = points[:, side == k].copy()
        moved[..., :2] += shift[:, k, None, :]
        true = g.height(moved[..., 0], moved[..., 1])                          # (T, P) the true treads
        # while planted, the foot stands on the highest tread under it, raised onto it ...
        np.testing.assert_allclose(rise[on, k], true[on].max(1), atol=0.01)
        # ... with at most a quarter of it hanging over the lower tread (plus the raised edge's two grid cells
        # of the 26 cm foot), never with most of it down there and its toes on the next step
        hanging = (true[on] < true[on].max(1, keepdims=True) - 1e-9).mean(1)
        assert hanging.max() <= 0.25 + 2 * rep.spacing / 0.26 + 1e-9
        assert np.abs(shift[on, k]).max() <= 0.1 * 1.8 + 1e-9
    assert np.abs(shift).max() > 0.02                                           # some footings moved
    # the hips rise with the lower planted foot, never above the higher one, smoothly
    assert (hips <= rise.max(1) + 1e-9).all() and hips[-1] > 0.3
    assert np.abs(np.diff(hips, 3)).max() < 0.05


def test_smoothing_holds_its_ends():
    x = np.concatenate([np.zeros(10), np.ones(10)])
    y = smooth_in_time(x, 2.0)
    assert y[0] == 0.0 and y[-1] == 1.0 and 0.3 < y[10] < 0.7
