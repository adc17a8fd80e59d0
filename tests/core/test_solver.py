import threading

import numpy as np
import pytest
import torch

from core.errors import CoreError
from core.contacts.ground import estimate_ground
from core.rig.rotations import quat_to_matrix
from core.solver import SEMANTIC_TERMS, SolveJob, SolverSettings, WarmSchedule, bspline_basis
from core.solver import footing, objective as objective_module
from core.solver import job as job_module
from core.solver.footing import FootModel
from core.character.track import ClipTrack
from core.types import Motion
from tests.core.synth import make_humanoid, walk_motion

FAST = dict(iterations=30, num_threads=2)


@pytest.fixture(scope="module")
def pair():
    src = make_humanoid()
    tgt = make_humanoid(scale=0.8, girth=1.6, leg=0.8, name="tgt")
    m = walk_motion(src, frames=40, clap=True)
    ratio = tgt.skeleton.rest_global[0, 2, 3] / src.skeleton.rest_global[0, 2, 3]
    init = Motion(m.rotations.copy(), m.locations * ratio, m.fps)
    return src, m, tgt, init


@pytest.fixture(scope="module")
def solved(pair):
    src, m, tgt, init = pair
    job = SolveJob(src, m, tgt, init, SolverSettings(**FAST))
    progress = list(job.steps())
    return job, progress


def test_presets_and_weights():
    fast, best = SolverSettings.preset("fast"), SolverSettings.preset("best")
    assert fast.iterations < SolverSettings().iterations < best.iterations
    assert SolverSettings.preset("fast", iterations=7).iterations == 7
    assert SolverSettings(w_sem=2.0, w_dist=3.0).weight("dist") == 6.0
    assert SolverSettings(w_sem=2.0, w_reg=3.0).weight("reg") == 3.0
    with pytest.raises(CoreError, match="preset"):
        SolverSettings.preset("ultra")
    with pytest.raises(CoreError, match="Unknown solver settings lock_cap, smooth_mode: use w_reg"):
        SolverSettings.preset("fast", smooth_mode="added", lock_cap=0.008, w_pen=1.0)
    with pytest.raises(CoreError, match="Unknown solver settings dtype, terrain: use w_reg"):   # the solve's input
        SolverSettings.preset("balanced", terrain=None, dtype="float64")                      # and a constant now


