"""Partners (several characters retargeted together, ReConForM §6.1) on a generated scene (no shared assets):
the panel's list and its Retarget (one new Action per target, partner metrics in the panel), Esc mid-solve,
bad input, all-or-nothing writing, and the batch command with two pairs.

The scene: two generated bodies (core.body, low resolution) face each other and raise their arms straight
ahead until their hands meet (tests/core/synth.py ``reach_motion``); two more, of other sizes, receive them.
"""

import dataclasses
import importlib
import json
import math
import time

import numpy as np
import pytest

from core.body import SHORT_HEAVY, TALL_THIN, BodyParams, make_body
from core.types import Character
from tests.addon.test_batch import run_tool
from tests.core.synth import reach_motion
from tools.make_demo_scene import build_character

from .bridge_helpers import action_snapshot, make_rig
from .test_ui_retarget import _driver, _pump
from .ui_helpers import draw_panel, quick_transfer, scene_fingerprint, ui

bpy = pytest.importorskip("bpy")

FRAMES = 10
ITERATIONS = 4


@pytest.fixture(scope="module")
def couple_blend(addon, tmp_path_factory):
    """The generated couple and its two targets, saved once (a module's slow tests share it)."""
    bpy.ops.wm.read_homefile(use_empty=True)
    bridge = importlib.import_module(addon.__name__ + ".reconform_addon.bridge")
    res = 0.03
    for name, params, loc, turn in (("Lead", BodyParams(name="lead", resolution=res), (0.0, 0.0), 0.0),
                                    ("Follow", BodyParams(name="follow", resolution=res), (0.0, -1.5), math.pi),
                                    ("Tall", dataclasses.replace(TALL_THIN, resolution=res), (3.0, 0.0), 0.0),
                                    ("Short", dataclasses.replace(SHORT_HEAVY, resolution=res), (4.5, 0.0), 0.0)):
        sk, mesh, bone_map = make_body(params, pose="T")
        arm = build_character(name, sk, mesh, loc[0])
        arm.location.y = loc[1]
        arm.rotation_euler.z = turn
        if name in ("Lead", "Follow"):
            motion = reach_motion(Character(sk, mesh, bone_map), frames=FRAMES)
            bridge.write_motion(arm, bridge.read_skeleton(arm), motion, f"{name}Reach")
    path = tmp_path_factory.mktemp("partners") / "couple.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


@pytest.fixture(scope="module")
def quick_keyverts(addon):
    kv = importlib.import_module(addon.__name__ + ".core.keyverts")
    with pytest.MonkeyPatch.context() as mp:
        for mod in (kv, importlib.import_module(addon.__name__ + ".core.character.complete")):
            mp.setattr(mod, "transfer_keyverts", quick_transfer(kv))
        yield


def open_couple(path, iterations=ITERATIONS):
    bpy.ops.wm.open_mainfile(filepath=str(path))
    s = bpy.context.scene.reconform
    o = bpy.data.objects
    s.source, s.target, s.action = o["Lead"], o["Tall"], bpy.data.actions["LeadReach"]
    s.method, s.quality, s.use_advanced, s.iterations = 'RECONFORM', 'FAST', True, iterations
    assert bpy.ops.reconform.partner_add() == {'FINISHED'}
    pair = s.partners[0]
    pair.source, pair.target, pair.action = o["Follow"], o["Short"], bpy.data.actions["FollowReach"]
    assert s.use_partners
    return s


