"""Live: the window around the current frame retargeted in the background and shown on the target as a
temporary preview, on a generated pair (no shared assets). The controller is driven here as the Live operator's
timer drives it (``tick`` with the current frame; the worker thread is real)."""

import time

import numpy as np
import pytest

from .ui_helpers import draw_panel, saved_generated_pair, scene_fingerprint, ui

bpy = pytest.importorskip("bpy")

FRAMES = 40
WINDOW = 16
ITERATIONS = 4


@pytest.fixture(scope="module")
def live_blend(addon, tmp_path_factory):
    return saved_generated_pair(addon, FRAMES, tmp_path_factory.mktemp("live"))


def open_scene(path):
    bpy.ops.wm.open_mainfile(filepath=str(path))
    s = bpy.context.scene.reconform
    s.source, s.target, s.action = bpy.data.objects["Walker"], bpy.data.objects["Heavy"], bpy.data.actions["Walk"]
    s.method, s.quality, s.use_advanced, s.iterations = 'RECONFORM', 'FAST', True, ITERATIONS
    s.live_window = WINDOW
    return s


def drive(c, frame, until, timeout=180.0):
    """Tick ``c`` at ``frame`` (as the timer would) until ``until()`` holds."""
    t0 = time.perf_counter()
    while not until():
        assert c.tick(frame), c.status
        assert time.perf_counter() - t0 < timeout, f"Live did not get there: {c.status}"
        time.sleep(0.02)


def pose_of(name):
    """Every pose channel of an armature, as numbers (what a viewport shows when no Action plays)."""
    return np.array([list(pb.location) + list(pb.rotation_quaternion) + list(pb.rotation_euler)
                     + list(pb.rotation_axis_angle) + list(pb.scale) for pb in bpy.data.objects[name].pose.bones])


def preview_motion(addon, c):
    """The preview Action's keys as a Motion of the target skeleton (every frame of the clip)."""
    bridge = ui(addon, "bridge")
    tgt = bpy.data.objects["Heavy"]
    act = ui(addon, "bridge.preview").preview_action(tgt)
    assert act is not None and tgt.animation_data.action == act
    return bridge.read_motion(tgt, bridge.read_skeleton(tgt), action=act)


@pytest.mark.slow
def test_live_solves_the_window_around_the_frame_follows_scrubs_and_edits_and_leaves_nothing(addon, live_blend):
    live, retarget = ui(addon, "live"), ui(addon, "operators.retarget")
    run = __import__(addon.__name__ + ".core.pipeline.retarget", fromlist=["run"]).run
    s = open_scene(live_blend)
    scene = bpy.context.scene
    before, pose_before = scene_fingerprint(bpy), pose_of("Heavy")
    c = live.start(scene, ui(addon, "operators.request").request_from_panel(s), int(s.live_window))
    assert live.is_live(scene) and live.controller(scene) is c

    # the set-up, then the window around frame 20 (frames 1..40: clip index 19 -> frames 12..27)
    drive(c, 20, lambda: c.shown is not None)
    assert c.shown == (11, 27) and "solved in" in live.status(scene)
    skeleton, base = c.baseline
    shown = preview_motion(addon, c)
    assert shown.num_frames == FRAMES and shown.frame_start == 1
    win = run(c.clip.solve(20))                               # the same window, solved again here
    np.testing.assert_allclose(np.abs((shown.rotations[11:27] * win.motion.rotations).sum(-1)), 1.0, atol=1e-5)
    np.testing.assert_allclose(shown.locations[11:27], win.motion.locations, atol=1e-5)
    assert np.abs(shown.locations[11:27] - base.locations[11:27]).max() > 1e-4        # solved, not copied
    np.testing.assert_allclose(shown.locations[:11], base.locations[:11], atol=1e-6)  # copy-rotations elsewhere
    np.testing.assert_allclose(shown.locations[27:], base.locations[27:], atol=1e-6)
    assert scene_fingerprint(bpy)[0]["Walk"] == before[0]["Walk"]                     # the source untouched

    # scrubbed to frame 38: that window is solved, the one before goes back to copy-rotations
    drive(c, 38, lambda: c.shown == (24, 40))
    shown = preview_motion(addon, c)
    np.testing.assert_allclose(shown.locations[:24], base.locations[:24], atol=1e-6)
    assert np.abs(shown.locations[24:] - base.locations[24:]).max() > 1e-4 and c.solved == 2

    # the source edited (the hips lifted 5 cm on every key): the clip is read again and the window re-solved
    walk = bpy.data.actions["Walk"]
    fcs = [fc for fc in ui(addon, "bridge.animation").action_fcurves(bpy.data.objects["Walker"], walk)
           if fc.data_path.endswith(".location") and fc.array_index == 2]
    hips = next(fc for fc in fcs if any(k.co[1] != 0.0 for k in fc.keyframe_points))
    for k in hips.keyframe_points:
        k.co[1] += 0.05
    hips.update()
    old_clip = c.clip
    c.source_edited()
    drive(c, 38, lambda: c.clip is not old_clip and c.shown == (24, 40))
    assert c.solved == 3 and not np.allclose(c.baseline[1].locations, base.locations)

    # an update of the source's Action that changed nothing it plays (a false alarm) keeps the window
    c.source_edited()
    drive(c, 38, lambda: c._edited_at is None and c.runner is None)
    assert c.clip.setup is not None and c.shown == (24, 40) and c.solved == 3

    # off: the target as it was, the preview gone, the (edited) source as edited
    scene.frame_set(20)                         # the preview's pose shown, then Live off: the pose as it was
    assert np.abs(pose_of("Heavy") - pose_before).max() > 1e-3
    assert live.stop(scene) and not live.is_live(scene) and c.runner is None
    after = scene_fingerprint(bpy)
    assert after[1] == before[1]
    np.testing.assert_allclose(pose_of("Heavy"), pose_before, atol=1e-6)
    assert set(after[0]) == set(before[0]) and not any("Live preview" in a.name for a in bpy.data.actions)
    assert not live.stop(scene)


