"""Several characters retargeted together (ReConForM §6.1): placement of copy-rotations, the joint solve
(core.solver.GroupSolveJob) and the group generator (core.pipeline.group.RetargetGroup)."""

import math
import threading
from dataclasses import replace

import numpy as np
import pytest
import torch

from core.pipeline.copy_rotations import copy_rotations

from core.pipeline.placement import place_together
from core.errors import CoreError
from core.metrics.partners import evaluate_partners
from core.pipeline.retarget import Retarget, RetargetOptions, run
from core.pipeline.group import RetargetGroup, run_group
from core.solver import GroupSolveJob, SolveJob, SolverSettings
from core.solver import partners as partners_module
from core.character.track import ClipTrack
from core.types import Motion
from tests.core.synth import couple, facing, make_humanoid, reach_motion, walk_motion, with_face

FAST = dict(iterations=12, num_threads=1)


def _hips(character, motion):
    return ClipTrack(character, motion).world_positions[:, character.skeleton.index(character.bone_map["hips"])]


def _forward(character, motion, t=0):
    wp = ClipTrack(character, motion).world_positions[t]
    bm = character.bone_map
    left = wp[character.skeleton.index(bm["left_upper_arm"])] - wp[character.skeleton.index(bm["right_upper_arm"])]
    left[2] = 0.0
    left /= np.linalg.norm(left)
    return np.cross(left, [0.0, 0.0, 1.0])


@pytest.fixture(scope="module")
def scene():
    """A couple clapping into each other's hands, and partners of other sizes placed elsewhere in the world."""
    a, ma, b, mb = couple(frames=30)
    ta = with_face(make_humanoid(scale=1.25, girth=1.3, name="tall"))
    tb = with_face(make_humanoid(scale=0.8, name="short", object_matrix=facing(0.5 * np.pi, 3.0, 1.0)))
    return a, ma, b, mb, ta, tb


def test_place_together_keeps_one_pair_and_the_partners_relative_places(scene):
    a, ma, b, mb, ta, tb = scene
    tra, trb = ClipTrack(a, ma), ClipTrack(b, mb)
    ia, ib = copy_rotations(a, ma, ta, tra), copy_rotations(b, mb, tb, trb)
    (only,) = place_together([(a, ma, tra, ta, ia)])
    assert only is ia
    pa, pb = place_together([(a, ma, tra, ta, ia), (b, mb, trb, tb, ib)])
    assert pa is ia
    # tb was turned by 90° and stands elsewhere: placed, it faces the way its source does, relative to the anchor
    assert _forward(tb, pb) == pytest.approx(_forward(b, mb), abs=1e-6)
    assert not np.allclose(_forward(tb, ib), _forward(b, mb), atol=1e-3)
    # its hips follow the anchor's, offset as the sources' are, scaled by the mean hip-height ratio
    off_src = (_hips(b, mb) - _hips(a, ma))[:, :2]
    off_tgt = (_hips(tb, pb) - _hips(ta, pa))[:, :2]
    ratio = np.linalg.norm(off_tgt, axis=1) / np.linalg.norm(off_src, axis=1)
    assert np.ptp(ratio) < 1e-6 and 0.8 < ratio[0] < 1.25
    # its own height stays (its feet on the floor as copy-rotations put them), its limbs are untouched
    assert _hips(tb, pb)[:, 2] == pytest.approx(_hips(tb, ib)[:, 2], abs=1e-9)
    hips = tb.skeleton.index(tb.bone_map["hips"])
    others = [j for j in range(tb.skeleton.num_bones) if j != hips]
    assert np.array_equal(pb.rotations[:, others], ib.rotations[:, others])


