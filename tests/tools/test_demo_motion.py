"""tools/make_demo_scene.py's demo clip is the reference every retarget of it is measured by: where its hands rest
on the hips and meet in the claps, they rest on the skin (the metrics' mesh measure), and they still touch."""

import numpy as np
import pytest
from scipy.spatial import cKDTree

from core.body import BodyParams, make_body
from core.character.track import ClipTrack
from core.rig.parts import vertex_segments
from core.types import Character
from tools import make_demo_scene as mds


@pytest.fixture(scope="module")
def demo():
    skel, mesh, bone_map = make_body(BodyParams(name="Source"), pose="T")
    motion, events = mds.demo_motion(skel, mesh)
    return skel, mesh, bone_map, motion, events


def test_no_hand_sinks_into_the_body_on_any_frame(demo):
    """Over the whole clip (walk, claps, hands on hips, squat), nothing within reach of a hand is deeper inside
    another part of the body than a resting press (``HAND_REST_DEPTH`` of the height, 3.5 mm here); before the
    hands were fitted, the hands on the hips sank 25 mm and the claps' fingers 20 mm into the other hand."""
    skel, mesh, _, motion, _ = demo
    height = float(np.ptp(mesh.rest_verts[:, 2]))
    d = mds.HandDepths(skel, mesh)(motion, range(motion.num_frames))
    assert d.shape == (mds.DEMO_FRAMES,)
    assert float(d.max()) <= mds.HAND_REST_DEPTH * height + 1e-3, int(d.argmax())


def test_the_hands_still_touch_where_they_rest(demo):
    """The claps' palms meet (less than 5 mm apart at each touch) and each hand on its hip is within 1 cm of the
    hips or thigh, at the frames the clip's events name."""
    skel, mesh, bone_map, motion, events = demo
    seg, names, _ = vertex_segments(skel, mesh, bone_map)
    ch = Character(skel, mesh, bone_map, height=float(np.ptp(mesh.rest_verts[:, 2])))
    frames = list(mds.HAND_REST_FRAMES)
    x = ClipTrack(ch, motion).vertices(np.arange(mesh.num_verts), frames=frames)
    hand = {s: seg == names.index(f"{s}_hand") for s in ("left", "right")}
    hips = {s: np.isin(seg, [names.index(n) for n in ("hips", f"{s}_upper_leg")]) for s in ("left", "right")}
    first, last = events["hands_on_hips"]
    for k, f in enumerate(frames):
        if first <= f <= last:
            for s in ("left", "right"):
                assert cKDTree(x[k][hips[s]]).query(x[k][hand[s]])[0].min() < 0.01, (f, s)
        else:
            assert events["clap"][0] <= f <= events["clap"][1]
            assert cKDTree(x[k][hand["right"]]).query(x[k][hand["left"]])[0].min() < 0.005, f


def test_no_part_of_the_body_passes_through_another(demo):
    """No part of the body passes through another over the clip, as the metrics read it on the mesh
    (``core.metrics.mesh_volume``: at most 0.01 % of the body's volume on any frame; the deepest, 0.009 % at frame 94,
    is the chest's skin pressed 5 mm into the upper arm at the armpit): the squat's arms go ahead and come back down
    with the hands passing in front of the thighs, each on its own side (``SQUAT_HANDS_OUT``); straight from beside the
    thighs, the forearms crossed through each other (``SQUAT_HANDS_OUT`` = 0 fails this, at 0.5 %)."""
    from core.character.complete import CharacterSpec, build_character
    from core.metrics.scores import evaluations
    from core.progress import drive
    skel, mesh, bone_map, motion, _ = demo
    ch = build_character(CharacterSpec(skel, mesh, bone_map), keyvert_count=41).character
    series = []
    drive(evaluations(ch, motion, ch, [motion], series=series))
    share = series[0]["mesh_pen"]
    assert share.shape == (mds.DEMO_FRAMES,)
    assert float(share.max()) < 1e-4, (int(share.argmax()), float(share.max()))
