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
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]


def enable_addon(repo_name: str, root: pathlib.Path = ROOT):
    """Enable the checkout at ``root`` as ``bl_ext.<repo_name>.reconform``; returns (module, repo)."""
    if "bpy" not in sys.modules:  # the bpy wheel: keep the user's Blender settings out of it
        os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="reconform_bl_"))
    import bpy
    import addon_utils  # importable once bpy is

    d = pathlib.Path(tempfile.mkdtemp(prefix=f"{repo_name}_"))
    (d / "reconform").symlink_to(pathlib.Path(root).resolve(), target_is_directory=True)
    repo = bpy.context.preferences.extensions.repos.new(name=repo_name, module=repo_name, custom_directory=str(d),
                                                        source='USER')

    def fail(ex):
        raise ex

    mod = addon_utils.enable(f"bl_ext.{repo_name}.reconform", default_set=True, handle_error=fail)
    return mod, repo


def disable_addon(repo_name: str, repo) -> None:
    """Disable ``bl_ext.<repo_name>.reconform`` and remove its temporary repository."""
    import contextlib
    import io

    import addon_utils
    import bpy

    def fail(ex):
        raise ex

    with contextlib.redirect_stdout(io.StringIO()):  # addon_utils prints a spurious "not enabled"
        addon_utils.disable(f"bl_ext.{repo_name}.reconform", default_set=True, handle_error=fail)
    bpy.context.preferences.extensions.repos.remove(repo)
