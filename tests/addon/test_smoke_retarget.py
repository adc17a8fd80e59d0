"""Smoke retarget on a generated scene (no shared assets), part of ``make test-fast``.

Two bodies made by ``core.body`` (a neutral source and a short heavy target, low resolution) become Blender
armatures with skinned meshes, a short walk is keyed on the source, and the panel's Retarget runs end to end
with the ReConForM solve: bone maps auto-detected, key vertices placed by optimal transport and stored on the
meshes, a few solver steps, the new Action written on the target, metrics in the panel; then one Re-solve.
"""

import numpy as np
import pytest

from .ui_helpers import saved_generated_pair, scene_fingerprint, ui

bpy = pytest.importorskip("bpy")

FRAMES = 8
ITERATIONS = 4


@pytest.fixture(scope="module")
def generated_blend(addon, tmp_path_factory):
    return saved_generated_pair(addon, FRAMES, tmp_path_factory.mktemp("smoke"))


def test_retarget_and_resolve_a_generated_pair_end_to_end(addon, generated_blend):
    session = ui(addon, "session")
    bpy.ops.wm.open_mainfile(filepath=str(generated_blend))
    s = bpy.context.scene.reconform
    s.source, s.target, s.action = bpy.data.objects["Walker"], bpy.data.objects["Heavy"], bpy.data.actions["Walk"]
    s.method, s.quality, s.use_advanced, s.iterations = 'RECONFORM', 'FAST', True, ITERATIONS
    before_acts, before_objs = scene_fingerprint(bpy)
    assert bpy.ops.reconform.retarget() == {'FINISHED'}
    after_acts, after_objs = scene_fingerprint(bpy)
    # one new Action, keyed on every frame of the clip, assigned to the target; the source clip untouched
    assert set(after_acts) - set(before_acts) == {"Walk to Heavy"} and s.last_action.name == "Walk to Heavy"
    assert after_acts["Walk"] == before_acts["Walk"]
    frames = {tuple(np.frombuffer(co, np.float32).reshape(-1, 2)[:, 0]) for _, _, co in after_acts["Walk to Heavy"]}
    assert frames == {tuple(float(f) for f in range(1, FRAMES + 1))}
    assert after_objs["Heavy"][0] == "Walk to Heavy"
    # key vertices placed and stored on both bodies, metrics and the cached solve
    for mesh in ("Walker_body", "Heavy_body"):
        assert len(after_objs[mesh][4]) == int(s.keyvert_count) and not before_objs[mesh][4]
    metrics = {m.name: m.value for m in s.metrics}
    assert {"floor_pen_mean", "jerk_mean", "grounded_f1"} <= set(metrics)
    assert np.isfinite([metrics["floor_pen_mean"], metrics["jerk_mean"]]).all()
    last = session.last_solve(bpy.context.scene)
    assert last is not None and last.iterations == ITERATIONS and last.job.done
    # Re-solve warm-starts from it and writes a second Action
    assert bpy.ops.reconform.resolve() == {'FINISHED'}
    assert s.last_action.name == "Walk to Heavy (re-solved)" and len(bpy.data.actions) == len(after_acts) + 1