def test_bspline_basis_partition_of_unity():
    B = bspline_basis(50, 3.0)
    assert B.shape == (50, int(49 // 3) + 4)
    np.testing.assert_allclose(B.sum(1), 1.0)
    assert np.array_equal(bspline_basis(10, 1.0), np.eye(10))


@pytest.mark.slow
def test_progress_stream(solved):
    job, progress = solved
    assert [p.step for p in progress] == list(range(30))
    assert progress[-1].fraction == 1.0 and all(p.total == 30 for p in progress)
    assert all(np.isfinite(p.loss) and set(p.terms) >= set(SEMANTIC_TERMS) for p in progress)
    assert job.stats["frames_per_s"] > 0


def _semantic_at_alpha_0(job) -> tuple:
    """({term: value} at copy-rotations (step 0, α = 0), {term: value} of the result at α = 0)."""
    with torch.no_grad():
        final = {k: float(v) for k, v in job.weighted_terms(alpha=0.0, pairset=job.objective.pairs.build(None)).items()}
    return job.history[0], final


@pytest.mark.slow
def test_semantic_terms_decrease(pair, solved):
    """The paper's objective (no contact state, no self barrier: the barrier is reported inside 'pen' and starts at
    0, docs/solver.md "Pair terms"): every semantic term ends below copy-rotations'. With the contact state
    (the default), which trades L_dir and L_pen for the source's contacts and gaps on this wide target
    (docs/solver.md "Pair terms: the contact state"), their sum does, and L_dist with the state in it."""
    src, m, tgt, init = pair
    paper = SolveJob(src, m, tgt, init, SolverSettings(**FAST, contact_state=0.0, w_self_barrier=0.0))
    paper.run()
    first, final = _semantic_at_alpha_0(paper)
    for k in SEMANTIC_TERMS:
        assert final[k] < first[k], (k, first[k], final[k])
    first, final = _semantic_at_alpha_0(solved[0])
    assert sum(final[k] for k in SEMANTIC_TERMS) < sum(first[k] for k in SEMANTIC_TERMS)
    assert final["dist"] < first["dist"]


@pytest.mark.slow
def test_result_channels(pair, solved):
    src, m, tgt, init = pair
    job, _ = solved
    res = job.result()
    assert res.rotations.shape == init.rotations.shape
    np.testing.assert_allclose(np.linalg.norm(res.rotations, axis=-1), 1.0, atol=1e-6)
    assert np.all((res.rotations[1:] * res.rotations[:-1]).sum(-1) >= 0)   # sign-continuous
    others = [j for j in range(tgt.skeleton.num_bones) if j != job.root_idx]
    np.testing.assert_array_equal(res.locations[:, others], init.locations[:, others])
    assert not np.allclose(res.rotations, init.rotations)


@pytest.mark.slow
def test_deterministic(pair, solved):
    src, m, tgt, init = pair
    job2 = SolveJob(src, m, tgt, init, SolverSettings(**FAST))
    np.testing.assert_array_equal(job2.run().rotations, solved[0].result().rotations)


def test_the_gpu_switch_keeps_new_tensors_unfilled_and_restores_torchs_settings(monkeypatch):
    """``deterministic`` on a GPU: torch's deterministic algorithms on, its NaN fill of every new tensor off (a
    third of a GPU step's kernel launches, docs/solver.md "GPU"), both as they were afterwards, also after an
    error; on the CPU, or with ``optim.DETERMINISTIC`` patched off, nothing is set. The device is only named:
    entering the switch needs no GPU."""
    import torch.utils.deterministic as torch_det

    from core.solver import optim
    from core.solver.optim import deterministic
    state = lambda: (torch.are_deterministic_algorithms_enabled(), torch_det.fill_uninitialized_memory)  # noqa: E731
    before = state()
    assert before == (False, True) and optim.DETERMINISTIC is True      # torch's defaults; the product's
    with deterministic("cpu"):
        assert state() == before
    with deterministic("cuda"):
        assert state() == (True, False)
    assert state() == before
    with pytest.raises(RuntimeError, match="inside"):
        with deterministic("cuda:0"):
            raise RuntimeError("inside")
    assert state() == before
    monkeypatch.setattr(optim, "DETERMINISTIC", False)
    with deterministic("cuda"):
        assert state() == before


#: a self-retarget's terms are ~0 at the start, yet Adam's first steps move the pose a little before the terms
#: bring it back: it is judged after the balanced preset's 120 steps (after 60 the firm contact state and self
#: barrier, which hold a hand on either side of a bound rather than bring it back, can still leave it over 3°)
SELF = dict(FAST, iterations=120)


@pytest.mark.slow
def test_self_retarget_returns_the_source(pair):
    src, m, _, _ = pair
    job = SolveJob(src, m, src, m, SolverSettings(**SELF))
    res = job.run()
    p_src = job.objective.src_p
    with torch.no_grad():
        p_res, _, _ = job._forward()
    assert float((p_res - p_src).norm(dim=-1).max()) < 0.01 * src.height
    ang = 2 * np.degrees(np.arccos(np.clip(np.abs((res.rotations * m.rotations).sum(-1)), 0, 1)))
    assert ang.max() < 3.0


def test_reg_reads_past_the_hips_horizontal_path_and_past_their_height_only_when_untied(pair, monkeypatch):
    """L_reg measures the key vertices past the hips' offset from copy-rotations: its horizontal part always (the hips'
    path is free), its height only with ``objective.REG_TIES_HIPS_HEIGHT`` False (docs/decisions.md "L_reg ties the
    hips' height to copy-rotations'"). The clip moved as one by the hips' offset then costs nothing; moved up with the
    height tied, it costs what its key vertices moved."""
    src, m, tgt, init = pair
    for ties in (True, False):
        monkeypatch.setattr(objective_module, "REG_TIES_HIPS_HEIGHT", ties)
        job = SolveJob(src, m, tgt, init, SolverSettings(**FAST))
        job.setup()
        T, dt = job.p_init.shape[0], job.p_init.dtype
        for offset, free in (([0.1, -0.2, 0.0], True), ([0.0, 0.0, 0.05], not ties)):
            off = torch.tensor(offset, dtype=dt).expand(T, 3)
            reg = float(job.objective.dense_terms(job.p_init + off[:, None], 0.0, None, off)["reg"])
            assert (reg < 1e-9) == free, (ties, offset, reg)


@pytest.mark.slow
def test_foot_contact_self_retarget_and_grounding(pair):
    """foot contact (foot_contact_weight > 0): a self-retarget still returns the source; onto another body, the
    lowest sole point of a foot the source has grounded ends at the source's height (scaled), not at its key
    vertices' heights."""
    src, m, tgt, init = pair
    job = SolveJob(src, m, src, m, SolverSettings(**SELF, foot_contact_weight=2.0))
    res = job.run()
    assert job.feet.contact_w is not None and float(job.feet.contact_w.sum()) > 0
    ang = 2 * np.degrees(np.arccos(np.clip(np.abs((res.rotations * m.rotations).sum(-1)), 0, 1)))
    assert ang.max() < 3.0
    job = SolveJob(src, m, tgt, init, SolverSettings(**FAST, foot_contact_weight=2.0))
    job.run()
    feet = job.feet
    with torch.no_grad():
        _, _, sole = job._forward()
        lows = feet.sole_lows(sole)
        lows0 = feet.sole_lows(job.sole_init)
    g = feet.contact_w > 0.99
    err = (lows - feet.contact_h).abs()[g]
    assert float(err.median()) < 0.01 * tgt.height
    assert float(err.median()) <= float((lows0 - feet.contact_h).abs()[g].median()) + 1e-6


def test_cancel_between_steps(pair):
    src, m, tgt, init = pair
    job = SolveJob(src, m, tgt, init, SolverSettings(**FAST))
    seen = []
    for p in job.steps():
        seen.append(p.step)
        if p.step == 2:
            threading.Thread(target=job.cancel).start()
            threading.Event().wait(0.05)
    assert seen == [0, 1, 2] and job.cancelled and not job.done
    with pytest.raises(CoreError, match="cancelled"):
        job.result()


@pytest.mark.slow
def test_warm_start_reproduces_previous_result(pair, solved):
    src, m, tgt, init = pair
    prev = solved[0].result()
    job = SolveJob(src, m, tgt, init, SolverSettings(**FAST), warm_start=prev, warm_schedule=WarmSchedule(0.2, 0.3))
    assert job.total == 6
    list(job.prepare())
    with torch.no_grad():
        p_ws, _, _ = job._forward()
        p_prev, _, _ = solved[0]._forward()
    # the B-spline control fit of the previous rotations alone (their orthonormal 6D columns, made consistent
    # with Gram-Schmidt by parametrisation.refit_rotations): within a couple of millimetres
    assert float((p_ws - p_prev).norm(dim=-1).max()) < 2e-3
    # with the previous solve's own 6D vectors (SolveJob.result_sixd): the same controls, exactly
    exact = SolveJob(src, m, tgt, init, SolverSettings(**FAST), warm_start=prev, warm_sixd=solved[0].result_sixd(),
                     warm_schedule=WarmSchedule(0.2, 0.3))
    list(exact.prepare())
    with torch.no_grad():
        p_ex, _, _ = exact._forward()
    assert float((p_ex - p_prev).norm(dim=-1).max()) < 1e-5
    np.testing.assert_allclose(exact.param.sixd_frames(), solved[0].result_sixd(), atol=1e-6)
    with pytest.raises(CoreError, match="another solve"):
        list(SolveJob(src, m, tgt, init, SolverSettings(**FAST), warm_start=prev,
                      warm_sixd=solved[0].result_sixd()[:, 1:]).prepare())


def test_a_resolve_continuing_the_optimiser_stays_at_its_optimum(pair, solved):
    """Re-solve with unchanged weights from the last result: continuing the last solve's Adam (``warm_state``, full
    learning rates, ``continue_schedule``'s share of the steps) stays where it starts; a fresh Adam at the same rates
    takes learning-rate-sized steps away from it. A state whose variables differ is not taken: the re-solve then
    follows ``warm_schedule``."""
    from core.solver.optim import Adam
    src, m, tgt, init = pair
    first = solved[0]
    prev, sixd = first.result(), first.result_sixd()
    ends = {}
    for state in (True, False):
        s = SolverSettings(**FAST)
        job = SolveJob(src, m, tgt, init, s, warm_start=prev, warm_sixd=sixd,
                       warm_state=first.optim if state else None, warm_schedule=WarmSchedule(steps=0.2, lr=1.0),
                       continue_schedule=WarmSchedule(steps=0.2, lr=1.0))
        rel = [p.relative for p in job.steps()]
        assert job.total == len(rel) == 6 and job.stats["continued_state"] == state
        ends[state] = (rel[0], rel[-1])
        if state:
            assert job.optim.t == first.optim.t + 6 and job.base_lrs == [s.lr_rot, s.lr_root]
    start, end = ends[True]
    assert end <= start * 1.05                                   # continued: at its optimum still
    assert ends[False][1] > end + 0.02 * start                   # fresh at full rates: it leaves it
    other = Adam([torch.zeros(3)], [0.1])
    job = SolveJob(src, m, tgt, init, SolverSettings(**FAST), warm_start=prev, warm_state=other,
                   warm_schedule=WarmSchedule(steps=0.1, lr=0.3), continue_schedule=WarmSchedule(steps=0.5, lr=1.0))
    list(job.prepare())
    assert not job.stats["continued_state"] and job.total == 3 and job.optim.t == 0
    assert job.base_lrs == pytest.approx([0.3 * job.settings.lr_rot, 0.3 * job.settings.lr_root])


def test_a_resolve_continuing_the_first_solves_set_up_is_the_resolve_with_a_new_one(pair, solved):
    """core.solver.continued: a re-solve with other per-part weights continues the finished solve's set-up and
    optimiser, and takes the steps a new SolveJob warm-started from its result takes (to float32 round-off: the
    new one fits the result back into control points); the first solve's result stays as it was. Any other
    setting, another start or terrain, or an unfinished solve: a new set-up."""
    from dataclasses import replace

    from core.solver.continued import can_continue, continued, solve_job
    src, m, tgt, init = pair
    first = solved[0]
    before = first.result()
    s = replace(first.settings, part_weights={("left_leg", "sliding"): 2.0, ("right_hand", "dist"): 0.5})
    share = WarmSchedule(steps=0.2, lr=1.0)
    assert can_continue(first, s, src, m, tgt, init)
    fast = solve_job(src, m, tgt, init, s, first.source_track, before, first.result_sixd(), first.optim, first,
                     continue_schedule=share)
    assert fast.stats["setup_reused"] and fast.objective is not first.objective
    new = SolveJob(src, m, tgt, init, s, warm_start=before, warm_sixd=first.result_sixd(), warm_state=first.optim,
                   continue_schedule=share)
    got, want = [p.total for p in fast.steps()], [p.total for p in new.steps()]
    assert len(got) == len(want) == 6 and fast.stats["continued_state"] and fast.optim.t == first.optim.t + 6
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert fast.start_loss == pytest.approx(new.start_loss, rel=1e-6)
    for k in fast.objective.scales:
        assert float(fast.objective.scales[k]) == pytest.approx(float(new.objective.scales[k]), rel=1e-5), k
    a, b = fast.result(), new.result()
    angle = 2 * np.degrees(np.arccos(np.clip(np.abs((a.rotations * b.rotations).sum(-1)), 0, 1)))
    assert angle.max() < 0.01 and np.abs(a.locations - b.locations).max() < 1e-5
    assert not np.allclose(a.rotations, before.rotations)                 # the weights moved it
    np.testing.assert_array_equal(first.result().rotations, before.rotations)   # the first solve's is kept
    assert solved[0].objective.vertex_scale["sliding"] is None               # and so are its weights
    assert not can_continue(first, replace(s, w_dist=s.w_dist + 1.0), src, m, tgt, init)
    moved = Motion(init.rotations, init.locations + 0.01, init.fps, init.frame_start)
    assert not can_continue(first, s, src, m, tgt, moved)
    assert not can_continue(first, s, src, m, tgt, init, terrain=lambda x, y: 0.0 * x)       # another ground
    assert not can_continue(new.__class__(src, m, tgt, init, s), s, src, m, tgt, init)      # not finished
    other = solve_job(src, m, tgt, init, replace(s, w_dist=s.w_dist + 1.0), first.source_track, before, first.result_sixd(),
                      first.optim, first, continue_schedule=share)
    assert not other._ready and "setup_reused" not in other.stats
    assert continued(first, s).param.delta is not first.param.delta


def test_a_retarget_on_a_terrain_hands_it_to_the_solve_and_its_re_solve_keeps_it(pair):
    """``RetargetOptions.ground`` reaches the solve as its input (``SolveJob(terrain=...)``: the start put onto it,
    the height terms reading it), not as a setting. The panel's re-solve (the first solve's terrain and optimiser,
    a ``continue_schedule``) solves on the same terrain for that share of the steps; the first solve's set-up is
    continued only on the same terrain object."""
    from dataclasses import replace

    from core.pipeline.retarget import Retarget, RetargetOptions, run
    from core.solver.continued import can_continue
    src, m, tgt, _ = pair

    def slope(x, y):                   # a 5 % ramp along y
        return 0.05 * y
    opts = RetargetOptions(settings=SolverSettings(**FAST), ground=slope, metrics=False, conflicts=False)
    first = run(Retarget(src, m, tgt, opts))
    job = first.job
    assert first.terrain is job.terrain is slope and job.objective.ground is slope and job.feet.ground is slope
    assert "terrain_lift_range_m" in job.stats
    flat = run(Retarget(src, m, tgt, replace(opts, ground=None)))
    assert flat.job.terrain is None and flat.job.objective.ground == 0.0
    assert not np.allclose(flat.motion.locations, first.motion.locations)
    settings = replace(opts.settings, part_weights={("left_leg", "sliding"): 2.0})
    again = replace(opts, settings=settings, init_motion=first.init_motion, warm_start=first.motion,
                    warm_sixd=job.result_sixd(), warm_state=job.optim, warm_job=job, ground=first.terrain,
                    continue_schedule=WarmSchedule(steps=0.1, lr=1.0))
    re = run(Retarget(first.source, m, first.target, again, source_track=first.source_track))
    assert re.job.terrain is slope and re.job.stats["continued_state"] and re.job.total == 3
    assert can_continue(job, settings, src, m, tgt, job.init_motion, slope)
    assert not can_continue(job, settings, src, m, tgt, job.init_motion, lambda x, y: 0.05 * y)


def test_a_warm_start_may_take_smaller_steps(pair, solved):
    src, m, tgt, init = pair
    prev = solved[0].result()
    lrs = {}
    for scale in (1.0, 0.1):
        job = SolveJob(src, m, tgt, init, SolverSettings(**FAST), warm_start=prev,
                       warm_schedule=WarmSchedule(0.3, scale))
        list(job.prepare())
        lrs[scale] = job.base_lrs
    np.testing.assert_allclose(lrs[0.1], [0.1 * v for v in lrs[1.0]])
    cold = SolveJob(src, m, tgt, init, SolverSettings(**FAST), warm_schedule=WarmSchedule(0.3, 0.1))
    list(cold.prepare())
    assert cold.base_lrs == lrs[1.0]                     # a solve from copy-rotations keeps its rates


def test_source_ground_estimate(pair):
    src, m, _, _ = pair
    g0 = estimate_ground(ClipTrack(src, m))
    lifted = Motion(m.rotations, m.locations.copy(), m.fps)
    hips = src.skeleton.index("hips")
    lifted.locations[:, hips] += np.array([0.0, 0.0, 0.2]) @ src.skeleton.rest_local[hips, :3, :3]
    assert estimate_ground(ClipTrack(src, lifted)) == pytest.approx(g0 + 0.2, abs=1e-6)
    assert abs(g0) < 0.02


def test_bad_inputs(pair):
    src, m, tgt, init = pair
    with pytest.raises(CoreError, match="frames"):
        SolveJob(src, m, tgt, init.slice(0, 10))
    with pytest.raises(CoreError, match="bone channels"):
        SolveJob(src, m, tgt, Motion.rest(40, 3))


@pytest.mark.slow
def test_fast_chain_matches_the_generic_rig(pair, solved):
    """The per-step FK/LBS (only variable bones, constants folded) equals the generic key-vertex rig."""
    job, _ = solved
    init = pair[3]
    chain = job.chain
    with torch.no_grad():
        p, n, _ = job._forward()
        d, off = job.param.frame_residuals()
        R, loc_root = job.param.rotations(d), job.param.root_location(off)
        opt = torch.as_tensor([chain.position[j] for j in job.opt_idx])
        rot = quat_to_matrix(torch.as_tensor(init.rotations[:, chain.needed], dtype=R.dtype)).index_copy(1, opt, R)
        loc = torch.as_tensor(init.locations[:, chain.needed], dtype=R.dtype)
        loc = loc.index_copy(1, torch.as_tensor([chain.position[job.root_idx]]), loc_root[:, None])
        p2, n2 = chain.vertices_needed(rot, loc)
        p2, n2 = p2[:, :job.num_keyverts], n2[:, :job.num_keyverts]
    assert float((p - job.p_init).norm(dim=-1).max()) > 1e-3      # the solve moved something
    assert float((p - p2).abs().max()) < 1e-5 and float((n - n2).abs().max()) < 1e-5


def test_root_init_from_feet_reduces_initial_sliding(pair, monkeypatch):
    """Starting the root where the source's planted feet stay put (ROOT_FROM_FEET, the default) lowers L_sliding
    before the first step against copy-rotations' root."""
    src, m, tgt, init = pair
    first = {}
    for feet in (False, True):
        monkeypatch.setattr(job_module, "ROOT_FROM_FEET", feet)
        job = SolveJob(src, m, tgt, init, SolverSettings(**dict(FAST, iterations=1)))
        progress = list(job.steps())
        first[feet] = progress[0].terms["sliding"]
    assert job.stats["root_init_shift_max_m"] > 0.0
    assert first[True] < 0.9 * first[False], first


def test_the_foot_lock_reads_the_source_feet_at_the_foot_locked_metrics_speed(pair, monkeypatch):
    """The lock's source velocity is that of each frame's lowest foot vertex, the foot point the foot-locked metric
    follows (docs/metrics.md), not of the lowest of the sparse sole points: the two differ where a foot rolls
    (three sole points a foot here, so that they do)."""
    from core.metrics.measures import foot_speed_windowed, measure
    src, m, tgt, init = pair
    monkeypatch.setattr(footing, "SOLE_POINTS", 3)
    job = SolveJob(src, m, tgt, init, SolverSettings(**dict(FAST, iterations=1)))
    list(job.steps())
    ratio = job.h_tgt / job.h_src
    lock_speed = np.linalg.norm(job.feet.lock_vel.numpy(), axis=-1) / ratio                 # (T, 2)
    metric = foot_speed_windowed(measure(job.source_track, job.source_ground_level), job.fps).T
    np.testing.assert_allclose(lock_speed, metric, rtol=1e-5, atol=1e-7)
    assert metric.max() > 0.1                                                                # the feet do move


def test_the_speed_cap_holds_where_the_source_foot_has_a_lock_weight(monkeypatch):
    """LOCK_CAP: on the frames whose source foot is near its floor and under the lock band's top (1 % h/s), with
    the lock weight's complement (it takes over where the velocity match fades), no others; the cap is a share of
    the target's height per second."""
    h_src, h_tgt = 2.0, 1.0
    speed = np.array([0.0, 0.004, 0.008, 0.02, 0.0]) * h_src                      # left foot, m/s
    vel = np.zeros((5, 2, 2))
    vel[:, 0, 0] = speed
    vel[:, 1, 0] = 0.02 * h_src                                                   # the right foot walks
    low = np.zeros((5, 2))
    low[4, 0] = 0.5 * h_src                                                       # still, but far above its floor
    monkeypatch.setattr(footing, "LOCK_CAP", 0.009)
    feet = FootModel(SolverSettings(), low, vel, np.array([0, 1]), np.array([-1]), h_src, h_tgt,
                     h_tgt / h_src, 30.0, torch.float64, "cpu")
    np.testing.assert_allclose(feet.lock_w.numpy()[:, 0], [1.0, 1.0, 0.4, 0.0, 0.0])
    np.testing.assert_allclose(feet.cap_w.numpy(), [[0, 0], [0, 0], [0.6, 0], [0, 0], [0, 0]])
    assert feet.cap == pytest.approx(0.009 * h_tgt)
    monkeypatch.setattr(footing, "LOCK_CAP", 0.0)
    assert FootModel(SolverSettings(), low, vel, np.array([0, 1]), np.array([-1]), h_src, h_tgt, 0.5,
                     30.0, torch.float64, "cpu").cap_w is None                  # 0 turns it off


def test_the_speed_caps_share_is_left_out_of_the_lock_terms_scale():
    """The lock term's reference scale is its initial velocity match alone: the cap's initial share (a copy-rotations
    foot sliding past the cap) is measured at set-up and taken off, so the cap adds to the match, not dilutes it."""
    h, T = 1.0, 12
    vel = np.zeros((T, 2, 2))
    vel[:, 0, 0] = 0.007 * h                                          # left: in the lock band's fade, λ = 0.6
    vel[:, 1, 0] = 0.02 * h                                           # right: walking, no lock weight
    assert footing.LOCK_CAP == 0.008
    feet = FootModel(SolverSettings(foot_contact_weight=0.0), np.zeros((T, 2)), vel, np.array([0, 1]),
                     np.array([-1]), h, h, 1.0, 30.0, torch.float64, "cpu")
    sole = torch.zeros((T, 2, 3), dtype=torch.float64)
    sole[:, 0, 0] = 0.05 * torch.arange(T, dtype=torch.float64) / 30.0   # the target's left sole slides 5 % h/s
    feet.set_initial(None, sole)
    with torch.no_grad():
        full, match = float(feet.lock_loss(sole)), float(feet.lock_terms(sole)[0])
    assert feet.cap_init == pytest.approx(full - match) and feet.cap_init > 0.1 * match
    assert feet.lock_scale(full) == pytest.approx(match)


def test_lock_loss_by_hand():
    """L_lock = Σ lock weight × |windowed velocity − source velocity|² over sole points near the foot's lowest."""
    from types import SimpleNamespace
    job = SimpleNamespace(h_tgt=1.0, ground=0.0, fps=10.0)
    job.sole_side = torch.tensor([0, 0, 1])
    job.sole_lows = lambda sole, hs=None: FootModel.sole_lows(job, sole, hs)
    job.lock_terms = lambda sole, hs=None, lows=None: FootModel.lock_terms(job, sole, hs, lows)
    T = 3
    job._lock_lo, job._lock_hi = torch.tensor([0, 0, 1]), torch.tensor([1, 2, 2])
    job._lock_dt = (job._lock_hi - job._lock_lo).double() / job.fps                  # 0.1, 0.2, 0.1 s
    job.lock_w = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.5, 1.0]], dtype=torch.float64)
    job.lock_vel = torch.zeros((T, 2, 2), dtype=torch.float64)
    job.lock_vel[:, 1, 0] = 0.1                                                       # right foot: 0.1 m/s in x
    sole = torch.zeros((T, 3, 3), dtype=torch.float64)
    sole[:, 0, 0] = torch.tensor([0.0, 0.01, 0.02])     # left sole point 0 slides 0.1 m/s on the floor
    sole[:, 1, 2] = 0.5                                  # left point 1 is 0.5 m up: not carrying the foot
    sole[:, 1, 0] = torch.tensor([0.0, 1.0, 2.0])
    sole[:, 2, 0] = torch.tensor([0.0, 0.01, 0.02])     # right point moves as its source: no cost
    job.cap_w = None
    got = float(FootModel.lock_loss(job, sole))
    assert got == pytest.approx(1.0 * 0.01 + 1.0 * 0.01 + 0.5 * 0.01, rel=1e-6)
    # LOCK_CAP: where the source foot is locked (cap_w), a carrying point faster than the cap pays (speed − cap)²
    job.cap_w = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    job.cap = 0.05                                                                    # m/s
    capped = float(FootModel.lock_loss(job, sole))
    assert capped - got == pytest.approx(3 * 0.05 ** 2 + 1 * 0.05 ** 2, rel=1e-5)       # left 3 frames, right 1


