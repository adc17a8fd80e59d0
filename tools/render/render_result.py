"""Render frames of a retarget's output .blend headless (``make demo``'s demo_output/output.blend, or a batch
result), to look at the result and not only at numbers: the named armatures' meshes only, each in its own colour,
one camera framing them all (tools/render/render_docs.py's Workbench set-up).

    .venv/bin/python tools/render/render_result.py demo_output/output.blend /tmp/couple Giant,Child 40,90
    .venv/bin/python tools/render/render_result.py demo_output/output.blend /tmp/single Source,TallThin 100

Writes PREFIX_FRAME.png (900 × 450) per frame.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

COLOURS = [(0.9, 0.5, 0.3, 1), (0.3, 0.6, 0.9, 1), (0.5, 0.8, 0.4, 1), (0.8, 0.4, 0.8, 1)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("blend")
    ap.add_argument("prefix", help="output path prefix: PREFIX_FRAME.png")
    ap.add_argument("armatures", help="comma-separated armature object names")
    ap.add_argument("frames", help="comma-separated frame numbers")
    args = ap.parse_args(argv)
    import numpy as np

    import render_docs as rd
    bpy = rd.bpy
    rd.enable_addon()
    bpy.ops.wm.open_mainfile(filepath=str(pathlib.Path(args.blend).resolve()))
    names = args.armatures.split(",")
    missing = [n for n in names if bpy.data.objects.get(n) is None or bpy.data.objects[n].type != 'ARMATURE']
    if missing:
        print(f"error: no armature named {', '.join(missing)} in {args.blend}", file=sys.stderr)
        return 1
    for ob in bpy.data.objects:                    # only the named characters' meshes render
        if ob.type == 'MESH':
            mods = [m.object.name for m in ob.modifiers if m.type == 'ARMATURE' and m.object]
            owner = ob.parent.name if ob.parent else (mods[0] if mods else None)
            ob.hide_render = owner not in names
    rd.setup_render(900, 450)
    where = np.asarray([list(bpy.data.objects[n].matrix_world.translation) for n in names])
    for n, colour in zip(names, COLOURS * len(names)):
        rd.colour_character(bpy.data.objects[n], colour)
    rd.camera((where[:, 0].mean(), where[:, 1].mean(), 1.0), np.ptp(where[:, 0]) + 1.5, 2.4, elevation=6.0)
    for f in (int(x) for x in args.frames.split(",")):
        bpy.context.scene.frame_set(f)
        rd.render(f"{args.prefix}_{f}.png")
    return 0


if __name__ == "__main__":
    from extension import exit_after
    exit_after(main)