def test_a_couple_placed_with_a_dancer_across_the_room_stands_as_its_own_sizes_say(scene):
    """Three characters: a solo dancer 3 m away is the anchor, the couple (targets 1.25× and 0.8× their sources)
    stands as it does placed alone, its offset turned and scaled by the two partners' sizes only. Placed relative
    to the anchor alone (the rule before), the couple's sizes scale their 3 m to the anchor differently and their
    own offset is off by 0.7 m."""
    a, ma, b, mb, ta, tb = scene
    c = with_face(make_humanoid(name="solo", object_matrix=facing(0.0, 3.0, 0.0)))
    mc = reach_motion(c, frames=ma.num_frames)
    tc = with_face(make_humanoid(name="mid", object_matrix=facing(0.0, -2.0, 0.0)))

    def pair(s, m, t):
        tr = ClipTrack(s, m)
        return s, m, tr, t, copy_rotations(s, m, t, tr)
    pa2, pb2 = place_together([pair(a, ma, ta), pair(b, mb, tb)])
    pc, pa3, pb3 = place_together([pair(c, mc, tc), pair(a, ma, ta), pair(b, mb, tb)])
    alone = (_hips(tb, pb2) - _hips(ta, pa2))[:, :2]
    with_solo = (_hips(tb, pb3) - _hips(ta, pa3))[:, :2]
    assert np.linalg.norm(with_solo - alone, axis=1).max() < 0.02 * np.linalg.norm(alone, axis=1).min()
    # the solo dancer stays on the side and at the distance its source does (the sizes, 1 to 1.25, between)
    to_couple = (_hips(ta, pa3) - _hips(tc, pc))[:, :2]
    assert (to_couple[:, 0] < -3.0).all() and (to_couple[:, 0] > -3.75).all()
    assert np.abs(to_couple[:, 1]).max() < 0.1
    # each target faces the way its source does, and keeps its height
    for src, mo, tgt, placed, init in ((a, ma, ta, pa3, pair(a, ma, ta)[4]), (b, mb, tb, pb3, pair(b, mb, tb)[4])):
        assert _forward(tgt, placed) == pytest.approx(_forward(src, mo), abs=1e-6)
        assert _hips(tgt, placed)[:, 2] == pytest.approx(_hips(tgt, init)[:, 2], abs=1e-9)


def test_placement_frame_block_by_block_is_the_same(monkeypatch):
    """``_placement`` solves a block of frames at a time (a crowd's pairwise arrays stay bounded): one frame at a
    time gives the placement all frames at once give, and a couple 0.5 m apart keeps its own scaled offset."""
    from core.pipeline import placement as cr
    rng = np.random.default_rng(0)
    T, K = 7, 4
    hips = np.zeros((T, K, 3))
    hips[:, :, :2] = rng.normal(scale=0.2, size=(T, K, 2)) + [[0.0, 0.0], [4.0, 0.0], [4.0, 0.0], [0.0, 4.0]]
    hips[:, :, 2] = 1.0
    hips[:, 2] = hips[:, 1] + [0.5, 0.0, 0.0]                  # characters 1 and 2: a couple, 4 m from the others
    ratios = np.array([1.0, 1.2, 0.8, 1.1])
    A0 = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    p0 = rng.normal(size=(T, 3))
    whole = cr._placement(hips, ratios, A0, p0)
    monkeypatch.setattr(cr, "PLACEMENT_ENTRIES", K * K)     # one frame at a time
    assert np.allclose(cr._placement(hips, ratios, A0, p0), whole, atol=1e-12)
    assert np.array_equal(whole[:, 0], p0)
    couple = whole[:, 2] - whole[:, 1]
    assert np.abs(couple - 0.5 * (1.2 + 0.8) * (hips[:, 2] - hips[:, 1]) @ A0.T)[:, :2].max() < 0.02


def test_a_joint_solve_of_one_pair_is_the_single_solve(scene):
    a, ma, _, _, ta, _ = scene
    init = copy_rotations(a, ma, ta)
    s = SolverSettings(**FAST)
    single = SolveJob(a, ma, ta, init, s).run()
    (joint,) = GroupSolveJob([SolveJob(a, ma, ta, init, s)]).run()
    assert np.array_equal(single.rotations, joint.rotations)
    assert np.array_equal(single.locations, joint.locations)


def test_a_group_of_one_pair_is_the_single_retarget(scene):
    a, ma, _, _, ta, _ = scene
    opts = RetargetOptions(settings=SolverSettings(**FAST), conflicts=False)
    single = run(Retarget(a, ma, ta, opts))
    group = run_group(RetargetGroup([(a, ma, ta)], opts))
    (member,) = group.members
    assert np.array_equal(single.motion.rotations, member.motion.rotations)
    assert np.array_equal(single.motion.locations, member.motion.locations)
    assert np.array_equal(single.init_motion.rotations, member.init_motion.rotations)
    for k, v in single.metrics.items():
        assert member.metrics[k] == pytest.approx(v, nan_ok=True), k
    assert group.partner_metrics is None


