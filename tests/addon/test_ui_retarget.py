"""Retarget / Re-solve operators on a shared character pair, the modal driver (progress, cancel, errors),
conflicts and metrics in the panel.

The pair: the Mesh2Motion mannequin with its 'YMCA' clip (source) onto the low-poly orange-juice base mesh
(target, Rigify metarig names), 8 frames, a short solve. The first run uses the real OT key-vertex transfer;
later runs use a quick stand-in (tests/core covers the transfer itself) so this module stays within its time
share.
"""

import json
import math
import time

import numpy as np
import pytest

from .ui_helpers import FakeJob, core, draw_panel, quick_transfer, scene_fingerprint, ui

bpy = pytest.importorskip("bpy")

pytestmark = pytest.mark.assets

SRC, TGT = "Rig", "metarig"
SRC_MESH, TGT_MESH = "Mannequin", "mesh"
FRAMES = (1, 8)
ITERATIONS = 12


@pytest.fixture(scope="module")
def pair_blend(addon, assets, tmp_path_factory):
    """A .blend with the two characters imported (and nothing else)."""
    bpy.ops.wm.read_homefile(use_empty=True)
    for f in ("mesh2motion_mannequin_ymca.glb", "orangejuice_male_base_mesh.glb"):
        bpy.ops.import_scene.gltf(filepath=str(assets / "characters" / f))
    path = tmp_path_factory.mktemp("ui") / "pair.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def patch_transfer(mp, addon, fn=None):
    """Replace the key-vertex transfer where retargets (core.character.complete) and the Transfer operator call it."""
    kv = core(addon, "keyverts")
    fn = fn or quick_transfer(kv)
    for mod in (kv, core(addon, "character.complete"), ui(addon, "operators.keyverts")):
        if hasattr(mod, "transfer_keyverts"):
            mp.setattr(mod, "transfer_keyverts", fn)


@pytest.fixture(scope="module")
def quick_keyverts(addon):
    with pytest.MonkeyPatch.context() as mp:
        patch_transfer(mp, addon)
        yield


def open_pair(path, method='RECONFORM'):
    bpy.ops.wm.open_mainfile(filepath=str(path))
    s = bpy.context.scene.reconform
    s.source, s.target = bpy.data.objects[SRC], bpy.data.objects[TGT]
    s.use_custom_range = True
    s.frame_start, s.frame_end = FRAMES
    s.method = method
    s.quality = 'FAST'
    s.use_advanced = True
    s.iterations = ITERATIONS
    return s


@pytest.fixture(scope="module")
def solved(addon, pair_blend, tmp_path_factory):
    """One Retarget run (execute path, the real OT key-vertex transfer when POT is installed); returns facts
    about it and a .blend saved right after it."""
    import importlib.util

    session = ui(addon, "session")
    session.forget()
    s = open_pair(pair_blend)
    before = scene_fingerprint(bpy)
    t0 = time.perf_counter()
    with pytest.MonkeyPatch.context() as mp:
        if importlib.util.find_spec("ot") is None:  # a venv without POT (e.g. a bare bpy 5.x check venv)
            patch_transfer(mp, addon)
        assert bpy.ops.reconform.retarget() == {'FINISHED'}
    seconds = time.perf_counter() - t0
    last = session.last_solve(bpy.context.scene)
    path = tmp_path_factory.mktemp("ui") / "solved.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path), copy=True)
    return dict(before=before, after=scene_fingerprint(bpy), action=s.last_action.name, status=s.status,
                metrics={m.name: (m.value, m.reference, m.has_reference) for m in s.metrics},
                metrics_json=s.metrics_json, n_conflicts=len(s.conflicts), last=last, seconds=seconds, path=path)


