"""docs/architecture.md's map of the tree matches the tree, and the add-on and the tools import nothing in a circle
(core's own import rules: tests/core/test_import_boundary.py)."""

import ast
import pathlib
import re

from tests.import_graph import find_cycle

ROOT = pathlib.Path(__file__).resolve().parents[1]
SKIP = {"__pycache__", "data", "presets"}          # data folders, not packages


def _tree_packages() -> set:
    """'core/rig/'-style paths of every package of core/ and reconform_addon/ and every folder of tools/."""
    out = set()
    for top in ("core", "reconform_addon"):
        for init in (ROOT / top).rglob("__init__.py"):
            if not SKIP & set(init.parent.relative_to(ROOT).parts):
                out.add(init.parent.relative_to(ROOT).as_posix() + "/")
    out.add("tools/")
    for d in (ROOT / "tools").rglob("*"):
        if d.is_dir() and not SKIP & set(d.relative_to(ROOT).parts):
            out.add(d.relative_to(ROOT).as_posix() + "/")
    return out


def _documented_packages() -> set:
    """The first column of docs/architecture.md's table under "## The tree"."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## The tree", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([\w/]+/)` \|", section, flags=re.M))


def test_architecture_map_names_every_package_and_only_those():
    tree, doc = _tree_packages(), _documented_packages()
    assert len(doc) >= 10, "docs/architecture.md lost its table of packages"
    assert not doc - tree, f"docs/architecture.md names packages the tree does not have: {sorted(doc - tree)}"
    assert not tree - doc, f"packages missing from docs/architecture.md's map: {sorted(tree - doc)}"


def test_every_package_says_what_it_owns():
    missing = [p for p in _tree_packages() if not p.startswith("tools")
               and not ast.get_docstring(ast.parse((ROOT / p / "__init__.py").read_text(encoding="utf-8")))]
    assert not missing, f"packages without a docstring in __init__.py: {sorted(missing)}"


def _relative_targets(module: str, is_pkg: bool, node: ast.ImportFrom, modules: set) -> set:
    """The modules of ``modules`` a relative ``from`` import of ``module`` names (the module itself, or the names
    imported from a package when they are modules)."""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    pkg = ".".join(base + (node.module.split(".") if node.module else []))
    out = {f"{pkg}.{a.name}" for a in node.names if f"{pkg}.{a.name}" in modules}
    if pkg in modules and pkg != module:
        out.add(pkg)
    return out


def test_addon_modules_import_nothing_in_a_circle():
    """Relative imports between reconform_addon's modules, at module level and inside functions alike, form no
    cycle (a package's ``__init__`` importing its submodules is not an edge back from them)."""
    files = {}
    for path in (ROOT / "reconform_addon").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        is_pkg = parts[-1] == "__init__"
        files[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    graph = {m: set() for m in files}
    for m, (path, is_pkg) in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                graph[m] |= {t for t in _relative_targets(m, is_pkg, node, set(files))
                             if not (is_pkg and t.startswith(m + "."))}
    # a submodule importing its own package's __init__ while that __init__ imports it back is the usual
    # registration pattern only when the submodule reaches no further than the package: drop package nodes
    graph = {m: {t for t in ts if not files[t][1]} for m, ts in graph.items() if not files[m][1]}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_tools_scripts_import_nothing_in_a_circle():
    """The scripts of tools/, tools/bench/, tools/render/ and tools/experiments/ import each other by plain name
    (their folders are put on sys.path) or as ``tools.<folder>.<name>``: no cycle between them."""
    scripts = {}
    for folder in ("tools", "tools/bench", "tools/render", "tools/experiments"):
        for path in sorted((ROOT / folder).glob("*.py")):
            scripts.setdefault(path.stem, path)
    dotted = {f"tools.{p.relative_to(ROOT / 'tools').with_suffix('').as_posix().replace('/', '.')}": n
              for n, p in scripts.items()}
    dotted.update({f"tools.{n}": n for n, p in scripts.items() if p.parent == ROOT / "tools"})
    graph = {n: set() for n in scripts}
    for name, path in scripts.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for t in targets:
                if t in scripts and t != name:
                    graph[name].add(t)
                elif t in dotted and dotted[t] != name:
                    graph[name].add(dotted[t])
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
