"""The partner metrics (core.metrics.partners, docs/metrics.md "Partners") on a case computed by hand."""

import math

import numpy as np
import pytest

from core.metrics.partners import evaluate_partners
from core.character.track import ClipTrack
from core.types import Motion
from tests.core.synth import facing, make_humanoid, with_face


def _still(character, frames=5):
    J = character.skeleton.num_bones
    rot = np.zeros((frames, J, 4))
    rot[..., 0] = 1.0
    return Motion(rot, np.zeros((frames, J, 3)), 30.0)


def _side_by_side(gap):
    """Two synthetic bodies in their T-pose, both facing -Y, B along +X so that A's left hand and B's right hand
    key vertices are ``gap`` metres apart along X (hands' key vertices at x = ±0.78, y = ±0.035, z = 1.42)."""
    a = with_face(make_humanoid(name="a"))
    b = with_face(make_humanoid(name="b", object_matrix=facing(0.0, 1.56 + gap, 0.0)))
    return (a, _still(a)), (b, _still(b))


def test_partner_contact_f1_and_hand_error_by_hand():
    src = _side_by_side(0.02)
    tgt = _side_by_side(0.06)
    a = src[0][0]
    kv = ClipTrack(*src[0]).keyverts[0][0]
    names = a.keyverts.names
    # the layout the numbers below are computed from
    assert np.allclose(kv[names.index("left_hand_a")], [0.78, -0.035, 1.42])
    assert np.allclose(kv[names.index("left_hand_b")], [0.78, 0.035, 1.42])
    h = a.height
    d_min = 0.05 * h                                          # 0.0843 m
    same, cross = 0.02, math.hypot(0.02, 0.07)                # source: 2 pairs at 2 cm, 2 across at 7.3 cm
    same_t, cross_t = 0.06, math.hypot(0.06, 0.07)            # target: 6 cm, and 9.2 cm (no longer a contact)
    assert cross < d_min < cross_t and same_t < d_min
    out = evaluate_partners([ClipTrack(*s) for s in src], list(tgt))
    # per frame: 4 source contacts (A's left hand × B's right hand), 2 of them kept in the target, none added
    assert out["source_partner_contacts"] == 4 * 5
    assert out["partner_contact_precision"] == pytest.approx(1.0)
    assert out["partner_contact_recall"] == pytest.approx(0.5)
    assert out["partner_contact_f1"] == pytest.approx(2.0 / 3.0)
    # at the source's contacts, |target − source distance| / mean height: 4 cm twice, 1.9 cm twice
    assert out["source_hand_partner_entries"] == 4 * 5
    want = 0.5 * ((same_t - same) + (cross_t - cross)) / h
    assert out["hand_partner_error_mean"] == pytest.approx(want, rel=1e-6)
    assert out["hand_partner_error_p90"] == pytest.approx((same_t - same) / h, rel=1e-6)
    # nobody looks at the partner (both face -Y, side by side): no gaze entry
    assert out["source_gaze_frames"] == 0 and math.isnan(out["gaze_angle_error_mean"])
    # by pair of limbs: A's left hand and B's right hand touch on the 5 source frames, and still do in the target
    kept = {k: v for k, v in out.items() if k.startswith("partner_kept: ")}
    assert kept == {"partner_kept: a's left hand ~ b's right hand, 5 frames": 1.0}


def test_contacts_kept_by_pair_of_limbs_count_frames_and_read_as_a_share():
    """``partner_kept: …``: the share of the source's contact frames of a pair of limbs where the target's limbs touch
    too; a pair of limbs under ``KEPT_MIN_FRAMES`` source frames is not listed; the report reads it in %."""
    from core.metrics.partners import KEPT_MIN_FRAMES
    from core.metrics.report import format_value, info
    (a, _), (b, _) = _side_by_side(0.02)
    src = [(a, _still(a, 8)), (b, _still(b, 8))]
    (_, _), (b_far, _) = _side_by_side(1.0)
    # the target: the same couple on frames 0-5, B a metre away on frames 6-7 (moved by its root, in its own frame)
    far = ClipTrack(b_far, _still(b_far, 8)).keyverts[0]
    near = ClipTrack(b, _still(b, 8)).keyverts[0]
    shift = (far - near)[0, 0]                                             # world offset of B's key vertices
    loc = np.zeros((8, b.skeleton.num_bones, 3))
    root = b.skeleton.index(b.bone_map["hips"])
    R = np.linalg.inv(b.skeleton.object_matrix[:3, :3] @ b.skeleton.rest_global[root, :3, :3])
    loc[6:, root] = R @ shift
    moved = Motion(_still(b, 8).rotations, loc, 30.0)
    assert np.allclose(ClipTrack(b, moved).keyverts[0][7] - near[7], shift, atol=1e-9)
    out = evaluate_partners([ClipTrack(*s) for s in src], [src[0], (b, moved)])
    key = "partner_kept: a's left hand ~ b's right hand, 8 frames"
    assert [k for k in out if k.startswith("partner_kept: ")] == [key]
    assert out[key] == pytest.approx(6 / 8)
    assert info(key).label == "Contact kept: a's left hand ~ b's right hand, 8 frames"
    assert format_value(key, out[key]) == "75 % of the source's frames"
    few = [(a, _still(a, KEPT_MIN_FRAMES - 1)), (b, _still(b, KEPT_MIN_FRAMES - 1))]
    short = evaluate_partners([ClipTrack(*s) for s in few], few)
    assert not [k for k in short if k.startswith("partner_kept: ")]


def test_the_same_couple_scores_perfectly_and_farther_apart_scores_nothing():
    src = _side_by_side(0.02)
    out = evaluate_partners([ClipTrack(*s) for s in src], list(src))
    assert out["partner_contact_f1"] == pytest.approx(1.0) and out["hand_partner_error_mean"] == pytest.approx(0.0)
    assert out["partner_pen_mean"] == pytest.approx(out["source_partner_pen_mean"])
    far = evaluate_partners([ClipTrack(*s) for s in src], list(_side_by_side(1.0)))
    assert far["partner_contact_f1"] == 0.0 and far["partner_pen_mean"] == 0.0
    assert far["hand_partner_error_mean"] == pytest.approx(0.5 * ((1.0 - 0.02) + (math.hypot(1.0, 0.07)
                                                                                  - math.hypot(0.02, 0.07)))
                                                           / src[0][0].height, rel=1e-6)


def test_body_capsules_are_computed_once_per_character():
    """metrics_partners.body_capsules: the same object for the same character (every window of a Live scrub
    builds its barriers on the same characters); a changed copy of the character (a new object) gets its own,
    equal to a fresh computation."""
    import dataclasses

    from core.metrics.partners import _body_capsules, body_capsules
    ch = make_humanoid()
    caps = body_capsules(ch)
    assert body_capsules(ch) is caps
    other = dataclasses.replace(ch)                       # equal, but another object
    again = body_capsules(other)
    assert again is not caps and again.names == caps.names
    fresh = _body_capsules(ch)
    for a, b in ((caps.bone, fresh.bone), (caps.ends, fresh.ends), (caps.radius, fresh.radius)):
        np.testing.assert_array_equal(a, b)
