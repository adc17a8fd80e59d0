"""Hand contacts on the skin (core.metrics.hand_contacts): a hand box above, on and pressed into a trunk box."""

import numpy as np
import pytest

from core.character.track import ClipTrack
from core.metrics import mesh_volume as mv
from core.metrics.hand_contacts import REGIONS, HandTally, hand_scores
from core.metrics.scores import evaluate
from core.progress import drive
from core.types import Motion
from tests.core.synth import make_humanoid, walk_motion
from tests.core.test_mesh_volume import box, character

TRUNK = [name for name, _ in REGIONS].index("trunk")


@pytest.fixture(scope="module")
def boxes():
    """A 40 cm trunk box on the hips and a 10 cm hand box on the left hand (6 steps apart in the chain), the hand
    resting on the trunk's top at rest; the character is 1 m tall."""
    A, fA, nA = box([-0.2, -0.2, -0.2], [0.2, 0.2, 0.2])
    B, fB, nB = box([-0.05, -0.05, 0.2], [0.05, 0.05, 0.3])
    return character([(0, A, fA, nA), (6, B, fB, nB)])


def placed(ch, heights):
    """The hand box's bottom at each of ``heights`` (metres above the trunk's top), one frame each."""
    m = Motion.rest(len(heights), len(ch.skeleton.names))
    m.locations[:, 6] = [(0, 0, z) for z in heights]
    return ClipTrack(ch, m)


def test_the_gap_and_depth_of_a_hand_above_on_and_in_a_box(boxes):
    track = placed(boxes, [0.05, 0.0, -0.02, 0.005])
    mm = drive(mv.mesh_measuring(track, hand_margin=np.full(4, 0.1)))
    np.testing.assert_allclose(mm.hand_gap[:, 0, TRUNK], [0.05, 0.0, 0.0, 0.005], atol=1e-4)
    np.testing.assert_allclose(mm.hand_depth[:, 0, TRUNK], [0.0, 0.0, 0.02, 0.0], atol=1e-4)
    # no other region, no right hand
    others = np.ones(mm.hand_gap.shape[1:], bool)
    others[0, TRUNK] = False
    assert np.isinf(mm.hand_gap[:, others]).all()
    # read out to the margin only: 5 cm is beyond a 1 cm margin; none read without one
    near = drive(mv.mesh_measuring(track, hand_margin=np.full(4, 0.01)))
    assert np.isinf(near.hand_gap[0, 0, TRUNK])
    np.testing.assert_allclose(near.hand_gap[1:, 0, TRUNK], mm.hand_gap[1:, 0, TRUNK])
    assert np.isinf(drive(mv.mesh_measuring(track)).hand_gap).all()


def test_held_sunk_and_off_the_skin_over_the_source_s_touches(boxes):
    def tally(heights):
        t = HandTally(len(heights))
        mm = drive(mv.mesh_measuring(placed(boxes, heights), hand_margin=np.full(len(heights), 0.1)))
        t.add(mm.hand_gap, mm.hand_depth, 0, len(heights), 0)
        return t
    source = tally([0.05, 0.0, 0.0, 0.003, 0.008])   # the hand touches the trunk on frames 1-3 (within 0.5 % of 1 m)
    target = tally([0.0, 0.008, 0.05, -0.02, 0.0])   # 8 mm off (held: within 1 %), 5 cm off, 2 cm in
    out = hand_scores(source, target, 1.0, 1.0)
    assert out["source_hand_contacts"] == 3
    assert out["hand_contact_held"] == pytest.approx(1 / 3)
    assert out["hand_contact_sunk"] == pytest.approx(1 / 3)
    assert out["hand_contact_gap_p50"] == pytest.approx(0.008, abs=1e-4)
    assert out["hand_contact_gap_p95"] == pytest.approx(0.0458, abs=2e-4)     # 90 % of the way from 8 mm to 5 cm
    # against itself every contact is held; a target twice as tall reads its gaps in its own height
    assert hand_scores(source, source, 1.0, 1.0)["hand_contact_held"] == 1.0
    assert hand_scores(source, target, 1.0, 2.0)["hand_contact_gap_p95_height"] == pytest.approx(0.0458 / 2, abs=1e-4)
    # a source hand 2 cm inside its body allows the target as deep, unless that body is a fit (its overlaps the fit's)
    deep = tally([-0.02])
    assert hand_scores(deep, deep, 1.0, 1.0)["hand_contact_held"] == 1.0
    assert hand_scores(deep, deep, 1.0, 1.0, fitted=True)["hand_contact_sunk"] == 1.0
    # no source touch: nothing to hold
    assert np.isnan(hand_scores(tally([0.05]), tally([0.0]), 1.0, 1.0)["hand_contact_held"])


def test_a_clip_holds_its_own_hand_contacts_and_loses_them_when_the_hands_part():
    ch = make_humanoid()
    clap = walk_motion(ch, frames=30, clap=True)
    own = evaluate(ch, clap, ch, clap)
    assert own["source_hand_contacts"] > 0
    assert own["hand_contact_held"] == 1.0 and own["hand_contact_sunk"] == 0.0
    apart = evaluate(ch, clap, ch, walk_motion(ch, frames=30, clap=False))
    assert apart["hand_contact_held"] == 0.0
    assert apart["hand_contact_gap_p50_height"] > 0.03            # the hands apart by more than 3 % of the height
