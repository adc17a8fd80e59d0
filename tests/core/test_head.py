"""The head's attitude: the measure (``core.solver.head.head_turn``, the metrics' head_turn_*) and the solver's term
(``core.solver.head.HeadAttitude``), on a synthetic humanoid with a face (docs/solver.md "The head's attitude")."""

import math

import numpy as np
import pytest
import torch

from core.contacts.gaze import HEAD_KEYVERTS
from core.pipeline.retarget import Retarget, RetargetOptions, run
from core.solver import SolveJob, SolverSettings
from core.solver.head import HEAD_SCALE_DEG, HEAD_TOLERANCE_DEG, HeadAttitude, head_turn, head_turn_degrees
from core.character.track import ClipTrack
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


def test_the_head_turn_reads_a_nod_and_nothing_else(pair, monkeypatch):
    _, tgt, motion = pair
    assert head_turn(tgt, motion, motion).max() < 1e-5
    nod = head_turn(tgt, _head_turned(tgt, motion, 25.0), motion)
    assert nod == pytest.approx(np.full(motion.num_frames, 25.0), abs=0.5)
    # the whole body turned about the vertical with its head: the head's turn, not its place, is read
    paths = _head_paths(tgt, motion).numpy()
    c, s = math.cos(0.4), math.sin(0.4)
    yaw = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    assert head_turn_degrees(paths @ yaw.T + 1.0, paths) == pytest.approx(np.full(len(paths), math.degrees(0.4)),
                                                                        abs=1e-6)
    # a long clip is read a chunk of frames at a time: the same angles
    whole = head_turn(tgt, _head_turned(tgt, motion, 25.0), motion)
    import core.solver.head as head_mod
    monkeypatch.setattr(head_mod, "HEAD_CHUNK", 5)
    np.testing.assert_allclose(head_turn(tgt, _head_turned(tgt, motion, 25.0), motion), whole, atol=1e-9)
    plain = make_humanoid(name="plain")        # no head key vertices: no head turn
    assert head_turn(plain, walk_motion(plain, frames=12), walk_motion(plain, frames=12)) is None


def test_the_term_is_free_within_the_tolerance_and_costs_one_over_t_at_the_scale(pair):
    _, tgt, motion = pair
    names = list(tgt.keyverts.names)
    term = HeadAttitude.of(SolverSettings(), names)
    assert HeadAttitude.of(SolverSettings(w_head=0.0), names) is None
    assert HeadAttitude.of(SolverSettings(), [n for n in names if n != "head_top"]) is None
    kv = lambda m: torch.as_tensor(ClipTrack(tgt, m).keyverts[0])       # noqa: E731
    term = term.anchored(kv(motion))
    assert float(term.loss(kv(_head_turned(tgt, motion, 0.8 * HEAD_TOLERANCE_DEG)))) == 0.0
    at_scale = float(term.loss(kv(_head_turned(tgt, motion, HEAD_SCALE_DEG))))
    assert at_scale == pytest.approx(1.0, rel=0.02)            # every frame at the scale angle: T · (1 / T)
    p = kv(_head_turned(tgt, motion, 45.0)).requires_grad_(True)
    term.loss(p).backward()
    assert float(p.grad.abs().sum()) > 0.0


def test_a_solve_keeps_a_pulled_head_near_copy_rotations_and_w_head_0_turns_it_off(pair):
    # the source nods its head far down from the start of the solve: the semantic terms on the head key vertices
    # pull the target's head after it; the term holds it within about its tolerance of copy-rotations'. The self
    # barrier and the jerk budget are off in both solves: the barrier also stops a head nodding into the chest, and
    # the budget holds back a nod sharper than copy-rotations' moves, which would hide the term's part
    src, tgt, motion = pair
    nodding = _head_turned(src, motion, 80.0)
    turns = {}
    for w in (0.0, 3.0):
        s = SolverSettings.preset("fast", iterations=120, w_head=w, w_self_barrier=0.0, jerk_budget=0.0,
                                  num_threads=1)
        job = SolveJob(src, nodding, tgt, motion, s)
        job.run()
        assert (job.objective.head is None) == (w == 0.0)
        turns[w] = head_turn(tgt, job.result(), motion).mean()
    assert turns[3.0] < HEAD_TOLERANCE_DEG + 2.0
    assert turns[3.0] < turns[0.0] - 5.0


def test_a_retarget_reports_the_head_turn_and_copy_rotations_reads_zero(pair):
    src, tgt, motion = pair
    out = run(Retarget(src, motion, tgt, RetargetOptions(settings=SolverSettings.preset("fast", iterations=4,
                                                                                        num_threads=1))))
    turn = head_turn(tgt, out.motion, out.init_motion)
    assert out.metrics["head_turn_mean"] == pytest.approx(turn.mean())
    assert out.metrics["head_turn_max"] == pytest.approx(turn.max())
    assert out.reference["head_turn_mean"] == 0.0 and out.reference["head_turn_max"] == 0.0
