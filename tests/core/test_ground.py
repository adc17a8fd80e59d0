"""core.contacts.ground: the source's floor as one level or one level per frame (docs/solver.md "Ground")."""

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from core.errors import CoreError
from core.contacts.ground import (_windows, estimate_ground, ground_levels, planted_soles, running_ground, track_ground,
                         window_percentile)
from core.metrics.scores import evaluate
from core.solver import SolveJob, SolverSettings
from core.character.track import ClipTrack
from core.types import Motion
from tests.core.synth import make_humanoid, walk_motion


@pytest.fixture(scope="module")
def walk():
    ch = make_humanoid()
    return ch, walk_motion(ch, frames=180, fps=30.0)


def _shifted(ch, m, dz):
    """``m`` with the whole body moved up by dz (T,) metres per frame (negative: sinks)."""
    out = Motion(m.rotations, m.locations.copy(), m.fps)
    hips = ch.skeleton.index("hips")
    up = np.array([0.0, 0.0, 1.0]) @ ch.skeleton.rest_local[hips, :3, :3]
    out.locations[:, hips] += np.asarray(dz)[:, None] * up
    return out


def test_running_ground_follows_a_drift_and_ignores_lifted_feet():
    fps, T = 30.0, 300
    t = np.arange(T) / fps
    drift = -0.004 * t                                      # sinks 4 mm per second
    steps = 0.08 * np.clip(np.sin(2 * np.pi * t), 0, None)  # a foot off the floor half of the time
    jump = np.where((t > 4.0) & (t < 4.5), 0.3, 0.0)         # half a second in the air
    level = running_ground(drift + steps + jump, fps)
    inner = slice(int(fps), T - int(fps))                     # a second from either end
    assert np.abs(level[inner] - drift[inner]).max() < 0.003
    assert np.abs(level - drift).max() < 0.006                # the ends: a one-sided window
    assert np.all(np.abs(np.diff(level, 2)) < 1e-3)           # smooth: no kink for the height terms to copy


def test_the_window_percentile_is_numpys_nanpercentile_to_the_bit():
    """window_percentile: every row at once, the same values as numpy's row-by-row nanpercentile of the windows
    (clamped at the clip's ends), on clips shorter and longer than the window, at the ends of the range of q."""
    rng = np.random.default_rng(3)
    for T, k, q in [(300, 30, 5.0), (1, 5, 5.0), (7, 30, 5.0), (1000, 60, 37.3), (50, 1, 50.0), (20, 3, 100.0),
                    (20, 3, 0.0)]:
        x = rng.normal(size=T)
        np.testing.assert_array_equal(window_percentile(x, k, q), np.nanpercentile(_windows(x, k), q, axis=1))


def test_running_ground_of_a_clip_shorter_than_its_window_is_one_line():
    lows = np.array([0.0, 0.002, 0.1, 0.004, 0.006, 0.2, 0.01])   # a floor rising 1 cm, two lifted frames
    level = running_ground(lows, 30.0)
    np.testing.assert_allclose(np.diff(level, 2), 0.0, atol=1e-12)
    np.testing.assert_allclose(level[[0, -1]], [0.0, 0.01], atol=1e-3)


def test_track_ground_recovers_a_sinking_clip(walk):
    ch, m = walk
    drift = -0.05 * np.arange(m.num_frames) / m.num_frames   # 5 cm lower by the end
    sunk = _shifted(ch, m, drift)
    base = track_ground(ClipTrack(ch, m))
    np.testing.assert_allclose(ClipTrack(ch, sunk).lowest_foot, ClipTrack(ch, m).lowest_foot + drift, atol=1e-9)
    assert np.abs(track_ground(ClipTrack(ch, sunk)) - (base + drift)).max() < 0.006
    # one level cannot follow it: it is off by centimetres at one end or the other
    one = estimate_ground(ClipTrack(ch, sunk))
    assert np.abs(one - (base + drift)).max() > 0.02


