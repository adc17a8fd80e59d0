"""The one helper that enables the extension outside Blender's UI: the batch command, the demo, the bench, the
doc renders, the experiments and the test suite all go through it.

``enable_addon(repo_name)`` makes a temporary extensions repository whose ``reconform`` entry links a checkout
(this one by default), registers it with Blender and enables the extension as ``bl_ext.<repo_name>.reconform``:
the code path of an installed extension, relative imports and all. Works with the bpy wheel and inside a
Blender binary.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import sys
import tempfile
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]


def exit_process(rc: int = 0) -> None:
    """End the process with status ``rc``, stdout and stderr flushed. With the bpy wheel (no Blender binary),
    leave without Python's shutdown, removing Blender's session temporary folder as Blender would: bpy 4.5 can
    hang there for good once torch is loaded (docs/decisions.md "The bpy wheel's exit"). Inside Blender, or
    without bpy, a normal ``sys.exit``."""
    sys.stdout.flush()
    sys.stderr.flush()
    bpy = sys.modules.get("bpy")
    if bpy is None or bpy.app.binary_path:
        sys.exit(rc)
    session_tmp = bpy.app.tempdir.rstrip(os.sep)
    if os.path.basename(session_tmp).startswith("blender_"):
        remove_folder(session_tmp)
    os._exit(rc or 0)


def exit_after(main, *args) -> None:
    """Run ``main(*args)`` and end the process with its status (``exit_process``): the tools' ``__main__`` tail.
    What escapes ``main`` ends it the same way, as Python would have reported it: ``SystemExit`` with its status
    (a message printed, status 1), Ctrl+C with 130, any other exception with its traceback and status 1."""
    try:
        rc = main(*args)
    except SystemExit as ex:
        rc = ex.code
        if rc is not None and not isinstance(rc, int):
            print(rc, file=sys.stderr)
            rc = 1
    except KeyboardInterrupt:
        rc = 130
    except BaseException:
        traceback.print_exc()
        rc = 1
    exit_process(rc)


def isolate_user_resources(prefix: str = "reconform_bl_"):
    """The bpy wheel: point ``BLENDER_USER_RESOURCES`` at a new temporary folder before bpy is first imported,
    so that the user's own Blender settings and extensions stay out of the run. Returns that folder (the
    caller removes it with ``remove_folder`` when done), or None when bpy is loaded already (a Blender binary)
    or the variable is set."""
    if "bpy" in sys.modules or os.environ.get("BLENDER_USER_RESOURCES"):
        return None
    d = tempfile.mkdtemp(prefix=prefix)
    os.environ["BLENDER_USER_RESOURCES"] = d
    return d


def remove_folder(path) -> None:
    """Remove a temporary folder this process made (symbolic links inside are removed, never followed)."""
    if path and os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)


def enable_addon(repo_name: str, root: pathlib.Path = ROOT):
    """Enable the checkout at ``root`` as ``bl_ext.<repo_name>.reconform``; returns (module, repo).
    ``disable_addon`` removes the temporary repository folder again."""
    isolate_user_resources()
    import bpy
    import addon_utils  # importable once bpy is

    d = pathlib.Path(tempfile.mkdtemp(prefix=f"{repo_name}_"))
    (d / "reconform").symlink_to(pathlib.Path(root).resolve(), target_is_directory=True)
    repo = bpy.context.preferences.extensions.repos.new(name=repo_name, module=repo_name, custom_directory=str(d),
                                                        source='USER')

    def fail(ex):
        raise ex

    try:
        mod = addon_utils.enable(f"bl_ext.{repo_name}.reconform", default_set=True, handle_error=fail)
    except BaseException:
        bpy.context.preferences.extensions.repos.remove(repo)
        _remove_repo_folder(d)
        raise
    return mod, repo


def _remove_repo_folder(d: pathlib.Path) -> None:
    link = d / "reconform"
    if link.is_symlink():
        link.unlink()   # the link to the checkout first: nothing of the checkout can be touched
    remove_folder(d)


def disable_addon(repo_name: str, repo) -> None:
    """Disable ``bl_ext.<repo_name>.reconform``, remove its temporary repository and the repository's folder."""
    import contextlib
    import io

    import addon_utils
    import bpy

    def fail(ex):
        raise ex

    folder = pathlib.Path(repo.custom_directory) if repo.custom_directory else None
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # addon_utils prints a spurious "not enabled"
            addon_utils.disable(f"bl_ext.{repo_name}.reconform", default_set=True, handle_error=fail)
    finally:
        bpy.context.preferences.extensions.repos.remove(repo)
        if folder is not None and folder.name.startswith(f"{repo_name}_"):
            _remove_repo_folder(folder)
