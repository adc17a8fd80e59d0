"""The morphology zoo's demo clip (tools/bench/bench_zoo.py ``demo_source``) plays at the rate it was made at,
whatever rate the scene had from the last import (a BVH sets 120 fps): a clip read at the wrong rate has its jerk
and foot speeds scaled and still looks like a result."""

import importlib
import sys

import pytest

from tests.conftest import ROOT

bpy = pytest.importorskip("bpy")

pytestmark = pytest.mark.slow   # builds the demo's source body and fits its clip (about 20 s)


def test_the_zoo_demo_clip_is_read_at_its_own_rate_and_the_scene_keeps_its_own(addon, clean_scene):
    sys.path.insert(0, str(ROOT / "tools"))
    import make_demo_scene
    from tools.bench.bench_zoo import demo_source
    mods = {n: importlib.import_module(f"{addon.__name__}.{n}")
            for n in ("core.body", "reconform_addon.bridge", "reconform_addon.pipeline")}
    clean_scene.render.fps, clean_scene.render.fps_base = 120, 1.0
    character, motion = demo_source(mods)
    assert motion.fps == make_demo_scene.FPS
    assert (clean_scene.render.fps, clean_scene.render.fps_base) == (120, 1.0)
    assert motion.num_frames > 100 and character.skeleton.num_bones == motion.rotations.shape[1]