@pytest.mark.parametrize("alpha", [0.3, 0.8])
def test_progress_yardstick_is_copy_rotations_objective_at_the_same_alpha(pair, alpha):
    """Progress.relative divides by copy-rotations' objective at the step's α: the parabola through α = 0, ½, 1
    equals that objective evaluated directly at any α (the squared weights make it quadratic, not linear)."""
    from core.solver.objective import start_objective
    src, m, tgt, init = pair
    job = SolveJob(src, m, tgt, init, SolverSettings(**FAST))
    job.setup()
    ob = job.objective
    with torch.no_grad():
        zero = torch.zeros((job.num_frames, 3), dtype=job.dtype)
        raw = ob.raw_terms(job.p_init, job.n_init, alpha, ob.pairs.active(job.p_init, alpha), job.sole_init, zero,
                           body=job.body_init)
        direct = float(sum(ob.weighted(raw).values()))
    s0, sh, s1 = job.start_loss
    linear = s0 + alpha * (s1 - s0)
    assert start_objective(job.start_loss, alpha) == pytest.approx(direct, rel=1e-4)
    assert abs(linear - direct) > 1e-3 * direct, "the case must tell the parabola from the straight line"
    assert start_objective(job.start_loss, 0.0) == pytest.approx(s0) and start_objective(job.start_loss, 1.0) == \
        pytest.approx(s1)


