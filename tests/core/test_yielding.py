"""core.solver.yielding: the contact state's gradient yields to the self barrier's, frame by frame."""

import numpy as np
import pytest
import torch

from core.solver.yielding import YieldingPart, leaves_of, without_conflict, yielding_backward


def test_without_conflict_takes_out_the_pulls_component_against_the_barrier_frame_by_frame():
    """Frame 0: the pull (1, 0) against the barrier (−1, 1) (dot −1, |b|² 2): the step loses −½ b, so the pull's
    share becomes (½, ½), square to b. Frame 1: the pull (0, 1) along the barrier (0, 2): untouched. Frame 2: no
    barrier gradient: untouched."""
    g = (torch.tensor([[3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]),)
    pull = (torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),)
    barrier = (torch.tensor([[-1.0, 1.0], [0.0, 2.0], [0.0, 0.0]]),)
    out = without_conflict(g, pull, barrier)[0]
    np.testing.assert_allclose(out.numpy(), [[2.5, 4.5], [5.0, 6.0], [7.0, 8.0]])
    kept_pull = pull[0][0] - (g[0][0] - out[0])
    assert float(kept_pull @ barrier[0][0]) == pytest.approx(0.0)


def test_without_conflict_reads_a_frame_over_every_variable_of_it(monkeypatch):
    """Per frame (``YIELD_PER_JOINT`` off), the dot product of a frame runs over all its variables (the 6D residuals
    (T, Jo, 6) and the hips offset (T, 3) together): a pull against the barrier on the rotations but with it, more, on
    the hips is no conflict."""
    from core.solver import yielding
    monkeypatch.setattr(yielding, "YIELD_PER_JOINT", False)
    rot_pull, rot_bar = torch.zeros((1, 2, 6)), torch.zeros((1, 2, 6))
    rot_pull[0, 0, 0], rot_bar[0, 0, 0] = 1.0, -1.0
    off_pull, off_bar = torch.tensor([[2.0, 0.0, 0.0]]), torch.tensor([[1.0, 0.0, 0.0]])
    g = (torch.ones((1, 2, 6)), torch.ones((1, 3)))
    out = without_conflict(g, (rot_pull, off_pull), (rot_bar, off_bar))
    assert all(torch.equal(a, b) for a, b in zip(out, g))
    out = without_conflict(g, (rot_pull, -off_pull), (rot_bar, off_bar))            # now against: −3 over |b|² 2
    np.testing.assert_allclose(out[1].numpy(), [[2.5, 1.0, 1.0]])
    assert float(out[0][0, 0, 0]) == pytest.approx(1.0 - 1.5)


def test_yielding_per_joint_takes_out_the_conflict_of_each_joint(monkeypatch):
    """``YIELD_PER_JOINT``: each (frame, joint) block yields on its own. The frame of the test above whose hips offset
    outweighs the conflict on a joint's rotation yields nothing per frame, and that joint's conflict per joint."""
    from core.solver import yielding
    rot_pull, rot_bar = torch.zeros((1, 2, 6)), torch.zeros((1, 2, 6))
    rot_pull[0, 0, 0], rot_bar[0, 0, 0] = 1.0, -1.0                  # joint 0: against; joint 1: no barrier
    off_pull, off_bar = torch.tensor([[2.0, 0.0, 0.0]]), torch.tensor([[1.0, 0.0, 0.0]])
    g = (torch.ones((1, 2, 6)), torch.ones((1, 3)))
    monkeypatch.setattr(yielding, "YIELD_PER_JOINT", True)
    out, frames = without_conflict(g, (rot_pull, off_pull), (rot_bar, off_bar), count=True)
    assert float(out[0][0, 0, 0]) == pytest.approx(1.0 - 1.0) and int(frames) == 1   # g − (−1 / 1)·(−1)
    assert torch.equal(out[0][0, 1], g[0][0, 1]) and torch.equal(out[1], g[1])