def test_retarget_writes_one_new_action_on_the_target(addon, solved):
    before_acts, before_objs = solved["before"]
    after_acts, after_objs = solved["after"]
    name = solved["action"]
    assert before_objs[SRC][0] and name == f"{before_objs[SRC][0]} to {TGT}"   # '<clip playing> to <target>'
    assert set(after_acts) - set(before_acts) == {name}
    for act, keys in before_acts.items():   # the source clip (and anything else) is untouched
        assert after_acts[act] == keys, act
    assert after_objs[TGT][0] == name and after_objs[TGT][1]  # assigned, with a slot
    assert after_objs[SRC][:3] == before_objs[SRC][:3]
    keys = after_acts[name]
    frames = {tuple(np.frombuffer(co, np.float32).reshape(-1, 2)[:, 0]) for _, _, co in keys}
    assert frames == {tuple(float(f) for f in range(FRAMES[0], FRAMES[1] + 1))}
    assert "Wrote" in solved["status"]
    # key vertices transferred for the solve are stored on each character's mesh in the FINISHED path
    for mesh_name in (SRC_MESH, TGT_MESH):
        assert len(after_objs[mesh_name][4]) == 41 and not before_objs[mesh_name][4]


def test_metrics_of_the_last_solve_are_in_the_panel(addon, solved):
    m = solved["metrics"]
    assert {"floor_pen_mean", "jerk_mean", "grounded_f1", "contact_f1"} <= set(m)
    assert not any(k.startswith("solver_") for k in m), "solver statistics are not user metrics"
    assert all(math.isfinite(m[k][0]) for k in ("floor_pen_mean", "jerk_mean", "grounded_f1"))
    assert m["floor_pen_mean"][2], "copy-rotations reference missing"
    data = json.loads(solved["metrics_json"])
    assert data["metrics"]["jerk_mean"] == pytest.approx(m["jerk_mean"][0])
    bpy.ops.wm.open_mainfile(filepath=str(solved["path"]))
    panels = ui(addon, "panels")
    lay = draw_panel(panels.VIEW3D_PT_reconform_metrics, bpy.context)
    assert lay is not None
    texts = lay.texts()
    assert "Copy Rot." in texts and any(t.startswith("Floor penetration") for t in texts)
    assert f"{m['jerk_mean'][0]:.0f} m/s³" in texts and any("copy-rotations" in t for t in texts)   # value, verdict
    if math.isnan(m["contact_f1"][0]):  # undefined (no source contacts in 8 frames): said, not hidden
        assert "n/a" in texts and data["metrics"]["contact_f1"] is None


def test_last_solve_is_cached_for_resolve(addon, solved):
    last = solved["last"]
    assert last is not None and last.target_name == TGT and last.iterations == ITERATIONS
    assert last.result.num_frames == FRAMES[1] - FRAMES[0] + 1
    assert last.job.done


def test_resolve_warm_starts_with_slider_weights_and_fewer_steps(addon, solved, quick_keyverts):
    session, conflicts = ui(addon, "session"), ui(addon, "operators.conflicts")
    bpy.ops.wm.open_mainfile(filepath=str(solved["path"]))
    s = bpy.context.scene.reconform
    assert session.last_solve(bpy.context.scene) is None            # loading a file forgets the cached solves
    assert not bpy.ops.reconform.resolve.poll()
    assert bpy.ops.reconform.retarget() == {'FINISHED'}
    if not len(s.conflicts):  # make one so the slider path runs even when this short clip has none
        cf = core(addon, "solver.conflicts")
        conflicts.fill_conflicts(s, [cf.Conflict("left_arm", "dist", "pen", -0.9, 0.8, ((2, 5),), 0.1)])
    c = s.conflicts[0]
    c.balance = 0.25
    part, term_a, term_b = c.body_part, c.term_a, c.term_b  # the list is refilled after the solve
    del c
    n_before = len(bpy.data.actions)
    prev_result = session.last_solve(bpy.context.scene).result
    assert bpy.ops.reconform.resolve() == {'FINISHED'}
    last = session.last_solve(bpy.context.scene)
    job = last.job
    assert job.total == math.ceil(ITERATIONS * s.warm_start_fraction) < ITERATIONS
    assert job.stats["continued_state"]                   # it continued the last solve's optimiser
    assert job.stats["setup_reused"]                      # and its set-up (core.solver.continued)
    np.testing.assert_allclose(job.warm_start.rotations, prev_result.rotations)  # started from the last result
    pw = job.settings.part_weights
    assert pw[(part, term_a)] == pytest.approx(1.5) and pw[(part, term_b)] == pytest.approx(0.5)
    assert len(bpy.data.actions) == n_before + 1
    assert s.last_action.name.endswith("(re-solved)")