def test_pair_terms_scaled_leave_a_scaled_copy_at_rest(monkeypatch):
    """A character retargeted onto a copy of itself 1.3 times bigger: copy-rotations is the source scaled, so
    with SCALE_PAIR_TERMS (the default) its pair terms are already zero; compared raw (the paper's form) they are
    not."""
    src = make_humanoid()
    big = make_humanoid(scale=1.3, name="big")
    m = walk_motion(src, frames=20, clap=True)
    init = Motion(m.rotations.copy(), m.locations * 1.3, m.fps)
    terms = {}
    for scale in (False, True):
        monkeypatch.setattr(objective_module, "SCALE_PAIR_TERMS", scale)
        job = SolveJob(src, m, big, init, SolverSettings(iterations=2, num_threads=2))
        job.setup()
        ob = job.objective
        zero = torch.zeros((job.num_frames, 3), dtype=job.dtype)
        with torch.no_grad():
            terms[scale] = ob.raw_terms(job.p_init, job.n_init, 0.0, ob.init_pairs, job.sole_init, zero)
        assert len(ob.init_pairs) > 0
    h = float(big.height)
    assert float(terms[False]["dist"]) > 1e-4 * h ** 2
    assert float(terms[True]["dist"]) < 1e-6 * float(terms[False]["dist"])
    assert float(terms[True]["pen"]) < 1e-6 * float(terms[False]["pen"])


