import numpy as np
import pytest

from core.metrics.measures import jerk_magnitude, vertex_areas
from core.metrics.scores import evaluate, f1_score, roc_auc
from core.character.track import ClipTrack
from core.types import Motion
from tests.core.synth import make_humanoid, walk_motion


@pytest.fixture(scope="module")
def clip():
    ch = make_humanoid()
    return ch, walk_motion(ch, frames=30, clap=True)


def test_f1_and_auc_by_hand():
    truth = np.array([1, 1, 0, 0, 1], bool)
    pred = np.array([1, 0, 1, 0, 1], bool)
    assert f1_score(truth, pred) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    assert np.isnan(f1_score(np.zeros(3, bool), np.zeros(3, bool)))
    assert roc_auc(truth, np.array([0.9, 0.8, 0.1, 0.2, 0.7])) == 1.0
    assert roc_auc(truth, np.array([0.1, 0.2, 0.9, 0.8, 0.3])) == 0.0
    assert roc_auc(np.array([1, 0], bool), np.array([0.5, 0.5])) == 0.5     # ties count half
    assert np.isnan(roc_auc(np.ones(3, bool), np.arange(3.0)))


def test_jerk_of_cubic():
    t = np.arange(10) / 20.0
    p = np.stack([2 * t ** 3, 0 * t, 0 * t], -1)[:, None]
    np.testing.assert_allclose(jerk_magnitude(p, 20.0), 12.0)


def test_vertex_areas_of_a_unit_square():
    from core.types import SkinnedMesh
    m = SkinnedMesh("sq", np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0.]]), np.zeros((4, 3)),
                    np.array([0, 1, 2, 3]), np.array([0, 4]), np.zeros((4, 1), np.int64), np.ones((4, 1)))
    np.testing.assert_allclose(vertex_areas(m), 0.25)


def test_self_evaluation_is_perfect(clip):
    ch, m = clip
    e = evaluate(ch, m, ch, m)
    assert e["grounded_f1"] == 1.0 and e["contact_f1"] == 1.0
    assert e["jerk_mean"] == pytest.approx(e["source_jerk_mean"])
    assert e["floor_pen_mean"] == e["source_floor_pen_mean"]
    assert 0.0 <= e["self_pen_mean"] <= e["self_pen_max"] <= 1.0


def test_jerk_is_compared_on_the_joints_both_characters_map(clip):
    import dataclasses
    ch, m = clip
    # a source without hands: the target's jerk is measured on the same joints, so a self-evaluation matches
    handless = dataclasses.replace(ch, bone_map={c: b for c, b in ch.bone_map.items() if not c.endswith("_hand")})
    e = evaluate(handless, m, ch, m)
    assert e["jerk_mean"] == pytest.approx(e["source_jerk_mean"])
    assert e["jerk_max"] == pytest.approx(e["source_jerk_max"])
    # the hands move the most: with them, the target's mean differs
    assert evaluate(ch, m, ch, m)["jerk_mean"] != pytest.approx(e["jerk_mean"])


def test_sinking_the_clip_raises_floor_penetration_and_breaks_grounding(clip):
    ch, m = clip
    sunk = Motion(m.rotations, m.locations.copy(), m.fps)
    hips = ch.skeleton.index("hips")
    sunk.locations[:, hips] += np.array([0, 0, -0.3]) @ ch.skeleton.rest_local[hips, :3, :3]
    e = evaluate(ch, m, ch, sunk)
    assert e["floor_pen_mean"] > 0.1 and e["source_floor_pen_mean"] == 0.0
    assert e["grounded_f1"] < 0.5
    # an upright source copied onto the floor scores what it scores against itself
    assert e["source_grounded_f1_clamped"] == 1.0
    # a sunk source: its own feet lifted back to the floor disagree with its labels, like the upright clip does
    s = evaluate(ch, sunk, ch, m)
    assert s["source_grounded_f1_clamped"] < 0.5
    assert s["source_grounded_f1_clamped"] == pytest.approx(s["grounded_f1"], abs=0.1)
    # the whole body shifted: contacts between key vertices are unchanged
    assert e["contact_f1"] == 1.0


