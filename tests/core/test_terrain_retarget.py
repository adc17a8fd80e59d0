"""A walk captured on flat ground, retargeted onto a target walking up stairs, up a 15° ramp and over bumpy
ground (ReConForM §6.2) through the one path (core.pipeline.retarget with a ground object): the planted feet stand on
the surface (not inside a step or the slope, not floating), the source's foot-lock timing is kept, and
copy-rotations, which walks on at flat height, does not.

The generated demo characters and walk (tools/make_demo_scene.py) and procedural grounds (core.contacts.terrain.shapes).
Thresholds: measured on these cases (docs/solver.md "Terrain"), with a margin."""

import numpy as np
import pytest

from core.body import SHORT_HEAVY, BodyParams, make_body
from core.character.complete import CharacterSpec, build_character
from core.metrics.measures import measure
from core.metrics.scores import GROUNDED_FRACTION
from core.pipeline.retarget import Retarget, RetargetOptions, run
from core.solver import SolverSettings
from core.contacts.terrain.shapes import bumps, ramp, stairs
from core.character.track import ClipTrack
from tools.make_demo_scene import walk_motion

pytestmark = pytest.mark.slow

#: each ground laid along the walk (-Y), its approach starting 0.5 m behind the source's start
GROUNDS = {
    "stairs": lambda: stairs(start=(0.0, 0.5), direction=(0.0, -1.0), width=1.2, approach=1.0, steps=6, tread=0.3,
                             rise=0.17, landing=2.0),
    "ramp": lambda: ramp(start=(0.0, 0.5), direction=(0.0, -1.0), width=1.2, approach=1.0, length=2.0,
                         angle_deg=15.0, landing=2.0),
    "bumps": lambda: bumps(start=(0.0, 0.5), direction=(0.0, -1.0), width=1.2, length=4.0, amplitude=0.04),
}


@pytest.fixture(scope="module")
def pair():
    sk, mesh, bm = make_body(BodyParams(name="source"), pose="T")
    walk, _ = walk_motion(sk, mesh, steps=6)
    tsk, tmesh, tbm = make_body(SHORT_HEAVY, pose="T")
    src = build_character(CharacterSpec(sk, mesh, bm), keyvert_count=41).character
    tgt = build_character(CharacterSpec(tsk, tmesh, tbm), keyvert_count=41, need_mesh=True).character
    return src, walk, tgt


@pytest.fixture(scope="module", params=list(GROUNDS))
def ground_walk(request, pair):
    src, walk, tgt = pair
    ground = GROUNDS[request.param]()
    out = run(Retarget(src, walk, tgt, RetargetOptions(settings=SolverSettings.preset("fast"),
                                                       ground=ground.surface, conflicts=False)))
    return request.param, src, walk, tgt, ground, out


def _planted_feet(src, walk, tgt, motion, ground):
    """Per foot: (source grounded (T,), lowest foot vertex above the *true* ground (T,) metres)."""
    ms = measure(ClipTrack(src, walk), 0.0)
    out = []
    for k, P in enumerate(ClipTrack(tgt, motion).foot_points):
        above = P[..., 2] - ground.height(P[..., 0], P[..., 1])
        out.append((np.abs(ms.foot_height[k]) <= GROUNDED_FRACTION * src.height, above.min(1)))
    return out


#: how deep copy-rotations' planted feet go under the true ground somewhere (metres; measured 0.68, 0.29 and
#: 0.020 / 0.049 per foot): on stairs four 17 cm steps, on the ramp the rise it walks into; the bumps are 4 cm
SINKS = {"stairs": 0.5, "ramp": 0.2, "bumps": 0.01}
#: the result's mean floor penetration at most this share of copy-rotations' (measured 0.002, 0.006, 0.15: on
#: bumps copy-rotations itself is only 0.47 % under the ground)
PEN_SHARE = {"stairs": 0.05, "ramp": 0.05, "bumps": 0.25}


def test_planted_feet_stand_on_the_ground_and_copy_rotations_sink(ground_walk):
    kind, src, walk, tgt, ground, out = ground_walk
    assert out.ground.name == ground.surface.name and out.ground.outside_frames == 0
    h = float(tgt.height)
    for k, (planted, low) in enumerate(_planted_feet(src, walk, tgt, out.motion, ground)):
        # not inside a step: the lowest foot vertex at most 1 % h_c under the true tread (the field's raised
        # edge is one grid cell; a toe tip that close to a riser counts), on every planted frame
        assert low[planted].min() >= -0.01 * h, (k, low[planted].min())
        # not floating: on most planted frames within the grounded band of the tread under it
        assert np.mean(np.abs(low[planted]) <= 0.02 * h) >= 0.8, (k, np.round(low[planted], 3))
    for k, (planted, low) in enumerate(_planted_feet(src, walk, tgt, out.init_motion, ground)):
        assert low[planted].min() < -SINKS[kind]


def test_metrics_against_copy_rotations(ground_walk):
    kind, _, _, _, _, out = ground_walk
    m, ref = out.metrics, out.reference
    assert m["floor_pen_mean"] < PEN_SHARE[kind] * ref["floor_pen_mean"] and m["floor_pen_max"] < 0.02
    assert m["grounded_f1"] >= ref["grounded_f1"] + 0.3
    assert m["locked_f1"] >= ref["locked_f1"] - 0.05               # the foot-lock timing kept
    assert m["root_jerk_mean"] < 4.0 * ref["root_jerk_mean"]        # the hips climb, smoothly