def _jobs_at_0_and_2(pair, setting: str, monkeypatch=None, **others):
    """The jobs of ``pair`` set up with ``setting`` at 0 and at 2 (and ``others``): a SolverSettings field, or with
    ``monkeypatch`` a constant of core.solver.objective (read at the set-up)."""
    src, m, tgt, init = pair
    jobs = []
    for w in (0.0, 2.0):
        if monkeypatch is None:
            job = SolveJob(src, m, tgt, init, SolverSettings(**FAST, **others, **{setting: w}))
        else:
            monkeypatch.setattr(objective_module, setting, w)
            job = SolveJob(src, m, tgt, init, SolverSettings(**FAST, **others))
        job.setup()
        jobs.append(job)
    return jobs


def _objectives_at_0_and_2(pair, setting: str, monkeypatch=None):
    """The objectives of ``pair`` set up with ``setting`` at 0 and at 2, and (p, n, sole) of copy-rotations."""
    job0, job2 = _jobs_at_0_and_2(pair, setting, monkeypatch)
    return job0.objective, job2.objective, (job2.p_init, job2.n_init, job2.sole_init)


def test_smooth_soles_adds_the_sole_points_added_jerk(pair, monkeypatch):
    """L_smooth with SMOOTH_SOLES w: the key vertices' added jerk plus w × the sole points' (smooth_loss against
    their copy-rotations jerk). At the start it adds (almost) nothing; one sole point kicked at one frame adds
    exactly w × that point's added-jerk sum."""
    from core.solver.losses import jerk, smooth_loss
    ob0, ob2, (p, n, sole) = _objectives_at_0_and_2(pair, "SMOOTH_SOLES", monkeypatch)
    assert sole is not None and sole.shape[1] > 0
    zero = torch.zeros((p.shape[0], 3), dtype=p.dtype)
    kicked = sole.clone()
    kicked[10, 0, 2] += 0.02                                      # 2 cm up at one frame
    ps = ob2.pairs.active(None, 0.0)
    eps = 1e-5 * ob2.fps ** 3
    for s_in, extra in ((sole, smooth_loss(sole, ob2.fps, None, eps=eps, reference=jerk(sole, ob2.fps))),
                        (kicked, smooth_loss(kicked, ob2.fps, None, eps=eps, reference=jerk(sole, ob2.fps)))):
        with torch.no_grad():
            a = float(ob0.raw_terms(p, n, 0.0, ps, s_in, zero)["smooth"])
            b = float(ob2.raw_terms(p, n, 0.0, ps, s_in, zero)["smooth"])
        assert b - a == pytest.approx(2.0 * float(extra), rel=1e-4)
    assert float(extra) > 100.0 * eps * sole.shape[1]                # the kick is far above the ε floor


