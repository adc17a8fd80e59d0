"""core.solver.reach: a hand that rests on the body in the source rests on it in the target, where no key-vertex pair
sees the contact (the demo clip's hands on the hips, onto a body with wider hips and a belly)."""

import importlib

import numpy as np
import pytest
import torch

from core.body import BodyParams, make_body
from core.character.complete import CharacterSpec, build_character
from core.character.track import ClipTrack
from core.pipeline.copy_rotations import copy_rotations
from core.rig.humanoid import unsided
from core.solver import SolveJob, SolverSettings, reach
from core.solver.surface import field_tensor
from core.solver.surface_fields import surface_fields, world_points
from core.types import Motion
from tools.experiments.hand_gaps import hand_gaps
from tools.make_demo_scene import demo_motion

#: the demo clip's hands on the hips (make_demo_scene's events: 126-150), with the frames around them
FIRST, LAST, HELD = 110, 170, range(130, 148)


def _character(params):
    sk, mesh, bm = make_body(params, pose="T")
    return build_character(CharacterSpec(sk, mesh, bm), keyvert_count=41).character


@pytest.fixture(scope="module")
def hands_on_hips():
    src = _character(BodyParams(name="src"))
    motion, _ = demo_motion(src.skeleton, src.mesh)
    clip = Motion(motion.rotations[FIRST:LAST], motion.locations[FIRST:LAST], motion.fps)
    tgt = _character(BodyParams(name="wide", height=1.66, hip_width=1.55, buttocks=1.55, torso_width=1.1,
                                limb_thickness=1.15))        # the zoo's wide hips (tools/bench/bench_zoo.py)
    return src, clip, tgt


def _gaps(character, motion, frames):
    """(len(frames), 2) metres: each hand's nearest vertex to the trunk's and thighs' (``hand_gaps``)."""
    gaps = hand_gaps(lambda name: importlib.import_module(f"core.{name}"), character, motion, set(frames))
    return np.array([[d for d, _ in gaps[f]] for f in frames])


@pytest.mark.slow
def test_the_source_hands_on_the_hips_are_found_as_touches(hands_on_hips):
    src, clip, tgt = hands_on_hips
    t, s, f, _ = reach.source_touches(surface_fields(src), ClipTrack(src, clip), surface_fields(tgt))
    fields = surface_fields(tgt)
    names = reach._entries(fields)[1]
    held = [h - FIRST for h in HELD]
    for side in ("left_hand", "right_hand"):
        frames = set(t[s == names.index(side)].tolist())
        assert set(held) <= frames, side                    # touching on every held frame
        assert not frames & set(range(0, 8)), side           # not while the hands come from the clap (frames 110-117)
    parts = {unsided(fields.field_names[i]) for i in f.tolist()}
    assert parts and parts <= set(reach.PARTS)


@pytest.mark.slow
def test_a_character_retargeted_onto_itself_pays_nothing_for_its_own_touches(hands_on_hips):
    """The touches are read a little wide for the probes' spacing (``PROBE_SPACING``), and each keeps the source's own
    distance: the source's own pose pays nothing, where pulling every touch to ``GAP`` would draw its hands in."""
    src, clip, _ = hands_on_hips
    fields = surface_fields(src)
    touches = reach.source_touches(fields, ClipTrack(src, clip), fields)
    assert len(touches.t) and float(touches.gap.max()) <= reach.TOUCH + reach.PROBE_SPACING
    assert bool((touches.gap > reach.GAP).any())             # some touch lies farther than GAP in the source
    term = reach.SurfaceReach(fields, field_tensor(fields, torch.float64), reach.skin_samples(src, fields), touches,
                              1.0, torch.float64, "cpu")
    points = world_points(fields, ClipTrack(src, clip)).to(torch.float64)
    assert float(term.weighted(points)) < 1e-12
    term.gap = torch.full_like(term.gap, reach.GAP * fields.height)
    assert float(term.weighted(points)) > 1e-6               # pulled to GAP, the source's own hands would pay


#: the demo clip's claps (make_demo_scene's HAND_REST_FRAMES: the hands touch at 94, 102 and 110), with frames around
CLAPS, CLAP_FIRST, CLAP_LAST = (94, 102, 110), 88, 116


@pytest.mark.slow
def test_a_fitted_source_s_touches_are_its_hands_meeting(hands_on_hips, monkeypatch):
    """A skeleton-only source (the template fitted to the demo body's skeleton) clapping: the surface reach keeps
    its hands meeting (``FITTED_PARTS``: the other hand or forearm), found at the claps and only there, and none of
    its trunk's or thighs' (a fitted body's widths are the template's); with no fitted parts there is no reach."""
    from core.body import BodyParams, make_body
    sk, mesh, bm = make_body(BodyParams(name="src"), pose="T")
    motion, _ = demo_motion(sk, mesh)
    clip = Motion(motion.rotations[CLAP_FIRST:CLAP_LAST], motion.locations[CLAP_FIRST:CLAP_LAST], motion.fps)
    src = build_character(CharacterSpec(sk, None, bm, clip=clip), keyvert_count=41, fit_body=True).character
    tgt = hands_on_hips[2]
    assert src.mesh.fitted
    init = copy_rotations(src, clip, tgt)
    job = SolveJob(src, clip, tgt, init, SolverSettings(num_threads=1, iterations=2))
    job.run()
    assert job.reach is not None
    fields = job.surface.fields
    touched = {unsided(fields.field_names[i]) for i in job.reach.f.tolist()}
    assert touched and touched <= set(reach.FITTED_PARTS) and not touched & set(reach.PARTS)
    frames = set((job.reach.t + CLAP_FIRST).tolist())
    assert set(CLAPS) <= frames and all(min(abs(f - c) for c in CLAPS) <= 1 for f in frames), sorted(frames)
    monkeypatch.setattr(reach, "FITTED_PARTS", ())
    job = SolveJob(src, clip, tgt, init, SolverSettings(num_threads=1, iterations=2))
    job.run()
    assert job.reach is None


@pytest.mark.slow
def test_the_target_hands_stay_on_its_wider_hips(hands_on_hips, monkeypatch):
    src, clip, tgt = hands_on_hips
    init = copy_rotations(src, clip, tgt)
    held = [h - FIRST for h in HELD]
    gaps, default = {}, reach.WEIGHT
    for weight in (default, 0.0):
        monkeypatch.setattr(reach, "WEIGHT", weight)
        job = SolveJob(src, clip, tgt, init, SolverSettings(num_threads=1))
        res = job.run()
        assert (job.reach is not None) == (weight > 0)
        gaps[weight] = _gaps(tgt, res, held)
    on, off = gaps[default], gaps[0.0]
    h = tgt.height
    assert np.median(on) < 0.006 * h, on                    # the hands rest on the skin
    assert np.median(off) > 2 * np.median(on), (on, off)    # without the term they hang off it
