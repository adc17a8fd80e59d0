"""Every UI class registers in the real bl_ext namespace; settings, preferences and torch status behave."""

import sys

import pytest

from .ui_helpers import core, run_enabled_in_fresh_process, ui

bpy = pytest.importorskip("bpy")

UI_MODULES = ("properties", "preferences", "operators", "gizmos", "panels")


def test_ui_modules_are_in_MODULES(addon):
    listed = addon.reconform_addon.MODULES
    for name in UI_MODULES:
        assert name in listed, name
    # panels reference operators, properties and gizmo accessors: they must register after them
    assert listed.index("properties") < listed.index("operators") < listed.index("panels")


def test_every_class_is_registered(addon):
    n = 0
    for name in UI_MODULES:
        for cls in ui(addon, name).classes:
            assert "bl_rna" in cls.__dict__, f"{name}.{cls.__name__} is not registered"
            n += 1
    assert n >= 25
    for op in ("detect_bone_map", "save_bone_map", "load_bone_map", "load_builtin_bone_map", "transfer_keyverts",
               "reset_keyverts", "retarget", "resolve", "copy_install_command"):
        assert hasattr(bpy.ops.reconform, op)
        getattr(bpy.ops.reconform, op).get_rna_type()  # raises when not registered


def test_scene_settings_and_preferences(addon, clean_scene):
    s = clean_scene.reconform
    assert s.quality == 'BALANCED' and s.keyvert_count == '41' and s.method == 'RECONFORM'
    prefs = bpy.context.preferences.addons[addon.__name__].preferences
    assert prefs.default_device == 'CPU'
    assert ui(addon, "preferences").get() == prefs


def test_advanced_defaults_mirror_solver_settings(addon, clean_scene):
    """The panel's advanced fields are SolverSettings fields with the balanced preset's defaults."""
    props = ui(addon, "properties")
    solver = core(addon, "solver")   # our own solver: a broken import fails here, it is not skipped
    base = solver.SolverSettings.preset("balanced")
    s = clean_scene.reconform
    assert set(props.ADVANCED_NAMES) == {f[0] for f in props.ADVANCED_FLOATS + props.ADVANCED_INTS +
                                         props.ADVANCED_BOOLS}
    for name in props.ADVANCED_NAMES:
        assert hasattr(base, name), f"SolverSettings has no field '{name}'"
        assert getattr(s, name) == pytest.approx(getattr(base, name), rel=1e-6), name


def test_quality_preset_and_overrides_reach_solver_settings(addon, clean_scene):
    s = clean_scene.reconform
    solver = core(addon, "solver")   # our own solver: a broken import fails here, it is not skipped
    s.quality = 'FAST'
    fast = solver.SolverSettings.preset("fast")
    assert s.iterations == fast.iterations          # the update callback copied the preset
    st = s.solver_settings()
    assert st.iterations == fast.iterations and st.device == "cpu"
    s.use_advanced = True
    s.w_pen = 7.5
    s.iterations = 11
    s.device = 'CUDA'
    st = s.solver_settings()
    assert (st.w_pen, st.iterations, st.device) == (7.5, 11, "cuda")
    s.use_advanced = False
    assert s.solver_settings().w_pen == fast.w_pen
    # the weights between partners solved together, for a couple whose hold the defaults let go
    s.use_advanced = True
    s.w_partner, s.w_gaze, s.w_barrier = 2.5, 0.0, 3.0
    assert (lambda st: (st.w_partner, st.w_gaze, st.w_barrier))(s.solver_settings()) == (2.5, 0.0, 3.0)


def test_source_floor_reaches_solver_settings(addon, clean_scene):
    s = clean_scene.reconform
    assert s.source_ground == 'AUTO' and s.solver_settings().source_ground == "auto"
    for item, mode in (('ZERO', "zero"), ('ESTIMATE', "estimate"), ('TRACK', "track")):
        s.source_ground = item
        assert s.solver_settings().source_ground == mode
    s.source_ground = 'CUSTOM'
    s.source_ground_level = -0.025
    assert s.solver_settings().source_ground == pytest.approx(-0.025)
    # not an advanced weight: it applies whether or not the weights are overridden
    s.use_advanced = True
    assert s.solver_settings().source_ground == pytest.approx(-0.025)