def test_smooth_root_adds_the_hips_added_jerk_once_per_point(pair, monkeypatch):
    """L_smooth with SMOOTH_ROOT w: w × (key vertices + sole points) × the hips offset's jerk (its offset from
    copy-rotations moves every point with it). Without an offset it adds only the ε floor; the hips moved 2 cm
    at one frame add exactly that much, and nothing when w is 0."""
    from core.solver.losses import smooth_loss
    ob0, ob2, (p, n, sole) = _objectives_at_0_and_2(pair, "SMOOTH_ROOT", monkeypatch)
    points = p.shape[1] + (0 if sole is None else sole.shape[1])
    zero = torch.zeros((p.shape[0], 3), dtype=p.dtype)
    kicked = zero.clone()
    kicked[10, 2] = 0.02                                          # the hips 2 cm up at one frame
    ps = ob2.pairs.active(None, 0.0)
    eps = 1e-5 * ob2.fps ** 3
    for root in (zero, kicked):
        extra = smooth_loss(root[:, None, :], ob2.fps, None, eps=eps)
        with torch.no_grad():
            a = float(ob0.raw_terms(p, n, 0.0, ps, sole, root)["smooth"])
            b = float(ob2.raw_terms(p, n, 0.0, ps, sole, root)["smooth"])
        assert b - a == pytest.approx(2.0 * points * float(extra), rel=1e-4)
    assert float(extra) > 100.0 * eps                              # the kick is far above the ε floor
    with torch.no_grad():                                          # the hips' jerk is not in L_smooth at w = 0
        assert float(ob0.raw_terms(p, n, 0.0, ps, sole, kicked)["smooth"]) == pytest.approx(
            float(ob0.raw_terms(p, n, 0.0, ps, sole, zero)["smooth"]), rel=1e-6)


def test_the_cpu_never_records_a_cuda_graph(solved):
    job, _ = solved
    assert job._pose is None and job.stats["cuda_graph"] is False


def test_a_solve_through_the_graphed_pose_is_the_eager_solve(pair, solved, monkeypatch):
    """Recording needs a GPU (`make bench`'s GPU section compares graph and eager there, bit for bit); here the
    plumbing around it runs with the recording replaced by the function itself: the pose map and the dense
    terms at α come from it (``terms_at`` takes them instead of evaluating them again), the same solve."""
    from core.solver.graphed import GraphedPose
    monkeypatch.setattr(torch.cuda, "make_graphed_callables", lambda fn, sample: fn)
    src, m, tgt, init = pair
    job = SolveJob(src, m, tgt, init, SolverSettings(**FAST))
    job.setup()
    job._pose = GraphedPose(job)
    first = job._pose(*job.param.params)
    again = job._pose(*job.param.params, alpha=0.5)
    assert len(first) == 5 and first[3] is not None and first[4] is None      # off, positions, normals, body points
    assert {"reg", "smooth", "height", "floor", "sliding"} <= set(again[4])   # and at α the dense terms
    assert all(a.data_ptr() != b.data_ptr() for a, b in zip(first[:4], again[:4]))  # copies: a kept tensor stays
    taken, raw_terms = [], job.objective.raw_terms

    def spy(*args, **kw):
        taken.append(args[-1] is not None)                                      # the dense terms handed over
        return raw_terms(*args, **kw)
    monkeypatch.setattr(job.objective, "raw_terms", spy)
    res = job.run()
    assert len(taken) == FAST["iterations"] and all(taken)
    np.testing.assert_array_equal(res.rotations, solved[0].result().rotations)
    np.testing.assert_array_equal(res.locations, solved[0].result().locations)


def test_a_graph_that_cannot_be_recorded_leaves_the_solve_eager(monkeypatch):
    from types import SimpleNamespace

    from core.solver.graphed import graphed_pose

    calls = []

    def refuse(fn, sample):
        calls.append(fn)
        raise RuntimeError("operation not permitted when stream is capturing\nmore")
    monkeypatch.setattr(torch.cuda, "make_graphed_callables", refuse)
    job = SimpleNamespace(settings=SolverSettings(), device=torch.device("cuda"), total=100, stats={},
                          vars=SimpleNamespace(last_points=None), param=SimpleNamespace(params=[torch.zeros(2)]))
    assert graphed_pose(job) is None                # tried with the dense terms, then the pose map alone
    assert job.stats == {"cuda_graph": False,
                         "cuda_graph_error": "operation not permitted when stream is capturing"}
    assert len(calls) == 2
    job.total, job.stats = 5, {}                    # a short solve (a re-solve) is never recorded
    assert graphed_pose(job) is None and job.stats == {"cuda_graph": False} and len(calls) == 2

    def refuse_the_terms(fn, sample):               # the pose map alone can be recorded: it is, and the stats say so
        calls.append(fn)
        if len(calls) == 3:
            raise RuntimeError("operation not permitted when stream is capturing")
        return fn
    monkeypatch.setattr(torch.cuda, "make_graphed_callables", refuse_the_terms)
    job.total, job.stats = 100, {}
    graphed = graphed_pose(job)
    assert graphed is not None and graphed.keys == () and len(calls) == 4
    assert job.stats == {"cuda_graph": True, "cuda_graph_terms": False,
                         "cuda_graph_error": "operation not permitted when stream is capturing"}


def test_the_contact_state_enters_l_dist_on_its_own_scale(pair):
    """contact_state w adds w × the pairs' contact-state loss to L_dist, divided by L_dist's reference scale, which
    it leaves as it was (the balancing reads L_dist alone); at 0 there is no such term."""
    ob0, ob2, (p, n, sole) = _objectives_at_0_and_2(pair, "contact_state")
    assert ob2.scales["dist"] == ob0.scales["dist"]
    zero = torch.zeros((p.shape[0], 3), dtype=p.dtype)
    ps = ob2.pairs.active(p, 1.0)
    moved = p.clone()
    moved[:, :, 0] *= 1.1                                          # every pair 10 % further apart along x
    for q in (p, moved):
        with torch.no_grad():
            raw0, raw2 = ob0.raw_terms(q, n, 1.0, ps, sole, zero), ob2.raw_terms(q, n, 1.0, ps, sole, zero)
        assert "state" not in raw0 and float(raw2["dist"]) == pytest.approx(float(raw0["dist"]), rel=1e-6)
        w = ob2.settings.weight("dist")
        assert float(ob2.weighted(raw2)["dist"]) == pytest.approx(
            w * float(raw2["dist"] + 2.0 * raw2["state"]) / ob2.scales["dist"], rel=1e-5)
    assert float(raw2["state"]) > 0.0                              # the moved pose leaves some pair on the wrong side


