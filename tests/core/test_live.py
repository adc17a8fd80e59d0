"""core.pipeline.live: the window around a frame retargeted on a clip set up once."""

from dataclasses import replace

import numpy as np
import pytest

from core.errors import CoreError
from core.pipeline.live import WARM_FRACTION, LiveClip, window_around
from core.pipeline.retarget import Retarget, RetargetOptions, run
from core.solver import SolverSettings
from core.character.track import ClipTrack
from core.types import Motion
from core.pipeline.windows import WindowPlan, WindowedRetarget
from tests.core.synth import make_humanoid, walk_motion

ITERATIONS = 12


def test_the_window_is_centred_and_moved_inward_at_the_ends():
    assert window_around(50, 20, 100) == (40, 60)
    assert window_around(0, 20, 100) == (0, 20) and window_around(3, 21, 100) == (0, 21)
    assert window_around(99, 20, 100) == (80, 100) and window_around(150, 20, 100) == (80, 100)
    assert window_around(-5, 20, 100) == (0, 20)
    assert window_around(7, 20, 12) == (0, 12)            # a clip shorter than a window: all of it
    for i in range(100):                                   # always `length` frames holding the index
        a, b = window_around(i, 21, 100)
        assert b - a == 21 and a <= i < b


@pytest.fixture(scope="module")
def live_pair():
    src = make_humanoid()
    tgt = make_humanoid(scale=0.8, girth=1.5, leg=0.75, name="tgt")
    clip = walk_motion(src, frames=90, stride=0.6)
    clip = Motion(clip.rotations, clip.locations, clip.fps, 11)          # scene frames 11..100
    opts = RetargetOptions(settings=SolverSettings.preset("fast", iterations=ITERATIONS, num_threads=1))
    return src, clip, tgt, opts


def test_a_live_window_is_the_windowed_retarget_of_those_frames(live_pair):
    src, clip, tgt, opts = live_pair
    live = LiveClip(src, clip, tgt, opts, length=30)
    with pytest.raises(CoreError, match="prepare"):
        live.solve(50)
    setup = run(live.prepare())
    assert live.setup is setup and setup.init.num_frames == clip.num_frames
    skeleton, base = live.baseline()
    assert skeleton is tgt.skeleton and base.frame_start == 11
    np.testing.assert_array_equal(base.rotations, setup.init.rotations)

    steps = []
    win = run(live.solve(50), steps.append)           # scene frame 50 = clip index 39: frames 24..53
    assert (win.start, win.stop) == (24, 54) and win.motion.num_frames == 30 and win.motion.frame_start == 35
    assert win.seconds > 0 and any("Live, frames 35–64" in s.message for s in steps)
    # the same as a windowed batch retarget's first window, whose start is copy-rotations of the whole clip
    levels = setup.levels if np.ndim(setup.levels) == 0 else setup.levels[24:54]
    ref = run(Retarget(src, clip.slice(24, 54), tgt, RetargetOptions(
        settings=replace(opts.settings, source_ground=levels), metrics=False, conflicts=False,
        init_motion=setup.init.slice(24, 54))))
    np.testing.assert_allclose(win.motion.rotations, ref.motion.rotations, atol=1e-6)
    np.testing.assert_allclose(win.motion.locations, ref.motion.locations, atol=1e-6)
    assert np.abs(win.motion.locations - setup.init.locations[24:54]).max() > 1e-3     # it was solved
    batch = WindowedRetarget(src, clip, tgt, RetargetOptions(settings=opts.settings, metrics=False),
                             WindowPlan(30, 10))
    first = run(batch).motion
    win0 = run(live.solve(11))
    assert (win0.start, win0.stop) == (0, 30)
    np.testing.assert_allclose(win0.motion.rotations[:20], first.rotations[:20], atol=1e-6)


def test_an_edited_clip_keeps_the_characters_and_follows_the_new_motion(live_pair):
    src, clip, tgt, opts = live_pair
    live = LiveClip(src, clip, tgt, opts, length=30)
    run(live.prepare())
    edited = Motion(clip.rotations, clip.locations + np.array([0.0, 0.0, 0.05]), clip.fps, clip.frame_start)
    again = live.edited(edited)
    assert again.setup is None and again.source is live.setup.built["source"]
    run(again.prepare())
    assert again.setup.source is live.setup.source and again.setup.target is live.setup.target
    assert not np.allclose(again.setup.init.locations, live.setup.init.locations)
    with pytest.raises(CoreError, match="other bones"):
        live.edited(Motion(clip.rotations[:, 1:], clip.locations[:, 1:], clip.fps, clip.frame_start))


