"""Build release zips of the extension that carry PyTorch and POT as bundled wheels, one zip per platform.

The source manifest stays wheel-free (so the dev link and `make extension` stay small and fast); this script
copies the package into a staging folder, appends ``platforms`` and ``wheels`` to the staged manifest and runs
Blender's own build script with ``--split-platforms``:

    python tools/stage_release.py --download                   # pip-download wheels for every platform
    python tools/stage_release.py --wheels-dir wheels/          # use wheels already downloaded
    python tools/stage_release.py --wheels-dir wheels/ --platforms linux-x64 --python 3.11

Output: ``dist/release/reconform-<version>-<platform>.zip``. Each zip holds the wheels of its platform for
every Python version listed (Blender installs only the ones matching its own Python: cp311 for 4.5 LTS,
cp313 for 5.1+). Wheels must be unmodified files from the package index and include their dependencies; numpy
is never bundled (Blender ships its own). Sizes: docs/user_guide.md "Installing PyTorch".
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ("__init__.py", "blender_manifest.toml", "reconform_addon", "core")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")

#: Blender platform -> pip ``--platform`` tags (newest first; pip takes the first that has a wheel).
PIP_PLATFORMS = {
    "linux-x64": ["manylinux_2_28_x86_64", "manylinux2014_x86_64", "manylinux_2_17_x86_64"],
    "windows-x64": ["win_amd64"],
    "macos-arm64": ["macosx_11_0_arm64", "macosx_14_0_arm64"],
    "macos-x64": ["macosx_10_9_x86_64"],
}
#: Blender's Python versions: 4.5 LTS / 5.0 use 3.11, 5.1+ use 3.13.
PYTHONS = ("3.11", "3.13")
REQUIREMENTS = ("torch==2.13.0", "pot")
#: Never bundled: Blender ships numpy.
EXCLUDE_DISTS = ("numpy",)


def blender_ext_script() -> pathlib.Path:
    """Blender's build script from the installed bpy wheel (same lookup as the Makefile)."""
    import bpy  # noqa: PLC0415 - only to locate the script

    mod = pathlib.Path(bpy.__file__).resolve().parent
    return mod.parents[1] / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"


def stage(stage_dir: pathlib.Path) -> pathlib.Path:
    """Copy the package into ``stage_dir`` (emptied first); returns it."""
    if stage_dir.exists():
        shutil.rmtree(stage_dir)
    stage_dir.mkdir(parents=True)
    for name in PACKAGE:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, stage_dir / name, ignore=IGNORE)
        else:
            shutil.copy2(src, stage_dir / name)
    return stage_dir


def add_wheels_to_manifest(manifest: pathlib.Path, wheels: list, platforms: list):
    """Insert ``platforms`` and ``wheels`` as top-level keys (before the first table) of a staged manifest."""
    text = manifest.read_text(encoding="utf-8")
    if re.search(r"^\s*(wheels|platforms)\s*=", text, re.M):
        raise SystemExit(f"{manifest} already lists wheels/platforms: stage from a clean source manifest.")
    lines = [f"platforms = [{', '.join(repr(p).replace(chr(39), chr(34)) for p in platforms)}]",
             "wheels = ["] + [f'  "./wheels/{w}",' for w in wheels] + ["]", ""]
    m = re.search(r"^\[", text, re.M)
    pos = m.start() if m else len(text)
    manifest.write_text(text[:pos] + "\n".join(lines) + "\n" + text[pos:], encoding="utf-8")


_PLATFORM_MATCH = {
    "linux-x64": lambda t: "linux" in t and t.endswith("x86_64"),
    "windows-x64": lambda t: t == "win_amd64",
    "macos-arm64": lambda t: t.startswith("macosx") and t.endswith(("arm64", "universal2")),
    "macos-x64": lambda t: t.startswith("macosx") and t.endswith(("x86_64", "universal2")),
}


def wheel_platform_ok(wheel: str, platform: str) -> bool:
    """True when ``wheel``'s platform tag fits Blender ``platform`` (pure ``any`` wheels fit everything)."""
    tags = wheel[:-len(".whl")].split("-")[-1].split(".")
    return any(t == "any" or _PLATFORM_MATCH[platform](t) for t in tags)


def download(wheels_dir: pathlib.Path, platforms: list, pythons: list):
    """``pip download`` the requirements' wheels (with dependencies, numpy removed) per platform and Python."""
    wheels_dir.mkdir(parents=True, exist_ok=True)
    for plat in platforms:
        for py in pythons:
            cmd = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--dest", str(wheels_dir),
                   "--python-version", py, *REQUIREMENTS]
            for tag in PIP_PLATFORMS[plat]:
                cmd += ["--platform", tag]
            if plat.startswith(("linux", "windows")):
                cmd += ["--index-url", "https://download.pytorch.org/whl/cpu",
                        "--extra-index-url", "https://pypi.org/simple"]
            print("+", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)
    for w in wheels_dir.glob("*.whl"):
        if w.name.split("-")[0].lower() in EXCLUDE_DISTS:
            w.unlink()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheels-dir", type=pathlib.Path, default=ROOT / "wheels")
    ap.add_argument("--download", action="store_true", help="pip-download the wheels into --wheels-dir first")
    ap.add_argument("--platforms", nargs="+", default=["linux-x64", "windows-x64", "macos-arm64"],
                    choices=sorted(PIP_PLATFORMS))
    ap.add_argument("--python", nargs="+", default=list(PYTHONS), dest="pythons")
    ap.add_argument("--stage-dir", type=pathlib.Path, default=ROOT / "build" / "stage")
    ap.add_argument("--out-dir", type=pathlib.Path, default=ROOT / "dist" / "release")
    args = ap.parse_args(argv)

    if args.download:
        download(args.wheels_dir, args.platforms, args.pythons)
    wheels = sorted(p.name for p in args.wheels_dir.glob("*.whl")) if args.wheels_dir.is_dir() else []
    wheels = [w for w in wheels if w.split("-")[0].lower() not in EXCLUDE_DISTS
              and any(wheel_platform_ok(w, p) for p in args.platforms)]
    if not wheels:
        print(f"No wheels in {args.wheels_dir}: run with --download or put the .whl files there.", file=sys.stderr)
        return 1
    stage_dir = stage(args.stage_dir)
    (stage_dir / "wheels").mkdir()
    for w in wheels:
        shutil.copy2(args.wheels_dir / w, stage_dir / "wheels" / w)
    add_wheels_to_manifest(stage_dir / "blender_manifest.toml", wheels, args.platforms)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    ext = blender_ext_script()
    tags = ext.parents[3] / "modules" / "_bpy_internal" / "extensions" / "tags.py"
    cmd = [sys.executable, str(ext), "build", "--source-dir", str(stage_dir), "--output-dir", str(args.out_dir),
           "--split-platforms", "--valid-tags", str(tags)]
    print("+", " ".join(cmd), flush=True)
    r = subprocess.run(cmd)
    if r.returncode:
        return r.returncode
    for z in sorted(args.out_dir.glob("*.zip")):
        rv = subprocess.run([sys.executable, str(ext), "validate", str(z)], capture_output=True, text=True)
        print(f"{z.name}: {os.path.getsize(z) / 1e6:.1f} MB, validate: {'ok' if rv.returncode == 0 else rv.stdout}")
        if rv.returncode:
            return rv.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
