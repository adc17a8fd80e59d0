"""How far each hand is from the body, frame by frame: the nearest vertex of each hand to the trunk's and thighs'
vertices, in the source, copy-rotations and ReConForM (a hand resting on a hip reads a few millimetres, one that hangs
off it centimetres; docs/solver.md "Surface contacts").

    OMP_NUM_THREADS=1 .venv/bin/python tools/experiments/hand_gaps.py --zoo demo:wide_hips [--frames 125:155:5] \\
        [--const core.MODULE.NAME=VALUE] [--set NAME=VALUE]

``--cases``, ``--zoo``: as ``case_lines.py``; ``--frames A:B:STEP``: the frames read (0-based; the demo clip's hands
rest on its hips over 126-150). Each entry: left / right in mm, and the part nearest to each hand. The distance is
vertex to vertex, so a hand on the skin reads up to about the mesh's vertex spacing.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))

#: the parts a hand's distance is read to (canonical names)
BODY = ("hips", "spine", "chest", "upper_chest", "left_upper_leg", "right_upper_leg")


def hand_gaps(core, character, motion, frames) -> dict:
    """{frame: [(metres, nearest part) for the left and the right hand]} of ``motion`` on ``character``."""
    import torch
    seg, names, _ = core("rig.parts").vertex_segments(character.skeleton, character.mesh, character.bone_map)
    track = core("character.track").ClipTrack(character, motion)
    skin = core("metrics.mesh_volume").skinning(track, np.arange(len(character.mesh.rest_verts)))
    body = np.nonzero(np.isin(seg, [names.index(n) for n in BODY if n in names]))[0]
    hands = [np.nonzero(seg == names.index(f"{s}_hand"))[0] for s in ("left", "right")]
    out = {}
    with torch.no_grad():
        for sl, R, t in track.skinning_chunks(32):
            x, _ = skin(R, t)
            for f in range(sl.start, sl.stop):
                if f in frames:
                    row = []
                    for h in hands:
                        d = torch.cdist(x[f - sl.start, h], x[f - sl.start, body]).min(0).values
                        k = int(d.argmin())
                        row.append((float(d[k]) * character.skeleton.metres_per_unit, names[seg[body[k]]]))
                    out[f] = row
    return out


def main(argv=None) -> int:
    import bench_zoo
    import common
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_zoo.add_case_options(ap)
    common.add_variant_options(ap)
    ap.add_argument("--frames", default="125:155:5", help="A:B:STEP, the frames read (0-based)")
    args = ap.parse_args(argv)
    a, b, step = (int(x) for x in args.frames.split(":"))
    frames = set(range(a, b, step))
    mods, loader, settings = common.variant_start(args)
    for label, src, smo, tgt in bench_zoo.chosen_cases(args, mods, loader):
        outcome = common.retarget(mods, src, smo, tgt, settings, metrics=False)
        gaps = {"source": hand_gaps(common.core, src, smo, frames),
                "copy-rot": hand_gaps(common.core, tgt, outcome.init_motion, frames),
                "ReConForM": hand_gaps(common.core, tgt, outcome.motion, frames)}
        print(f"== {label}: each hand's nearest vertex to the trunk and thighs, mm (left / right)")
        for f in sorted(frames & set(gaps["source"])):
            print(f"  {f}: " + "   ".join(
                f"{k} {1000 * g[f][0][0]:.0f} / {1000 * g[f][1][0]:.0f} ({g[f][0][1]}, {g[f][1][1]})"
                for k, g in gaps.items()))
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