@pytest.mark.slow
def test_a_couple_retargeted_onto_itself_comes_back_as_the_source(scene):
    # every term is ~0 at the start, yet Adam's first steps move the pose a little before the terms bring it
    # back: the single solve of the same identity pair does not come back exactly either. The group must come
    # back as closely as each pair solved alone (measured here), and within a few millimetres
    a, ma, b, mb, _, _ = scene
    a2, b2 = replace(a, skeleton=replace(a.skeleton, name="lead copy")), replace(b, skeleton=replace(b.skeleton,
                                                                                                     name="follow copy"))
    opts = RetargetOptions(settings=SolverSettings(num_threads=1), conflicts=False)
    out = run_group(RetargetGroup([(a, ma, a2), (b, mb, b2)], opts))
    alone = [run(Retarget(src, mo, tgt, opts)).motion for src, mo, tgt in ((a, ma, a2), (b, mb, b2))]
    for member, single, src, mo in zip(out.members, alone, (a, b), (ma, mb)):
        want = ClipTrack(src, mo).keyverts[0]
        err = np.linalg.norm(ClipTrack(member.target, member.motion).keyverts[0] - want, axis=-1)
        err_alone = np.linalg.norm(ClipTrack(member.target, single).keyverts[0] - want, axis=-1)
        assert err.max() < 3e-3 and err.mean() < 5e-4         # metres
        assert err.max() <= 1.25 * err_alone.max() and err.mean() <= 1.25 * err_alone.mean()
    pm = out.partner_metrics
    pm_alone = evaluate_partners([ClipTrack(a, ma), ClipTrack(b, mb)], [(a2, alone[0]), (b2, alone[1])])
    assert pm["partner_contact_f1"] == pytest.approx(1.0)
    assert pm["hand_partner_error_mean"] < 1e-3
    assert pm["hand_partner_error_mean"] <= max(pm_alone["hand_partner_error_mean"], 1e-4)
    # penetration between the characters: the source's (the synthetic hands clap into each other), as closely
    # as the pairs solved alone keep it
    off = abs(pm["partner_pen_mean"] - pm["source_partner_pen_mean"])
    # no worse than the pairs solved alone, within 10 % of their offset: on this 30-frame couple float32
    # round-off (a different but equivalent skinning product order) moves the share by a few % either way
    assert off <= 1.1 * max(abs(pm_alone["partner_pen_mean"] - pm["source_partner_pen_mean"]), 1e-3)


@pytest.fixture
def group_job(scene):
    """The couple's joint solve onto the partners, set up (not stepped)."""
    return _group_job(scene)


def _group_job(scene):
    a, ma, b, mb, ta, tb = scene
    s = SolverSettings(**FAST)
    tra, trb = ClipTrack(a, ma), ClipTrack(b, mb)
    inits = place_together([(a, ma, tra, ta, copy_rotations(a, ma, ta, tra)),
                            (b, mb, trb, tb, copy_rotations(b, mb, tb, trb))])
    job = GroupSolveJob([SolveJob(a, ma, ta, inits[0], s, source_track=tra),
                         SolveJob(b, mb, tb, inits[1], s, source_track=trb)])
    job._setup()
    return job


