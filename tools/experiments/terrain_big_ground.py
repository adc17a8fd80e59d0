"""A square-kilometre ground object: how long the bridge takes to read it and the core to sample a clip's
footprint of it, and what the sample cap does to a region the size of the object (docs/bridge.md, docs/solver.md
"Terrain").

    .venv/bin/python tools/experiments/terrain_big_ground.py [--subdivisions 1000]

A 1 km x 1 km grid (``subdivisions``² quads) with a Displace modifier (Clouds texture, 0.5 m) is read by
``bridge.terrain.read_ground`` (its evaluated mesh, world space), then ``core.contacts.terrain.sample_ground`` samples a
7 x 3 m footprint and a 900 x 900 m region. Prints times, array sizes and the load average.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="reconform_big_"))

import bpy  # noqa: E402

import extension  # noqa: E402

REPO = "reconform_big"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subdivisions", type=int, default=1000)
    args = ap.parse_args(argv)
    _, repo = extension.enable_addon(REPO)
    try:
        terrain = importlib.import_module(f"bl_ext.{REPO}.reconform.reconform_addon.bridge.terrain")
        core_terrain = importlib.import_module(f"bl_ext.{REPO}.reconform.core.contacts.terrain")
        bpy.ops.wm.read_homefile(use_empty=True)
        bpy.ops.mesh.primitive_grid_add(x_subdivisions=args.subdivisions, y_subdivisions=args.subdivisions,
                                        size=1000.0)
        ob = bpy.context.object
        disp = ob.modifiers.new("Displace", 'DISPLACE')
        disp.strength = 0.5
        disp.texture = bpy.data.textures.new("Clouds", 'CLOUDS')
        t = time.perf_counter()
        surf = terrain.read_ground(ob)
        print(f"read_ground: {len(surf.vertices)} vertices, {len(surf.triangles)} triangles in "
              f"{time.perf_counter() - t:.2f} s; {(surf.vertices.nbytes + surf.triangles.nbytes) / 2 ** 20:.0f} MB")
        for region in ((-3.0, 4.0, -1.5, 1.5), (-450.0, 450.0, -450.0, 450.0)):
            t = time.perf_counter()
            hf, rep = core_terrain.sample_ground(surf, region)
            print(f"sample {region[1] - region[0]:g} x {region[3] - region[2]:g} m: {rep.line()} in "
                  f"{time.perf_counter() - t:.2f} s; heights {hf.heights.nbytes / 2 ** 20:.2f} MB")
        print("load average (1, 5, 15 min):", ", ".join(f"{x:.1f}" for x in os.getloadavg()),
              f"on {os.cpu_count()} CPUs")
    finally:
        extension.disable_addon(REPO, repo)
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
