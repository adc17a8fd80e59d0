"""Conflicts and their sliders in a joint solve (ReConForM §6.1 with §6.3): the terms between the characters as
one more term, "partner", in each member's conflict list and per-part weights, and the group's warm-started
re-solve (core.solver.conflicts.detecting_group / resolve_group, core.pipeline.group.RetargetGroup.resolving)."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from core.solver.conflicts import (detect_conflicts, detect_group_conflicts, merge_part_weights, resolution_weights, resolve,
                            resolve_group)
from core.pipeline.copy_rotations import copy_rotations
from core.pipeline.placement import place_together
from core.errors import CoreError
from core.pipeline.retarget import RetargetOptions
from core.pipeline.group import RetargetGroup, run_group
from core.solver import PARTNER_TERM, GroupSolveJob, SolveJob, SolverSettings
from core.solver.settings import part_weights_from
from core.character.track import ClipTrack
from tests.core.synth import couple, facing, make_humanoid, with_face


@pytest.fixture(scope="module")
def scene():
    """A couple reaching for each other's hands, retargeted onto a partner of 0.6 its size: the hold pulls the
    taller target's arms down, its own pairs keep them level."""
    a, ma, b, mb = couple(frames=30)
    ta = with_face(make_humanoid(scale=1.0, name="tall"))
    tb = with_face(make_humanoid(scale=0.6, name="short", object_matrix=facing(0.5 * np.pi, 3.0, 1.0)))
    return a, ma, b, mb, ta, tb


@pytest.fixture(scope="module")
def first(scene):
    a, ma, b, mb, ta, tb = scene
    opts = RetargetOptions(settings=SolverSettings(iterations=40, num_threads=1))
    return run_group(RetargetGroup([(a, ma, ta), (b, mb, tb)], opts))


def _resolved(outcome, part_weights, fraction=0.5):
    job = RetargetGroup.resolving(outcome, part_weights, fraction)
    for _ in job.steps():
        pass
    return job.outcome


@pytest.mark.slow
def test_the_terms_between_characters_are_listed_against_a_members_own_and_their_slider_trades_them(first):
    partner = [[c for c in m.conflicts if PARTNER_TERM in (c.term_a, c.term_b)] for m in first.members]
    assert any(partner), "the hold against the arms' own pairs is a conflict"
    assert {c.body_part for cs in partner for c in cs} & {"left_arm", "right_arm"}
    # the ranking is stable: the same finished solve lists the same conflicts
    assert detect_group_conflicts(first.job) == [m.conflicts for m in first.members]
    errors = {}
    for v in (0.0, 1.0):       # 0 keeps the member's own term on the part, 1 the terms between the characters
        pws = [merge_part_weights(*[resolution_weights(c, v) for c in cs]) for cs in partner]
        out = _resolved(first, pws)
        errors[v] = out.partner_metrics["hand_partner_error_mean"]
        # a re-solve keeps the first solve's copy-rotations figures (not measured again) and lists conflicts
        assert out.partner_reference is first.partner_reference
        assert [m.reference for m in out.members] == [m.reference for m in first.members]
        assert out.job.members[0].stats["setup_reused"] and out.job.stats["setup_reused"]
    assert errors[1.0] < 0.5 * errors[0.0]
    # the first solve is left as it was
    assert first.job.done and len(first.job.history) == 40


def test_a_group_of_one_lists_and_resolves_as_the_single_solve(scene):
    a, ma, _, _, ta, _ = scene
    s = SolverSettings(iterations=12, num_threads=1)
    init = copy_rotations(a, ma, ta)
    single = SolveJob(a, ma, ta, init, s)
    single.run()
    group = GroupSolveJob([SolveJob(a, ma, ta, init, s)])
    group.run()
    (listed,) = detect_group_conflicts(group)
    assert listed == detect_conflicts(single)
    assert all(PARTNER_TERM not in (c.term_a, c.term_b) for c in listed)
    pw = {("left_arm", "dist"): 0.3, ("torso", "pen"): 1.5}
    alone = resolve(single, pw)
    alone.run()
    (joint,) = resolve_group(group, [pw]).run()
    assert np.array_equal(alone.result().rotations, joint.rotations)
    assert np.array_equal(alone.result().locations, joint.locations)


@pytest.fixture(scope="module")
def set_up(scene):
    """Build a set-up (not stepped) joint solve of the couple at per-member settings."""
    a, ma, b, mb, ta, tb = scene
    tra, trb = ClipTrack(a, ma), ClipTrack(b, mb)
    inits = place_together([(a, ma, tra, ta, copy_rotations(a, ma, ta, tra)),
                            (b, mb, trb, tb, copy_rotations(b, mb, tb, trb))])

    def make(settings_a, settings_b):
        job = GroupSolveJob([SolveJob(a, ma, ta, inits[0], settings_a, source_track=tra),
                             SolveJob(b, mb, tb, inits[1], settings_b, source_track=trb)], settings_a)
        job._setup()
        return job
    return make


