"""The metrics measured a chunk of frames at a time (``core.metrics.scores.evaluations(..., chunk=N)``: a windowed retarget,
whose memory must not follow the clip's length) equal the whole clip's, key for key: a real Bandai walk
(../shared/assets) onto a MakeHuman character, in chunks that cut through a planted foot and do not divide the
clip."""

import math

import numpy as np
import pytest

from core.metrics.scores import chunk_ranges
from tests.addon.real_assets import mod, prepared_pair

SOURCE, TARGET = "NC_bandai_walk_normal_001.bvh", "mh_male_heavy.glb"
FRAMES = (0, 125)           # 125 frames at 30 fps
CHUNK = 23                  # 6 chunks, the last of 10 frames


def test_chunks_cover_the_clip_with_the_neighbours_a_frame_reads():
    assert chunk_ranges(100, None) == [(0, 100, 0, 100)] == chunk_ranges(100, 100) == chunk_ranges(100, 500)
    r = chunk_ranges(100, 30, fps=120.0)            # the windowed foot speed reads k = 4 frames each side at 120 fps
    assert [(a, b) for a, b, _, _ in r] == [(0, 30), (30, 60), (60, 90), (90, 100)]
    assert r[1][2:] == (26, 64) and r[0][2] == 0 and r[-1][3] == 100
    assert chunk_ranges(100, 30, fps=30.0)[1][2:] == (29, 63)    # k = 1 before; 3 after for the jerk


def assert_same_metrics(w: dict, c: dict):
    """Every key, in the same order, equal: exactly, but for the jerk means, sums over chunks divided by the count,
    equal to the whole clip's mean up to the order of the float additions (a few ulps); every other value is
    computed from the same per-frame values or counts."""
    assert list(w) == list(c)
    for k in w:
        if math.isnan(w[k]):
            assert math.isnan(c[k]), k
        elif k.endswith("jerk_mean"):
            assert c[k] == pytest.approx(w[k], rel=1e-12, abs=1e-300), k
        else:
            assert c[k] == w[k], k


@pytest.fixture(scope="module")
def real_walk(addon, assets):
    src, motion, tgt, init = prepared_pair(addon, assets, SOURCE, TARGET, FRAMES)
    sunk = mod(addon, "core.pipeline.windows").shifted(tgt, init, (0.0, 0.0, -0.015))   # feet partly under the floor
    return src, motion, tgt, [init, sunk]


@pytest.mark.assets
def test_metrics_in_chunks_equal_the_whole_clips(addon, real_walk):
    src, motion, tgt, targets = real_walk
    metrics, measures, track = mod(addon, "core.metrics.scores"), mod(addon, "core.metrics.measures"), mod(addon, "core.character.track")
    T = motion.num_frames
    ranges = metrics.chunk_ranges(T, CHUNK, motion.fps)
    assert len(ranges) == math.ceil(T / CHUNK) >= 5 and T % CHUNK
    levels = np.linspace(0.0, 0.004, T)          # a drifting floor: the source's (T,) levels, sliced per chunk
    # a chunk boundary cuts through a planted foot: grounded and locked on both sides of it in the source
    m = measures.measure(track.ClipTrack(src, motion), levels)
    hs = float(src.height)
    speed = measures.foot_speed_windowed(m, motion.fps)
    planted = (np.abs(m.foot_height) <= metrics.GROUNDED_FRACTION * hs) & (speed < metrics.LOCKED_FRACTION * hs)
    assert any((planted[:, a - 1] & planted[:, a]).any() for a, _, _, _ in ranges[1:])

    drive = mod(addon, "core.progress").drive
    whole = drive(metrics.evaluations(src, motion, tgt, targets, None, levels))
    chunked = drive(metrics.evaluations(src, motion, tgt, targets, None, levels, chunk=CHUNK))
    for w, c in zip(whole, chunked):
        assert w["source_contacts"] > 0 and 0 < w["grounded_f1"] < 1
        assert_same_metrics(w, c)
    assert whole[1]["floor_pen_mean"] > whole[0]["floor_pen_mean"]
    # one target alone is measured as it is among several (the source measured once for all of them)
    assert_same_metrics(metrics.evaluate(src, motion, tgt, targets[1], source_ground=levels, chunk=CHUNK), chunked[1])
