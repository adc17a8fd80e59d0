"""The joint solve's barrier between bodies (core.solver.barrier): its depth by hand, the capsule points the rig
carries, exact candidates, the source's own overlap allowed, hands in hands excepted, and a limb pushed out of a
partner's body where the source's is not inside."""

import numpy as np
import pytest
import torch

from core.metrics.partners import body_capsules, capsule_paths, evaluate_partners
from core.solver import GroupSolveJob, SolveJob, SolverSettings
from core.solver import job as job_module
from core.solver import objective as objective_module
from core.solver.barrier import SPHERES, PartnerBarrier, _depth
from core.solver.capsules import capsule_points
from core.character.track import ClipTrack
from core.types import Motion
from tests.core.synth import couple, facing, make_humanoid, reach_motion, walk_motion, with_face


@pytest.fixture
def float64(monkeypatch):
    """The solves of a test in float64 (``core.solver.job.DTYPE``): depths and sums compared to 1e-9."""
    monkeypatch.setattr(job_module, "DTYPE", "float64")


def test_depth_by_hand():
    a, b = torch.tensor([0.0, 0.0, 0.0]), torch.tensor([1.0, 0.0, 0.0])
    # a sphere of radius 0.1 whose centre is 0.15 above the middle of a capsule of radius 0.1: overlap 0.05
    assert float(_depth(torch.tensor([0.5, 0.15, 0.0]), 0.1, a, b, 0.1)) == pytest.approx(0.05)
    # beyond the end: distance to the end point (3-4-5), radii 0.5 + 0.5 - 0.5
    assert float(_depth(torch.tensor([1.3, 0.4, 0.0]), 0.5, a, b, 0.5)) == pytest.approx(0.5)
    assert float(_depth(torch.tensor([0.5, 2.0, 0.0]), 0.1, a, b, 0.1)) == pytest.approx(-1.8)


def test_the_rig_carries_the_capsule_ends_as_the_track_computes_them(float64):
    ch = with_face(make_humanoid(scale=1.1, object_matrix=facing(0.3, 1.0, 2.0)))
    mo = reach_motion(ch, frames=12)
    caps, points = capsule_points(ch)
    assert len(caps.names) == 21 and points[1].shape == (42, 3)     # one per bone of the synthetic body
    s = SolverSettings(iterations=1, num_threads=1)
    job = SolveJob(ch, mo, ch, mo, s)
    job.body_points = points
    job.setup()
    with torch.no_grad():
        p, _, _ = job._forward(job.param.zero_residuals())
    got = job.body_positions[:, :len(points[0])].reshape(12, -1, 2, 3)   # then the surface barrier's points
    want = capsule_paths(ClipTrack(ch, mo), body_capsules(ch))
    assert torch.allclose(got, want, atol=1e-9)
    assert p.shape[1] == len(ch.keyverts)                 # the key vertices are untouched


def _still(character, frames=6):
    J = character.skeleton.num_bones
    rot = np.zeros((frames, J, 4))
    rot[..., 0] = 1.0
    return Motion(rot, np.zeros((frames, J, 3)), 30.0)