@pytest.mark.slow
def test_panel_retargets_the_partners_together(addon, couple_blend, quick_keyverts):
    s = open_couple(couple_blend)
    s.w_partner = 2.0                                   # the panel's weight between partners (Override Weights)
    before_acts, before_objs = scene_fingerprint(bpy)
    assert bpy.ops.reconform.retarget() == {'FINISHED'}
    after_acts, after_objs = scene_fingerprint(bpy)
    new = set(after_acts) - set(before_acts)
    assert new == {"LeadReach to Tall", "FollowReach to Short"}
    assert after_objs["Tall"][0] == "LeadReach to Tall" and after_objs["Short"][0] == "FollowReach to Short"
    for clip in ("LeadReach", "FollowReach"):
        assert after_acts[clip] == before_acts[clip]
    assert s.last_action.name == "LeadReach to Tall" and s.status.startswith("Wrote 2 Actions")
    metrics = {m.name: m for m in s.metrics}
    assert {"partner_contact_f1", "hand_partner_error_mean", "partner_pen_mean", "gaze_angle_error_mean"} <= set(metrics)
    assert metrics["hand_partner_error_mean"].has_reference                 # copy-rotations beside it
    assert "Tall: grounded_f1" in metrics and "Short: grounded_f1" in metrics
    last = ui(addon, "session").last_solve(bpy.context.scene)               # kept for the group's Re-solve
    assert type(last).__name__ == "LastGroupSolve" and len(last.outcome.members) == 2
    assert last.outcome.job.settings.w_partner == 2.0 and last.outcome.job.partners is not None
    # every character's conflicts in one list, each row naming its character
    rows = [(c.character, c.score) for c in s.conflicts]
    assert {who for who, _ in rows} <= {"Tall", "Short"} and all(who for who, _ in rows)
    assert [score for _, score in rows] == sorted((score for _, score in rows), reverse=True)
    labels = ui(addon, "panels").metric_label
    assert labels("Short: grounded_f1") == "Short: Grounded feet F1"        # core.metrics.report's label, prefixed
    assert labels("partner_contact_f1") == "Contacts with partners F1"


@pytest.mark.slow
def test_re_solve_of_the_partners_applies_each_characters_sliders(addon, couple_blend, quick_keyverts):
    s = open_couple(couple_blend)
    assert bpy.ops.reconform.retarget() == {'FINISHED'}
    session = ui(addon, "session")
    first = session.last_solve(bpy.context.scene)
    cf = importlib.import_module(addon.__name__ + ".core.solver.conflicts")
    # one slider per character (made here, so the path runs whatever this short clip lists): Short's hand hold
    # against its own distances on the left arm, pushed all the way to the hold
    ui(addon, "operators.conflicts").fill_group_conflicts(s, [
        ("Tall", [cf.Conflict("torso", "dist", "pen", -0.8, 0.6, ((1, 4),), 0.2)]),
        ("Short", [cf.Conflict("left_arm", "dist", "partner", -0.9, 0.8, ((2, 5),), 0.3)])])
    assert [c.character for c in s.conflicts] == ["Short", "Tall"]         # ranked by cost over both characters
    s.conflicts[0].balance = 1.0
    before_acts, _ = scene_fingerprint(bpy)
    assert bpy.ops.reconform.resolve() == {'FINISHED'}
    after_acts, after_objs = scene_fingerprint(bpy)
    assert set(after_acts) - set(before_acts) == {"LeadReach to Tall (re-solved)", "FollowReach to Short (re-solved)"}
    for name in ("LeadReach", "FollowReach", "LeadReach to Tall", "FollowReach to Short"):
        assert after_acts[name] == before_acts[name]          # the sources and the first results untouched
    assert after_objs["Short"][0] == "FollowReach to Short (re-solved)"
    assert s.status.startswith("Wrote 2 Actions")
    last = session.last_solve(bpy.context.scene)
    job = last.job
    assert job.stats["setup_reused"] and job.optim.t > first.job.optim.t          # the group's optimiser continued
    assert job.total == math.ceil(ITERATIONS * s.warm_start_fraction)
    tall, short = (m.settings.part_weights for m in job.members)
    assert tall == {}
    assert short == {("left_arm", "dist"): 0.0, ("left_arm", "partner"): 2.0}
    # copy-rotations' figures are the first solve's (not measured again)
    assert last.outcome.partner_reference is first.outcome.partner_reference


@pytest.fixture
def four_rigs(addon):
    """Four plain armatures (the list, the panel and the checks need no humanoid)."""
    bpy.ops.wm.read_homefile(use_empty=True)
    rigs = {n: make_rig(n)[0] for n in ("Lead", "Follow", "Tall", "Short")}
    s = bpy.context.scene.reconform
    s.source, s.target = rigs["Lead"], rigs["Tall"]
    assert bpy.ops.reconform.partner_add() == {'FINISHED'}
    s.partners[0].source, s.partners[0].target = rigs["Follow"], rigs["Short"]
    return s, rigs