def test_push_to_nla_moves_the_result_onto_a_track(addon, pair_blend, quick_keyverts):
    s = open_pair(pair_blend, method='COPY_ROTATIONS')
    s.push_to_nla = True
    assert bpy.ops.reconform.retarget() == {'FINISHED'}
    ad = bpy.data.objects[TGT].animation_data
    assert ad.action is None
    strip = ad.nla_tracks[-1].strips[0]
    assert strip.action == s.last_action and strip.action_slot is not None
    # copy rotations: measured on its own (no copy-rotations reference beside it), no conflicts
    assert {m.name for m in s.metrics} >= {"grounded_f1", "floor_pen_mean"} and len(s.conflicts) == 0
    assert not any(m.has_reference for m in s.metrics)


def test_bad_input_is_one_line_and_changes_nothing(addon, pair_blend):
    s = open_pair(pair_blend)
    s.target = s.source
    before = scene_fingerprint(bpy)
    with pytest.raises(RuntimeError, match="both 'Rig'"):
        bpy.ops.reconform.retarget()
    assert scene_fingerprint(bpy) == before


# ------------------------------------------------------------------------------------------ modal driver
def _driver(addon, op_name="RECONFORM_OT_retarget"):
    """The operator's modal logic on a plain object (Operators can't be instantiated headless)."""
    retarget = ui(addon, "operators.retarget")
    op_cls = getattr(retarget, op_name)
    ns = {k: v for k, v in op_cls.__dict__.items() if k in ("_start", "_apply", "execute", "_written", "_group")}
    ns["reports"] = []
    ns["report"] = lambda self, kind, msg: self.reports.append((set(kind), msg))
    return type("Driver", (retarget._SolveModalBase,), ns)()


def _pump(drv, runner, until, timeout=120.0, before_handle=None):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        evs = runner.events()
        if evs:
            kinds = [k for k, _ in evs]
            if before_handle is not None:
                before_handle(evs)
            ret = drv.handle_events(bpy.context, evs)
            if until(kinds) or ret != {'RUNNING_MODAL'}:
                return kinds, ret
        time.sleep(0.02)
    raise AssertionError("no events from the worker")


def test_cancel_mid_solve_leaves_the_scene_exactly_as_before(addon, pair_blend, quick_keyverts):
    session = ui(addon, "session")
    session.forget()
    s = open_pair(pair_blend)
    s.iterations = 400  # long enough to still be running when we cancel
    s.status, s.progress = "previous status", 0.0
    before = scene_fingerprint(bpy)
    drv = _driver(addon)
    drv._save_state(bpy.context)
    runner = drv._start(bpy.context)
    drv._runner = runner
    session.track(bpy.context.scene, runner)
    runner.start()
    kinds, ret = _pump(drv, runner, until=lambda k: s.status.startswith("Solving"))
    assert ret == {'RUNNING_MODAL'} and s.progress > 0.0 and s.status.startswith("Solving")
    assert session.is_running(bpy.context.scene)
    assert not bpy.ops.reconform.retarget.poll()  # one run per scene
    drv.cancel_run(bpy.context)                   # what Esc does
    runner.thread.join(30.0)
    assert not runner.thread.is_alive()
    assert runner.job.cancelled and runner.job.done is False
    assert scene_fingerprint(bpy) == before
    assert (s.status, s.progress) == ("previous status", 0.0)
    assert not session.is_running(bpy.context.scene) and session.last_solve(bpy.context.scene) is None
    # the worker's last word is 'cancelled' (never 'done'), and handing its late events over applies nothing
    events = runner.events()
    kinds = [k for k, _ in events]
    assert kinds and kinds[-1] == "cancelled" and not {"done", "error"} & set(kinds), kinds
    assert drv.handle_events(bpy.context, events) == {'CANCELLED'}
    assert scene_fingerprint(bpy) == before and (s.status, s.progress) == ("previous status", 0.0)


