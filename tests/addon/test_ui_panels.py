"""Every panel and list of the ReConForM tab draws in each state, and only asks for real properties, operators
and icons (``FakeLayout`` checks them: UI layouts cannot be created headless). Bone-map operators run for real."""

import json

import pytest

from .ui_helpers import Stub, core, draw_panel, run_enabled_in_fresh_process, ui

bpy = pytest.importorskip("bpy")


def _panels(addon):
    return [c for c in ui(addon, "panels").classes if issubclass(c, bpy.types.Panel)]


def _arm(name, bones=("hips",)):
    """A small armature (bones along +Z) linked to the scene."""
    arm = bpy.data.objects.new(name, bpy.data.armatures.new(name))
    bpy.context.scene.collection.objects.link(arm)
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode='EDIT')
    for i, b in enumerate(bones):
        eb = arm.data.edit_bones.new(b)
        eb.head, eb.tail = (0, 0, i * 0.2), (0, 0, i * 0.2 + 0.2)
    bpy.ops.object.mode_set(mode='OBJECT')
    return arm


def test_every_panel_draws_on_an_empty_scene(addon, clean_scene):
    panels = ui(addon, "panels")
    drawn = {}
    for cls in _panels(addon):
        lay = draw_panel(cls, bpy.context)
        drawn[cls.__name__] = lay
    main = drawn["VIEW3D_PT_reconform"]
    assert {"source", "target", "action", "method"} <= set(main.props())
    # conflicts and metrics hide until there is something to show
    assert drawn["VIEW3D_PT_reconform_conflicts"] is None and drawn["VIEW3D_PT_reconform_metrics"] is None
    run = drawn["VIEW3D_PT_reconform_run"]
    assert "reconform.retarget" in run.operators()
    assert panels.CATEGORY == "ReConForM"
    assert all(c.bl_category == "ReConForM" and c.bl_space_type == 'VIEW_3D' for c in _panels(addon))


def test_solver_panels_show_every_advanced_field(addon, clean_scene):
    panels, props = ui(addon, "panels"), ui(addon, "properties")
    lay = draw_panel(panels.VIEW3D_PT_reconform_solver, bpy.context)
    assert {"quality", "device", "source_ground", "push_to_nla"} <= set(lay.props())
    assert "source_ground_level" not in lay.props()           # only for a custom level
    clean_scene.reconform.source_ground = 'CUSTOM'
    assert "source_ground_level" in draw_panel(panels.VIEW3D_PT_reconform_solver, bpy.context).props()
    cpu_rows = draw_panel(panels.VIEW3D_PT_reconform_solver, bpy.context).props()
    clean_scene.reconform.device = 'CUDA'              # a GPU run is always reproducible: no row of its own
    assert draw_panel(panels.VIEW3D_PT_reconform_solver, bpy.context).props() == cpu_rows
    adv = draw_panel(panels.VIEW3D_PT_reconform_solver_advanced, bpy.context)
    names = [n for n, *_ in props.ADVANCED_FLOATS + props.ADVANCED_INTS + props.ADVANCED_BOOLS]
    assert set(names) <= set(adv.props()) and "use_advanced" in adv.props()
    clean_scene.reconform.method = 'COPY_ROTATIONS'
    assert draw_panel(panels.VIEW3D_PT_reconform_solver, bpy.context) is None


