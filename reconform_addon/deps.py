"""Optional heavy dependencies (PyTorch, POT): find them, report them, tell the user how to install them.

Nothing here imports torch at module level. ``torch_status()`` imports it on first call (about 1 s) and caches
the answer; the panel calls it on every redraw, so only the first call costs anything.

Where torch can come from (README, "Installing PyTorch"):
1. bundled wheels in a platform build of the extension (``tools/stage_release.py``): Blender installs them into
   ``<user>/extensions/.local/lib/pythonX.Y/site-packages``, already on ``sys.path``;
2. a guided ``pip install --target`` into this extension's own user directory (``user_site_dir()``), which
   ``ensure_user_site_on_path()`` adds to ``sys.path`` when the add-on is enabled;
3. whatever is already importable in Blender's Python.
"""

from __future__ import annotations

import os
import shlex
import sys

#: Pip requirement used by the guided install (the version the project is tested with).
TORCH_REQUIREMENT = "torch==2.13.0"
OTHER_REQUIREMENTS = ("pot",)
CPU_INDEX_URL = "https://download.pytorch.org/whl/cpu"

_cache: dict = {}


def _extension_package() -> str:
    """The extension's package name (``bl_ext.<repo>.reconform``): this module's grand-parent package."""
    return __package__.rsplit(".", 1)[0]


def user_site_dir(create: bool = False) -> str:
    """Per-extension writable directory for a guided ``pip --target`` install (``<user>/extensions/.user/...``)."""
    import bpy

    try:
        base = bpy.utils.extension_path_user(_extension_package(), path="", create=create)
    except (ValueError, KeyError):  # not loaded as an extension (legacy add-on or a plain import in tests)
        base = os.path.join(bpy.utils.user_resource('SCRIPTS', path="reconform"), "")
        if create:
            os.makedirs(base, exist_ok=True)
    return os.path.join(base, "site-packages")


def ensure_user_site_on_path() -> str | None:
    """Put ``user_site_dir()`` on ``sys.path`` when it exists (called on register); returns it or None."""
    try:
        d = user_site_dir(create=False)
    except Exception:  # noqa: BLE001 - never fail enabling the add-on over this
        return None
    if os.path.isdir(d) and d not in sys.path:
        sys.path.append(d)
        invalidate()
    return d if os.path.isdir(d) else None


def torch_status(refresh: bool = False) -> tuple[bool, str]:
    """(available, message): torch's version, or the import error in one line. Cached until ``refresh``."""
    if refresh or "torch" not in _cache:
        try:
            import torch  # noqa: PLC0415 - lazy on purpose

            msg = f"PyTorch {torch.__version__}"
            if torch.cuda.is_available():
                msg += f", CUDA {torch.version.cuda} ({torch.cuda.get_device_name(0)})"
            else:
                msg += ", CPU only"
            _cache["torch"] = (True, msg)
        except Exception as ex:  # noqa: BLE001 - ImportError, or a DLL/.so load error
            first = str(ex).strip().splitlines()[0] if str(ex).strip() else ""
            _cache["torch"] = (False, f"{type(ex).__name__}: {first}" if first else type(ex).__name__)
    return _cache["torch"]


def cuda_available() -> bool:
    """True when torch imports and sees a CUDA device."""
    ok, msg = torch_status()
    return ok and "CUDA" in msg


def invalidate():
    """Forget cached answers (after an install, or when sys.path changed)."""
    _cache.clear()


def install_command(target: str | None = None, cpu_only: bool = True) -> str:
    """The command line that installs torch (and POT) for *this* Blender's Python into ``target``.

    Blender's Python is ``sys.executable`` in Blender 4.5 and 5.x. The CPU wheel index keeps the download small
    (about 200 MB on Linux instead of several GB of CUDA libraries); drop it to get the CUDA build.
    """
    if target is None:
        target = user_site_dir()
    args = [sys.executable, "-m", "pip", "install", "--upgrade", "--target", target, TORCH_REQUIREMENT,
            *OTHER_REQUIREMENTS]
    if cpu_only and sys.platform != "darwin":
        args += ["--extra-index-url", CPU_INDEX_URL]
    if os.name == "nt":
        import subprocess

        return subprocess.list2cmdline(args)
    return " ".join(shlex.quote(a) for a in args)


def missing_message() -> list[str]:
    """Lines the panel shows when torch is missing: what is wrong, and the fix."""
    ok, msg = torch_status()
    if ok:
        return []
    return [
        "PyTorch is not installed for Blender's Python.",
        f"({msg})",
        "Retargeting needs it (the math runs in PyTorch).",
        "Fix: Preferences > Add-ons > ReConForM > Copy Install Command,",
        "run it in a terminal, then restart Blender.",
    ]