def _check_member_rates(job):
    """Every member's rates follow ``member_rates``' rule, on each of its bone groups' grids (``Parametrisation.
    groups``: the main grid, and the upper body's where it has its own)."""
    from core.solver.group import ARM_STEP, PARTNER_STEP, member_rates
    shared = job.partners.shared_vertices()                               # (T, Ntot)
    off = job.partners.offsets
    s = job.members[0].settings
    first = 0
    for c, m in enumerate(job.members):
        own = shared[:, off[c]:off[c + 1]]
        limbs = np.asarray(m.limbs)
        hands = own[:, np.char.endswith(limbs, "_hand")].any(1)          # (T,) frames where a hand is shared
        assert 0 < hands.sum() < len(hands)                               # the hands meet on some frames
        assert not own[:, np.char.endswith(limbs, "_leg") | np.char.endswith(limbs, "_foot")].any()
        rates = job.base_lrs[first:first + len(m.param.params)]
        first += len(m.param.params)
        assert len(rates) == len(m.param.rates(s.lr_rot, s.lr_root))

        def controls(basis, frames):
            """(C_g,) the controls of ``basis`` (T, C_g) that shape any of ``frames`` (T,) bool."""
            return (basis[frames] != 0).any(0)
        mixed = False
        for g, (cols, band) in enumerate(m.param.groups):
            basis = band.dense()
            rot = rates[0 if g == 0 else g + 1].squeeze(-1).numpy()      # (C_g, Jo_g)
            near = controls(basis, own.any(1))
            for i, k in enumerate(cols):
                part = m.opt_parts[k]
                if part.endswith(("_leg", "_foot")):
                    np.testing.assert_allclose(rot[:, i], s.lr_rot, rtol=1e-6)
                elif part.startswith(("left", "right")):                # an arm: where its own chain is shared
                    chain = [part.replace("_hand", "_arm"), part.replace("_arm", "_hand")]
                    mine = controls(basis, own[:, np.isin(limbs, chain)].any(1))
                    np.testing.assert_allclose(rot[:, i], np.where(mine, s.lr_rot * ARM_STEP, s.lr_rot), rtol=1e-6)
                    mixed = mixed or (mine.any() and not mine.all())
                else:
                    np.testing.assert_allclose(rot[:, i], np.where(near, s.lr_rot * PARTNER_STEP, s.lr_rot),
                                               rtol=1e-6)
        near = controls(m.param.basis, own.any(1))
        np.testing.assert_allclose(rates[1].squeeze(-1).numpy(), np.where(near, s.lr_root * PARTNER_STEP, s.lr_root),
                                   rtol=1e-6)
        assert near.any() and mixed                 # (the eyes look at the partner throughout: ``near`` is all)
        every = np.concatenate([rates[i].squeeze(-1).numpy().ravel() for i in [0] + list(range(2, len(rates)))])
        assert job.stats["single_rate_share"][c] == pytest.approx(float(np.mean(every == s.lr_rot)))
        for a, b in zip(member_rates(m, PARTNER_STEP, own), rates):
            np.testing.assert_allclose(torch.as_tensor(a).numpy(), torch.as_tensor(b).numpy())
        assert member_rates(m, PARTNER_STEP, np.zeros_like(own)) == m.param.rates(s.lr_rot, s.lr_root)
        assert member_rates(m, PARTNER_STEP, None) == m.param.rates(s.lr_rot * PARTNER_STEP, s.lr_root * PARTNER_STEP)
        assert member_rates(m, 1.0, own) == m.param.rates(s.lr_rot, s.lr_root)


def test_where_no_partner_term_acts_a_member_steps_at_the_single_solves_rate(group_job):
    """The couple's hands meet, their legs stay apart: on the control points of the frames where a hand's key
    vertex is shared with the partner, the arm's bones step at ARM_STEP of their single-solve rates, the other
    non-leg bones and the root at PARTNER_STEP; the legs' bones everywhere, and every bone where nothing is shared,
    at the single solve's (``group.member_rates``). Nothing shared at all: the single solve's rates; no partner
    terms: PARTNER_STEP everywhere."""
    from core.solver import group
    from core.solver.group import PARTNER_STEP, member_rates
    job = group_job
    assert all(len(m.param.groups) == 1 for m in job.members)             # 30 fps: one grid
    _check_member_rates(job)
    shared = job.partners.shared_vertices()
    off = job.partners.offsets
    s = job.members[0].settings
    # the arm's share is its own (ARM_STEP): at 1 the arms step at the single solve's rate where their hands are
    # shared, while the torso keeps PARTNER_STEP there
    m, own = job.members[0], shared[:, off[0]:off[1]]
    arm = [k for k, part in enumerate(m.opt_parts) if part.endswith(("_arm", "_hand"))]
    torso = [k for k, part in enumerate(m.opt_parts) if not part.startswith(("left", "right"))]
    prev = group.ARM_STEP
    try:
        group.ARM_STEP = 1.0
        rot = member_rates(m, PARTNER_STEP, own)[0][..., 0].numpy()
    finally:
        group.ARM_STEP = prev
    assert arm and torso and np.allclose(rot[:, arm], s.lr_rot)
    assert rot[:, torso].min() == pytest.approx(s.lr_rot * PARTNER_STEP)