def test_partners_list_and_panel(addon, four_rigs):
    s, rigs = four_rigs
    assert s.use_partners and s.partners_index == 0
    panels = ui(addon, "panels")
    layout = draw_panel(panels.VIEW3D_PT_reconform_partners, bpy.context)
    assert "reconform.partner_add" in layout.operators() and "reconform.partner_remove" in layout.operators()
    assert any("2 characters together" in t for t in layout.texts())
    s.partners[0].target = None
    layout = draw_panel(panels.VIEW3D_PT_reconform_partners, bpy.context)
    assert any("lack a source or a target" in t for t in layout.texts())
    # bad input: one line, nothing changes
    before = scene_fingerprint(bpy)
    with pytest.raises(RuntimeError, match="Partner pair 1 has no target"):
        bpy.ops.reconform.retarget()
    assert scene_fingerprint(bpy) == before
    s.use_partners = False
    layout = draw_panel(panels.VIEW3D_PT_reconform_partners, bpy.context)
    assert any("solves Source -> Target alone" in t for t in layout.texts())
    assert bpy.ops.reconform.partner_remove() == {'FINISHED'} and len(s.partners) == 0
    assert bpy.ops.reconform.partner_remove.poll() is False


def test_a_target_in_two_pairs_is_refused(addon, four_rigs):
    s, rigs = four_rigs
    group = ui(addon, "pipeline_group")
    with pytest.raises(Exception, match="target of two pairs"):
        group.check_pairs([(rigs["Lead"], rigs["Tall"], None), (rigs["Follow"], rigs["Tall"], None)])
    with pytest.raises(Exception, match="both a source and a target"):
        group.check_pairs([(rigs["Lead"], rigs["Tall"], None), (rigs["Tall"], rigs["Short"], None)])
    group.check_pairs([(rigs["Lead"], rigs["Tall"], None), (rigs["Follow"], rigs["Short"], None)])


@pytest.mark.slow
def test_cancel_mid_group_solve_leaves_the_scene_exactly_as_before(addon, couple_blend, quick_keyverts):
    session = ui(addon, "session")
    session.forget()
    s = open_couple(couple_blend, iterations=400)
    s.status, s.progress = "previous status", 0.0
    before = scene_fingerprint(bpy)
    drv = _driver(addon)
    drv._save_state(bpy.context)
    runner = drv._start(bpy.context)
    drv._runner = runner
    session.track(bpy.context.scene, runner)
    runner.start()
    t0 = time.perf_counter()
    while not s.status.startswith("Solving 2 characters together") and time.perf_counter() - t0 < 120:
        ret = drv.handle_events(bpy.context, runner.events())
        assert ret == {'RUNNING_MODAL'}
        time.sleep(0.02)
    assert s.status.startswith("Solving 2 characters together") and s.progress > 0.0
    drv.cancel_run(bpy.context)                   # what Esc does
    runner.thread.join(30.0)
    assert not runner.thread.is_alive() and runner.job.cancelled and not runner.job.done
    assert scene_fingerprint(bpy) == before
    assert (s.status, s.progress) == ("previous status", 0.0)
    events = runner.events()
    assert drv.handle_events(bpy.context, events) == {'CANCELLED'}
    assert scene_fingerprint(bpy) == before


@pytest.mark.slow
def test_writing_is_all_or_nothing(addon, couple_blend, quick_keyverts):
    s = open_couple(couple_blend)
    partners = ui(addon, "operators.partners")
    pipe = ui(addon, "pipeline")        # pipeline_group writes each pair through pipeline.write_outcome
    req = partners.request_from_panel(s)
    inputs, job = partners.start_group(req)
    outcome = importlib.import_module(addon.__name__ + ".core.pipeline.group").run_group(job)
    before = scene_fingerprint(bpy)
    calls = []
    real = pipe.write_motion

    def failing(arm, *a, **k):
        calls.append(arm.name)
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return real(arm, *a, **k)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pipe, "write_motion", failing)
        with pytest.raises(RuntimeError, match="disk full"):
            partners.apply_group(bpy.context, req, inputs, outcome)
    assert calls == ["Tall", "Short"]
    assert scene_fingerprint(bpy) == before