def test_the_foot_contact_weight_scales_the_sole_contact_on_the_floor_scale(pair):
    """foot_contact_weight w adds w × the foot-contact match (each grounded foot's lowest sole point against the
    source foot's height) to 'height', on the floor barrier's fixed scale: from w = 1 to w = 2 'height' grows by
    exactly one match. Feet lowered 2 cm make the match (and so the difference) grow. At 0 foot contact is off:
    no match, and every key vertex's raw height is matched again (as the paper does)."""
    src, m, tgt, init = pair
    ob1, ob2 = (SolveJob(src, m, tgt, init, SolverSettings(**FAST, foot_contact_weight=w)) for w in (1.0, 2.0))
    for job in (ob1, ob2):
        job.setup()
    p, n, sole = ob2.p_init, ob2.n_init, ob2.sole_init
    ob1, ob2 = ob1.objective, ob2.objective
    assert ob2.scales == ob1.scales
    zero = torch.zeros((p.shape[0], 3), dtype=p.dtype)
    ps = ob2.pairs.active(p, 1.0)
    lowered = sole.clone()
    lowered[..., 2] -= 0.02
    gaps = []
    for s_in in (sole, lowered):
        with torch.no_grad():
            raw1, raw2 = ob1.raw_terms(p, n, 1.0, ps, s_in, zero), ob2.raw_terms(p, n, 1.0, ps, s_in, zero)
        assert float(raw1["sole_contact"]) == pytest.approx(float(raw2["sole_contact"]), rel=1e-6)
        gap = float(ob2.weighted(raw2)["height"]) - float(ob1.weighted(raw1)["height"])
        w = ob2.settings.weight("height")
        assert gap == pytest.approx(w * float(raw2["sole_contact"]) / ob2.scales["floor"], rel=1e-4, abs=1e-9)
        gaps.append(gap)
    assert gaps[1] > gaps[0] > 0.0
    off = SolveJob(src, m, tgt, init, SolverSettings(**FAST, foot_contact_weight=0.0))
    off.setup()
    with torch.no_grad():
        raw0 = off.objective.raw_terms(off.p_init, off.n_init, 1.0, off.objective.pairs.active(off.p_init, 1.0),
                                       off.sole_init, zero)
    assert "sole_contact" not in raw0 and off.objective.feet.contact_w is None


def test_smooth_joints_adds_the_body_points_added_jerk(pair, monkeypatch):
    """L_smooth with SMOOTH_JOINTS w: w × the body points' (the capsules' ends, at the joints) added jerk against
    copy-rotations'. At the start it adds only the ε floor; one body point kicked at one frame adds exactly w × that
    point's added-jerk sum, and nothing at w = 0."""
    from core.solver.losses import jerk, smooth_loss
    job0, job = _jobs_at_0_and_2(pair, "SMOOTH_JOINTS", monkeypatch, jerk_budget=0.0)     # L_smooth's added-jerk part alone
    ob0, ob2 = job0.objective, job.objective
    p, n, sole, body = job.p_init, job.n_init, job.sole_init, job.body_init[:, :ob2.body_rows]   # the surface
    assert body is not None and body.shape[1] >= 2                    # barrier's points (past body_rows): not read
    zero = torch.zeros((p.shape[0], 3), dtype=p.dtype)
    kicked = body.clone()
    kicked[10, 0, 2] += 0.02                                      # 2 cm up at one frame
    ps = ob2.pairs.active(None, 0.0)
    eps = 1e-5 * ob2.fps ** 3
    for b_in in (body, kicked):
        extra = smooth_loss(b_in, ob2.fps, None, eps=eps, reference=jerk(body, ob2.fps))
        with torch.no_grad():
            a = float(ob0.raw_terms(p, n, 0.0, ps, sole, zero, body=b_in)["smooth"])
            b = float(ob2.raw_terms(p, n, 0.0, ps, sole, zero, body=b_in)["smooth"])
        assert b - a == pytest.approx(2.0 * float(extra), rel=1e-4)
    assert float(extra) > 100.0 * eps * body.shape[1]             # the kick is far above the ε floor
    with torch.no_grad():                                         # not in L_smooth at w = 0
        assert float(ob0.raw_terms(p, n, 0.0, ps, sole, zero, body=kicked)["smooth"]) == pytest.approx(
            float(ob0.raw_terms(p, n, 0.0, ps, sole, zero, body=body)["smooth"]), rel=1e-6)


def test_jerk_budget_charges_only_the_jerk_a_point_adds_in_a_window(pair, monkeypatch):
    """jerk_budget w: w × each point's jerk beyond its budget in each window (its budget: copy-rotations' jerk there,
    plus JERK_BUDGET_SLACK for round-off), the hinge rounded off over JERK_BUDGET_KNEE of the budget. Without
    JERK_BUDGET_SOURCE it adds nothing at copy-rotations (a self-retarget has no push) and a body point kicked at one
    frame adds exactly w × its windows' rounded excess; with it
    (the default) the key vertices' budget is at most the source's own jerk × h_tgt / h_src and the body points'
    at most the source's capsule ends of the same segments, and copy-rotations pays its excess over those, ×
    JERK_BUDGET_CAPPED_GAIN in the windows where the source's cap binds."""
    from core.solver.losses import jerk_totals
    from core.metrics.partners import body_capsules
    from core.solver.objective import JERK_BUDGET_CAPPED_GAIN, JERK_BUDGET_KNEE, JERK_BUDGET_SLACK

    def rounded(e, budget, gain=1.0):  # the hinge by hand: e²/(2k) under k = knee · budget, e − k/2 beyond
        e, k = e.clamp_min(0), JERK_BUDGET_KNEE * budget
        return float((gain * torch.where(e < k, e * e / (2 * k), e - k / 2)).sum())
    src, m, tgt, init = pair
    assert objective_module.JERK_BUDGET_SOURCE                   # the default
    jobs = []
    for budget, source in ((0.0, True), (2.0, False), (2.0, True)):
        monkeypatch.setattr(objective_module, "JERK_BUDGET_SOURCE", source)
        jobs.append(SolveJob(src, m, tgt, init, SolverSettings(**FAST, jerk_budget=budget)))
        jobs[-1].setup()
    ob0, ob2, capped = (job.objective for job in jobs)
    assert ob0.jerk_budgets is None
    p, n, sole, body = jobs[1].p_init, jobs[1].n_init, jobs[1].sole_init, jobs[1].body_init
    assert body is not None
    body = body[:, :jobs[1].objective.body_rows]               # the points L_smooth and the budget read
    zero = torch.zeros((p.shape[0], 3), dtype=p.dtype)
    ps = ob2.pairs.active(None, 0.0)
    eps = 1e-5 * ob2.fps ** 3
    w, slack = ob2.budget_window, 1.0 + JERK_BUDGET_SLACK

    def smooth(ob, b_in):
        with torch.no_grad():
            return float(ob.raw_terms(p, n, 0.0, ps, sole, zero, body=b_in)["smooth"])
    assert smooth(ob2, body) == pytest.approx(smooth(ob0, body), rel=1e-6)
    own, body_own = jerk_totals(p, ob2.fps, w, eps), jerk_totals(body, ob2.fps, w, eps)    # copy-rotations'
    assert torch.allclose(ob2.jerk_budgets[0], own * slack) and torch.allclose(ob2.jerk_budgets[2], body_own * slack)
    kicked = body.clone()
    kicked[10, 0, 2] += 0.02                                      # 2 cm up at one frame
    excess = rounded(jerk_totals(kicked, ob2.fps, w, eps) - body_own * slack, body_own * slack)
    assert excess > 0.0
    assert smooth(ob2, kicked) - smooth(ob0, kicked) == pytest.approx(2.0 * excess, rel=1e-4)
    # the source's caps: its key vertices' jerk, its capsule ends' of the same segments (here every segment; the
    # bulge points have none)
    src_tot = jerk_totals(ob2.src_p, ob2.fps, w, eps) * (ob2.h_tgt / ob2.h_src)
    assert torch.allclose(capped.jerk_budgets[0], torch.minimum(own, src_tot) * slack)
    sb, has = jobs[2].source_body
    rows = jobs[2].objective.body_rows
    sb, has = (sb, has) if rows is None else (sb[:, :rows], has[:rows])
    B = len(body_capsules(tgt).names)
    assert bool(has[:2 * B].all()) and not bool(has[2 * B:].any())
    body_src = jerk_totals(sb, ob2.fps, w, eps) * (ob2.h_tgt / ob2.h_src)
    assert torch.allclose(capped.jerk_budgets[2], torch.where(has, torch.minimum(body_own, body_src), body_own) * slack)
    # the windows the source caps below copy-rotations' weigh JERK_BUDGET_CAPPED_GAIN, the others 1
    assert ob2.jerk_gains is None and JERK_BUDGET_CAPPED_GAIN > 1.0
    for g, b, o in ((capped.jerk_gains[0], capped.jerk_budgets[0], own), (capped.jerk_gains[2], capped.jerk_budgets[2],
                                                                        body_own)):
        binds = b < o * slack * (1 - 1e-3)
        assert bool(binds.any()) and not bool(binds.all())
        assert torch.equal(g, torch.where(binds, JERK_BUDGET_CAPPED_GAIN, 1.0).to(g.dtype))
    over = rounded(own - capped.jerk_budgets[0], capped.jerk_budgets[0], capped.jerk_gains[0]) \
        + rounded(body_own - capped.jerk_budgets[2], capped.jerk_budgets[2], capped.jerk_gains[2])
    assert over > 0.0                                                 # the caps bind somewhere on this pair
    assert smooth(capped, body) - smooth(ob0, body) == pytest.approx(2.0 * over, rel=1e-3)


