"""Shared fixtures. Works with the bpy wheel (``pytest -p no:pytest-blender``) and inside a real Blender
through pytest-blender. Tests that need ../shared/assets skip when it is absent, and fail under CI=true."""

import os
import pathlib
import subprocess
import sys
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _find_assets() -> pathlib.Path:
    """``$RECONFORM_ASSETS``, else ../shared/assets beside this checkout, else beside the main checkout when this
    one is a git worktree (its .git file names the main repository's git directory)."""
    if os.environ.get("RECONFORM_ASSETS"):
        return pathlib.Path(os.environ["RECONFORM_ASSETS"])
    here = ROOT.parent / "shared" / "assets"
    git = ROOT / ".git"
    if not here.is_dir() and git.is_file():  # "gitdir: <main>/.git/worktrees/<name>"
        line = git.read_text().strip()
        if line.startswith("gitdir:"):
            main = pathlib.Path(line.split(":", 1)[1].strip()).resolve().parents[2]
            if (main.parent / "shared" / "assets").is_dir():
                return main.parent / "shared" / "assets"
    return here


ASSETS = _find_assets()

if "bpy" not in sys.modules:  # bpy wheel: isolate Blender's user dirs BEFORE the first import of bpy
    os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="reconform_bl_"))


def assets_dir() -> pathlib.Path:
    """The shared assets folder, or skip (fail under CI) when it is absent."""
    if not (ASSETS / "characters").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but the shared assets are missing at {ASSETS}")
        pytest.skip(f"shared assets not found at {ASSETS}")
    return ASSETS


@pytest.fixture(scope="session")
def assets():
    return assets_dir()


def _raise(ex):
    raise ex


@pytest.fixture(scope="session")
def addon():
    """The real extension, enabled in its real ``bl_ext`` namespace from a temporary repo linking here."""
    pytest.importorskip("bpy")
    from tools.extension import disable_addon, enable_addon

    mod, repo = enable_addon("reconform_test")
    yield mod
    disable_addon("reconform_test", repo)


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """``tools/demo.py`` run once for the session on the demo's first 40 frames, fast preset: (exit status,
    stdout, stderr, output folder). The folder holds demo.blend (the generated demo scene as `make demo` builds
    it), output.blend and report.txt; the demo's test and the demo scene's read them."""
    pytest.importorskip("bpy")
    out = tmp_path_factory.mktemp("demo")
    env = dict(os.environ)
    env.pop("BLENDER_USER_RESOURCES", None)
    p = subprocess.run([sys.executable, str(ROOT / "tools" / "demo.py"), "--out", str(out), "--frames", "1", "40",
                        "--quality", "fast"], capture_output=True, text=True, timeout=1500, env=env, cwd=str(ROOT))
    return p.returncode, p.stdout, p.stderr, out


@pytest.fixture
def clean_scene():
    """An empty scene (add-ons stay enabled)."""
    bpy = pytest.importorskip("bpy")
    bpy.ops.wm.read_homefile(use_empty=True)
    yield bpy.context.scene


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """A test that reads the shared assets (the ``assets`` fixture, directly or through another fixture) must be
    marked ``assets``, so that ``-m "not assets"`` really leaves them out."""
    unmarked = [it.nodeid for it in items if "assets" in it.fixturenames and it.get_closest_marker("assets") is None]
    if unmarked:
        raise pytest.UsageError("tests reading ../shared/assets without @pytest.mark.assets: " + ", ".join(unmarked))


_SESSION = []


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """With the bpy wheel, the test process ends through ``tools.extension.exit_process`` once pytest has done
    everything (the first cleanup registered runs last): bpy 4.5 can hang for good in Python's shutdown once torch
    is loaded (docs/decisions.md "The bpy wheel's exit"), which would hold CI until its time limit."""
    config.add_cleanup(_exit_without_python_shutdown)


def pytest_sessionfinish(session):
    _SESSION.append(session)


def _exit_without_python_shutdown():
    bpy = sys.modules.get("bpy")
    if _SESSION and bpy is not None and not bpy.app.binary_path:
        from tools.extension import exit_process
        exit_process(int(_SESSION[-1].exitstatus))