def test_modal_done_event_writes_in_the_finished_path_only(addon, pair_blend, quick_keyverts):
    s = open_pair(pair_blend)
    before = scene_fingerprint(bpy)
    drv = _driver(addon)
    drv._save_state(bpy.context)
    runner = drv._start(bpy.context)
    drv._runner = runner
    runner.start()
    seen = []

    def check(events):
        seen.extend(p for k, p in events if k == "progress")
        assert scene_fingerprint(bpy) == before, "written before FINISHED"

    kinds, ret = _pump(drv, runner, until=lambda k: False, before_handle=check)
    assert ret == {'FINISHED'} and len([p for p in seen if p.solver is not None]) == ITERATIONS
    phases = [p.phase for p in seen]
    assert phases[0] == "characters" and "metrics" in phases and phases[-1] == "done"
    assert all(a <= b for a, b in zip([p.fraction for p in seen], [p.fraction for p in seen][1:]))
    assert s.last_action is not None and s.last_action.name not in before[0]
    assert s.progress == 1.0


def test_worker_error_reports_one_line_and_writes_nothing(addon, pair_blend):
    session = ui(addon, "session")
    open_pair(pair_blend)
    before = scene_fingerprint(bpy)
    drv = _driver(addon)
    drv._save_state(bpy.context)
    runner = session.SolveRunner(FakeJob(result=None, total=4, fail_at=2), finish=lambda j: None)
    drv._runner = runner
    runner.start()
    kinds, ret = _pump(drv, runner, until=lambda k: False)
    assert ret == {'CANCELLED'}
    (kind, msg), = drv.reports
    assert kind == {'ERROR'} and "nothing was written" in msg and "boom at step 2" in msg
    assert scene_fingerprint(bpy) == before


def test_invoke_in_background_runs_synchronously(addon, pair_blend):
    """The panel button invokes; in background mode (batch, the bpy wheel) invoke must not go modal."""
    s = open_pair(pair_blend, method='COPY_ROTATIONS')
    assert bpy.ops.reconform.retarget('INVOKE_DEFAULT') == {'FINISHED'}
    assert s.last_action is not None and bpy.data.objects[TGT].animation_data.action == s.last_action
    assert not ui(addon, "session").is_running(bpy.context.scene)


# ------------------------------------------------------------------------------------------ key vertices
def test_second_retarget_reuses_stored_key_vertices(addon, solved, quick_keyverts):
    calls = []
    inner = core(addon, "character.complete").transfer_keyverts

    def counting(*a, **k):
        calls.append(a[0].name)
        return inner(*a, **k)

    bpy.ops.wm.open_mainfile(filepath=str(solved["path"]))
    s = bpy.context.scene.reconform
    s.method = 'RECONFORM'
    with pytest.MonkeyPatch.context() as mp:
        patch_transfer(mp, addon, counting)
        assert bpy.ops.reconform.retarget() == {'FINISHED'}
    assert calls == [], f"transferred again for {calls}"


def test_source_floor_reaches_the_solve_and_its_metrics(addon, solved, quick_keyverts):
    """The panel's Source Floor and a batch set-up's ``source_ground`` both reach the solve, and the metrics
    read the source's grounded feet above that floor."""
    import importlib

    pipeline = importlib.import_module(addon.__name__ + ".reconform_addon.pipeline")
    bpy.ops.wm.open_mainfile(filepath=str(solved["path"]))
    s = bpy.context.scene.reconform
    src, tgt = bpy.data.objects[SRC], bpy.data.objects[TGT]
    shares = {}
    for level in (0.0, 0.25):         # a floor 25 cm up: no source foot is within 1 % of h_c of it
        settings = {"quality": "fast", "iterations": 2, "source_ground": level}
        res = pipeline.retarget(src, tgt, method="reconform", frame_start=FRAMES[0], frame_end=FRAMES[1],
                                settings=settings, name=f"floor {level}")
        assert res.report["metrics_solver"]["source_ground"] == pytest.approx(level)
        shares[level] = res.report["metrics"]["source_grounded_share"]
        advice = [n for n in res.report["notes"] if "Source Floor" in n]
        # 25 cm under that floor, the source's feet are never grounded: the report says to try another reading
        if level:
            assert len(advice) == 1 and f"source '{SRC}'" in advice[0]
        else:
            assert advice == []
    assert shares[0.0] > 0.2 and shares[0.25] == 0.0
    # the panel: Custom Level, through the operator
    s.source_ground, s.source_ground_level = 'CUSTOM', 0.25
    assert bpy.ops.reconform.retarget() == {'FINISHED'}
    data = json.loads(s.metrics_json)
    assert data["metrics"]["solver_source_ground"] == pytest.approx(0.25)
    assert data["metrics"]["source_grounded_share"] == 0.0
    assert data["reference"]["source_grounded_share"] == 0.0     # copy-rotations, against the same labels


