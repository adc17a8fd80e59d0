"""A walk captured on flat ground, retargeted onto a target walking up stairs (ReConForM §6.2) through the one
path (core.retarget with a ground object): the planted feet stand on the steps (not inside them, not floating),
the source's foot-lock timing is kept, and copy-rotations, which walks on at flat height, does not.

The generated demo characters and walk (tools/make_demo_scene.py) and procedural stairs (core.terrain.shapes).
Thresholds: measured on this case (docs/solver.md "Terrain"), with a margin."""

import numpy as np
import pytest

from core.body import SHORT_HEAVY, BodyParams, make_body
from core.character import CharacterSpec, build_character
from core.metrics import GROUNDED_FRACTION, measure
from core.retarget import Retarget, RetargetOptions, run
from core.solver import SolverSettings
from core.terrain.shapes import stairs
from core.track import ClipTrack
from tools.make_demo_scene import walk_motion

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stairs_walk():
    sk, mesh, bm = make_body(BodyParams(name="source"), pose="T")
    walk, _ = walk_motion(sk, mesh, steps=6)
    tsk, tmesh, tbm = make_body(SHORT_HEAVY, pose="T")
    src = build_character(CharacterSpec(sk, mesh, bm), keyvert_count=41).character
    tgt = build_character(CharacterSpec(tsk, tmesh, tbm), keyvert_count=41, need_mesh=True).character
    ground = stairs(start=(0.0, 0.5), direction=(0.0, -1.0), width=1.2, approach=1.0, steps=6, tread=0.3,
                    rise=0.17, landing=2.0)
    out = run(Retarget(src, walk, tgt, RetargetOptions(settings=SolverSettings.preset("fast"),
                                                       ground=ground.surface, conflicts=False)))
    return src, walk, tgt, ground, out


def _planted_feet(src, walk, tgt, motion, ground):
    """Per foot: (source grounded (T,), lowest foot vertex above the *true* steps (T,) metres)."""
    ms = measure(ClipTrack(src, walk), 0.0)
    out = []
    for k, P in enumerate(ClipTrack(tgt, motion).foot_points):
        above = P[..., 2] - ground.height(P[..., 0], P[..., 1])
        out.append((np.abs(ms.foot_height[k]) <= GROUNDED_FRACTION * src.height, above.min(1)))
    return out


def test_planted_feet_stand_on_the_steps_and_copy_rotations_sink(stairs_walk):
    src, walk, tgt, ground, out = stairs_walk
    assert out.ground.name == "Stairs" and out.ground.outside_frames == 0
    h = float(tgt.height)
    for k, (planted, low) in enumerate(_planted_feet(src, walk, tgt, out.motion, ground)):
        # not inside a step: the lowest foot vertex at most 1 % h_c under the true tread (the field's raised
        # edge is one grid cell; a toe tip that close to a riser counts), on every planted frame
        assert low[planted].min() >= -0.01 * h, (k, low[planted].min())
        # not floating: on most planted frames within the grounded band of the tread under it
        assert np.mean(np.abs(low[planted]) <= 0.02 * h) >= 0.8, (k, np.round(low[planted], 3))
    for k, (planted, low) in enumerate(_planted_feet(src, walk, tgt, out.init_motion, ground)):
        assert low[planted].min() < -0.5                           # copy-rotations: a metre into the stairs


def test_stairs_metrics_against_copy_rotations(stairs_walk):
    _, _, _, _, out = stairs_walk
    m, ref = out.metrics, out.reference
    assert m["floor_pen_mean"] < 0.05 * ref["floor_pen_mean"] and m["floor_pen_max"] < 0.02
    assert m["grounded_f1"] >= ref["grounded_f1"] + 0.3
    assert m["locked_f1"] >= ref["locked_f1"] - 0.05               # the foot-lock timing kept
    assert m["root_jerk_mean"] < 4.0 * ref["root_jerk_mean"]        # the hips climb, smoothly