def test_at_120_fps_the_upper_body_grid_takes_the_same_rates_and_the_joint_step_runs():
    """A 120 fps couple: each member's neck, head, collarbones, chest and spine are on the upper body's finer grid
    (``parametrisation.UPPER_KNOTS``), a third control tensor whose rates follow the same rule on its own controls; a
    joint step moves every control tensor."""
    a, ma, b, mb = couple(frames=60, fps=120.0)
    ta = with_face(make_humanoid(scale=1.25, girth=1.3, name="tall"))
    tb = with_face(make_humanoid(scale=0.8, name="short", object_matrix=facing(0.5 * np.pi, 3.0, 1.0)))
    job = _group_job((a, ma, b, mb, ta, tb))
    for m in job.members:
        assert len(m.param.groups) == 2 and len(m.param.params) == 3
        upper = sorted(m.opt_parts[k] for k in m.param.groups[1][0])
        assert upper == ["head", "head", "left_arm", "right_arm", "torso", "torso"]  # neck, head, collarbones, spine
        assert m.param.groups[1][1].num_controls > m.param.basis.shape[1]      # finer
    _check_member_rates(job)
    before = [t.detach().clone() for t in job.optim.params]
    job._adam_step()
    assert all(not torch.equal(t0, t1.detach()) for t0, t1 in zip(before, job.optim.params))


def test_no_gradient_flows_through_the_partners_gaze_weights(group_job):
    job = group_job
    po = job.partners
    assert len(po.lookers) == 2
    with torch.no_grad():
        p = torch.cat([m.p_init for m in job.members], 1).clone()
        n = torch.cat([m.n_init for m in job.members], 1)
    # the target's cone weights are read from a copy of the state: its gradient must stay empty, the state's not
    p.requires_grad_(True)
    q = p.detach().clone().requires_grad_(True)
    e, _ = po._gaze(p, q, 1.0)
    assert e.numel() > 0
    e.sum().backward()
    assert q.grad is None and torch.count_nonzero(p.grad) > 0
    # and the solve hands it a detached copy: the gradient is that of the weights held constant, for either form
    # of the gaze term
    t, c, m, w = po._gaze_entries(p.detach(), 1.0)
    N = p.shape[1]
    flat = p.reshape(-1, 3)
    d = flat[t * N + po.others[c, m]] - flat[t * N + po.tgt_eyes[c]]
    cos = torch.nn.functional.cosine_similarity
    held = {"direction": (w * (1 - cos(po.look_dir[t, c, m], d, dim=-1))).square().sum(),
            "look": (w * (cos(po.target_gaze(p)[t, c], d.detach(), dim=-1) - po.look_cos[t, c, m])).square().sum()}
    try:
        for term, value in held.items():
            po.gaze_term = term
            (g_held,) = torch.autograd.grad(value, p, retain_graph=True)
            e, _ = po._gaze(p, p.detach(), 1.0)
            (g,) = torch.autograd.grad(e.sum(), p)
            assert torch.allclose(g, g_held, atol=1e-5), term
    finally:
        po.gaze_term = partners_module.GAZE_TERM
    out = po.weighted(p, n, 1.0)
    assert set(out) == {"partner_dist", "partner_dir", "partner_pen", "gaze"}


def test_the_look_gaze_term_turns_only_the_lookers_head(group_job, monkeypatch):
    """GAZE_TERM 'look' (the default): the angle between a target's gaze and its eye → partner direction against
    the source's. Only the looker's three head key vertices (its head's orientation) get a gradient: neither
    the partner looked at nor the looker's body is moved to keep a direction, as the paper's form does (a tall
    character crouching to look up at a short partner the way the source looked up)."""
    po = group_job.partners
    assert po.gaze_term == partners_module.GAZE_TERM == "look"
    with torch.no_grad():
        p = torch.cat([m.p_init for m in group_job.members], 1).clone()
    p.requires_grad_(True)
    e, c = po._gaze(p, p.detach(), 1.0)
    assert e.numel() > 0 and float(e.detach().sum()) > 0
    (g,) = torch.autograd.grad(e.sum(), p)
    moved = set(torch.nonzero(g.abs().sum(-1).sum(0) > 0, as_tuple=True)[0].tolist())
    heads = set(po.tgt_head[torch.unique(c)].reshape(-1).tolist())
    assert moved and moved <= heads
    try:    # the paper's form moves the eyes and the partners' key vertices
        po.gaze_term = "direction"
        e, _ = po._gaze(p, p.detach(), 1.0)
        (g,) = torch.autograd.grad(e.sum(), p)
        assert set(torch.nonzero(g.abs().sum(-1).sum(0) > 0, as_tuple=True)[0].tolist()) - heads
    finally:
        po.gaze_term = "look"
    monkeypatch.setattr(partners_module, "GAZE_TERM", "sideways")
    with pytest.raises(CoreError, match="GAZE_TERM must be one of look, direction"):
        type(po)(po.settings, group_job.members)


