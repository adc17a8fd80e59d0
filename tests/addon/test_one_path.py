"""The panel and the batch command run the same retarget (issue 10's one path): on one generated pair whose
target carries hand-placed (locked) key vertices, the panel's Retarget and ``tools/retarget.py`` (a separate
process, as a technical director runs it) write the same Action, every key within 1e-6, and the batch report
lists the same conflicts as the panel."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from .ui_helpers import generated_pair, ui

bpy = pytest.importorskip("bpy")
pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FRAMES = 20
#: two key vertices of the target moved by hand onto other vertices of their limb, and locked
MOVED = {"left_palm": 5, "right_heel": 11}


def _keys(action) -> dict:
    """{(data path, index): (K, 2) keyframe co} of every F-curve of ``action``'s first slot."""
    from bpy_extras import anim_utils
    bag = anim_utils.action_get_channelbag_for_slot(action, action.slots[0])
    out = {}
    for fc in bag.fcurves:
        co = np.empty(2 * len(fc.keyframe_points), np.float32)
        fc.keyframe_points.foreach_get("co", co)
        out[(fc.data_path, fc.array_index)] = co.reshape(-1, 2)
    return out


@pytest.fixture(scope="module")
def hand_placed_blend(addon, tmp_path_factory):
    """A generated pair; the target's key vertices transferred, then two of them moved by hand and locked."""
    generated_pair(addon, FRAMES, clap=True)
    s = bpy.context.scene.reconform
    s.source, s.target = bpy.data.objects["Walker"], bpy.data.objects["Heavy"]
    assert bpy.ops.reconform.transfer_keyverts(role='TARGET') == {'FINISHED'}
    kvstore = ui(addon, "bridge.keyverts")
    items = kvstore.holder_mesh(bpy.data.objects["Heavy"]).reconform_keyverts
    for it in items:
        if it.name in MOVED:
            it.index += MOVED[it.name]
            it.locked = True
    path = tmp_path_factory.mktemp("onepath") / "pair.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path, {it.name: it.index for it in items if it.name in MOVED}


def test_panel_and_batch_write_the_same_action(addon, hand_placed_blend, tmp_path):
    path, moved = hand_placed_blend
    # the panel
    bpy.ops.wm.open_mainfile(filepath=str(path))
    s = bpy.context.scene.reconform
    s.source, s.target, s.action = bpy.data.objects["Walker"], bpy.data.objects["Heavy"], bpy.data.actions["Walk"]
    s.method, s.quality, s.use_advanced = 'RECONFORM', 'FAST', False
    assert bpy.ops.reconform.retarget() == {'FINISHED'}
    panel_keys = _keys(s.last_action)
    panel_conflicts = [(c.body_part, c.term_a, c.term_b) for c in s.conflicts]
    last = ui(addon, "session").last_solve(bpy.context.scene)
    used = last.outcome.target.keyverts
    for name, index in moved.items():            # the hand-placed key vertices were used, as placed
        k = used.names.index(name)               # (one mesh per character: stored index = merged index)
        assert used.locked[k] and used.vertex_ids[k] == index
    assert last.outcome.built["target"].keyverts_origin == "stored"
    # the batch command, in its own process, on the same file
    import torch
    out, rep = tmp_path / "batch.blend", tmp_path / "batch.json"
    setup = tmp_path / "setup.json"
    setup.write_text(json.dumps({"method": "reconform", "settings": {"quality": "fast"}}))
    env = dict(os.environ, OMP_NUM_THREADS=str(torch.get_num_threads()))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "retarget.py"), "--blend", str(path),
                        "--source", "Walker", "--target", "Heavy", "--action", "Walk", "--setup", str(setup),
                        "--out", str(out), "--report", str(rep), "--quiet"],
                       capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(rep.read_text())
    assert report["target"]["keyverts"] == "stored"
    assert [(c["body_part"], *c["terms"]) for c in report["conflicts"]] == panel_conflicts
    bpy.ops.wm.open_mainfile(filepath=str(out))
    batch_keys = _keys(bpy.data.actions[report["action"]])
    assert set(batch_keys) == set(panel_keys) and len(panel_keys) > 7 * 20
    worst = max(float(np.abs(batch_keys[k] - panel_keys[k]).max()) for k in panel_keys)
    assert worst <= 1e-6, worst