def test_bone_map_detect_edit_save_load(addon, clean_scene, tmp_path):
    panels = ui(addon, "panels")
    humanoid = core(addon, "rig.humanoid")
    # a Mixamo-named skeleton: detection maps it, the list shows it, presets round-trip through JSON
    names = ["mixamorig:Hips", "mixamorig:Spine", "mixamorig:Spine1", "mixamorig:Neck", "mixamorig:Head"]
    arm = bpy.data.objects.new("Mixa", bpy.data.armatures.new("Mixa"))
    clean_scene.collection.objects.link(arm)
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode='EDIT')
    ebs = arm.data.edit_bones
    prev = None
    for i, n in enumerate(names):
        eb = ebs.new(n)
        eb.head, eb.tail = (0, 0, 1.0 + 0.15 * i), (0, 0, 1.15 + 0.15 * i)
        eb.parent = prev
        prev = eb
    for side, x in (("Left", 1), ("Right", -1)):
        p = ebs[names[2]]
        for part, (h, t) in (("Shoulder", ((0.05 * x, 0, 1.35), (0.15 * x, 0, 1.35))),
                             ("Arm", ((0.15 * x, 0, 1.35), (0.4 * x, 0, 1.35))),
                             ("ForeArm", ((0.4 * x, 0, 1.35), (0.65 * x, 0, 1.35))),
                             ("Hand", ((0.65 * x, 0, 1.35), (0.75 * x, 0, 1.35)))):
            eb = ebs.new(f"mixamorig:{side}{part}")
            eb.head, eb.tail, eb.parent = h, t, p
            p = eb
        p = ebs[names[0]]
        for part, (h, t) in (("UpLeg", ((0.1 * x, 0, 1.0), (0.1 * x, 0, 0.55))),
                             ("Leg", ((0.1 * x, 0, 0.55), (0.1 * x, 0, 0.1))),
                             ("Foot", ((0.1 * x, 0, 0.1), (0.1 * x, -0.12, 0.02))),
                             ("ToeBase", ((0.1 * x, -0.12, 0.02), (0.1 * x, -0.2, 0.02)))):
            eb = ebs.new(f"mixamorig:{side}{part}")
            eb.head, eb.tail, eb.parent = h, t, p
            p = eb
    bpy.ops.object.mode_set(mode='OBJECT')
    s = clean_scene.reconform
    s.source = arm
    lay = draw_panel(panels.VIEW3D_PT_reconform_bone_map, bpy.context)
    assert "reconform.detect_bone_map" in lay.operators() and "template_list" not in [k for k, _ in lay.calls]
    assert bpy.ops.reconform.detect_bone_map(role='SOURCE') == {'FINISHED'}
    bm = s.bone_map("source")
    assert bm["hips"] == "mixamorig:Hips" and bm["left_hand"] == "mixamorig:LeftHand"
    assert set(humanoid.REQUIRED_BONES) <= set(bm)
    assert s.source_rig_type == "mixamo"
    lay = draw_panel(panels.VIEW3D_PT_reconform_bone_map, bpy.context)
    assert "template_list" in [k for k, _ in lay.calls]
    assert any("mixamo" in t and "mapped" in t for t in lay.texts())
    # UIList rows: a searchable bone field per canonical bone, a warning icon on missing required ones
    ul = ui(addon, "panels").RECONFORM_UL_bone_map
    for it in list(s.source_bone_map)[:5]:
        st = Stub()
        ul.draw_item(st, bpy.context, st.layout, s, it, 0, s, "source_bone_map_index")
        assert st.layout.calls[-1][0] == "prop_search"
    # edit one row, save, clear, load: the edit survives the round trip
    next(it for it in s.source_bone_map if it.canonical == "chest").bone = ""
    path = tmp_path / "mixa.json"
    assert bpy.ops.reconform.save_bone_map(role='SOURCE', filepath=str(path)) == {'FINISHED'}
    data = json.loads(path.read_text())
    assert data["bone_map"]["hips"] == "mixamorig:Hips" and "chest" not in data["bone_map"]
    s.set_bone_map("source", {}, "", arm.name)
    assert bpy.ops.reconform.load_bone_map(role='SOURCE', filepath=str(path)) == {'FINISHED'}
    assert s.bone_map("source") == data["bone_map"]
    # a preset for another rig: refused with the reason, the current map is kept
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "reconform.bone_map", "version": 1, "rig_type": "x",
                                 "bone_map": {"hips": "pelvis", "head": "Head_J"}}))
    with pytest.raises(RuntimeError, match="wrong preset"):
        bpy.ops.reconform.load_bone_map(role='SOURCE', filepath=str(other))
    assert s.bone_map("source") == data["bone_map"]


def test_missing_required_bones_are_flagged(addon, clean_scene):
    panels = ui(addon, "panels")
    arm = _arm("Odd", ("root", "thing"))
    s = clean_scene.reconform
    s.target = arm
    s.bone_map_role = 'TARGET'
    s.set_bone_map("target", {"hips": "root"}, "generic", arm.name)
    lay = draw_panel(panels.VIEW3D_PT_reconform_bone_map, bpy.context)
    assert any(t.startswith("Missing: ") and "spine" in t for t in lay.texts())
    row = next(it for it in s.target_bone_map if it.canonical == "spine")
    st = Stub()
    panels.RECONFORM_UL_bone_map.draw_item(st, bpy.context, st.layout, s, row, 0, s, "target_bone_map_index")
    assert ("label", {"text": "spine", "icon": 'ERROR'}) in st.layout.calls