def test_the_contact_state_between_partners_is_added_to_partner_l_dist_on_request(group_job, monkeypatch):
    """partners.PARTNER_CONTACT_STATE: the pairs between the characters pay the contact state too, inside partner
    L_dist; off (the default), nothing of it. With the follow moved 30 cm away, held hands are on the wrong side of
    d_min."""
    po = group_job.partners
    assert partners_module.PARTNER_CONTACT_STATE is False
    with torch.no_grad():
        p = torch.cat([m.p_init for m in group_job.members], 1).clone()
        n = torch.cat([m.n_init for m in group_job.members], 1)
        p[:, group_job.members[0].num_keyverts:, 0] += 0.3
        entries = po.raw_entries(p, 1.0)
        off = po.weighted(p, n, 1.0, entries)
        monkeypatch.setattr(partners_module, "PARTNER_CONTACT_STATE", True)
        on = po.weighted(p, n, 1.0, entries)
    assert float(on["partner_dist"]) > 1.01 * float(off["partner_dist"])
    assert all(float(on[k]) == float(off[k]) for k in ("partner_dir", "partner_pen", "gaze"))


@pytest.mark.slow
def test_the_joint_solve_joins_the_hands_that_solving_alone_loses(scene):
    a, ma, b, mb, ta, tb = scene
    s = SolverSettings(iterations=60, num_threads=1)
    tra, trb = ClipTrack(a, ma), ClipTrack(b, mb)
    inits = place_together([(a, ma, tra, ta, copy_rotations(a, ma, ta, tra)),
                            (b, mb, trb, tb, copy_rotations(b, mb, tb, trb))])
    alone = [SolveJob(a, ma, ta, inits[0], s, source_track=tra).run(),
             SolveJob(b, mb, tb, inits[1], s, source_track=trb).run()]
    joint = GroupSolveJob([SolveJob(a, ma, ta, inits[0], s, source_track=tra),
                           SolveJob(b, mb, tb, inits[1], s, source_track=trb)]).run()
    res = {name: evaluate_partners([tra, trb], [(ta, m0), (tb, m1)])
           for name, (m0, m1) in (("copy", inits), ("alone", alone), ("joint", joint))}
    assert res["joint"]["partner_contact_f1"] > max(res["alone"]["partner_contact_f1"],
                                                      res["copy"]["partner_contact_f1"]) + 0.2
    assert res["joint"]["hand_partner_error_mean"] < 0.5 * min(res["alone"]["hand_partner_error_mean"],
                                                              res["copy"]["hand_partner_error_mean"])


def test_without_terms_between_them_the_characters_are_solved_as_alone(scene):
    """w_partner and w_gaze 0: no term between the characters is built or evaluated, and with no barrier either
    each character's result is its single solve's at the group's step (PARTNER_STEP of its learning rates); with
    the barrier on, the barrier alone joins them."""
    from core.solver.group import PARTNER_STEP
    a, ma, b, mb, ta, tb = scene
    inits = place_together([(a, ma, ClipTrack(a, ma), ta, copy_rotations(a, ma, ta)),
                            (b, mb, ClipTrack(b, mb), tb, copy_rotations(b, mb, tb))])
    s = SolverSettings(w_partner=0.0, w_gaze=0.0, w_barrier=0.0, **FAST)
    group = GroupSolveJob([SolveJob(a, ma, ta, inits[0], s), SolveJob(b, mb, tb, inits[1], s)])
    joint = group.run()
    assert group.partners is None and group.barrier is None
    half = replace(s, lr_rot=s.lr_rot * PARTNER_STEP, lr_root=s.lr_root * PARTNER_STEP)
    for (src, mo, tgt), init, got in zip([(a, ma, ta), (b, mb, tb)], inits, joint):
        alone = SolveJob(src, mo, tgt, init, half).run()
        np.testing.assert_allclose(got.rotations, alone.rotations, rtol=0, atol=1e-6)
        np.testing.assert_allclose(got.locations, alone.locations, rtol=0, atol=1e-6)
    group = GroupSolveJob([SolveJob(a, ma, ta, inits[0], replace(s, w_barrier=1.0)),
                           SolveJob(b, mb, tb, inits[1], replace(s, w_barrier=1.0))])
    group.run()
    assert group.partners is None and group.barrier is not None
    assert "partner_barrier" in group.history[-1] and "partner_dist" not in group.history[-1]


