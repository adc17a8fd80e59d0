"""The embedded demo scene (tools/make_demo_scene.py): its source motion keeps the feet on the floor
(Blender's own evaluation, every 10th frame, squat included) and its claps bring the hands together."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

pytestmark = pytest.mark.slow   # the demo runs in a subprocess (tests/conftest.py demo_run: about a minute)


@pytest.fixture(scope="module")
def demo_blend(demo_run):
    """The demo scene as `make demo` generates it (tools/make_demo_scene.py, through tools/demo.py)."""
    rc, _, se, out = demo_run
    assert rc == 0, se[-2000:]
    return out / "demo.blend"


def test_demo_source_keeps_feet_on_the_floor_and_claps(demo_blend, clean_scene):
    bpy.ops.wm.open_mainfile(filepath=str(demo_blend))
    src = bpy.data.objects["Source"]
    assert src.animation_data.action.name == "DemoMotion"
    body = [o for o in bpy.data.objects if o.type == 'MESH' and o.find_armature() == src][0]
    scene = bpy.context.scene
    lows = []
    for f in range(scene.frame_start, scene.frame_end + 1, 10):
        scene.frame_set(f)
        me = body.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
        co = np.empty(len(me.vertices) * 3)
        me.vertices.foreach_get("co", co)
        world = co.reshape(-1, 3) @ np.array(body.matrix_world)[:3, :3].T + np.array(body.matrix_world)[:3, 3]
        lows.append(world[:, 2].min())
    assert max(abs(z) for z in lows) < 0.01, np.round(lows, 3)   # planted feet: within 1 cm of z = 0
    scene.frame_set(94)                                            # a clap (events: clap 88-116)
    lh, rh = (src.matrix_world @ src.pose.bones[n].head for n in ("left_hand", "right_hand"))
    assert (lh - rh).length < 0.15
