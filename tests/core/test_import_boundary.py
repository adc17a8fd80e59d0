"""core/ is pure torch/numpy/POT: it never imports Blender modules."""

import ast
import pathlib
import subprocess
import sys

from tests.import_graph import find_cycle

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


# ------------------------------------------------------------------------------------------------ module structure

MAX_LINES = 450


def _core_modules():
    """{dotted module name: (path, is_package)} for every Python file under core/."""
    out = {}
    for path in sorted((ROOT / "core").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def _import_targets(module, is_pkg, node, modules):
    """Core modules a relative ``from`` statement of ``module`` imports (explicit targets, plus the packages on
    the way to them that ``module`` is not itself inside of: importing ``core.a.b`` runs ``core/a/__init__.py``)."""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    pkg = ".".join(base + (node.module.split(".") if node.module else []))
    names = [f"{pkg}.{a.name}" for a in node.names if f"{pkg}.{a.name}" in modules]
    if len(names) < len(node.names):
        names.append(pkg)                                   # attributes of the package (or module) itself
    out = set()
    for target in names:
        parts = target.split(".")
        for k in range(2, len(parts) + 1):                  # 'core' itself is every module's ancestor
            anc = ".".join(parts[:k])
            if anc in modules and not (module == anc or module.startswith(anc + ".")):
                out.add(anc)
    return out


def _import_graph():
    modules = _core_modules()
    graph = {m: set() for m in modules}
    for m, (path, is_pkg) in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                graph[m] |= _import_targets(m, is_pkg, node, modules)
    return graph


def test_core_import_graph_is_acyclic():
    """Relative imports between core modules (module level and inside functions alike) form no cycle."""
    graph = _import_graph()
    assert graph["core.body.fit"] >= {"core.keyverts", "core.keyverts.template"}   # the graph sees packages
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_keyverts_never_imports_body():
    graph = _import_graph()
    bad = {m: sorted(t for t in ts if t.startswith("core.body")) for m, ts in graph.items()
           if m.startswith("core.keyverts")}
    assert not any(bad.values()), bad


def test_no_core_import_inside_a_function():
    """Imports of core modules sit at module top, none hidden inside a function body."""
    bad = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for fn in ast.walk(ast.parse(path.read_text(), rel)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            for node in ast.walk(fn):
                if (isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("core"))
                        or isinstance(node, ast.Import) and any(a.name.split(".")[0] == "core" for a in node.names)):
                    bad.append(f"{rel}:{node.lineno} in {getattr(fn, 'name', 'lambda')}()")
    assert not bad, bad


def test_core_modules_are_short():
    long = {p.relative_to(ROOT).as_posix(): n for p in (ROOT / "core").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long