def test_transfer_reset_unlock_key_vertices(addon, pair_blend, quick_keyverts):
    panels, gz = ui(addon, "panels"), ui(addon, "gizmos")
    kvstore, geometry = ui(addon, "bridge.keyverts"), ui(addon, "bridge.geometry")
    s = open_pair(pair_blend)
    s.keyvert_role = 'TARGET'
    lay = draw_panel(panels.VIEW3D_PT_reconform_keyverts, bpy.context)
    assert any(t.startswith("None yet") for t in lay.texts())
    assert bpy.ops.reconform.transfer_keyverts(role='TARGET') == {'FINISHED'}
    holder = kvstore.holder_mesh(bpy.data.objects[TGT])
    assert holder is not None and holder.name == TGT_MESH
    items = holder.reconform_keyverts
    assert len(items) == 41 and not any(it.locked for it in items)
    first = [it.index for it in items]
    # a hand-placed vertex survives Reset Unlocked; the others are placed again
    items[0].index, items[0].locked = 7, True
    assert bpy.ops.reconform.reset_keyverts(role='TARGET') == {'FINISHED'}
    items = kvstore.holder_mesh(bpy.data.objects[TGT]).reconform_keyverts
    assert (items[0].index, items[0].locked) == (7, True)
    assert [it.index for it in items][1:] == first[1:]
    lay = draw_panel(panels.VIEW3D_PT_reconform_keyverts, bpy.context)
    assert "41 key vertices, 1 placed by hand" in lay.texts()
    # the viewport gizmos appear only when asked for
    assert not gz.RECONFORM_GGT_keyverts.poll(bpy.context)
    s.show_keyverts = True
    assert gz.RECONFORM_GGT_keyverts.poll(bpy.context)
    get, _ = gz.make_handlers(holder.name, 0)
    assert np.allclose(get(), geometry.evaluated_geometry(holder).co[7])
    assert bpy.ops.reconform.unlock_keyverts(role='TARGET') == {'FINISHED'}
    assert not any(it.locked for it in kvstore.holder_mesh(bpy.data.objects[TGT]).reconform_keyverts)
    # a full transfer that does not keep locks re-places everything
    items = kvstore.holder_mesh(bpy.data.objects[TGT]).reconform_keyverts
    items[0].index, items[0].locked = 7, True
    assert bpy.ops.reconform.transfer_keyverts(role='TARGET', keep_locked=False) == {'FINISHED'}
    assert [it.index for it in kvstore.holder_mesh(bpy.data.objects[TGT]).reconform_keyverts] == first


def test_loading_a_file_cancels_a_running_solve(addon, pair_blend, quick_keyverts):
    session = ui(addon, "session")
    s = open_pair(pair_blend)
    s.iterations = 400
    drv = _driver(addon)
    drv._save_state(bpy.context)
    runner = drv._start(bpy.context)
    drv._runner = runner
    session.track(bpy.context.scene, runner)
    runner.start()
    _pump(drv, runner, until=lambda k: "progress" in k)
    bpy.ops.wm.open_mainfile(filepath=str(pair_blend))     # load_pre handler cancels the worker
    runner.thread.join(30.0)
    assert not runner.thread.is_alive() and runner.job.cancelled
    assert not session.is_running(bpy.context.scene)
    assert drv.handle_events(bpy.context, runner.events()) == {'CANCELLED'}   # nothing lands in the new file
    assert bpy.context.scene.reconform.last_action is None