@pytest.mark.slow
def test_batch_command_retargets_two_pairs_together(addon, couple_blend, tmp_path):
    out, rep = tmp_path / "out.blend", tmp_path / "report.json"
    setup = tmp_path / "setup.json"
    # the pairs from the set-up's 'characters' list; per-part weights from its settings, the "partner" term's among
    # them, act on every character of the group, and a character's own entry multiplies its own in
    shared = {"left_hand": {"partner": 1.5, "dist": 0.5}}
    characters = [{"source": "Lead", "target": "Tall", "action": "LeadReach",
                   "part_weights": {"right_arm": {"partner": 0.25}, "left_hand": {"dist": 2}}},
                  {"source": "Follow", "target": "Short", "action": "FollowReach"}]
    setup.write_text(json.dumps({"settings": {"quality": "fast", "iterations": ITERATIONS, "part_weights": shared},
                                 "characters": characters}))
    rc, so, se = run_tool("--blend", couple_blend, "--method", "reconform", "--setup", setup,
                          "--out", out, "--report", rep, timeout=900)
    assert rc == 0, se
    report = json.loads(rep.read_text())
    assert report["characters"] == 2 and [p["target"]["armature"] for p in report["pairs"]] == ["Tall", "Short"]
    assert report["pairs"][0]["part_weights"] == {"left_hand": {"partner": 1.5, "dist": 1.0},
                                                  "right_arm": {"partner": 0.25}}
    assert report["pairs"][1]["part_weights"] == shared
    assert [p["action"] for p in report["pairs"]] == ["LeadReach to Tall", "FollowReach to Short"]
    pm = report["partner_metrics"]
    assert {"partner_contact_f1", "hand_partner_error_mean", "partner_pen_mean"} <= set(pm)
    assert report["partner_reference_metrics"] is not None
    for p in report["pairs"]:     # each pair's conflicts, among its own terms and the terms between the characters
        assert isinstance(p["conflicts"], list)
        assert all(set(c["terms"]) <= {"dist", "dir", "pen", "height", "sliding", "partner"} for c in p["conflicts"])
    # and every character's in one ranking, as the panel lists them
    merged = report["conflicts"]
    assert len(merged) == sum(len(p["conflicts"]) for p in report["pairs"])
    assert [c["rank"] for c in merged] == list(range(1, len(merged) + 1))
    assert [c["score"] for c in merged] == sorted((c["score"] for c in merged), reverse=True)
    for c in merged:
        own = next(p for p in report["pairs"] if p["target"]["armature"] == c["character"])["conflicts"]
        assert any(o["body_part"] == c["body_part"] and o["terms"] == c["terms"] for o in own)
    bpy.ops.wm.open_mainfile(filepath=str(out))
    for tgt, act in (("Tall", "LeadReach to Tall"), ("Short", "FollowReach to Short")):
        assert bpy.data.objects[tgt].animation_data.action.name == act
    # one target per source, or the pairs come in the set-up's 'characters' list
    rc, so, se = run_tool("--blend", couple_blend, "--source", "Lead", "--source", "Follow", "--target", "Tall")
    assert rc == 2 and "give one target per source" in se
    setup.write_text(json.dumps({"characters": [{"source": "Lead", "target": "Tall", "action": "LeadReach"},
                                                {"source": "Follow", "target": "Tall"}]}))
    refused = tmp_path / "refused.blend"                 # something to write, so the set-up itself is what fails
    rc, so, se = run_tool("--blend", couple_blend, "--setup", setup, "--method", "copy_rotations", "--out", refused)
    assert rc == 1 and se.strip().splitlines()[-1].startswith("error: ") and "two pairs" in se
    assert not refused.exists()
    np.testing.assert_equal(len(se.strip().splitlines()), 1)
    setup.write_text(json.dumps({"settings": {"part_weights": {"arm": {"partner": 2}}}}))
    rc, so, se = run_tool("--blend", couple_blend, "--setup", setup, "--method", "reconform", "--source", "Lead",
                          "--target", "Tall", "--out", refused)
    assert rc == 1 and "unknown body part 'arm'" in se.strip().splitlines()[-1] and not refused.exists()
    characters[1]["part_weights"] = {"head": {"gaze": 1}}
    setup.write_text(json.dumps({"characters": characters}))
    rc, so, se = run_tool("--blend", couple_blend, "--setup", setup, "--method", "reconform", "--out", refused)
    last = se.strip().splitlines()[-1]
    assert rc == 1 and "'characters' entry 2 ('Short')" in last and "'gaze'" in last and not refused.exists()
    # one 'characters' entry: a single retarget, with that entry's part weights multiplied into the settings'
    setup.write_text(json.dumps({"settings": {"quality": "fast", "iterations": 2, "part_weights": shared},
                                 "characters": characters[:1]}))
    rc, so, se = run_tool("--blend", couple_blend, "--setup", setup, "--method", "reconform",
                          "--report", rep, timeout=900)
    assert rc == 0, se
    single = json.loads(rep.read_text())
    assert "pairs" not in single and single["part_weights"] == report["pairs"][0]["part_weights"]