def test_smooth_joints_has_its_body_points_without_the_self_barrier(pair, monkeypatch):
    """The body points are the self barrier's capsule ends; with the barrier off (w_self_barrier 0) L_smooth's
    joints still read them, and the job has no own barrier."""
    src, m, tgt, init = pair
    monkeypatch.setattr(objective_module, "SMOOTH_JOINTS", 1.0)
    job = SolveJob(src, m, tgt, init, SolverSettings(**FAST, w_self_barrier=0.0))
    job.setup()
    assert job.own_barrier is None and job.body_init is not None
    monkeypatch.setattr(objective_module, "SMOOTH_JOINTS", 0.0)
    off = SolveJob(src, m, tgt, init, SolverSettings(**FAST, w_self_barrier=0.0))
    off.setup()
    assert off.own_barrier is None and off.body_init is None


def test_sole_floor_gain_ramps_the_sole_points_barrier_with_alpha(pair, monkeypatch):
    """SOLE_FLOOR_GAIN G (a constant, 10 by default): the sole points' floor barrier × (1 + (G − 1) α²), the key
    vertices' barrier as it is. Sole points 1 cm under the floor add (G − 1) α² × their barrier at α = 0, ½, 1
    over G = 1, and the objective stays quadratic in α (Progress.relative's yardstick)."""
    from core.descriptors.pose import height
    from core.solver.losses import floor_barrier
    src, m, tgt, init = pair
    job = SolveJob(src, m, tgt, init, SolverSettings(**FAST))
    job.setup()
    ob = job.objective
    p, n = job.p_init, job.n_init
    sunk = job.sole_init.clone()
    sunk[..., 2] -= 0.01
    zero = torch.zeros((p.shape[0], 3), dtype=p.dtype)
    ps = ob.pairs.active(None, 0.0)

    def floor(alpha):
        with torch.no_grad():
            return float(ob.raw_terms(p, n, alpha, ps, sunk, zero)["floor"])
    monkeypatch.setattr(objective_module, "SOLE_FLOOR_GAIN", 1.0)
    before = {a: floor(a) for a in (0.0, 0.5, 1.0)}
    soles = float(floor_barrier(height(sunk, ob.ground)))
    assert soles > 0.0
    monkeypatch.setattr(objective_module, "SOLE_FLOOR_GAIN", 101.0)
    for alpha, gain in ((0.0, 1.0), (0.5, 26.0), (1.0, 101.0)):
        assert floor(alpha) - before[alpha] == pytest.approx((gain - 1.0) * soles, rel=1e-4, abs=1e-9)


def _eager_and_compiled(pair, solved, monkeypatch, compile_fn):
    """The synthetic pair solved eagerly (the ``solved`` fixture) and with ``compile`` on, ``torch.compile`` replaced
    by ``compile_fn``."""
    src, m, tgt, init = pair
    monkeypatch.setattr(torch, "compile", compile_fn)
    job = SolveJob(src, m, tgt, init, SolverSettings(**FAST, compile=True))
    job.run()
    return solved[0], job


def test_the_compiled_pose_evaluates_the_eager_pose_and_terms(pair, solved, monkeypatch):
    """``compile`` on the CPU routes every step's pose and dense terms through one function of the control points
    (what torch.compile compiles; here compiled as itself, so the test needs no C++ compiler): the same solve, to
    float32 rounding (α enters as a tensor). A real compilation is measured by `make bench` (tools/bench/bench_compile.py)."""
    calls = []

    def as_itself(fn, **kw):
        calls.append(kw)
        return fn
    eager, job = _eager_and_compiled(pair, solved, monkeypatch, as_itself)
    assert calls == [{"dynamic": False}] and job.stats["compiled"] is True and "compile_error" not in job.stats
    assert eager.stats["compiled"] is False
    np.testing.assert_allclose(job.result().rotations, eager.result().rotations, atol=1e-4)
    assert [h.keys() for h in job.history] == [h.keys() for h in eager.history]


def test_a_compilation_that_fails_leaves_the_solve_eager(pair, solved, monkeypatch):
    """Without a C++ compiler (or with an operation inductor cannot lower) the compiled call raises: the solve goes
    on eagerly from that step, with the same result, and its stats say why."""
    def failing(fn, **kw):
        def compiled(*a):
            raise RuntimeError("InductorError: CppCompileError: C++ compile error\ncommand failed")
        return compiled
    eager, job = _eager_and_compiled(pair, solved, monkeypatch, failing)
    assert job.stats["compiled"] is False
    assert job.stats["compile_error"] == "RuntimeError: InductorError: CppCompileError: C++ compile error"
    np.testing.assert_allclose(job.result().rotations, eager.result().rotations, atol=1e-4)
