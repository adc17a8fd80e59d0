"""core/ is pure torch/numpy/POT: it never imports Blender modules."""

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
FORBIDDEN = {"bpy", "mathutils", "bmesh", "gpu", "bpy_extras", "reconform_addon", "addon_utils", "bl_math"}


def test_core_sources_never_import_blender_modules():
    offenders = []
    for path in (ROOT / "core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "__import__":
                names = [a.value for a in node.args if isinstance(a, ast.Constant)]
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert not offenders, offenders


def test_core_imports_with_blender_modules_blocked():
    code = ("import sys\n"
            "for m in ('bpy', 'mathutils', 'bmesh', 'gpu', 'bpy_extras'): sys.modules[m] = None\n"
            "import core, pkgutil, importlib\n"
            "for info in pkgutil.walk_packages(core.__path__, 'core.'): importlib.import_module(info.name)\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr


def test_core_uses_only_relative_imports_of_itself():
    bad = []
    for path in (ROOT / "core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "core":
                bad.append(str(path.relative_to(ROOT)))
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "core" for a in node.names):
                bad.append(str(path.relative_to(ROOT)))
    assert not bad, f"absolute 'core' imports break the installed extension: {bad}"