@pytest.mark.slow
def test_the_group_is_written_in_one_finished_return_one_undo_step(addon, couple_blend, quick_keyverts):
    # the panel's Retarget with partners, driven as its modal run: Blender pushes one undo step when the operator
    # returns FINISHED (bl_options UNDO; undo itself cannot run headless, docs: ../shared/notes/blender.md), so
    # every new Action must be written in that one return and nothing before it
    s = open_couple(couple_blend)
    retarget = ui(addon, "operators.retarget")
    assert {'REGISTER', 'UNDO'} <= set(retarget.RECONFORM_OT_retarget.bl_options)
    before = scene_fingerprint(bpy)
    drv = _driver(addon)
    drv._save_state(bpy.context)
    runner = drv._start(bpy.context)
    drv._runner = runner
    runner.start()
    batches = []

    def check(events):
        batches.append([k for k, _ in events])
        assert scene_fingerprint(bpy) == before, "written before FINISHED"
    kinds, ret = _pump(drv, runner, until=lambda k: False, before_handle=check, timeout=600)
    assert ret == {'FINISHED'} and "done" in kinds and len(batches) > 1
    after_acts, after_objs = scene_fingerprint(bpy)
    assert set(after_acts) - set(before[0]) == {"LeadReach to Tall", "FollowReach to Short"}
    assert after_objs["Tall"][0] == "LeadReach to Tall" and after_objs["Short"][0] == "FollowReach to Short"
    assert s.status.startswith("Wrote 2 Actions")


def _skinned_box(arm, name, bone, size=0.05):
    """A small box moved by one bone of ``arm`` (an Armature modifier and one vertex group), near that bone."""
    head = arm.matrix_world @ arm.data.bones[bone].head_local
    verts = [(head.x + dx, head.y + dy, head.z + dz) for dx in (-size, size) for dy in (-size, size)
             for dz in (-size, size)]
    faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    me = bpy.data.meshes.new(name)
    me.from_pydata(verts, [], faces)
    ob = bpy.data.objects.new(name, me)
    bpy.context.scene.collection.objects.link(ob)
    ob.parent = arm
    ob.matrix_parent_inverse = arm.matrix_world.inverted()
    ob.vertex_groups.new(name=bone).add(list(range(8)), 1.0, 'REPLACE')
    ob.modifiers.new("Armature", 'ARMATURE').object = arm
    return ob


