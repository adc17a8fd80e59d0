"""The built extension zip installs through Blender's own extension system, enables, retargets a shared
character pair, and disables cleanly.

Runs in a subprocess with its own BLENDER_USER_RESOURCES: the session's dev-link ``addon`` fixture registers the
same class names, and two enabled copies would clash.
"""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest


ROOT = pathlib.Path(__file__).resolve().parents[2]

bpy = pytest.importorskip("bpy")


def _blender_ext():
    """(blender_ext.py, tags.py) of the bpy wheel, found the way the Makefile finds them."""
    mod = pathlib.Path(bpy.__file__).resolve().parent        # .../scripts/modules/bpy
    return (mod.parents[1] / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py",
            mod.parent / "_bpy_internal" / "extensions" / "tags.py")


@pytest.fixture(scope="module")
def built_zip(tmp_path_factory):
    """The zip `make extension` builds (same build script and flags), in a private folder."""
    ext, tags = _blender_ext()
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, str(ext), "build", "--source-dir", str(ROOT), "--output-dir", str(out),
                        "--valid-tags", str(tags)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    zips = list(out.glob("reconform-*.zip"))
    assert len(zips) == 1, r.stdout
    r = subprocess.run([sys.executable, str(ext), "validate", str(zips[0])], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return zips[0]


def test_zip_holds_the_package_and_no_dev_files(built_zip):
    import zipfile

    names = set(zipfile.ZipFile(built_zip).namelist())
    assert {"__init__.py", "blender_manifest.toml", "reconform_addon/__init__.py", "reconform_addon/panels/__init__.py",
            "reconform_addon/panels/results.py",
            "reconform_addon/operators/__init__.py", "reconform_addon/operators/retarget.py",
            "reconform_addon/session.py", "reconform_addon/bridge/keyverts.py", "core/__init__.py",
            "core/solver/__init__.py", "core/solver/job.py", "core/pipeline/retarget.py", "core/keyverts/template.py",
            "core/bonemap/presets/mixamo.json", "core/data/template.npz", "core/rig/rotations_np.py"} <= names
    assert not any(n.startswith(("tests/", "docs/", "tools/", ".venv/", "dist/")) for n in names)
    assert not any("__pycache__" in n for n in names)


@pytest.mark.slow
@pytest.mark.assets
def test_install_enable_retarget_disable(built_zip, assets, tmp_path):
    script = textwrap.dedent(f"""
        import sys, os
        import bpy, addon_utils
        zip_path = {str(built_zip)!r}
        ret = bpy.ops.extensions.package_install_files(filepath=zip_path, repo='user_default',
                                                       enable_on_install=True)
        assert ret == {{'FINISHED'}}, ret
        name = "bl_ext.user_default.reconform"
        loaded, enabled = addon_utils.check(name)
        assert enabled, "not enabled after install"
        mod = sys.modules[name]
        user_ext = bpy.utils.user_resource('EXTENSIONS')
        assert os.path.realpath(mod.__file__).startswith(os.path.realpath(user_ext)), mod.__file__
        assert hasattr(bpy.types.Scene, "reconform") and hasattr(bpy.ops.reconform, "retarget")
        assert "torch" not in sys.modules, "enabling imported torch"
        prefs = bpy.context.preferences.addons[name].preferences
        assert prefs.default_device == 'CPU'

        bpy.ops.wm.read_homefile(use_empty=True)
        for f in ("mesh2motion_mannequin_ymca.glb", "orangejuice_male_base_mesh.glb"):
            bpy.ops.import_scene.gltf(filepath=os.path.join({str(assets)!r}, "characters", f))
        s = bpy.context.scene.reconform
        s.source, s.target = bpy.data.objects["Rig"], bpy.data.objects["metarig"]
        s.method = 'COPY_ROTATIONS'
        s.use_custom_range, s.frame_start, s.frame_end = True, 1, 10
        src_keys = sum(len(fc.keyframe_points) for l in bpy.data.actions["YMCA"].layers for st in l.strips
                       for b in st.channelbags for fc in b.fcurves)
        assert bpy.ops.reconform.retarget() == {{'FINISHED'}}
        act = bpy.data.objects["metarig"].animation_data.action
        assert act is not None and act.name == "YMCA to metarig", act   # named after the clip playing
        assert act.frame_range[:] == (1.0, 10.0), act.frame_range[:]
        assert s.last_action == act
        assert src_keys == sum(len(fc.keyframe_points) for l in bpy.data.actions["YMCA"].layers
                               for st in l.strips for b in st.channelbags for fc in b.fcurves)

        ours = [f for f in bpy.app.handlers.load_pre if (f.__module__ or "").startswith(name)]
        assert len(ours) == 3, ours      # solves, Live previews and key-vertex gizmo caches dropped when a file loads
        addon_utils.disable(name, default_set=True)
        assert not addon_utils.check(name)[1]
        assert not hasattr(bpy.types.Scene, "reconform"), "Scene.reconform left behind"
        for kind in ("load_pre", "load_post", "undo_post", "redo_post", "depsgraph_update_post", "frame_change_post"):
            left = [f for f in getattr(bpy.app.handlers, kind) if (f.__module__ or "").startswith(name)]
            assert not left, f"{{kind}} handlers left behind: {{left}}"
        try:
            bpy.ops.reconform.retarget.get_rna_type()
            raise SystemExit("operator reconform.retarget still registered")
        except KeyError:
            pass
        print("INSTALL-OK", act.name)
    """)
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "user"))
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300,
                       cwd=str(tmp_path))
    assert "INSTALL-OK YMCA to metarig" in r.stdout, (r.stdout[-4000:] + "\n" + r.stderr[-4000:])