def _toy(seed=0):
    """Control points x (C, 2) and a fixed spline matrix B (T, C): residuals r = B x (T, 2); a pull toward a
    target point and a barrier that pushes frame 1 the other way, plus a third term."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((3, 2), generator=g, dtype=torch.float64).requires_grad_(True)
    B = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.0, 0.0, 1.0]], dtype=torch.float64)
    aim = torch.tensor([3.0, 0.0], dtype=torch.float64)

    def terms(r):
        pull = ((r[1] - aim) ** 2).sum() + ((r[2] - aim) ** 2).sum()
        barrier = 4.0 * torch.relu(r[1, 0] + 5.0) ** 2               # frame 1 pushed towards −x, against the pull
        other = (r ** 2).sum() * 0.1
        return pull, barrier, other
    return x, B, terms


def test_yielding_backward_is_the_spline_s_transpose_of_the_yielded_frame_gradients():
    """By hand on a toy: the control points' gradient is Bᵀ (g − coef·b) per frame, where the pull and the barrier
    conflict (frame 1 here: the pull towards +x, the barrier towards −x); frames without a barrier gradient are as
    ``loss.backward()`` leaves them."""
    x, B, terms = _toy()
    res = (B @ x,)
    leaves = leaves_of(res)
    pull, barrier, other = terms(leaves[0])
    yielding_backward(pull + barrier + other, [YieldingPart(res, leaves, pull, barrier)], scale=2.0)
    got = x.grad.clone()

    r = (B @ x).detach().requires_grad_(True)
    p, b, o = terms(r)
    gp, = torch.autograd.grad(p, r, retain_graph=True)
    gb, = torch.autograd.grad(b, r, retain_graph=True)
    gall, = torch.autograd.grad(p + b + o, r)
    dot, bb = (gp * gb).sum(1), (gb * gb).sum(1)
    assert float(dot[1]) < 0 and float(bb[0]) == 0 and float(bb[2]) == 0     # the toy conflicts on frame 1 only
    coef = torch.where(dot < 0, dot / bb.clamp_min(1e-30), torch.zeros_like(dot))
    want = 2.0 * B.T @ (gall - coef[:, None] * gb)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)

    plain = 2.0 * B.T @ gall           # what loss.backward() would give: not the same
    assert not torch.allclose(plain, got)


def test_yielding_backward_without_a_barrier_or_a_pull_is_plain_backward():
    """A part without a barrier (or whose barrier has no gradient: nothing deeper than allowed) or without a pull
    steps as ``loss.backward()``."""
    x, B, terms = _toy(1)
    for which in ("no barrier", "no pull", "a barrier without gradient"):
        res = (B @ x,)
        leaves = leaves_of(res)
        pull, barrier, other = terms(leaves[0])
        quiet = torch.zeros((), dtype=torch.float64)
        part = {"no barrier": YieldingPart(res, leaves, pull, None),
                "no pull": YieldingPart(res, leaves, None, barrier),
                "a barrier without gradient": YieldingPart(res, leaves, pull, quiet)}[which]
        x.grad = None
        yielding_backward(pull + barrier + other, [part], scale=1.0)
        got = x.grad.clone()
        x.grad = None
        p, b, o = terms(B @ x)
        (p + b + o).backward()
        np.testing.assert_allclose(got.numpy(), x.grad.numpy(), rtol=1e-12, err_msg=which)


@pytest.fixture(scope="module")
def clap():
    """A clap onto a body much thicker than the source's: the contact state pulls the thick hands together, the
    self barrier keeps them out of each other."""
    from core.pipeline.copy_rotations import copy_rotations
    from tests.core.synth import make_humanoid, walk_motion
    src, tgt = make_humanoid(), make_humanoid(scale=0.8, girth=2.2, name="fat_yielding")
    motion = walk_motion(src, frames=12, clap=True)
    return src, motion, tgt, copy_rotations(src, motion, tgt)


def test_a_job_yields_with_a_contact_state_and_a_self_barrier_and_then_steps_otherwise(clap, monkeypatch):
    """``yielding.yields``: on with a contact state and a self barrier (the default), off with either at 0 or with
    ``CONTACT_YIELDS_TO_BARRIER`` off; the steps from ``YIELD_FROM`` of the solve on yield
    (``yields_at``); a solve that yields steps differently from one that does not (the clap's pull and barrier
    conflict), says on how many steps it yielded, and both stay finite."""
    from core.solver import SolveJob, SolverSettings, yielding
    src, motion, tgt, init = clap
    s = SolverSettings(iterations=8, num_threads=1)
    results = {}
    for on in (True, False):
        monkeypatch.setattr(yielding, "CONTACT_YIELDS_TO_BARRIER", on)
        job = SolveJob(src, motion, tgt, init, s)
        results[on] = job.run()
        assert yielding.yields(job) is on
        late = [k >= yielding.YIELD_FROM * 8 for k in range(8)]
        assert any(late) and not all(late)
        assert [yielding.yields_at(job, k) for k in range(8)] == [on and x for x in late]
        assert 0 < job.stats["yield_steps"] <= sum(late) if on else job.stats["yield_steps"] == 0
        assert job.stats["yield_frames"] > 0 if on else job.stats["yield_frames"] == 0
        assert np.isfinite(results[on].rotations).all()
    assert not np.allclose(results[True].rotations, results[False].rotations, atol=1e-6)
    monkeypatch.setattr(yielding, "CONTACT_YIELDS_TO_BARRIER", True)
    for off in (dict(contact_state=0.0), dict(w_self_barrier=0.0)):
        job = SolveJob(src, motion, tgt, init, SolverSettings(iterations=2, num_threads=1, **off))
        job.run()
        assert not yielding.yields(job), off


def test_the_barriers_own_frames_are_the_frames_of_its_gradient():
    """``surface.own_penetration_frames`` (the two barriers' bookkeeping of their entries deeper than allowed) marks
    exactly the frames on which the self barrier has a gradient with respect to the pose, the check that spares a
    step without a conflicting frame the two extra backward passes (``yielding._conflict_possible``)."""
    from core.pipeline.copy_rotations import copy_rotations
    from core.solver import SolveJob, SolverSettings
    from core.solver.surface import own_penetration_frames
    from tests.core.synth import make_humanoid, walk_motion
    src, tgt = make_humanoid(), make_humanoid(scale=0.8, girth=1.3, name="stout_yielding")
    motion = walk_motion(src, frames=24, clap=True)          # the hands meet in the middle of the clip only
    job = SolveJob(src, motion, tgt, copy_rotations(src, motion, tgt), SolverSettings(iterations=8, num_threads=1))
    job.setup()
    job.weighted_terms(alpha=1.0)
    bar = job.last_own_penetration
    assert bar is not None and bar.requires_grad
    T = job.num_frames
    g = torch.autograd.grad(bar, job.body_positions, retain_graph=True)[0]
    moved = (g.reshape(T, -1) != 0).any(1)
    frames = own_penetration_frames(job)
    assert 0 < int(frames.sum()) < T
    assert torch.equal(frames, moved)


def test_a_joint_solve_yields_member_by_member_as_the_single_solve(clap):
    """A joint solve of one pair takes the single solve's yielding steps: the same result bit for bit, and the
    member's ``yield_steps`` / ``yield_frames`` counted as the single job's."""
    from core.solver import GroupSolveJob, SolveJob, SolverSettings
    src, motion, tgt, init = clap
    s = SolverSettings(iterations=8, num_threads=1)
    single = SolveJob(src, motion, tgt, init, s)
    alone = single.run()
    member = SolveJob(src, motion, tgt, init, s)
    (joint,) = GroupSolveJob([member]).run()
    assert np.array_equal(alone.rotations, joint.rotations) and np.array_equal(alone.locations, joint.locations)
    assert single.stats["yield_steps"] > 0
    assert {k: member.stats[k] for k in ("yield_steps", "yield_frames")} == \
        {k: single.stats[k] for k in ("yield_steps", "yield_frames")}