def test_a_file_saved_while_live_opens_with_the_target_restored(addon, live_blend, tmp_path):
    live, retarget = ui(addon, "live"), ui(addon, "operators.retarget")
    s = open_scene(live_blend)
    before = scene_fingerprint(bpy)
    c = live.start(bpy.context.scene, ui(addon, "operators.request").request_from_panel(s), WINDOW)
    c.source_edited()            # a false alarm while the set-up runs: it is stopped, and started again
    drive(c, 10, lambda: c.baseline is not None)
    assert bpy.data.objects["Heavy"].animation_data.action.name == "Heavy Live preview"
    path = tmp_path / "saved_while_live.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path), copy=True)
    live.stop(bpy.context.scene)
    bpy.ops.wm.open_mainfile(filepath=str(path))        # load_pre stops Live, load_post restores the target
    assert not live.is_live(bpy.context.scene)
    after = scene_fingerprint(bpy)
    assert after[1] == before[1] and set(after[0]) == set(before[0])
    assert "reconform_live_previous" not in bpy.data.objects["Heavy"].keys()


def test_retarget_turns_live_off_first_and_the_panel_shows_the_toggle(addon, live_blend):
    live, retarget, panels = ui(addon, "live"), ui(addon, "operators.retarget"), ui(addon, "panels")
    s = open_scene(live_blend)
    scene = bpy.context.scene
    assert "reconform.live" in draw_panel(panels.VIEW3D_PT_reconform_run, bpy.context).operators()
    c = live.start(scene, ui(addon, "operators.request").request_from_panel(s), WINDOW)
    drive(c, 10, lambda: c.baseline is not None)
    lay = draw_panel(panels.VIEW3D_PT_reconform_run, bpy.context)
    assert any(t.startswith("Live:") for t in lay.texts())
    assert bpy.ops.reconform.retarget() == {'FINISHED'}
    assert not live.is_live(scene)
    assert bpy.data.objects["Heavy"].animation_data.action.name == "Walk to Heavy"
    assert not any("Live preview" in a.name for a in bpy.data.actions)
    # Live in the background is refused with a reason; copy-rotations has nothing to solve live
    with pytest.raises(RuntimeError, match="needs the viewport"):
        bpy.ops.reconform.live()
    s.method = 'COPY_ROTATIONS'
    with pytest.raises(Exception, match="ReConForM"):
        live.start(scene, ui(addon, "operators.request").request_from_panel(s), WINDOW)
    assert not live.is_live(scene)


def test_a_failing_window_stops_live_and_puts_the_target_back(addon, live_blend, monkeypatch):
    live, retarget = ui(addon, "live"), ui(addon, "operators.retarget")
    s = open_scene(live_blend)
    scene = bpy.context.scene
    before = scene_fingerprint(bpy)
    c = live.start(scene, ui(addon, "operators.request").request_from_panel(s), WINDOW)
    drive(c, 10, lambda: c.baseline is not None)

    class Exploding:                       # a window whose solve fails in the worker thread
        outcome, cancelled = None, False

        def steps(self):
            raise RuntimeError("window exploded")
            yield

        def cancel(self):
            pass
    monkeypatch.setattr(c.clip, "solve", lambda frame, previous=None: Exploding())
    t0 = time.perf_counter()
    while c.tick(30):                      # a frame whose window is not solved yet
        assert time.perf_counter() - t0 < 30
        time.sleep(0.02)
    assert not live.is_live(scene) and "window exploded" in live.status(scene)
    assert scene_fingerprint(bpy)[1] == before[1]
    assert not any("Live preview" in a.name for a in bpy.data.actions)


