"""core.pipeline.windows: a long clip retargeted as overlapping windows, stitched without seams."""

import numpy as np
import pytest

from core.errors import CoreError
from core.pipeline.retarget import Retarget, RetargetOptions, run
from core.solver import SolverSettings
from core.character.track import ClipTrack
from core.pipeline.windows import WindowedRetarget, WindowPlan, crossfade_weight, retarget_job
from tests.core.synth import make_humanoid, walk_motion


def test_windows_cover_the_clip_and_share_their_overlap():
    plan = WindowPlan(50, 10)
    r = plan.ranges(137)
    assert r[0] == (0, 50) and r[-1] == (87, 137) and len(r) == 4
    assert all(b - a == 50 for a, b in r)
    assert all(a2 < b1 and b1 - a2 >= 10 for (_, b1), (a2, _) in zip(r, r[1:]))   # every seam has ≥ 10 shared
    covered = np.zeros(137, bool)
    for a, b in r:
        covered[a:b] = True
    assert covered.all()
    assert plan.ranges(50) == [(0, 50)] and plan.ranges(7) == [(0, 7)]
    for bad in (WindowPlan(4, 2), WindowPlan(50, 1), WindowPlan(50, 26)):
        with pytest.raises(CoreError):
            bad.ranges(100)


def test_the_crossfade_rises_smoothly_and_symmetrically():
    w = crossfade_weight(40)
    assert np.all(np.diff(w) > 0) and 0 < w[0] < 0.01 and 0.99 < w[-1] < 1
    np.testing.assert_allclose(w + w[::-1], 1.0, atol=1e-12)
    # held at 0 before and 1 after, its third difference (what a blend adds to jerk) is a small fraction of a
    # linear ramp's, whose kinks at both ends are a jerk spike
    def third(x):
        return np.abs(np.diff(np.concatenate([np.zeros(4), x, np.ones(4)]), 3)).max()
    assert third(w) < 0.1 * third((np.arange(40) + 0.5) / 40)


@pytest.fixture(scope="module")
def walk_pair():
    src = make_humanoid()
    tgt = make_humanoid(scale=0.8, girth=1.5, leg=0.75, name="tgt")
    clip = walk_motion(src, frames=150, stride=0.6)
    return src, clip, tgt


def _joint_jerk(character, motion):
    """(T - 3,) largest joint jerk (m/s³) per frame."""
    p = ClipTrack(character, motion).world_positions
    j = (p[3:] - 3 * p[2:-1] + 3 * p[1:-2] - p[:-3]) * motion.fps ** 3
    return np.linalg.norm(j, axis=-1).max(-1)


@pytest.fixture(scope="module")
def windowed(walk_pair):
    src, clip, tgt = walk_pair
    opts = RetargetOptions(settings=SolverSettings.preset("fast"), conflicts=False)
    whole = run(Retarget(src, clip, tgt, opts))
    plan = WindowPlan(60, 20)
    job = retarget_job(src, clip, tgt, opts, plan)
    assert isinstance(job, WindowedRetarget)
    steps = []
    out = run(job, steps.append)
    return whole, out, plan, steps


@pytest.mark.slow
def test_a_windowed_retarget_covers_the_clip_without_a_seam(walk_pair, windowed):
    src, clip, tgt = walk_pair
    whole, out, plan, steps = windowed
    m = out.motion
    assert m.num_frames == clip.num_frames and m.fps == clip.fps and m.frame_start == clip.frame_start
    n = len(plan.ranges(clip.num_frames))
    assert out.solver_stats["windows"] == n == 4
    fractions = [s.fraction for s in steps]
    assert fractions == sorted(fractions) and any(f"Window {n}/{n}" in s.message for s in steps)
    assert ((m.rotations[1:] * m.rotations[:-1]).sum(-1) > 0).all()      # sign-continuous across the seams
    # every window was solved: the result is not copy-rotations anywhere
    moved = np.abs(m.locations - out.init_motion.locations).max(-1).max(-1)
    for a, b in plan.ranges(clip.num_frames):
        assert moved[a:b].max() > 1e-3
    # no jerk spike at a seam: around each window boundary the joints' jerk stays within what the whole-clip
    # solve has anywhere, and the hips do not jump
    jw, jo = _joint_jerk(tgt, m), _joint_jerk(tgt, whole.motion)
    for a, _ in plan.ranges(clip.num_frames)[1:]:
        seam = slice(max(a - 3, 0), a + plan.overlap)
        assert jw[seam].max() <= 1.25 * jo.max()
    hips = tgt.skeleton.index(tgt.bone_map["hips"])
    step = np.linalg.norm(np.diff(ClipTrack(tgt, m).world_positions[:, hips], axis=0), axis=-1)
    step_whole = np.linalg.norm(np.diff(ClipTrack(tgt, whole.motion).world_positions[:, hips], axis=0), axis=-1)
    assert step.max() <= 1.25 * step_whole.max()
    # measured on the stitched clip as a whole retarget is, and as good as the whole-clip solve
    mw, mo = out.metrics, whole.metrics
    assert mw["frames"] == clip.num_frames and out.reference["frames"] == clip.num_frames
    assert mw["grounded_f1"] >= mo["grounded_f1"] - 0.05 and mw["contact_f1"] >= mo["contact_f1"] - 0.05
    assert mw["floor_pen_mean"] <= mo["floor_pen_mean"] + 5e-4 and mw["self_pen_mean"] <= mo["self_pen_mean"] + 5e-4
    assert mw["jerk_max"] <= 1.1 * mo["jerk_max"] and mw["jerk_mean"] <= 1.1 * mo["jerk_mean"]
    assert any("windows" in n for n in out.notes)