def test_ground_levels_accepts_modes_numbers_and_per_frame_levels(walk):
    ch, m = walk
    tr = ClipTrack(ch, m)
    assert ground_levels(tr, "zero") == 0.0
    assert ground_levels(tr, 0.25) == 0.25
    assert ground_levels(tr, "estimate") == pytest.approx(estimate_ground(tr))
    assert ground_levels(tr, "track").shape == (m.num_frames,)
    levels = np.linspace(0, 0.1, m.num_frames)
    np.testing.assert_array_equal(ground_levels(tr, list(levels)), levels)
    with pytest.raises(CoreError, match="'floor'"):
        ground_levels(tr, "floor")
    with pytest.raises(CoreError, match="180 frames"):
        ground_levels(tr, np.zeros(7))
    with pytest.raises(CoreError, match="non-finite"):
        ground_levels(tr, np.full(m.num_frames, np.nan))


def test_metrics_read_the_source_above_its_per_frame_floor(walk):
    ch, m = walk
    drift = -0.03 * np.arange(m.num_frames) / m.num_frames
    sunk = _shifted(ch, m, drift)
    # the sinking source against the upright clip: its labels disagree once it has sunk by more than 1 % h
    assert evaluate(ch, sunk, ch, m)["grounded_f1"] < 0.9
    # read above its own (sinking) floor, it is the upright clip again
    e = evaluate(ch, sunk, ch, m, source_ground=drift)
    assert e["grounded_f1"] == 1.0
    assert e["source_floor_pen_mean"] == pytest.approx(e["floor_pen_mean"], abs=1e-6)


def test_solver_reads_a_drifting_source_above_its_tracked_floor(walk):
    ch, m = walk
    tgt = make_humanoid(scale=0.9, girth=1.3, name="tgt")
    drift = -0.05 * np.arange(m.num_frames) / m.num_frames
    sunk = _shifted(ch, m, drift)
    init = Motion(m.rotations, m.locations * 0.9, m.fps)
    settings = SolverSettings(iterations=1, num_threads=1)

    def setup(motion, ground):
        job = SolveJob(ch, motion, tgt, init, SolverSettings(**{**settings.__dict__, "source_ground": ground}))
        list(job.prepare())
        return job

    upright = setup(m, "track")
    tracked = setup(sunk, "track")
    flat = setup(sunk, "zero")
    assert tracked.source_ground_level.shape == (m.num_frames,)
    assert tracked.stats["source_ground_drift"] > 0.04
    # the sinking clip read above its tracked floor has the upright clip's heights (within the tracker's error)
    err_tracked = float((tracked.objective.src_h - upright.objective.src_h).abs().max())
    err_flat = float((flat.objective.src_h - upright.objective.src_h).abs().max())
    assert err_tracked < 0.008 < 0.03 < err_flat
    # and its feet are in contact on the upright clip's frames (the sunk ones, read above z = 0, are not)
    off_tracked = float((tracked.feet.contact_w - upright.feet.contact_w).abs().mean())
    off_flat = float((flat.feet.contact_w - upright.feet.contact_w).abs().mean())
    assert off_tracked < 0.25 * off_flat


def test_floor_advice_names_the_setting_for_sinking_and_floating_sources():
    from core.metrics.advice import floor_advice

    sinking = floor_advice({"source_grounded_f1_clamped": 0.65, "source_grounded_share": 0.5})
    assert "0.65" in sinking and "Track Drift" in sinking and "source_ground 'track'" in sinking
    floating = floor_advice({"source_grounded_f1_clamped": float("nan"), "source_grounded_share": 0.0})
    assert "floats" in floating and "Estimate Level" in floating
    assert floor_advice({"source_grounded_f1_clamped": 0.97, "source_grounded_share": 0.4}) is None
    assert floor_advice({}) is None                    # copy-rotations runs carry no such metrics


def test_floor_advice_is_importable_without_torch():
    code = "import sys; import core.metrics.advice; assert 'torch' not in sys.modules, 'core.metrics.advice imported torch'"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=pathlib.Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr


def test_planted_soles_reads_a_body_standing_above_its_floor_and_not_a_drift(walk):
    """core.contacts.ground.planted_soles (a fitted body's soles are put on the floor by it, core.character.complete): a body
    standing still lifted by 1 cm reads 1 cm more on both feet; lifted 3 % of its height (the whole clip floats:
    source_ground's business) or drifting 5 cm over the clip (no one level to stand on), it reads nothing."""
    ch, _ = walk
    T, J = 60, ch.skeleton.num_bones
    m = Motion(np.tile([1.0, 0.0, 0.0, 0.0], (T, J, 1)), np.zeros((T, J, 3)), 30.0)     # standing in the rest pose
    base = planted_soles(ClipTrack(ch, m))
    assert set(base) == {"left", "right"}, base
    up = planted_soles(ClipTrack(ch, _shifted(ch, m, np.full(m.num_frames, 0.01))))
    for side in ("left", "right"):
        assert up[side] == pytest.approx(base[side] + 0.01, abs=1e-3)
    assert planted_soles(ClipTrack(ch, _shifted(ch, m, np.full(m.num_frames, 0.03 * ch.height)))) == {}
    drift = 0.05 * np.arange(m.num_frames) / m.num_frames
    assert planted_soles(ClipTrack(ch, _shifted(ch, m, drift))) == {}