@pytest.mark.slow
def test_the_live_operator_ticks_on_timer_events_and_ends_with_live(addon, live_blend):
    """The modal operator's own code, driven with stand-in events (a background Blender runs no modal
    operator): every event passes through, a timer event ticks the scene's controller, Live off ends it."""
    live, retarget, ops = ui(addon, "live"), ui(addon, "operators.retarget"), ui(addon, "operators.live")
    s = open_scene(live_blend)
    scene = bpy.context.scene
    c = live.start(scene, ui(addon, "operators.request").request_from_panel(s), WINDOW)

    class Event:
        def __init__(self, kind):
            self.type, self.value = kind, 'NOTHING'

    class Op:                                  # what the operator instance carries
        _timer, _scene_ptr = None, scene.as_pointer()
        reports = []

        def report(self, level, text):
            self.reports.append((level, text))

        _end = ops.RECONFORM_OT_live._end
        _panel = ops.RECONFORM_OT_live._panel
    op = Op()
    modal = ops.RECONFORM_OT_live.modal
    assert modal(op, bpy.context, Event('MOUSEMOVE')) == {'PASS_THROUGH'}
    t0 = time.perf_counter()
    while c.baseline is None:
        assert modal(op, bpy.context, Event('TIMER')) == {'PASS_THROUGH'}
        assert time.perf_counter() - t0 < 120
        time.sleep(0.02)
    # a solver setting changed in the panel: the timer hands it to Live, which sets the clip up again with it
    assert c.request.settings.iterations == ITERATIONS
    s.iterations = ITERATIONS + 2
    old_clip, t0 = c.clip, time.perf_counter()
    while not (c.clip is not old_clip and c.clip.setup is not None and c.shown is not None):
        assert modal(op, bpy.context, Event('TIMER')) == {'PASS_THROUGH'}
        assert time.perf_counter() - t0 < 120, c.status
        time.sleep(0.02)
    assert c.request.settings.iterations == ITERATIONS + 2 == c.clip.options.settings.iterations
    assert c.clip.setup.source is old_clip.setup.source                     # the same characters
    settled = c.clip
    for _ in range(5):                                                       # unchanged settings: nothing again
        assert modal(op, bpy.context, Event('TIMER')) == {'PASS_THROUGH'}
        time.sleep(0.02)
    assert c.clip is settled and c._edited_at is None

    # the window length changed in the panel (not a solver setting): Live starts again with it
    s.live_window = WINDOW + 4
    t0 = time.perf_counter()
    while live.controller(scene) is c or live.controller(scene).baseline is None:
        assert modal(op, bpy.context, Event('TIMER')) == {'PASS_THROUGH'}
        assert time.perf_counter() - t0 < 120, c.status
        time.sleep(0.02)
    c2 = live.controller(scene)
    assert not c.alive and c2.length == WINDOW + 4 and c2.request.settings.iterations == ITERATIONS + 2
    assert bpy.data.objects["Heavy"].animation_data.action.name == "Heavy Live preview"

    # a panel Live cannot follow (Copy Rotations has nothing to solve): Live stops, says why, the target is back
    s.method = 'COPY_ROTATIONS'
    t0 = time.perf_counter()
    while (result := modal(op, bpy.context, Event('TIMER'))) == {'PASS_THROUGH'}:
        assert time.perf_counter() - t0 < 60, c2.status
        time.sleep(0.02)
    assert result == {'FINISHED'} and not live.is_live(scene)
    assert op.reports and op.reports[-1][0] == {'WARNING'} and "ReConForM method" in op.reports[-1][1]
    assert not any("Live preview" in a.name for a in bpy.data.actions)


def test_a_second_preview_replaces_the_first_and_restore_gives_the_original_back(addon, live_blend):
    bridge, preview = ui(addon, "bridge"), ui(addon, "bridge.preview")
    open_scene(live_blend)
    heavy = bpy.data.objects["Heavy"]
    before, pose_before = scene_fingerprint(bpy), pose_of("Heavy")
    skeleton = bridge.read_skeleton(heavy)
    walk = bridge.read_motion(bpy.data.objects["Walker"], bridge.read_skeleton(bpy.data.objects["Walker"]))
    J = skeleton.num_bones
    motion = type(walk)(np.tile([1.0, 0.0, 0.0, 0.0], (FRAMES, J, 1)), np.zeros((FRAMES, J, 3)), walk.fps, 1)
    motion.locations[:, :, 2] = 0.1                               # every bone moved: a pose unlike the rest
    first = preview.write_preview(heavy, skeleton, motion, "Heavy Live preview")
    first_name = first.name
    second = preview.write_preview(heavy, skeleton, motion.slice(0, 20), "Heavy Live preview")
    assert first_name not in bpy.data.actions and preview.preview_action(heavy) == second
    assert [a.name for a in bpy.data.actions if preview.is_preview(a)] == [second.name]
    bpy.context.scene.frame_set(5)
    assert preview.restore(heavy) and not preview.restore(heavy)
    after = scene_fingerprint(bpy)
    assert after == before
    np.testing.assert_allclose(pose_of("Heavy"), pose_before, atol=1e-6)
