"""The upper body's own knot grid (``parametrisation.UPPER_KNOTS``; docs/solver.md "The upper body's knots"): which
bones take it, the residual on two grids, a warm start fitted on both, and what it is for: on a 120 fps capture
the solve can take out frame-level jitter of the chest that copy-rotations carries to the head."""


import numpy as np
import pytest
import torch

from core.pipeline.copy_rotations import copy_rotations
from core.rig.rotations import quat_multiply, quat_normalize
from core.solver import SolveJob, SolverSettings, WarmSchedule, bspline_basis, objective, parametrisation
from core.solver.parametrisation import Parametrisation, upper_body_bones
from core.character.track import ClipTrack
from core.types import Motion

from .synth import _axis_quat, make_humanoid, walk_motion


def _canonical(character):
    names = character.skeleton.names
    return {names.index(b): c for c, b in character.bone_map.items()}


def test_the_neck_head_collarbones_and_the_spine_the_neck_hangs_from_take_the_upper_grid(monkeypatch):
    ch = make_humanoid()
    canon = _canonical(ch)
    opt = sorted(canon)
    by_name = {c: j for j, c in canon.items()}

    def upper(opt):
        return sorted(canon[j] for j, u in zip(opt, upper_body_bones(ch.skeleton, opt, canon)) if u)
    assert parametrisation.NECK_CHAIN == "spine"              # the default: every optimised bone up to the hips
    head_and_shoulders = ["head", "left_shoulder", "neck", "right_shoulder"]
    assert upper(opt) == sorted(head_and_shoulders + ["chest", "spine"])
    # a bone not optimised is skipped, the others of the chain still take it; never the hips
    assert upper([j for j in opt if j != by_name["chest"]]) == sorted(head_and_shoulders + ["spine"])
    assert "hips" not in upper(opt)
    # "nearest": only the optimised bone nearest above the neck
    monkeypatch.setattr(parametrisation, "NECK_CHAIN", "nearest")
    assert upper(opt) == sorted(head_and_shoulders + ["chest"])
    assert upper([j for j in opt if j != by_name["chest"]]) == sorted(head_and_shoulders + ["spine"])
    assert upper([j for j in opt if canon[j] not in ("chest", "spine")]) == head_and_shoulders
    monkeypatch.setattr(parametrisation, "NECK_CHAIN", "")
    assert upper(opt) == head_and_shoulders
    monkeypatch.setattr(parametrisation, "NECK_CHAIN", "all")
    with pytest.raises(Exception, match="NECK_CHAIN"):
        upper(opt)


def _param(frames, fps, fine, spacing=0.025):
    eye = torch.eye(3, dtype=torch.float64)
    Jo = len(fine)
    return Parametrisation(eye.expand(frames, Jo, 3, 3), eye.expand(Jo, 3, 3), torch.zeros(frames, 3, dtype=eye.dtype),
                           eye.expand(frames, 3, 3), 1.7, fps, 0.1, (), 0.0, np.asarray(fine), spacing)


def test_the_upper_bones_have_their_own_grid_at_120_fps_and_the_main_one_at_30():
    fine = [False, True, False, True]
    p = _param(240, 120.0, fine)
    assert len(p.groups) == 2 and [list(g[0]) for g in p.groups] == [[0, 2], [1, 3]]
    fine_basis = p.groups[1][1].dense()
    np.testing.assert_array_equal(fine_basis, bspline_basis(240, 3.0))                # 0.025 s: 3 frames
    np.testing.assert_array_equal(p.groups[0][1].dense(), p.basis)
    assert p.delta.shape == (p.num_controls, 2, 6) and p.delta_fine.shape == (fine_basis.shape[1], 2, 6)
    assert len(p.params) == 3 and p.rates(1.0, 2.0) == [1.0, 2.0, 1.0]
    # each bone's residual is its own grid's spline of its controls
    gen = torch.Generator().manual_seed(0)
    delta = torch.randn(p.delta.shape, generator=gen, dtype=torch.float64)
    root = torch.randn(p.root_off.shape, generator=gen, dtype=torch.float64)
    fine_ctrl = torch.randn(p.delta_fine.shape, generator=gen, dtype=torch.float64)
    d, off = p.residuals(delta, root, fine_ctrl)
    assert d.shape == (240, 4, 6)
    np.testing.assert_allclose(d[:, [0, 2]].reshape(240, -1).numpy(), p.basis @ delta.reshape(len(delta), -1).numpy(),
                               atol=1e-12)
    np.testing.assert_allclose(d[:, [1, 3]].reshape(240, -1).numpy(),
                               fine_basis @ fine_ctrl.reshape(len(fine_ctrl), -1).numpy(), atol=1e-12)
    np.testing.assert_allclose(off.numpy(), p.basis @ root.numpy(), atol=1e-12)
    # 30 fps: 3 frames is the main grid already; 0 s: off; nothing marked: one grid
    for q in (_param(60, 30.0, fine), _param(240, 120.0, fine, 0.0), _param(240, 120.0, [False] * 4)):
        assert len(q.groups) == 1 and q.delta_fine is None and len(q.params) == 2
        assert q.delta.shape[1] == 4