def test_other_settings_keep_the_characters_and_solve_the_window_as_a_fresh_clip_with_them(live_pair):
    """A slider moved while Live is on: the same characters, the new settings, and a window equal to the one a
    LiveClip started with those settings solves."""
    src, clip, tgt, opts = live_pair
    live = LiveClip(src, clip, tgt, opts, length=30)
    run(live.prepare())
    heavier = replace(opts.settings, w_sliding=opts.settings.w_sliding * 4, foot_lock=0.5)
    again = live.edited(settings=heavier)
    assert again.source is live.setup.built["source"] and again.source_motion is clip
    assert again.options.settings == heavier and live.options.settings == opts.settings
    run(again.prepare())
    win = run(again.solve(50))
    fresh = LiveClip(src, clip, tgt, replace(opts, settings=heavier), length=30)
    run(fresh.prepare())
    ref = run(fresh.solve(50))
    np.testing.assert_allclose(win.motion.rotations, ref.motion.rotations, atol=1e-6)
    old = run(live.solve(50))
    assert np.abs(win.motion.rotations - old.motion.rotations).max() > 1e-4      # the settings made a difference


def test_a_cancelled_live_window_produces_nothing(live_pair):
    src, clip, tgt, opts = live_pair
    live = LiveClip(src, clip, tgt, opts, length=30)
    run(live.prepare())
    job = live.solve(40)
    for s in job.steps():
        if s.phase == "solve" and s.solver is not None and s.solver.step >= 2:
            job.cancel()
    assert job.outcome is None and job.cancelled and job.job.cancelled


def test_live_refuses_copy_rotations_and_tiny_windows(live_pair):
    src, clip, tgt, opts = live_pair
    with pytest.raises(CoreError, match="copy-rotations"):
        LiveClip(src, clip, tgt, RetargetOptions(method="copy_rotations"))
    with pytest.raises(CoreError, match="too short"):
        LiveClip(src, clip, tgt, opts, length=4)


@pytest.mark.slow
def test_a_window_overlapping_the_last_one_starts_from_it(live_pair):
    src, clip, tgt, _ = live_pair
    opts = RetargetOptions(settings=SolverSettings.preset("balanced", num_threads=1))    # converged windows
    live = LiveClip(src, clip, tgt, opts, length=60)
    setup = run(live.prepare())
    first = run(live.solve(50))                          # frames 9..68 (clip indices)
    assert not first.warm and first.core_motion is not None and (first.start, first.stop) == (9, 69)
    start = live.warm_start(14, 74, first)               # five frames later: 55 shared
    assert start is not None and start.num_frames == 60
    np.testing.assert_array_equal(start.locations[:55], first.core_motion.locations[5:])
    # past the shared frames: copy-rotations carried on from where the last result leaves the hips, no jump
    hips = tgt.skeleton.index(tgt.bone_map["hips"])
    def hips_steps(motion):
        path = ClipTrack(tgt, motion).world_positions[:, hips]
        return np.linalg.norm(np.diff(path, axis=0), axis=-1)
    steps = hips_steps(start)
    assert steps.max() <= 1.25 * max(hips_steps(first.core_motion).max(), hips_steps(setup.init).max())
    assert steps[54:].min() >= 0.5 * hips_steps(setup.init.slice(68, 74)).min()       # and no stall
    steps_seen = []
    warm = run(live.solve(55, first), steps_seen.append)
    assert warm.warm and (warm.start, warm.stop) == (14, 74)
    total = {s.solver.total for s in steps_seen if s.solver is not None}
    assert total == {int(np.ceil(opts.settings.iterations * WARM_FRACTION))}
    cold = run(live.solve(55))
    print(f"relative objective: cold {cold.relative:.3f} in {cold.seconds:.2f} s, warm {warm.relative:.3f} in "
          f"{warm.seconds:.2f} s")
    assert not cold.warm and np.isfinite(warm.relative) and warm.relative <= cold.relative + 0.05
    # too far, or from another set-up: from copy-rotations
    far = replace(first, start=first.start - 40, stop=first.stop - 40)       # 20 of 60 frames shared
    assert live.warm_start(14, 74, far) is None and live.warm_start(14, 74, replace(first, setup=None)) is None
    again = live.edited(clip)
    run(again.prepare())
    assert again.warm_start(14, 74, first) is None


def test_at_120_fps_windows_and_a_warm_started_window_run_on_both_grids():
    """A 120 fps clip, where the upper body's bones take their own grid (``parametrisation.UPPER_KNOTS``): a live window
    warm-started from the last one (fitted on both grids) is no worse than the same window solved cold; a windowed
    batch retarget covers the clip."""
    src = make_humanoid()
    tgt = make_humanoid(scale=0.8, girth=1.5, leg=0.75, name="tgt")
    clip = walk_motion(src, frames=240, fps=120.0, stride=0.6)
    opts = RetargetOptions(settings=SolverSettings.preset("balanced", num_threads=1))    # converged windows
    live = LiveClip(src, clip, tgt, opts, length=120)
    run(live.prepare())
    first = run(live.solve(100))
    assert first.sixd.shape[0] == 120
    warm, cold = run(live.solve(110, first)), run(live.solve(110))
    assert warm.warm and not cold.warm
    assert np.isfinite(warm.relative) and warm.relative <= cold.relative + 0.05
    seen = []
    whole = run(WindowedRetarget(src, clip, tgt, replace(opts, metrics=False, conflicts=False), WindowPlan(120, 30)),
                seen.append)
    assert whole.motion.num_frames == 240 and whole.motion.fps == 120.0
    assert any("Window 2/" in s.message for s in seen) and np.isfinite(whole.motion.rotations).all()