def test_running_state_shows_progress_and_esc_hint(addon, clean_scene):
    panels, session = ui(addon, "panels"), ui(addon, "session")
    s = clean_scene.reconform
    s.source, s.target = _arm("A"), _arm("B")
    s.progress, s.status = 0.4, "Solving 48/120: objective 40 % of copy-rotations'"
    session.track(clean_scene, object())
    try:
        lay = draw_panel(panels.VIEW3D_PT_reconform_run, bpy.context)
        bars = [kw for k, kw in lay.calls if k == "progress"]
        assert len(bars) == 1 and abs(bars[0]["factor"] - 0.4) < 1e-6
        assert bars[0]["text"] == "Solving 48/120: objective 40 % of copy-rotations'"
        assert any("Esc" in t for t in lay.texts())
        assert not bpy.ops.reconform.retarget.poll()
    finally:
        session.untrack(clean_scene)
    assert bpy.ops.reconform.retarget.poll()


def test_conflict_list_rows_sliders_and_frames(addon, clean_scene):
    panels, ops = ui(addon, "panels"), ui(addon, "operators.conflicts")
    cf = core(addon, "solver.conflicts")
    s = clean_scene.reconform
    ranking = [cf.Conflict("torso", "dist", "pen", -0.6, 0.2, ((10, 30), (52, 60)), 4.0),
               cf.Conflict("left_arm", "dir", "height", -0.95, 0.9, ((4, 4),), 0.03),
               cf.Conflict("head", "dist", "dir", -0.7, 0.4, ((8, 9),), 0.02),
               cf.Conflict("right_foot", "height", "sliding", -0.6, 0.1, ((70, 71),), 0.01)]
    ops.fill_conflicts(s, ranking)
    assert [c.body_part for c in s.conflicts] == ["torso", "left_arm", "head", "right_foot"]  # core's ranking kept
    c = s.conflicts[0]
    assert (c.term_a, c.term_b, c.frames, c.first_frame, c.balance) == ("dist", "pen", "10-30, 52-60", 10, 0.5)
    assert s.conflicts[1].frames == "4" and s.conflicts[0].score == 4.0
    lay = draw_panel(panels.VIEW3D_PT_reconform_conflicts, bpy.context)
    assert "reconform.resolve" in lay.operators()
    assert any(t == "Frames: 10-30, 52-60" for t in lay.texts())
    assert any(kw["prop"] == "show_all_conflicts" and "4" in (kw["text"] or "") for k, kw in lay.calls if k == "prop")
    sliders = [kw for k, kw in lay.calls if k == "prop" and kw["prop"] == "balance"]
    assert sliders and "dist" in sliders[0]["text"] and "pen" in sliders[0]["text"]
    st = Stub()
    panels.RECONFORM_UL_conflicts.draw_item(st, bpy.context, st.layout, s, c, 0, s, "conflicts_index")
    assert [kw["prop"] for k, kw in st.layout.calls if k == "prop"] == ["balance"]
    jumps = [kw for k, kw in st.layout.calls if k == "operator" and kw["idname"] == "reconform.jump_to_conflict"]
    assert jumps and jumps[0]["props"].values["frame"] == 10
    # the costliest few are listed, the rest folded until Show All
    flags, _ = panels.RECONFORM_UL_conflicts.filter_items(st, bpy.context, s, "conflicts")
    assert [bool(f) for f in flags] == [True, True, True, False]
    s.show_all_conflicts = True
    flags, _ = panels.RECONFORM_UL_conflicts.filter_items(st, bpy.context, s, "conflicts")
    assert all(flags)
    # Go to Frame
    assert bpy.ops.reconform.jump_to_conflict(frame=52) == {'FINISHED'} and clean_scene.frame_current == 52
    # slider -> per-part weights with core.solver.conflicts' rule; centred sliders change nothing
    assert ops.slider_part_weights(s) == {}
    s.conflicts[1].balance = 1.0
    s.conflicts[0].balance = 0.25
    w = ops.slider_part_weights(s)
    assert w == {("left_arm", "dir"): 0.0, ("left_arm", "height"): 2.0,
                 ("torso", "dist"): 1.5, ("torso", "pen"): 0.5}
    assert bpy.ops.reconform.reset_conflicts() == {'FINISHED'}
    assert ops.slider_part_weights(s) == {}