def _arms_ahead(character, frames=6):
    """Standing still, both arms straight ahead: reach_motion's held pose on every frame."""
    m = reach_motion(character, frames=frames + 2)
    held = m.rotations[(frames + 2) // 2]
    return Motion(np.repeat(held[None], frames, 0), m.locations[:frames], m.fps)


def _job(src, tgt, inits, w_barrier=1.0, iterations=1, **kw):
    s = SolverSettings(iterations=iterations, num_threads=1, w_barrier=w_barrier, **kw)
    members = [SolveJob(sc, sm, tc, im, s) for (sc, sm), tc, im in zip(src, tgt, inits)]
    job = GroupSolveJob(members, s)
    job._setup()
    return job


def _lead_into_follow(gap):
    """A lead with his arms straight ahead and a follow standing still ``gap`` metres in front of him, facing him."""
    a = with_face(make_humanoid(name="lead"))
    b = with_face(make_humanoid(name="follow", object_matrix=facing(np.pi, 0.0, -gap)))
    return (a, _arms_ahead(a)), (b, _still(b))


def _dense(barrier, ends) -> float:
    """The barrier by hand over every (frame, sphere, capsule), for a source that overlaps nowhere (the carried
    points past the barrier's rows, the surface barrier's, left out)."""
    ends = [e[:, :len(g)] for e, g in zip(ends, barrier.row_seg)]
    dense = 0.0
    U = len(SPHERES)
    for (i, k, _, unit, _, excl, _), in zip(barrier.blocks):
        q = ends[i][:, :, None, 0] + torch.as_tensor(SPHERES, dtype=ends[i].dtype)[:, None] \
            * (ends[i][:, :, None, 1] - ends[i][:, :, None, 0])
        q = q.reshape(q.shape[0], -1, 3)
        d = _depth(q[:, :, None], barrier.sphere_r[i][:, None], ends[k][:, None, :, 0], ends[k][:, None, :, 1],
                   barrier.radius[k])
        assert excl.shape == (len(barrier.radius[i]), len(barrier.radius[k]))     # per segment pair
        d = torch.where(excl.repeat_interleave(U, 0), torch.zeros_like(d), d)   # no source overlap: none allowed
        dense += float(d.clamp_min(0).square().sum()) / (ends[0].shape[0] * unit)
    return dense


@pytest.mark.slow
def test_a_limb_inside_the_partner_where_the_source_is_not_is_penalised_and_pushed_out():
    (a, ma), (b, mb) = _lead_into_follow(1.2)         # the source: his hands stop short of her chest
    (ta, _), (tb, _) = _lead_into_follow(0.55)        # the targets' start: his forearms through her chest
    job = _job([(a, ma), (b, mb)], [ta, tb], [ma, mb])
    ends = [m.body_positions.unflatten(1, (-1, 2)) for m in job.members]
    value = float(job.barrier.weighted(ends))
    assert value > 0 and job.barrier.last_entries > 0
    # the candidates hold every overlapping entry: the same sum over every (frame, sphere, capsule), by hand
    assert value == pytest.approx(_dense(job.barrier, ends), rel=1e-5)
    # the same start with its source as deep inside: allowed, nothing to pay
    inside = _job([(ta, ma), (tb, mb)], [ta, tb], [ma, mb])
    assert float(inside.barrier.weighted([m.body_positions.unflatten(1, (-1, 2)) for m in inside.members])) \
        == pytest.approx(0.0, abs=1e-9)
    # solved (the key-vertex terms between the characters off): the barrier takes the forearms out of her chest;
    # without it they stay in
    src = [ClipTrack(a, ma), ClipTrack(b, mb)]
    pen = {"start": evaluate_partners(src, [(ta, ma), (tb, mb)])["partner_pen_mean"]}
    for w in (0.0, 1.0):
        out = _job([(a, ma), (b, mb)], [ta, tb], [ma, mb], w_barrier=w, iterations=40, w_partner=0.0)
        for _ in out.steps():
            pass
        pen[w] = evaluate_partners(src, list(zip([ta, tb], out.results())))["partner_pen_mean"]
    assert pen["start"] > 0.003 and pen[0.0] > 0.5 * pen["start"]
    assert pen[1.0] < 0.25 * pen[0.0]


def test_hands_in_hands_and_on_wrists_are_holds_not_penetrations():
    a, ma, b, mb = couple(frames=8, gap=0.0)
    # the hands clap into each other in the source and in the target (the source's own start)
    job = _job([(a, ma), (b, mb)], [a, b], [ma, mb])
    names = body_capsules(a).names
    excl = job.barrier.blocks[0][5]
    for s, sn in enumerate(names):
        for k, kn in enumerate(names):
            hold = (sn.endswith("_hand") and (kn.endswith("_hand") or kn.endswith("_lower_arm"))
                    or sn.endswith("_lower_arm") and kn.endswith("_hand"))
            assert bool(excl[s, k]) == hold


def test_characters_far_apart_are_not_searched_again_until_they_come_near_and_the_sum_stays_exact():
    (a, ma), (b, mb) = _lead_into_follow(1.2)
    (ta, _), (tb, _) = _lead_into_follow(3.0)         # the targets start 3 m apart
    job = _job([(a, ma), (b, mb)], [ta, tb], [ma, mb])
    bar = job.barrier
    ends = [m.body_positions.unflatten(1, (-1, 2)).detach() for m in job.members]
    toward = (ends[0].mean((0, 1, 2)) - ends[1].mean((0, 1, 2)))
    toward[2] = 0.0
    toward = toward / toward.norm()
    values, refreshed = [], []
    for step in range(30):                             # the follow walks 10 cm a step into the lead's arms
        moved = [ends[0], ends[1] + 0.1 * step * toward]
        before = bar.block_refreshes
        values.append((float(bar.weighted(moved)), _dense(bar, moved)))
        refreshed.append(bar.block_refreshes > before)
    for got, want in values:
        assert got == pytest.approx(want, rel=1e-5, abs=1e-12)
    assert values[0][1] == 0.0 and values[-1][1] > 0           # from far apart into each other
    # far apart, a block is searched again only once the two have come a clearance closer, not every step
    assert refreshed[0] and sum(refreshed) < len(refreshed) // 2
    assert not any(refreshed[1:8])


@pytest.mark.parametrize("gap", [0.6, 3.0])
def test_moves_summed_step_by_step_skip_measuring_only_where_no_frame_can_be_due(gap):
    """Between characters, a block's moves since its last search are measured only when the two characters'
    moves summed evaluation by evaluation (never less) could reach its allowance: two characters jittering by
    millimetres 3 m apart are measured on no step after the first, and the sum stays that of every (frame, sphere,
    capsule); close (his forearms in her chest), they are measured and the sum is exact too."""
    (a, ma), (b, mb) = _lead_into_follow(1.2)
    (ta, _), (tb, _) = _lead_into_follow(gap)
    job = _job([(a, ma), (b, mb)], [ta, tb], [ma, mb])
    bar = job.barrier
    ends = [m.body_positions.unflatten(1, (-1, 2)).detach() for m in job.members]
    rng = np.random.default_rng(3)
    measured = []
    for step in range(25):
        moved = [e + torch.as_tensor(rng.normal(scale=0.004, size=e.shape), dtype=e.dtype) for e in ends]
        before = bar.measured
        assert float(bar.weighted(moved)) == pytest.approx(_dense(bar, moved), rel=1e-5, abs=1e-12)
        measured.append(bar.measured - before)
    if gap > 1.0:
        assert _dense(bar, moved) == 0.0 and not any(measured[1:])
    else:
        assert _dense(bar, moved) > 0 and sum(measured[1:]) > 0


def test_one_character_moving_alone_is_measured_for_the_blocks_of_both_orders():
    """The lead's arms reach into the follow while his centroid, and so everything of hers, stays where it was
    (centred, she has not moved): both blocks, his spheres in her capsules and hers in his arms' capsules, are
    measured again from his moves alone, and the sum stays that of every (frame, sphere, capsule)."""
    (a, ma), (b, mb) = _lead_into_follow(1.2)
    (ta, _), (tb, _) = _lead_into_follow(0.9)
    job = _job([(a, ma), (b, mb)], [ta, tb], [ma, mb])
    bar = job.barrier
    ends = [m.body_positions.unflatten(1, (-1, 2)).detach() for m in job.members]
    toward = ends[1].mean((0, 1, 2)) - ends[0].mean((0, 1, 2))
    toward[2] = 0.0
    toward = toward / toward.norm()
    names = body_capsules(ta).names
    arm = torch.zeros(ends[0].shape[1], dtype=torch.bool)
    arm[[r for r, n in enumerate(names) if "arm" in n or "hand" in n]] = True
    shift = torch.where(arm, 1.0, -float(arm.sum()) / float((~arm).sum()))[None, :, None, None]
    values = []
    for step in range(20):                        # 2 cm a step into her chest, his centroid kept
        lead = ends[0] + 0.02 * step * shift * toward
        assert torch.allclose(lead.mean((1, 2)), ends[0].mean((1, 2)), atol=1e-9)
        values.append((float(bar.weighted([lead, ends[1]])), _dense(bar, [lead, ends[1]])))
    for got, want in values:
        assert got == pytest.approx(want, rel=1e-5, abs=1e-12)
    assert values[0][1] == 0.0 and values[-1][1] > 0


def test_segment_exclusion_by_hand():
    """Segments within two hops of the mapped canonical tree are not tested against each other (a bent elbow or
    a shoulder's joint region is no collision); a hand against the hips or the chest is (unmapped bones skipped)."""
    from core.metrics.measures import segment_exclusion
    bones = ["hips", "spine", "chest", "left_upper_arm", "left_lower_arm", "left_hand", "left_upper_leg"]
    ex = segment_exclusion(bones)
    i = {b: k for k, b in enumerate(bones)}
    assert (ex == ex.T).all() and ex.diagonal().all()
    assert ex[i["left_hand"], i["left_upper_arm"]] and ex[i["hips"], i["chest"]]
    assert ex[i["left_upper_arm"], i["spine"]]               # upper arm -> (shoulder, upper chest unmapped) -> chest -> spine
    assert not ex[i["left_hand"], i["hips"]] and not ex[i["left_hand"], i["chest"]]
    assert not ex[i["left_lower_arm"], i["left_upper_leg"]]


def test_the_own_barrier_costs_nothing_where_the_target_is_as_deep_as_the_source(float64):
    """w_self_barrier: each character against its own other segments. A character retargeted onto itself starts
    exactly as deep in itself as the source (arms ahead, hands close to the body), so the term is 0 there and
    'pen' is unchanged; it has candidate entries (the arms near the torso), so it would act on a deeper limb."""
    ch = with_face(make_humanoid())
    mo = _arms_ahead(ch)
    values = {}
    for w in (0.0, 5.0):
        job = SolveJob(ch, mo, ch, mo, SolverSettings(iterations=1, num_threads=1,
                                                      w_self_barrier=w))
        job.setup()
        with torch.no_grad():
            p, n, sole = job._forward(job.param.zero_residuals())
            values[w] = job.terms_at(p, n, sole, 0.0)
        if w:
            bar = job.own_barrier
            assert bar is not None and len(bar.blocks) == 1 and bar.blocks[0][:2] == (0, 0)
            assert sum(int(c[0].numel()) for c in bar._cand) > 0 and bar.last_entries == 0
        else:
            assert job.own_barrier is None
    assert float(values[5.0]["pen"]) == pytest.approx(float(values[0.0]["pen"]), abs=1e-12)


def test_the_own_barrier_leaves_limbs_that_touch_in_the_source_free_there():
    """A clap: the hands meet in the source, so at those frames the self barrier has no entry between the two
    hands (a contact the source has stays a contact; ``own_contacts``: limbs with a key-vertex pair closer than d_min
    in the source), while it keeps its entries elsewhere."""
    from core.rig.humanoid import limb_of
    src = make_humanoid()
    tgt = make_humanoid(scale=0.9, girth=1.6, name="tgt")
    mo = walk_motion(src, frames=40, clap=True)
    ratio = tgt.skeleton.rest_global[0, 2, 3] / src.skeleton.rest_global[0, 2, 3]
    init = Motion(mo.rotations.copy(), mo.locations * ratio, mo.fps)
    job = SolveJob(src, mo, tgt, init, SolverSettings(iterations=1, num_threads=1, w_self_barrier=1.0))
    job.setup()
    bar = job.own_barrier
    names = list(job._own_caps.names)
    arm = {side: [k for k, n in enumerate(names) if limb_of(n) in (f"{side}_arm", f"{side}_hand")]
           for side in ("left", "right")}
    free = bar.contacts[(0, 0)][:, arm["left"]][:, :, arm["right"]].any(-1).any(-1)        # (T,) the hands touch
    assert 0 < int(free.sum()) < job.num_frames
    with torch.no_grad():                                 # one evaluation: the candidates are searched
        p, n, sole = job._forward(job.param.zero_residuals())
        job.terms_at(p, n, sole, 0.0)
    t, q, k, _ = bar._cand[0]
    seg = torch.div(q, len(SPHERES), rounding_mode="floor")
    assert t.numel() > 0                                  # the barrier watches the body (limbs near the torso)
    assert not bool(bar.contacts[(0, 0)][t, seg, k].any())     # no entry of a segment pair touching in the source then


def test_a_fitted_source_body_allows_none_of_its_own_depths(float64):
    """The self barrier allows each entry the source's depth, unless the source's body is a template fitted to a
    skeleton-only clip (``SkinnedMesh.fitted``): its limbs' overlaps are the fit's, so only copy-rotations' start
    depth is allowed there (and the solve adds none)."""
    from dataclasses import replace
    src = make_humanoid(girth=1.8, name="wide")                 # its arms overlap its torso
    tgt = make_humanoid()
    mo = walk_motion(src, frames=30)
    allow = {}
    for fitted in (False, True):
        s = replace(src, mesh=replace(src.mesh, fitted=fitted))
        job = SolveJob(s, mo, tgt, mo, SolverSettings(iterations=1, num_threads=1,
                                                        w_self_barrier=1.0))
        job.setup()
        with torch.no_grad():
            p, n, sole = job._forward(job.param.zero_residuals())
            job.terms_at(p, n, sole, 0.0)
        bar = job.own_barrier
        assert bar.source_depth == [0.0 if fitted else 1.0]
        t, q, k, a = bar._cand[0]
        allow[fitted] = {key: float(v) for key, v in zip(zip(t.tolist(), q.tolist(), k.tolist()), a)}
    common = set(allow[False]) & set(allow[True])
    assert common
    assert all(allow[True][key] <= allow[False][key] + 1e-12 for key in common)
    assert any(allow[True][key] < allow[False][key] - 1e-4 for key in common)   # the source deeper somewhere


def test_a_fitted_source_body_lends_l_pen_no_depth(monkeypatch, float64):
    """L_pen copies the source's signed depths along the normals, unless the source's body is a fitted template
    (``objective.FITTED_PEN_SURFACE``): then a key vertex behind another's surface in the source only asks the target's
    not to be behind it. A wide source retargeted onto itself: its own pose costs nothing as a captured body, and its
    arms' depths in its torso cost L_pen as a fitted one."""
    from dataclasses import replace
    src = make_humanoid(girth=1.8, name="wide")                 # its arms overlap its torso
    mo = walk_motion(src, frames=30)
    pen = {}
    for fitted, on in ((False, True), (True, True), (True, False)):
        s = replace(src, mesh=replace(src.mesh, fitted=fitted))
        monkeypatch.setattr(objective_module, "FITTED_PEN_SURFACE", on)
        job = SolveJob(s, mo, s, mo, SolverSettings(iterations=1, num_threads=1))
        job.setup()
        assert job.objective.surface_pen == (fitted and on)
        assert job.objective.apart == (fitted and on)       # a captured body's overlaps: L_dist copies them too
        ps = job.objective.init_pairs
        assert bool((ps.src_pen_ij < 0).any())                 # the source has key vertices behind a surface
        with torch.no_grad():
            p, n, _ = job._forward(job.param.zero_residuals())
            pen[fitted, on] = float(job.objective._pair_terms(p, n, 0.0, ps)["pen"])
    assert pen[False, True] < 1e-12 and pen[True, False] < 1e-12    # the source's own depths copied
    assert pen[True, True] > 1e-6                                     # a fitted body's depths are not
    monkeypatch.setattr(objective_module, "CAPTURED_DIST_APART", True)  # the experiment: captured overlaps too
    job = SolveJob(src, mo, src, mo, SolverSettings(iterations=1, num_threads=1))
    job.setup()
    assert job.objective.apart and not job.objective.surface_pen
    monkeypatch.setattr(objective_module, "FITTED_PEN_SURFACE", True)
    monkeypatch.setattr(objective_module, "FITTED_DIST_APART", False)   # a fitted body's overlaps copied by L_dist
    s = replace(src, mesh=replace(src.mesh, fitted=True))
    job = SolveJob(s, mo, s, mo, SolverSettings(iterations=1, num_threads=1))
    job.setup()
    assert job.objective.surface_pen and not job.objective.apart


def test_fit_body_marks_the_body_fitted():
    from core.body import fit_body_to_skeleton
    ch = make_humanoid()
    assert not ch.mesh.fitted
    assert fit_body_to_skeleton(ch.skeleton, ch.bone_map).fitted


def _own_dense(bar, ends) -> float:
    """The own block's barrier by hand over every (frame, sphere, capsule): depth beyond the larger of the source's
    (scaled) and the start's, segment pairs within two hops and those touching in the source left out. Spheres:
    ``SPHERES`` along each capsule axis, then one of radius 0 per bulge point (its row's two ends)."""
    (a, b, ratio, unit, _, excl, _), = bar.blocks
    B = bar.num_caps[0]
    row, u = bar.q_row[0], bar.q_u[0][:, None]

    def depths(e):
        q = e[:, row, 0] + u * (e[:, row, 1] - e[:, row, 0])                       # (T, Q, 3)
        return _depth(q[:, :, None], bar.sphere_r[0][:, None], e[:, None, :B, 0], e[:, None, :B, 1], bar.radius[0])
    d = depths(ends)
    src = bar.src_ends[0]
    q = bar.src_spheres[0]
    d_src = _depth(q[:, :, None], bar.src_sphere_r[0][:, None], src[:, None, :, 0], src[:, None, :, 1], bar.src_r[0])
    allow = torch.maximum(d_src.clamp_min(0) * ratio * bar.source_depth[0], depths(bar.init_ends[0]).clamp_min(0))
    seg = bar.row_seg[0][row]                                                        # (Q,) each sphere's segment
    out = excl[row][None] | bar.contacts[(0, 0)][:, seg]
    return float(torch.where(out, torch.zeros_like(d), (d - allow).clamp_min(0)).square().sum()) / (
        ends.shape[0] * unit)


def test_the_own_barrier_stays_exact_when_a_few_frames_move_far(float64):
    """The own block's candidates and hot entries are searched again frame by frame (only where that frame's
    capsule ends moved as far as it allows): under moves of every size on a few frames at a time, and small
    ones everywhere, the barrier equals the dense sum over every entry at every step."""
    src = make_humanoid(girth=1.8, name="wide")
    tgt = make_humanoid()
    mo = walk_motion(src, frames=24, clap=True)
    job = SolveJob(src, mo, tgt, mo, SolverSettings(iterations=1, num_threads=1,
                                                    w_self_barrier=1.0))
    job.setup()
    bar = job.own_barrier
    ends = job.body_positions.unflatten(1, (-1, 2)).detach().clone()
    g = torch.Generator().manual_seed(1)
    searched = []
    for step in range(25):
        ends = ends + 0.002 * torch.randn(ends.shape, generator=g, dtype=ends.dtype)
        frames = torch.randint(0, ends.shape[0], (3,), generator=g)
        ends[frames] += (0.02 if step % 4 else 0.15) * torch.randn((3,) + ends.shape[1:], generator=g,
                                                                   dtype=ends.dtype)
        before = bar.block_refreshes
        got = float(bar.weighted([ends])) / bar.weight
        assert got == pytest.approx(_own_dense(bar, ends), rel=1e-9, abs=1e-15)
        searched.append(bar.block_refreshes > before)
    assert any(searched[1:]) and _own_dense(bar, ends) > 0


def test_the_own_barrier_searches_nothing_again_when_the_body_moves_as_a_whole(float64):
    """A depth between two segments of one body is unchanged when the body moves as a whole: every frame
    translated by far more than the margin (a root that slides) searches no candidate or hot entry again, and
    the barrier still equals the dense sum."""
    src = make_humanoid(girth=1.8, name="wide")
    mo = walk_motion(src, frames=16, clap=True)
    job = SolveJob(src, mo, make_humanoid(), mo, SolverSettings(iterations=1, num_threads=1,
                                                                w_self_barrier=1.0))
    job.setup()
    bar = job.own_barrier
    ends = job.body_positions.unflatten(1, (-1, 2)).detach().clone()
    g = torch.Generator().manual_seed(2)
    ends = ends + 0.1 * torch.randn(ends.shape, generator=g, dtype=ends.dtype)     # some depths to hold
    bar.weighted([ends])
    searched = (bar.block_refreshes, bar.hot_refreshes)
    for step in range(5):
        ends = ends + torch.randn((ends.shape[0], 1, 1, 3), generator=g, dtype=ends.dtype)
        got = float(bar.weighted([ends])) / bar.weight
        assert got == pytest.approx(_own_dense(bar, ends), rel=1e-9, abs=1e-15)
    assert (bar.block_refreshes, bar.hot_refreshes) == searched and _own_dense(bar, ends) > 0


def test_a_released_barrier_searches_again_and_gives_the_same_value(float64):
    """``release`` (after a solve, before the metrics) forgets the candidates; the next evaluation searches again."""
    src = make_humanoid(girth=1.8, name="wide")
    mo = walk_motion(src, frames=12)
    job = SolveJob(src, mo, make_humanoid(), mo, SolverSettings(iterations=1, num_threads=1,
                                                                w_self_barrier=1.0))
    job.setup()
    bar = job.own_barrier
    ends = job.body_positions.unflatten(1, (-1, 2)).detach()
    ends = ends + 0.1 * torch.randn(ends.shape, generator=torch.Generator().manual_seed(0), dtype=ends.dtype)
    before = float(bar.weighted([ends]))
    searched = bar.block_refreshes
    bar.release()
    assert bar._cand == [None] and bar._hot == [None]
    assert float(bar.weighted([ends])) == pytest.approx(before, rel=1e-12) and before > 0
    assert bar.block_refreshes == searched + 1


def test_release_free_memory_runs_on_glibc():
    import platform
    from core.heap import release_free_memory
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert release_free_memory() is True
    else:
        assert release_free_memory() is False


def _bulgy(depth=0.06):
    """The synthetic body with a bulge: the chest's front vertices pushed ``depth`` forward (out of its core)."""
    import dataclasses
    from core.rig.parts import vertex_segments
    ch = make_humanoid(name="bulgy")
    seg, bones, _ = vertex_segments(ch.skeleton, ch.mesh, ch.bone_map)
    v = ch.mesh.rest_verts.copy()
    front = np.nonzero((seg == bones.index("chest")) & (v[:, 1] > 0.1))[0]
    v[front, 1] += depth
    return dataclasses.replace(ch, mesh=dataclasses.replace(ch.mesh, rest_verts=v)), front


def test_bulge_points_are_the_surface_that_sticks_out_of_its_segments_core():
    """``bulges.bulge_points``: none on the tubes of the synthetic body (every vertex on its core's surface); on a
    chest pushed forward, points on the chest, on those vertices, carried by the chest's bone."""
    from core.rig.skinning import bind_matrices
    from core.solver.bulges import BULGE_POINTS, bulge_points
    plain = make_humanoid()
    assert len(bulge_points(plain, body_capsules(plain))[0]) == 0
    ch, front = _bulgy()
    caps = body_capsules(ch)
    seg, bone, local = bulge_points(ch, caps)
    chest = caps.names.index("chest")
    assert 0 < len(seg) <= BULGE_POINTS and set(seg.tolist()) == {chest}
    assert set(bone.tolist()) == {int(caps.bone[chest])}
    G = bind_matrices(ch.skeleton, ch.mesh)[caps.bone[chest]]
    rest = local @ G[:3, :3].T + G[:3, 3]                     # back in the rest pose: mesh vertices of the bulge
    assert np.abs(rest[:, None] - ch.mesh.rest_verts[front][None]).sum(-1).min(1).max() < 1e-9
    # carried as rows of two equal ends after the capsules' (capsule_points with bulges)
    _, (bones_b, ends_b) = capsule_points(ch, bulges=True)
    B = len(caps.names)
    assert len(bones_b) == 2 * (B + len(seg)) and np.allclose(ends_b[2 * B::2], ends_b[2 * B + 1::2])


def test_a_limb_sunk_into_a_bulge_is_penalised_where_the_cores_stay_apart(float64):
    """The self barrier tests each bulge point (a sphere of radius 0 of its segment) against the other segments'
    cores: a bulge point put inside the left hand's core costs, exactly as the dense sum says, though no
    capsule sphere of the chest reaches the hand; the start (copy-rotations, the source's pose) costs nothing."""
    ch, _ = _bulgy()
    mo = _arms_ahead(ch, frames=4)
    job = SolveJob(ch, mo, ch, mo, SolverSettings(iterations=1, num_threads=1, w_self_barrier=1.0))
    job.setup()
    bar = job.own_barrier
    B, R = bar.num_caps[0], len(bar.row_seg[0])
    assert R > B and len(bar.sphere_r[0]) == B * len(SPHERES) + R - B
    ends = job.body_positions.unflatten(1, (-1, 2)).detach().clone()
    surface = 0 if job.surface is None else (job.surface.rows.stop - job.surface.rows.start) // 2
    assert ends.shape[1] == R + surface                        # the surface barrier's points follow the barrier's
    ends = ends[:, :R]
    assert float(bar.weighted([ends])) == pytest.approx(0.0, abs=1e-12)
    hand = job._own_caps.names.index("left_hand")
    moved = ends.clone()
    moved[:, B] = ends[:, hand].mean(1, keepdim=True)          # the first bulge point on the hand's axis
    got = float(bar.weighted([moved])) / bar.weight
    assert got > 0 and got == pytest.approx(_own_dense(bar, moved), rel=1e-9)
    without = PartnerBarrier(job.settings, [job], [job._own_caps], own=True, init_ends=[ends],
                             contacts=bar.contacts)              # the capsules alone: the hand is not inside
    assert float(without.weighted([moved])) == pytest.approx(0.0, abs=1e-12)


def test_a_joint_solve_carries_the_bulge_points_for_the_own_barriers_and_not_between_the_characters():
    """In a joint solve the group sets each member's carried points (capsule ends, then bulge points): each member's
    own barrier reads them all, the barrier between the characters only the capsules (a bulge has no counterpart in
    the source couple)."""
    a, _ = _bulgy()
    b = make_humanoid(name="partner", object_matrix=facing(np.pi, 0.0, -1.0))
    ma, mb = _arms_ahead(a), _still(b)
    job = _job([(a, ma), (b, mb)], [a, b], [ma, mb], w_self_barrier=1.0)
    m = job.members[0]
    rows = m.body_positions.unflatten(1, (-1, 2)).shape[1]      # then the surface barrier's points, 2 a row
    surface = 0 if m.surface is None else (m.surface.rows.stop - m.surface.rows.start) // 2
    assert rows - surface == len(m.own_barrier.row_seg[0]) > m.own_barrier.num_caps[0]
    assert job.barrier.num_caps == [len(body_capsules(a).names), len(body_capsules(b).names)]
    assert [len(r) for r in job.barrier.row_seg] == job.barrier.num_caps
    ends = [x.body_positions.unflatten(1, (-1, 2)) for x in job.members]
    assert float(job.barrier.weighted(ends)) == pytest.approx(_dense(job.barrier, [e[:, :B] for e, B in
                                                                             zip(ends, job.barrier.num_caps)]))


def test_the_barrier_between_characters_leaves_limbs_that_touch_in_the_source_couple_free_there():
    """A lead whose hands come to rest on his partner's shoulders in the source (frames 6–11; before, his arms are
    out to the sides): the barrier between them leaves his hands (and arms) against her arms free on those frames and
    ``CONTACT_HOLD_S`` before (``partner_contacts``: limbs with a key-vertex pair closer than d_min in the source
    couple), so targets whose hands sink into her shoulders there pay nothing for it, while the same hands in her
    shoulders on the first frames, where the source's are away, are still entries of the barrier."""
    from core.rig.humanoid import limb_of
    from core.solver.free_pairs import CONTACT_HOLD_S, partner_contacts
    (a, _), (b, _) = _lead_into_follow(0.65)         # arms ahead, his hands 3 cm from her shoulders
    mb = _still(b, 12)
    out, ahead = _still(a, 6), _arms_ahead(a, 6)
    ma = Motion(np.concatenate([out.rotations, ahead.rotations]), np.concatenate([out.locations, ahead.locations]),
                30.0)
    (ta, _), (tb, _) = _lead_into_follow(0.5)         # the targets: his arms ahead on every frame, into her
    job = _job([(a, ma), (b, mb)], [ta, tb], [_arms_ahead(ta, 12), mb])
    caps = [body_capsules(a), body_capsules(b)]
    free = partner_contacts(job.members, caps)
    assert torch.equal(free[(1, 0)], free[(0, 1)].transpose(1, 2))
    hand = torch.as_tensor([limb_of(n).endswith("_hand") for n in caps[0].names])
    arm = torch.as_tensor([limb_of(n).endswith("_arm") for n in caps[1].names])
    first = 6 - round(CONTACT_HOLD_S * 30.0)                          # 3: the hold before the contact
    assert free[(0, 1)][:, hand][:, :, arm].flatten(1).any(1).tolist() == [t >= first for t in range(12)]
    assert bool(free[(0, 1)][6:][:, ~hand][:, :, arm].any())         # his forearms go along with his hands

    def hand_arm_frames(barrier):
        """the frames of the candidates between his hands' spheres and her arms' capsules, after one evaluation"""
        value = float(barrier.weighted([m.body_positions.unflatten(1, (-1, 2)) for m in job.members]))
        i = next(k for k, blk in enumerate(barrier.blocks) if blk[:2] == (0, 1))
        t, q, k, _ = barrier._cand[i]
        seg = barrier.row_seg[0][barrier.q_row[0][q]]
        return set(t[hand[seg] & arm[k]].tolist()), value
    with torch.no_grad():
        kept, value = hand_arm_frames(job.barrier)
        job.barrier.contacts = None                     # the same barrier without the source couple's contacts
        job.barrier.release()
        every, without = hand_arm_frames(job.barrier)
    assert kept and kept <= set(range(first))           # his hands in her shoulders where the source's are away
    assert every >= kept | set(range(6, 12))
    assert 0.0 < value < without