def test_auto_ground_keeps_z0_for_a_clip_standing_on_it_and_tracks_one_that_does_not(walk):
    """``source_ground="auto"`` (the default): the synthetic walk stands on z = 0 and is read there, exactly (a
    level within half the grounded band of 0 is not replaced by its own noise); lifted 3 cm, or sinking 5 cm over
    the clip, it is read above its tracked floor, and its heights above it are the upright walk's above its own."""
    ch, m = walk
    assert ground_levels(ClipTrack(ch, m), "auto") == 0.0
    upright = ClipTrack(ch, m).lowest_foot - track_ground(ClipTrack(ch, m))
    for dz in (np.full(m.num_frames, 0.03), -0.05 * np.arange(m.num_frames) / m.num_frames):
        tr = ClipTrack(ch, _shifted(ch, m, dz))
        level = ground_levels(tr, "auto")
        assert np.shape(level) == (m.num_frames,)
        np.testing.assert_array_equal(level, track_ground(tr))
        assert np.abs((tr.lowest_foot - level) - upright).max() < 0.006


def test_l_reg_rises_with_a_drifting_floor_so_the_lift_is_not_charged_to_the_limbs(walk):
    """Copy-rotations places a clip once, so where the source's floor sinks its target sinks with it. L_reg's anchor
    rises by that drift (``root_start.floor_drift_lift``): the sinking clip's copy-rotations, lifted by it, stands on
    z = 0 as the source stands on the floor the solve reads (its tracked level), and L_reg charges the solve nothing
    for standing there (only what the limbs move); a clip on one floor gets no lift (docs/solver.md "The root's
    start")."""
    from core.character.frame import body_alignment, hip_height
    from core.contacts.ground import ground_levels
    from core.pipeline.copy_rotations import copy_rotations
    from core.solver.root_start import floor_drift_lift

    ch, m = walk
    tgt = make_humanoid(scale=0.9, girth=1.3, name="tgt")
    drift = -0.05 * np.arange(m.num_frames) / m.num_frames                 # 5 cm lower by the end
    sunk = _shifted(ch, m, drift)
    upright, sinking = ClipTrack(ch, m), ClipTrack(ch, sunk)
    assert np.ndim(ground_levels(upright, "auto")) == 0                     # on z = 0: one floor
    assert floor_drift_lift(upright, ground_levels(upright, "auto"), tgt, copy_rotations(ch, m, tgt)) is None
    levels = ground_levels(sinking, "auto")
    init = copy_rotations(ch, sunk, tgt, sinking)
    lift = floor_drift_lift(sinking, levels, tgt, init)
    # lifted, its lowest foot point stands as high above z = 0 as the source's above the floor the solve reads, × the
    # hip-height ratio (this walk always has a foot down)
    _, _, qs, qt = body_alignment(ch, sunk, tgt, sinking)
    ratio = hip_height(tgt, qt) / hip_height(ch, qs)
    stood = ClipTrack(tgt, init).lowest_foot + lift
    err = np.abs(stood - ratio * (sinking.lowest_foot - levels)).max()
    assert np.ptp(lift) > 0.03 and err < 0.002, (np.ptp(lift), err)

    job = SolveJob(ch, sunk, tgt, init, SolverSettings(iterations=1, num_threads=1))
    job.setup()
    off = job.objective.reg_lift                                            # (T, 3): the lift on z
    np.testing.assert_allclose(off[:, 2].numpy(), lift, atol=1e-6)
    reg = job.objective.dense_terms
    assert float(reg(job.p_init + off[:, None], 0.0, None, off)["reg"]) < 1e-9
    assert float(reg(job.p_init, 0.0, None, off * 0.0)["reg"]) > 0.0        # copy-rotations' own place, sunk