def test_metric_labels_and_better_worse_marks(addon, clean_scene):
    panels = ui(addon, "panels")
    s = clean_scene.reconform
    s.set_metrics({"floor_pen_mean": 0.01, "grounded_f1": 0.9, "jerk_max": 50.0, "contact_f1": float("nan"),
                   "solver_steps": 60},
                  {"floor_pen_mean": 0.03, "grounded_f1": 0.95, "jerk_max": 50.0, "contact_f1": 0.5})
    rows = {r[0]: r[1:] for r in panels.metric_rows(s)}
    # values rounded as core.metrics.report prints them, with their units (shares in %), better/worse marked
    assert rows["Floor penetration, mean"] == ("1.00 %", "3.00 %", True)                  # lower is better
    assert rows["Grounded feet F1"] == ("0.900", "0.950", False)                          # higher is better
    assert rows["Jerk of the joints, max"] == ("50 m/s³", "50 m/s³", None)                # unchanged
    assert rows["Key-vertex contacts F1"][0] == "n/a"
    assert list(rows)[:2] == ["Grounded feet F1", "Key-vertex contacts F1"]               # headline first
    assert not any("steps" in k.lower() for k in rows)
    assert json.loads(s.metrics_json)["metrics"]["solver_steps"] == 60
    assert panels.metric_label("source_jerk_mean") == "Source: jerk of the joints, mean"
    lay = draw_panel(panels.VIEW3D_PT_reconform_metrics, bpy.context)
    icons = [kw["icon"] for k, kw in lay.calls if k == "label"]
    assert 'TRIA_UP' in icons and 'TRIA_DOWN' in icons
    assert 'INFO' not in icons                                            # no floor advice for this source
    verdict = " ".join(kw.get("text", "") for k, kw in lay.calls if k == "label")
    assert "beats copy-rotations on 1 of 2" in verdict                   # floor better, grounded worse
    # a source whose feet sink under its floor: the panel says so and names the setting
    s.set_metrics({"grounded_f1": 0.65, "source_grounded_f1_clamped": 0.65, "source_grounded_share": 0.5})
    assert panels.metric_label("source_grounded_f1_clamped") == "Source: grounded F1, feet kept on its floor"
    lay = draw_panel(panels.VIEW3D_PT_reconform_metrics, bpy.context)
    advice = [kw.get("text", "") for k, kw in lay.calls if k == "label"]
    assert any(kw["icon"] == 'INFO' for k, kw in lay.calls if k == "label")
    assert "Track Drift" in " ".join(advice) and all(len(t) <= 44 for t in advice)