@pytest.mark.slow
def test_the_target_is_read_above_its_terrain(clip):
    """Issue 13 item 4: with a terrain, the target's floor penetration and grounded / locked labels are read above
    f(x, y), the source's above its own floor. A clip raised onto a plateau measured over that plateau scores as
    the clip on the floor; over a plateau higher than its feet it sinks; on a slope, lifted along the slope, it
    stands on it."""
    from core.contacts.terrain import HeightField
    ch, m = clip
    hips = ch.skeleton.index("hips")

    def lifted(dz):
        out = Motion(m.rotations, m.locations.copy(), m.fps)
        out.locations[:, hips] += np.asarray(dz)[..., None] * (np.array([0, 0, 1.0]) @ ch.skeleton.rest_local[hips, :3, :3])
        return out
    flat = evaluate(ch, m, ch, m)
    plateau = HeightField((-5.0, -5.0), (0.5, 0.5), np.full((21, 21), 0.3), name="Plateau")
    on = evaluate(ch, m, ch, lifted(0.3), terrain=plateau)
    for k in ("floor_pen_mean", "grounded_f1", "grounded_auc", "locked_auc", "contact_f1"):
        np.testing.assert_allclose(on[k], flat[k], atol=1e-6, err_msg=k)
    assert on["source_floor_pen_mean"] == flat["source_floor_pen_mean"]        # the source stays on its floor
    high = HeightField((-5.0, -5.0), (0.5, 0.5), np.full((21, 21), 0.6), name="Higher")
    under = evaluate(ch, m, ch, lifted(0.3), terrain=high)
    assert under["floor_pen_mean"] > 0.1 and under["grounded_f1"] < 0.5
    # the same lifted clip over z = 0 floats: no penetration, but its feet are not grounded
    floating = evaluate(ch, m, ch, lifted(0.3))
    assert floating["floor_pen_mean"] == 0.0 and floating["grounded_f1"] < 0.5


def test_arms_through_the_body_raise_self_penetration(clip):
    ch, m = clip
    from core.rig.rotations import quat_multiply
    bent = Motion(m.rotations.copy(), m.locations, m.fps)
    for side, s in (("left", 1), ("right", -1)):
        j = ch.skeleton.index(f"{side}_upper_arm")
        # swing the arms down and across the chest (about the bone's local Z)
        q = np.array([np.cos(1.2), 0, 0, s * np.sin(1.2)])
        bent.rotations[:, j] = quat_multiply(np.broadcast_to(q, bent.rotations[:, j].shape), bent.rotations[:, j])
    e0 = evaluate(ch, m, ch, m)
    e1 = evaluate(ch, m, ch, bent)
    assert e1["self_pen_mean"] > e0["self_pen_mean"]


def test_windowed_foot_speed_removes_jitter_but_keeps_motion():
    from core.metrics.measures import Measures, foot_speed_windowed
    T, fps = 60, 120.0
    still = np.zeros((T, 2, 3), np.float32)
    still[:, 0, 0] = 0.001 * (-1.0) ** np.arange(T)          # 1 mm frame-to-frame capture jitter
    still[:, 1, 2] = 0.05                                    # a higher vertex, never the lowest
    moving = still.copy()
    moving[:, :, 0] += (0.5 * np.arange(T) / fps)[:, None]    # 0.5 m/s walk
    low = np.zeros(T, np.int64)
    tr = Measures(None, [], None, None, np.zeros((2, T)), None, [still, moving], [low, low], None)
    sp = foot_speed_windowed(tr, fps)                        # 1/15 s window: k = 4 frames at 120 fps
    raw = np.abs(np.diff(still[:, 0, 0])) * fps
    assert raw.min() > 0.2                                   # 240 mm/s of raw jitter speed
    assert sp[0, 4:-4].max() < 1e-6                          # the even window cancels the alternation
    np.testing.assert_allclose(sp[1, 4:-4], 0.5, atol=1e-3)


def test_capsule_test_equals_the_distance_to_each_axis_segment():
    """The self-penetration pass tests capsules with squared distances from matrix products (``_inside_capsules``):
    the same answer as the plain point-to-segment distance, away from round-off at the boundary."""
    import torch

    from core.metrics.measures import _inside_capsules
    g = torch.Generator().manual_seed(0)
    B, S, C = 3, 500, 7
    p = torch.randn(B, S, 3, generator=g, dtype=torch.float64)
    P = torch.randn(B, C, 3, generator=g, dtype=torch.float64)
    U = torch.nn.functional.normalize(torch.randn(B, C, 3, generator=g, dtype=torch.float64), dim=-1)
    lo, hi = -torch.rand(C, generator=g, dtype=torch.float64), torch.rand(C, generator=g, dtype=torch.float64)
    r = 0.3 + torch.rand(C, generator=g, dtype=torch.float64)
    a, b = P[:, None] + lo[:, None] * U[:, None], P[:, None] + hi[:, None] * U[:, None]     # (B, 1, C, 3)
    q = p[:, :, None]
    t = (((q - a) * (b - a)).sum(-1) / ((b - a) ** 2).sum(-1)).clamp(0, 1)
    d = (q - (a + t[..., None] * (b - a))).norm(dim=-1)                                       # (B, S, C)
    got = _inside_capsules(p, P, U, lo, hi, r ** 2)
    margin = (d - r).abs() > 1e-9
    assert got.shape == d.shape and bool(((got == (d < r)) | ~margin).all())
    assert 0 < int((d < r).sum()) < d.numel()