def test_group_checks_its_pairs(scene):
    a, ma, b, mb, ta, tb = scene
    with pytest.raises(CoreError, match="same frame range"):
        RetargetGroup([(a, ma, ta), (b, mb.slice(0, 10), tb)])
    with pytest.raises(CoreError, match="appears in two pairs"):
        RetargetGroup([(a, ma, ta), (b, mb, ta)])
    with pytest.raises(CoreError, match="at least one"):
        RetargetGroup([])
    # per-pair part weights (a batch set-up's 'characters' entries): one per pair, multiplied into the shared ones
    with pytest.raises(CoreError, match="one per pair"):
        RetargetGroup([(a, ma, ta), (b, mb, tb)], part_weights=[None])
    with pytest.raises(CoreError, match="unknown body part 'arm'"):
        RetargetGroup([(a, ma, ta), (b, mb, tb)], part_weights=[{"arm": {"dist": 1.0}}, None])
    shared = RetargetOptions(settings=SolverSettings(part_weights={("head", "dist"): 2.0}))
    group = RetargetGroup([(a, ma, ta), (b, mb, tb)], shared,
                          part_weights=[{"head": {"dist": 0.5, "partner": 3}}, None])
    assert group.member_settings[0].part_weights == {("head", "dist"): 1.0, ("head", "partner"): 3.0}
    assert group.member_settings[1] is shared.settings


def test_cancelling_a_group_produces_nothing(scene):
    a, ma, b, mb, ta, tb = scene
    job = RetargetGroup([(a, ma, ta), (b, mb, tb)], RetargetOptions(settings=SolverSettings(**FAST)))
    phases = []
    for step in job.steps():
        phases.append(step.phase)
        if step.phase == "solve" and step.solver is not None and step.solver.step == 2:
            job.cancel()
    assert job.cancelled and job.outcome is None and not job.job.done
    assert "metrics" not in phases
    with pytest.raises(CoreError, match="cancelled"):
        job.job.results()


def test_gaze_candidates_hold_every_nonzero_cone_weight(group_job):
    job = group_job
    po = job.partners
    with torch.no_grad():
        p = torch.cat([m.p_init for m in job.members], 1).clone()
    rng = np.random.default_rng(0)
    for step in range(15):
        p = p + torch.as_tensor(rng.normal(scale=0.001, size=p.shape), dtype=p.dtype)
        t, c, m, w = po._gaze_entries(p, 0.8)
        dense = po.look_src + 0.8 * po._look(p, po.tgt_eyes, po.target_gaze(p))
        want = torch.nonzero(dense > 0, as_tuple=True)
        got = set(zip(t.tolist(), c.tolist(), m.tolist()))
        assert got == set(zip(*(x.tolist() for x in want)))
        assert torch.allclose(w, dense[t, c, m], atol=1e-6)
    assert 1 <= po.gaze_refreshes < 15
    # two frames jump past the slack, the others hold still: only the frames whose key vertices or gaze (a
    # window mean over time: the jump's neighbours too) moved are searched again; the set is still exact and in
    # (frame, looker, other) order
    T = p.shape[0]
    for step in range(4):
        jump = torch.zeros((T, 1, 1), dtype=p.dtype)
        jump[torch.as_tensor(rng.choice(T, 2, replace=False))] = 0.05
        p = p + jump * torch.as_tensor(rng.normal(size=p.shape), dtype=p.dtype)
        before = po._gaze_ref[1].clone()
        t, c, m, w = po._gaze_entries(p, 0.8)
        assert 0 < int((po._gaze_ref[1] != before).any(-1).any(-1).sum()) < T
        dense = po.look_src + 0.8 * po._look(p, po.tgt_eyes, po.target_gaze(p))
        want = torch.nonzero(dense > 0, as_tuple=True)
        assert all(torch.equal(x, y) for x, y in zip((t, c, m), want))
        assert torch.allclose(w, dense[t, c, m], atol=1e-6)