@pytest.mark.slow
def test_a_group_leaves_out_a_mesh_the_setup_excludes(addon, couple_blend, quick_keyverts):
    open_couple(couple_blend)
    group = ui(addon, "pipeline_group")
    o = bpy.data.objects
    hand = next(b.name for b in o["Tall"].data.bones if "hand" in b.name.lower())
    _skinned_box(o["Tall"], "TallBox", hand)
    pairs = [(o["Lead"], o["Tall"], bpy.data.actions["LeadReach"]),
             (o["Follow"], o["Short"], bpy.data.actions["FollowReach"])]
    # the set-up's "target" entry serves every target: the box is Tall's only, Short's body is read as usual
    setup = {"target": {"exclude_meshes": ["TallBox"]}, "settings": {"quality": "fast", "iterations": ITERATIONS}}
    inputs = group.read_group_inputs(pairs, setup=setup)
    assert inputs.pairs[0].target.mesh_choice.get("TallBox") is False
    assert "TallBox" not in (inputs.pairs[1].target.mesh_choice or {})
    merged = inputs.pairs[0].target.mesh.num_verts
    # a name no target moves: one line, nothing read further
    with pytest.raises(Exception, match="no armature of the group .* moves a mesh 'Sword'"):
        group.read_group_inputs(pairs, setup={"target": {"exclude_meshes": ["Sword"]}})
    before_acts, _ = scene_fingerprint(bpy)
    res = group.retarget_group(pairs, setup=setup, settings=setup["settings"])
    assert [a.name for a in res.actions] == ["LeadReach to Tall", "FollowReach to Short"]
    tall = res.outcome.members[0].target
    assert tall.mesh.num_verts == merged - 8                     # the body without the box's 8 vertices
    assert "TallBox" in ui(addon, "bridge.bodyparts").left_out(o["Tall"])


def _keep_only(src, dst, names):
    """Save ``src`` as ``dst`` with only the armatures ``names`` and their meshes."""
    bpy.ops.wm.open_mainfile(filepath=str(src))
    for ob in list(bpy.data.objects):
        arm = ob if ob.type == 'ARMATURE' else ob.parent
        if arm is None or arm.name not in names:
            bpy.data.objects.remove(ob)
    bpy.ops.wm.save_as_mainfile(filepath=str(dst))


def _keys(path, actions):
    bpy.ops.wm.open_mainfile(filepath=str(path))
    return {name: action_snapshot(bpy.data.actions[name]) for name in actions}


@pytest.mark.slow
def test_batch_pairs_from_two_files_in_one_world_frame(addon, couple_blend, tmp_path):
    # the lead and the follow saved in two files (each keeps its world placement), the targets in a third opened
    # with --blend: the same Actions as the couple read from one file
    lead, follow, targets = tmp_path / "lead.blend", tmp_path / "follow.blend", tmp_path / "targets.blend"
    _keep_only(couple_blend, lead, {"Lead"})
    _keep_only(couple_blend, follow, {"Follow"})
    _keep_only(couple_blend, targets, {"Tall", "Short"})
    setup = tmp_path / "setup.json"
    setup.write_text(json.dumps({"settings": {"quality": "fast", "iterations": ITERATIONS}}))
    one, two = tmp_path / "one.blend", tmp_path / "two.blend"
    rc, so, se = run_tool("--blend", couple_blend, "--method", "reconform", "--setup", setup,
                          "--source", "Lead", "--target", "Tall", "--action", "LeadReach",
                          "--source", "Follow", "--target", "Short", "--action", "FollowReach",
                          "--out", one, "--report", tmp_path / "one.json", timeout=900)
    assert rc == 0, se
    rc, so, se = run_tool("--blend", targets, "--method", "reconform", "--setup", setup,
                          "--source", lead, "--source-armature", "Lead", "--target", "Tall", "--action", "LeadReach",
                          "--source", follow, "--source-armature", "Follow", "--target", "Short",
                          "--action", "FollowReach", "--out", two, "--report", tmp_path / "two.json", timeout=900)
    assert rc == 0, se
    # the sources' relative placement is the same (it places the targets together: their keys, below, move with
    # it), and so is every partner metric, the source's and the result's
    pm = [json.loads((tmp_path / f"{n}.json").read_text())["partner_metrics"] for n in ("one", "two")]
    assert pm[0].keys() == pm[1].keys()
    for k, v in pm[0].items():
        assert (v is None and pm[1][k] is None) or pm[1][k] == pytest.approx(v, rel=1e-4, abs=1e-6), k
    names = ["LeadReach to Tall", "FollowReach to Short"]
    a, b = _keys(one, names), _keys(two, names)
    for name in names:
        assert a[name].keys() == b[name].keys() and len(a[name]) > 10
        for key in a[name]:
            np.testing.assert_allclose(b[name][key], a[name][key], atol=1e-5, err_msg=f"{name} {key}")