def test_a_fit_to_a_motion_of_both_grids_gives_its_rotations_back():
    p = _param(120, 120.0, [True, False, True])
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        p.delta.copy_(0.2 * torch.randn(p.delta.shape, generator=gen, dtype=torch.float64))
        p.delta_fine.copy_(0.2 * torch.randn(p.delta_fine.shape, generator=gen, dtype=torch.float64))
        d, _ = p.frame_residuals()
        R = p.rotations(d)
    q = _param(120, 120.0, [True, False, True])
    q.fit_to(R, torch.zeros(120, 3, dtype=torch.float64))
    with torch.no_grad():
        d2, off2 = q.frame_residuals()
    # (the orthonormal frames of a fitted 6D spline miss by a little: ``refit_rotations``; a bone fitted on the
    # other group's grid would miss by the size of the residual, 0.2)
    assert float((q.rotations(d2) - R).abs().max()) < 0.03
    assert float(off2.abs().max()) < 1e-12
    # with the 6D vectors given, the same controls exactly
    q.fit_to(R, torch.zeros(120, 3, dtype=torch.float64), p.sixd_frames())
    np.testing.assert_allclose(q.delta.numpy(), p.delta.numpy(), atol=1e-9)
    np.testing.assert_allclose(q.delta_fine.numpy(), p.delta_fine.numpy(), atol=1e-9)


def _jittery_walk(character, frames, fps, seed=0, degrees=1.0):
    """``walk_motion`` with rotation noise on the chest over a few frames (a 120 fps capture's jitter: white noise
    smoothed by a Gaussian of 1.5 frames, faster than 12-frame spans can follow)."""
    m = walk_motion(character, frames=frames, fps=fps)
    j = character.skeleton.index(character.bone_map["chest"])
    rng = np.random.default_rng(seed)
    kernel = np.exp(-0.5 * (np.arange(-4, 5) / 1.5) ** 2)
    white = rng.standard_normal((frames + 8, 3))
    noise = np.stack([np.convolve(white[:, a], kernel / np.linalg.norm(kernel), "valid") for a in range(3)], 1)
    noise = np.deg2rad(degrees) * noise
    q = m.rotations.copy()
    for axis in range(3):
        q[:, j] = quat_normalize(quat_multiply(q[:, j], _axis_quat(np.eye(3)[axis], noise[:, axis])))
    return Motion(q, m.locations, m.fps, m.frame_start)


def _head_jerk(character, motion):
    wp = ClipTrack(character, motion).world_positions
    head = wp[:, character.skeleton.index(character.bone_map["head"])]
    return float(np.linalg.norm(np.diff(head, 3, axis=0), axis=-1).mean())


@pytest.mark.slow
def test_on_a_120_fps_capture_the_upper_grid_takes_the_chests_jitter_out_of_the_head(monkeypatch):
    """With the printed L_smooth (every point's jerk, ``objective.SMOOTH_MODE`` "absolute"), the jitter the chest's noise
    gives the head can be taken out only by residuals that change from frame to frame: the upper grid's."""
    src = make_humanoid()
    tgt = make_humanoid(scale=1.1, girth=1.2, name="tgt")
    m = _jittery_walk(src, 96, 120.0)
    init = copy_rotations(src, m, tgt)
    heads, warm = {}, {}
    monkeypatch.setattr(objective, "SMOOTH_MODE", "absolute")
    for knots in (0.0, 0.025):
        monkeypatch.setattr(parametrisation, "UPPER_KNOTS", knots)
        s = SolverSettings(iterations=60, num_threads=1)
        job = SolveJob(src, m, tgt, init, s)
        job.run()
        heads[knots] = _head_jerk(tgt, job.result())
        assert len(job.param.groups) == (2 if knots else 1)
        # a warm start from its result, with its 6D vectors: the same pose
        again = SolveJob(src, m, tgt, init, s, warm_start=job.result(), warm_sixd=job.result_sixd(),
                         warm_schedule=WarmSchedule(steps=0.1, lr=0.3))
        list(again.prepare())
        with torch.no_grad():
            warm[knots] = float((again._forward()[0] - job._forward()[0]).norm(dim=-1).max())
    copy_rot = _head_jerk(tgt, init)
    assert heads[0.025] < 0.8 * heads[0.0] and heads[0.025] < 0.8 * copy_rot
    assert max(warm.values()) < 1e-5


def test_the_compiled_pose_takes_the_upper_grids_controls(monkeypatch):
    """``compile`` (here ``torch.compile`` replaced by the function itself: no C++ compiler needed) routes the
    three control tensors of a 120 fps solve through one function: the eager solve's result."""
    src = make_humanoid()
    tgt = make_humanoid(scale=1.1, girth=1.2, name="tgt")
    m = walk_motion(src, frames=60, fps=120.0)
    init = copy_rotations(src, m, tgt)
    eager = SolveJob(src, m, tgt, init, SolverSettings(iterations=24, num_threads=1))    # ≥ graphed.MIN_STEPS
    eager.run()
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)
    job = SolveJob(src, m, tgt, init, SolverSettings(iterations=24, num_threads=1, compile=True))
    job.run()
    assert job.stats["compiled"] is True and len(job.param.params) == 3
    np.testing.assert_allclose(job.result().rotations, eager.result().rotations, atol=1e-4)
