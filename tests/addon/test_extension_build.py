"""`make extension`'s steps: Blender's own build script packs the extension and validates it; the zip has the
package root, the add-on and core, and none of the development files."""

import pathlib
import re
import subprocess
import sys
import zipfile

import pytest

from tests.conftest import ROOT

bpy = pytest.importorskip("bpy")

# bpy.__file__ is <version>/scripts/modules/bpy/__init__.py (same lookup as the Makefile)
SCRIPTS = pathlib.Path(bpy.__file__).resolve().parents[2]
BLEXT = SCRIPTS / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"
TAGS = SCRIPTS / "modules" / "_bpy_internal" / "extensions" / "tags.py"


def _ext(*args):
    p = subprocess.run([sys.executable, str(BLEXT), *map(str, args)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_make_extension_builds_a_valid_zip(tmp_path):
    assert BLEXT.is_file() and TAGS.is_file()
    assert "extension:" in (ROOT / "Makefile").read_text()
    version = re.search(r'^version = "(.+)"', (ROOT / "blender_manifest.toml").read_text(), re.M).group(1)
    _ext("validate", "--valid-tags", TAGS, ROOT)
    _ext("build", "--source-dir", ROOT, "--output-dir", tmp_path, "--valid-tags", TAGS)
    zpath = tmp_path / f"reconform-{version}.zip"
    assert "Success" in _ext("validate", zpath)
    names = set(zipfile.ZipFile(zpath).namelist())
    for required in ("blender_manifest.toml", "__init__.py", "reconform_addon/__init__.py",
                     "reconform_addon/bridge/read.py", "reconform_addon/bridge/write.py", "reconform_addon/pipeline.py",
                     "core/__init__.py", "core/types.py", "core/rig/kinematics.py"):
        assert required in names, required
    for n in names:
        assert not n.startswith(("tests/", "tools/", "docs/", "dist/", ".venv/", ".git/", "demo_output/")), n
        assert "__pycache__" not in n and not n.endswith(".zip"), n
    # every Python module of the add-on and core is packed
    for sub in ("reconform_addon", "core"):
        for f in (ROOT / sub).rglob("*.py"):
            if "__pycache__" not in f.parts:
                assert f.relative_to(ROOT).as_posix() in names, f
