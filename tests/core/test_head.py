"""The head's attitude: the measure (core.gaze's attitude helpers, the metrics' head_attitude_*) and the solver's
term (core.solver.head), on a synthetic humanoid with a face (docs/solver.md "The head's attitude")."""

import math

import numpy as np
import pytest
import torch

from core.gaze import HEAD_KEYVERTS, attitude_degrees, attitude_gap, attitude_reference, tpose_head_frame
from core.metrics import evaluate
from core.solver import SolveJob, SolverSettings
from core.solver.head import HEAD_SCALE_DEG, HEAD_TOLERANCE_DEG, HeadAttitude
from core.track import ClipTrack
from core.types import Motion
from tests.core.synth import _axis_quat, make_humanoid, walk_motion, with_face


def _head_turned(ch, motion, degrees):
    """``motion`` with the head bone turned by ``degrees`` about its own X axis (a nod) on every frame."""
    out = Motion(motion.rotations.copy(), motion.locations.copy(), motion.fps, motion.frame_start)
    head = ch.skeleton.index(ch.bone_map["head"])
    q = _axis_quat([1.0, 0.0, 0.0], math.radians(degrees) * np.ones(motion.num_frames))
    w1, v1 = out.rotations[:, head, :1], out.rotations[:, head, 1:]
    w2, v2 = q[:, :1], q[:, 1:]
    out.rotations[:, head] = np.concatenate([w1 * w2 - np.sum(v1 * v2, 1, keepdims=True),
                                             w1 * v2 + w2 * v1 + np.cross(v1, v2)], 1)
    return out


def _head_paths(ch, motion):
    ids = ch.keyverts.vertex_ids[[list(ch.keyverts.names).index(n) for n in HEAD_KEYVERTS]]
    return torch.as_tensor(ClipTrack(ch, motion).vertices(ids))


@pytest.fixture(scope="module")
def pair():
    src = with_face(make_humanoid(name="src"))
    tgt = with_face(make_humanoid(scale=1.2, girth=1.4, name="tgt"))
    return src, tgt, walk_motion(src, frames=12)


def test_the_attitude_angle_reads_a_nod_and_ignores_the_body_and_head_shape(pair):
    src, tgt, motion = pair
    frames = tpose_head_frame(src), tpose_head_frame(tgt)
    ref = attitude_reference(_head_paths(src, motion), *frames)
    # the same rotations on another body: the same attitude (the T-pose calibration absorbs the head's shape)
    assert attitude_degrees(ref, _head_paths(tgt, motion)).max() < 0.5
    nod = attitude_degrees(ref, _head_paths(tgt, _head_turned(tgt, motion, 25.0)))
    assert nod == pytest.approx(np.full(len(nod), 25.0), abs=0.5)
    gap = attitude_gap(ref, _head_paths(tgt, _head_turned(tgt, motion, 25.0)))
    assert gap.numpy() == pytest.approx(1.0 - math.cos(math.radians(25.0)), abs=2e-3)


def test_copy_rotations_reads_no_head_attitude_whichever_way_the_armature_objects_face(pair):
    # the angle is measured against the head copy-rotations would give (its turn A between the two bodies' axes
    # included): a target whose armature object faces the other way (the demo's couple) reads 0 too, where a
    # calibration in world axes, or in body axes without A, reads 180°
    src, tgt, motion = pair
    from dataclasses import replace
    from core.copy_rotations import copy_rotations
    from tests.core.synth import facing
    turned = replace(tgt, skeleton=replace(tgt.skeleton, object_matrix=facing(math.pi, x=1.0)))
    for target in (tgt, turned):
        ref = attitude_reference(_head_paths(src, motion), tpose_head_frame(src), tpose_head_frame(target))
        assert attitude_degrees(ref, _head_paths(target, copy_rotations(src, motion, target))).max() < 0.5
    L, F = tpose_head_frame(turned)
    L0, F0 = tpose_head_frame(tgt)
    np.testing.assert_allclose(L, L0, atol=1e-9)                      # the head's shape in its body's axes
    np.testing.assert_allclose(F @ F0.T, facing(math.pi)[:3, :3], atol=1e-9)


def test_the_metrics_report_the_head_attitude(pair):
    src, tgt, motion = pair
    same = evaluate(src, motion, tgt, motion)
    turned = evaluate(src, motion, tgt, _head_turned(tgt, motion, 40.0))
    assert same["head_attitude_mean"] < 0.5 and same["head_attitude_max"] < 0.5
    assert turned["head_attitude_mean"] == pytest.approx(40.0, abs=0.5)
    assert turned["head_attitude_max"] >= turned["head_attitude_mean"] - 1e-9
    plain = make_humanoid(name="plain")        # no head key vertices: no head metric
    assert "head_attitude_mean" not in evaluate(plain, walk_motion(plain, frames=12), plain,
                                                walk_motion(plain, frames=12))


def test_the_term_is_free_within_the_tolerance_and_costs_one_over_t_at_the_scale(pair):
    src, tgt, motion = pair
    T = motion.num_frames
    frames = tpose_head_frame(src), tpose_head_frame(tgt)
    term = HeadAttitude((0, 1, 2), attitude_reference(_head_paths(src, motion), *frames), torch.float64)
    assert float(term.loss(_head_paths(tgt, _head_turned(tgt, motion, 0.8 * HEAD_TOLERANCE_DEG)))) == 0.0
    at_scale = float(term.loss(_head_paths(tgt, _head_turned(tgt, motion, HEAD_SCALE_DEG))))
    assert at_scale == pytest.approx(1.0, rel=0.02)            # every frame at the scale angle: T · (1 / T)
    p = _head_paths(tgt, _head_turned(tgt, motion, 45.0)).requires_grad_(True)
    term.loss(p).backward()
    assert float(p.grad.abs().sum()) > 0.0 and T == p.shape[0]


def test_a_solve_keeps_a_pulled_head_near_the_source_s_attitude_and_w_head_0_turns_it_off(pair):
    src, tgt, motion = pair
    init = _head_turned(tgt, motion, 60.0)        # a start whose head is nodded far from the source's
    angles = {}
    for w in (0.0, 1.0):
        s = SolverSettings.preset("fast", iterations=30, w_head=w, num_threads=1)
        job = SolveJob(src, motion, tgt, init, s)
        job.run()
        assert (job.objective.head is None) == (w == 0.0)
        out = job.result()
        angles[w] = evaluate(src, motion, tgt, out)["head_attitude_mean"]
    assert angles[1.0] < angles[0.0] - 10.0