def test_a_partner_part_weight_scales_the_terms_between_the_characters_on_that_part_only(set_up):
    s = SolverSettings(iterations=12, num_threads=1)
    off = replace(s, part_weights={("left_arm", PARTNER_TERM): 0.0, ("right_arm", PARTNER_TERM): 0.0})
    plain, weighted = set_up(s, s), set_up(off, s)
    m0 = weighted.members[0]
    limbs = np.asarray(m0.objective.limbs)
    arm = np.isin(limbs, ("left_arm", "right_arm"))
    assert arm.any() and (~arm).any()
    # the member's own terms are not touched; the partner terms' multiplier is 0 on its arms, 1 elsewhere
    assert all(m0.objective.vertex_scale[t] is None for t in ("dist", "dir", "pen"))
    vs = weighted.partners.vertex_scale["dist"].numpy()
    n0 = m0.num_keyverts
    assert np.array_equal(vs[:n0], np.where(arm, 0.0, 1.0)) and (vs[n0:] == 1.0).all()
    assert plain.partners.vertex_scale["dist"] is None
    # with every part's "partner" factor at 0 on both characters, nothing between them is left (their reference
    # scales fall to their floors), while the same pose is far from it without the factors
    every = {(part, PARTNER_TERM): 0.0 for part in set(limbs)}
    both = set_up(replace(s, part_weights=every), replace(s, part_weights=every))
    with torch.no_grad():
        p = torch.cat([m.p_init for m in both.members], 1)
        n = torch.cat([m.n_init for m in both.members], 1)
        vals = both.partners.weighted(p, n, 0.0)
        ref = plain.partners.weighted(p, n, 0.0)
    for k in ("partner_dist", "partner_dir", "partner_pen"):
        assert float(vals[k]) == 0.0
    assert float(ref["partner_dist"]) > 0 and float(ref["partner_dir"]) > 0
    with pytest.raises(CoreError, match="partner"):
        set_up(replace(s, part_weights={("left_arm", "nonsense"): 1.0}), s)


@pytest.mark.slow
def test_the_groups_re_solve_continues_its_optimiser_and_leaves_it_as_it_was(first):
    group = first.job
    t, x = group.optim.t, [p.detach().clone() for p in group.optim.params]
    new = resolve_group(group, [{("left_arm", PARTNER_TERM): 0.5}, {}])
    assert new.optim.t == t and new._ready and new.total == 2     # CONTINUE.steps 0.05 of 40
    for a, b in zip(new.optim.params, x):
        assert torch.equal(a.detach(), b)
    for a, b in zip(new.optim.m, group.optim.m):
        assert torch.equal(a, b)
    new.run()
    assert group.optim.t == t
    assert all(torch.equal(p.detach(), q) for p, q in zip(group.optim.params, x))


@pytest.mark.slow
def test_cancelling_a_groups_re_solve_produces_nothing(first):
    before = [m.motion.rotations.copy() for m in first.members]
    job = RetargetGroup.resolving(first, [{}, {}], fraction=0.5)
    steps = 0
    for step in job.steps():
        if step.solver is not None:
            steps += 1
            job.cancel()
    assert steps == 1 and job.outcome is None and not job.job.done
    assert first.job.done and all(np.array_equal(m.motion.rotations, r) for m, r in zip(first.members, before))
    with pytest.raises(CoreError, match="re-solved"):
        RetargetGroup.resolving(replace(first, job=None), [{}, {}])


def test_part_weights_from_a_set_up_file_are_checked():
    assert part_weights_from({"left_arm": {"partner": 0.5, "dist": 2}, ("torso", "pen"): 1}) == {
        ("left_arm", "partner"): 0.5, ("left_arm", "dist"): 2.0, ("torso", "pen"): 1.0}
    for bad, words in (({"arm": {"dist": 1}}, "unknown body part 'arm'"), ({"left_arm": {"x": 1}}, "'x'"),
                       ({"left_arm": 1.0}, "give {term: factor}"), ({"left_arm": {"dist": -1}}, "≥ 0"),
                       ({"left_arm": {"dist": "a"}}, "≥ 0")):
        with pytest.raises(CoreError, match=words.replace("{", "\\{").replace("}", "\\}")):
            part_weights_from(bad)


@pytest.mark.slow
def test_only_a_finished_group_is_re_solved_with_one_set_of_weights_per_member(set_up, first):
    s = SolverSettings(iterations=12, num_threads=1)
    with pytest.raises(CoreError, match="finished joint solve"):
        resolve_group(set_up(s, s), [{}, {}])
    with pytest.raises(CoreError, match="takes 2 sets of per-part weights, not 1"):
        resolve_group(first.job, [{}])
    with pytest.raises(CoreError, match="after a finished solve"):
        detect_group_conflicts(set_up(s, s))


def test_several_characters_conflicts_in_one_ranking():
    from core.solver.conflicts import Conflict, ranked_across
    a1 = Conflict("torso", "dist", "pen", -0.9, 0.8, ((1, 4),), 0.5)
    a2 = Conflict("head", "dir", "pen", -0.7, 0.4, (), 0.1)
    b1 = Conflict("left_arm", "dist", "partner", -0.9, 0.8, ((2, 5),), 0.9)
    b2 = Conflict("torso", "dist", "dir", -0.6, 0.2, (), 0.1)
    assert ranked_across([("A", [a1, a2]), ("B", [b1, b2])]) == [("B", b1), ("A", a1), ("A", a2), ("B", b2)]
    assert ranked_across([("A", []), ("B", [])]) == []