def test_three_characters_one_far_away(scene):
    # a third pair 25 m away: it joins the solve, yet its character pairs never reach the narrow phase
    a, ma, b, mb, ta, tb = scene
    far_src = replace(a, skeleton=replace(a.skeleton, name="far", object_matrix=facing(0.0, 25.0, 0.0)))
    far_tgt = with_face(make_humanoid(scale=0.9, name="far target"))
    out = run_group(RetargetGroup([(a, ma, ta), (b, mb, tb), (far_src, ma, far_tgt)],
                                  RetargetOptions(settings=SolverSettings(iterations=4, num_threads=1), metrics=False,
                                                  conflicts=False)))
    assert len(out.members) == 3 and all(np.isfinite(m.motion.rotations).all() for m in out.members)
    pp = out.job.partners.pairs
    assert pp.blocks == [(0, 1), (0, 2), (1, 2)]
    assert pp.broad_tests >= 3 * ma.num_frames
    ps, block = pp.active(None, 0.0)
    assert set(block.tolist()) <= {0}                  # source entries only between the couple
    assert out.solver_stats["partner_narrow_blocks"] <= pp.refreshes * ma.num_frames + ma.num_frames
    # the far target stays far: its hips about 25 m · r̄ from the lead's
    d = np.linalg.norm((_hips(far_tgt, out.members[2].motion) - _hips(ta, out.members[0].motion))[:, :2], axis=1)
    assert d.min() > 20.0


def _moved(character, name, dx):
    m = character.skeleton.object_matrix.copy()
    m[0, 3] += dx
    return replace(character, skeleton=replace(character.skeleton, name=name, object_matrix=m))


@pytest.mark.slow
def test_five_characters_two_couples_and_a_solo_dancer(scene):
    # the K = 5: two couples 4 m apart and a solo dancer, one generator with one progress bar
    a, ma, b, mb, ta, tb = scene
    pairs = [(a, ma, ta), (b, mb, tb),
             (_moved(a, "lead 2", 4.0), ma, with_face(make_humanoid(scale=1.1, name="tall 2"))),
             (_moved(b, "follow 2", 4.0), mb, with_face(make_humanoid(scale=0.9, name="short 2"))),
             (_moved(a, "solo", -4.0), ma, with_face(make_humanoid(scale=1.0, girth=1.2, name="solo target")))]
    job = RetargetGroup(pairs, RetargetOptions(settings=SolverSettings(iterations=4, num_threads=1), metrics=False,
                                               conflicts=False))
    fractions = [step.fraction for step in job.steps()]
    out = job.outcome
    assert len(out.members) == 5 and all(np.isfinite(m.motion.rotations).all() for m in out.members)
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0)
    assert out.solver_stats["steps"] == 4
    pp = out.job.partners.pairs
    assert len(pp.blocks) == 10
    _, block = pp.active(None, 0.0)
    # source contacts only inside each couple: (0, 1) and (2, 3)
    assert {pp.blocks[k] for k in set(block.tolist())} == {(0, 1), (2, 3)}
    # the second couple (its targets 1.1× and 0.9×, 4 m from the anchor) starts as it does placed on its own
    inits = [m.init_motion for m in out.members]
    tracks = [m.source_track for m in out.members]
    alone = place_together([(s, mo, tr, t, copy_rotations(s, mo, t, tr))
                            for (s, mo, t), tr in zip(pairs[2:4], tracks[2:4])])
    lead2, follow2 = pairs[2][2], pairs[3][2]
    in_five = (_hips(follow2, inits[3]) - _hips(lead2, inits[2]))[:, :2]
    on_its_own = (_hips(follow2, alone[1]) - _hips(lead2, alone[0]))[:, :2]
    assert np.linalg.norm(in_five - on_its_own, axis=1).max() < 0.02 * np.linalg.norm(on_its_own, axis=1).min()