def test_drawing_and_reading_a_motion_never_import_torch(tmp_path):
    """Drawing never needs torch: in a fresh process where importing torch fails, the add-on enables, and every
    panel, list and the preferences draw a scene with two armatures, key vertices, a bone map, metrics,
    conflicts and a run in flight. Reading a motion (Euler and axis-angle channels) and writing it back do not
    need it either. torch is still not imported afterwards."""
    prelude = """
        import sys
        sys.modules["torch"] = None                      # `import torch` raises ImportError from here on
    """
    run_enabled_in_fresh_process(tmp_path, prelude, """
        panels, session = sys.modules[pkg + ".panels"], sys.modules[pkg + ".session"]
        conflicts = sys.modules[pkg + ".operators.conflicts"]
        gizmos = sys.modules[pkg + ".gizmos"]

        scene = bpy.context.scene
        def armature(name):
            arm = bpy.data.objects.new(name, bpy.data.armatures.new(name))
            scene.collection.objects.link(arm)
            bpy.context.view_layer.objects.active = arm
            bpy.ops.object.mode_set(mode='EDIT')
            for i, b in enumerate(("hips", "spine", "head")):
                eb = arm.data.edit_bones.new(b)
                eb.head, eb.tail = (0, 0, 1 + 0.2 * i), (0, 0, 1.2 + 0.2 * i)
            bpy.ops.object.mode_set(mode='OBJECT')
            return arm
        src, tgt = armature("Src"), armature("Tgt")
        me = bpy.data.meshes.new("Body")
        me.from_pydata([(0, 0, 1), (0.1, 0, 1.2), (0, 0.1, 1.4)], [], [(0, 1, 2)])
        body = bpy.data.objects.new("Body", me)
        scene.collection.objects.link(body)
        body.modifiers.new("Armature", 'ARMATURE').object = tgt
        for i, (name, limb) in enumerate((("navel", "torso"), ("nose", "head"))):
            it = body.reconform_keyverts.add()
            it.name, it.limb, it.index, it.locked = name, limb, i, i == 1

        s = scene.reconform
        s.source, s.target = src, tgt
        s.keyvert_role, s.show_keyverts = 'TARGET', True
        for role, arm in (("source", src), ("target", tgt)):
            s.set_bone_map(role, {"hips": "hips", "spine": "spine", "head": "head"}, "custom", arm.name)
        s.set_metrics({"floor_pen_mean": 0.01, "grounded_f1": 0.9}, {"floor_pen_mean": 0.03, "grounded_f1": 0.8})
        conflicts.fill_conflicts(s, [dict(body_part="torso", term_a="dist", term_b="pen", cosine=-0.6, severity=0.2,
                                          spans=((10, 30),), score=4.0)])   # Conflict's fields (it imports torch)
        s.use_custom_range, s.source_ground, s.device = True, 'CUSTOM', 'CUDA'

        def draw_all():
            drawn = []
            for cls in panels.classes:
                if issubclass(cls, bpy.types.Panel):
                    if draw_panel(cls, bpy.context) is not None:
                        drawn.append(cls.__name__)
            for role in ('SOURCE', 'TARGET'):
                s.bone_map_role = role
                draw_panel(panels.VIEW3D_PT_reconform_bone_map, bpy.context)
                for it in s.bone_map_items(role):
                    st = Stub()
                    panels.RECONFORM_UL_bone_map.draw_item(st, bpy.context, st.layout, s, it, 0, s, "x")
            for c in s.conflicts:
                st = Stub()
                panels.RECONFORM_UL_conflicts.draw_item(st, bpy.context, st.layout, s, c, 0, s, "conflicts_index")
            prefs = bpy.context.preferences.addons["bl_ext.nt.reconform"].preferences
            st = Stub(proxy=prefs); type(prefs).draw(st, bpy.context)
            assert gizmos.RECONFORM_GGT_keyverts.poll(bpy.context)
            return drawn

        drawn = draw_all()
        assert len(drawn) == len([c for c in panels.classes if issubclass(c, bpy.types.Panel)]), drawn
        lay = draw_panel(panels.VIEW3D_PT_reconform_keyverts, bpy.context)
        assert "2 key vertices, 1 placed by hand" in lay.texts(), lay.texts()
        session.track(scene, object())                   # a run in flight: the progress bar
        draw_all()
        session.untrack(scene)
        # the bridge reads Euler / axis-angle channels and writes quaternions with core.rig.rotations_np
        bridge = sys.modules[pkg + ".bridge"]
        src.pose.bones["spine"].rotation_mode = 'ZXY'
        src.pose.bones["head"].rotation_mode = 'AXIS_ANGLE'
        for f, a in ((1, 0.0), (5, 0.7)):
            src.pose.bones["spine"].rotation_euler = (a, 0.2, -a)
            src.pose.bones["spine"].keyframe_insert("rotation_euler", frame=f)
            src.pose.bones["head"].rotation_axis_angle = (a, 0.0, 1.0, 0.0)
            src.pose.bones["head"].keyframe_insert("rotation_axis_angle", frame=f)
        sk = bridge.read_skeleton(src)
        motion = bridge.read_motion(src, sk)
        assert motion.rotations.shape == (5, 3, 4), motion.rotations.shape
        bridge.write_motion(src, sk, motion, "Copy")
        assert sys.modules.get("torch") is None, "torch was imported"
        assert not [m for m in sys.modules if m.startswith("torch.")], "a torch submodule was imported"
    """)