@pytest.mark.slow
def test_a_windowed_retarget_is_measured_a_window_at_a_time_as_the_whole_clip(walk_pair, windowed):
    """Its metrics are measured a window's length of frames at a time (memory flat in the clip's length): the same
    dict as the whole stitched clip measured at once (jerk means to the order of their float additions)."""
    from core.metrics.scores import evaluations
    from core.progress import drive
    from tests.core.test_metrics_chunks import assert_same_metrics
    src, clip, tgt = walk_pair
    _, out, plan, _ = windowed
    assert clip.num_frames > plan.length
    whole = drive(evaluations(src, clip, tgt, [out.motion, out.init_motion], None, out.source_ground))
    assert_same_metrics(whole[0], out.metrics)
    assert_same_metrics(whole[1], out.reference)


@pytest.mark.slow
def test_a_retarget_hands_back_the_per_frame_series_its_metrics_read(walk_pair, windowed):
    """``Outcome.series``: the result's, then copy-rotations' per-frame mesh self-penetration and contact depth, the
    frames behind ``mesh_pen_max`` and ``contact_depth_p95``; the windowed retarget's are the whole stitched clip's."""
    from core.metrics.scores import evaluations
    from core.progress import drive
    src, clip, tgt = walk_pair
    whole, out, _, _ = windowed
    for o in (whole, out):
        assert len(o.series) == 2
        for s, m in zip(o.series, (o.metrics, o.reference)):
            assert s["mesh_pen"].shape == s["contact_depth"].shape == (clip.num_frames,)
            assert s["mesh_pen"].max() == m["mesh_pen_max"]
            depth = s["contact_depth"][np.isfinite(s["contact_depth"])]
            assert len(depth) == m["source_contact_frames"]
            if len(depth):
                assert np.percentile(depth, 95) == pytest.approx(m["contact_depth_p95"])
    got = []
    drive(evaluations(src, clip, tgt, [out.motion, out.init_motion], None, out.source_ground, series=got))
    for a, b in zip(out.series, got):
        np.testing.assert_allclose(a["mesh_pen"], b["mesh_pen"], atol=1e-12)
        np.testing.assert_allclose(a["contact_depth"], b["contact_depth"], atol=1e-12)


def test_a_short_clip_or_copy_rotations_is_one_retarget(walk_pair):
    src, clip, tgt = walk_pair
    assert isinstance(retarget_job(src, clip, tgt, RetargetOptions(), WindowPlan(300, 60)), Retarget)
    assert isinstance(retarget_job(src, clip, tgt, RetargetOptions(method="copy_rotations"), WindowPlan(60, 20)),
                      Retarget)
    assert isinstance(retarget_job(src, clip, tgt, RetargetOptions(), None), Retarget)
    with pytest.raises(CoreError, match="copy-rotations"):
        WindowedRetarget(src, clip, tgt, RetargetOptions(method="copy_rotations"), WindowPlan(60, 20))


@pytest.mark.slow
def test_cancelling_a_windowed_retarget_produces_nothing(walk_pair):
    src, clip, tgt = walk_pair
    job = WindowedRetarget(src, clip, tgt, RetargetOptions(settings=SolverSettings.preset("fast", iterations=10),
                                                           metrics=False), WindowPlan(60, 20))
    for s in job.steps():
        if "Window 2/" in s.message:
            job.cancel()
    assert job.outcome is None and job.cancelled
    with pytest.raises(CoreError, match="cancelled"):
        run(job)