def _fake_wheel(folder: pathlib.Path) -> pathlib.Path:
    """A tiny pure wheel standing in for torch (the real ones are 80-190 MB per platform)."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    whl = folder / "rcfakedep-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("rcfakedep/__init__.py", "VALUE = 42\n")
        z.writestr("rcfakedep-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: rcfakedep\nVersion: 1.0\n")
        z.writestr("rcfakedep-1.0.dist-info/WHEEL",
                   "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("rcfakedep-1.0.dist-info/RECORD", "")
    return whl


def test_staged_release_bundles_wheels_per_platform_and_installs_them(tmp_path):
    """tools/stage_release.py: platforms/wheels go into the staged manifest only, one zip per platform, and
    Blender installs the bundled wheel so the add-on can import it."""
    import importlib.util
    import zipfile

    spec = importlib.util.spec_from_file_location("stage_release", ROOT / "tools" / "stage_release.py")
    sr = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sr)
    assert sr.wheel_platform_ok("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "linux-x64")
    assert not sr.wheel_platform_ok("torch-2.13.0-cp311-cp311-win_amd64.whl", "linux-x64")
    assert sr.wheel_platform_ok("pot-0.9.5-cp313-cp313-macosx_11_0_arm64.whl", "macos-arm64")
    wheel = _fake_wheel(tmp_path / "wheels")
    out = tmp_path / "out"
    src_manifest = (ROOT / "blender_manifest.toml").read_text()
    rc = sr.main(["--wheels-dir", str(wheel.parent), "--platforms", "linux-x64", "windows-x64",
                  "--stage-dir", str(tmp_path / "stage"), "--out-dir", str(out)])
    assert rc == 0
    assert (ROOT / "blender_manifest.toml").read_text() == src_manifest, "source manifest must stay wheel-free"
    zips = sorted(p.name for p in out.glob("*.zip"))
    assert zips == ["reconform-0.1.0-linux_x64.zip", "reconform-0.1.0-windows_x64.zip"]
    z = zipfile.ZipFile(out / zips[0])
    assert f"wheels/{wheel.name}" in z.namelist()
    man = z.read("blender_manifest.toml").decode()
    assert 'platforms = ["linux-x64"]' in man and wheel.name in man
    script = textwrap.dedent(f"""
        import bpy, addon_utils, sys
        assert bpy.ops.extensions.package_install_files(filepath={str(out / zips[0])!r}, repo='user_default',
                                                        enable_on_install=True) == {{'FINISHED'}}
        assert addon_utils.check("bl_ext.user_default.reconform")[1]
        import rcfakedep
        assert rcfakedep.VALUE == 42 and "extensions" in rcfakedep.__file__, rcfakedep.__file__
        print("WHEEL-OK")
    """)
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "user"))
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300,
                       cwd=str(tmp_path))
    assert "WHEEL-OK" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