def test_default_device_comes_from_the_preferences(addon, clean_scene):
    s = clean_scene.reconform
    prefs = bpy.context.preferences.addons[addon.__name__].preferences
    assert s.device == 'DEFAULT' and s.solver_settings().device == "cpu"
    prefs.default_device = 'CUDA'
    try:
        assert s.effective_device() == 'CUDA' and s.solver_settings().device == "cuda"
        s.device = 'CPU'                       # a scene's own choice wins
        assert s.solver_settings().device == "cpu"
    finally:
        prefs.default_device = 'CPU'


def test_bone_map_rows_and_owner(addon, clean_scene):
    arm = bpy.data.objects.new("A", bpy.data.armatures.new("A"))
    clean_scene.collection.objects.link(arm)
    s = clean_scene.reconform
    s.source = arm
    s.set_bone_map("source", {"hips": "pelvis", "head": "head_bone"}, "custom", arm.name)
    assert s.bone_map("source") == {"hips": "pelvis", "head": "head_bone"}
    rows = {it.canonical: it for it in s.source_bone_map}
    assert rows["hips"].required and not rows["left_index_1"].required
    arm.name = "Renamed"  # the map was made for another armature: not used silently
    assert s.bone_map("source") == {}


def test_non_armature_characters_are_refused_with_a_clear_message(addon, clean_scene):
    """The pointer's poll hides meshes in the UI; Python can still assign one, and Retarget then refuses."""
    props, ops = ui(addon, "properties"), ui(addon, "operators.common")
    me = bpy.data.objects.new("Body", bpy.data.meshes.new("Body"))
    arm = bpy.data.objects.new("Arm", bpy.data.armatures.new("Arm"))
    assert not props._is_armature(None, me) and props._is_armature(None, arm)
    s = clean_scene.reconform
    s.source, s.target = arm, me
    with pytest.raises(Exception, match="Target 'Body' is not an armature"):
        ops.check_characters(s)
    s.target = arm
    with pytest.raises(Exception, match="both 'Arm'"):
        ops.check_characters(s)
    s.source = None
    with pytest.raises(Exception, match="No source armature"):
        ops.check_characters(s)


def test_torch_status_reports_version(addon):
    deps = ui(addon, "deps")
    ok, msg = deps.torch_status(refresh=True)
    import torch

    assert ok and torch.__version__ in msg
    cmd = deps.install_command("/tmp/some dir")
    assert sys.executable in cmd and "--target" in cmd and deps.TORCH_REQUIREMENT in cmd
    assert "'/tmp/some dir'" in cmd or '"/tmp/some dir"' in cmd


def test_addon_without_torch_enables_and_explains_the_fix(tmp_path):
    """torch import blocked: the add-on still enables, never imports torch, and the panel shows the fix."""
    prelude = """
        import sys
        class _Block:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("No module named 'torch' (blocked by test)")
        sys.meta_path.insert(0, _Block())
    """
    run_enabled_in_fresh_process(tmp_path, prelude, """
        assert "torch" not in sys.modules, "enabling imported torch"
        deps = sys.modules[pkg + ".deps"]
        ok, msg = deps.torch_status()
        assert not ok and "ImportError" in msg, msg
        panels = sys.modules[pkg + ".panels"]
        lay = draw_panel(panels.VIEW3D_PT_reconform, bpy.context)
        texts = lay.texts()
        assert any("PyTorch is not installed" in t for t in texts), texts
        assert "reconform.copy_install_command" in lay.operators()
        # preferences draw the status and the install button too
        prefs = bpy.context.preferences.addons["bl_ext.nt.reconform"].preferences
        st = Stub(proxy=prefs); type(prefs).draw(st, bpy.context)
        assert "reconform.copy_install_command" in st.layout.operators()
        # Retarget refuses with the one-line reason instead of a traceback
        s = bpy.context.scene.reconform
        a1 = bpy.data.objects.new("A1", bpy.data.armatures.new("A1")); bpy.context.scene.collection.objects.link(a1)
        a2 = bpy.data.objects.new("A2", bpy.data.armatures.new("A2")); bpy.context.scene.collection.objects.link(a2)
        s.source, s.target = a1, a2
        n_actions = len(bpy.data.actions)
        try:
            bpy.ops.reconform.retarget()
            raise SystemExit("retarget did not fail")
        except RuntimeError as ex:
            assert "PyTorch is missing" in str(ex), ex
        assert len(bpy.data.actions) == n_actions
        assert "torch" not in sys.modules
    """)