def test_foot_heights_are_the_measures_feet_and_follow_the_body(clip):
    from core.metrics.measures import foot_heights, measure
    ch, m = clip
    h = foot_heights(ClipTrack(ch, m))
    assert h.shape == (2, m.num_frames)
    np.testing.assert_allclose(h, measure(ClipTrack(ch, m)).foot_height)
    lifted = Motion(m.rotations, m.locations.copy(), m.fps)
    hips = ch.skeleton.index("hips")
    lifted.locations[:, hips] += np.array([0, 0, 0.05]) @ ch.skeleton.rest_local[hips, :3, :3]
    np.testing.assert_allclose(foot_heights(ClipTrack(ch, lifted)), h + 0.05, atol=1e-6)
    np.testing.assert_allclose(foot_heights(ClipTrack(ch, m), ground=0.02), h - 0.02, atol=1e-9)


def test_self_pen_parts_locates_the_self_penetration():
    """measures.self_pen_parts splits the self-penetration share by (segment, capsule): a vertex inside one other
    segment's core counts once, inside two counts twice, so the split sums to at least the share, and to exactly
    it where no vertex is in two cores; a wider body has more of it."""
    from core.metrics.measures import measure, self_pen_parts
    sums = []
    for girth in (1.0, 2.5):
        ch = make_humanoid(girth=girth)
        tr = ClipTrack(ch, walk_motion(ch, frames=20, clap=True))
        bones, parts = self_pen_parts(tr)
        share = float(measure(tr).self_share.mean())
        assert parts.shape == (len(bones), len(bones)) and share > 0
        assert parts.sum() >= share - 1e-9 and not parts.diagonal().any()
        sums.append(parts.sum())
    assert sums[1] > 5 * sums[0]


def test_a_locked_foot_is_a_run_of_at_least_a_thirtieth_of_a_second():
    from core.contacts.feet import lock_runs
    below = np.zeros(120, bool)
    below[[10, 20, 30, 31, 50]] = True              # single- and two-frame dips of a jittering 120 fps stance
    assert not lock_runs(below, 120.0).any()
    below[60:65] = True                             # a 5-frame run (1/24 s): a lock
    out = lock_runs(below, 120.0)
    assert out[60:65].all() and out.sum() == 5
    assert (lock_runs(below, 30.0) == below).all()  # at 30 fps one frame is 1/30 s
    both = lock_runs(np.stack([below, np.roll(below, 3)]), 120.0)     # per foot, (2, T)
    assert both.shape == (2, 120) and both[1, 63:68].all() and both[1].sum() == 5


def test_series_are_the_per_frame_values_the_mesh_scores_read(clip):
    """``evaluate(..., series=[])``: the per-frame mesh self-penetration and contact depth its scores read (the
    bench's worst frames, tools/bench/worst_frames.py)."""
    ch, m = clip
    from core.rig.rotations import quat_multiply
    bent = Motion(m.rotations.copy(), m.locations, m.fps)
    j = ch.skeleton.index("left_upper_arm")
    q = np.array([np.cos(1.2), 0, 0, np.sin(1.2)])
    bent.rotations[:, j] = quat_multiply(np.broadcast_to(q, bent.rotations[:, j].shape), bent.rotations[:, j])
    series = []
    e = evaluate(ch, m, ch, bent, series=series)
    assert len(series) == 1 and series[0]["mesh_pen"].shape == series[0]["contact_depth"].shape == (m.num_frames,)
    pen, depth = series[0]["mesh_pen"], series[0]["contact_depth"]
    assert pen.max() > 0 and pen.max() == e["mesh_pen_max"] and pen.mean() == pytest.approx(e["mesh_pen_mean"])
    c = depth[np.isfinite(depth)]
    assert len(c) == e["source_contact_frames"] > 0
    assert np.percentile(c, 95) == pytest.approx(e["contact_depth_p95"])
    again = evaluate(ch, m, ch, bent)                                  # the same metrics without it
    assert again.keys() == e.keys() and all(again[k] == e[k] or again[k] != again[k] and e[k] != e[k] for k in e)
