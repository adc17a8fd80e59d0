"""How far each named armature's head bone leans from the vertical over a retarget's output .blend, against
another .blend of the same clip (copy-rotations' result, say): a head thrown back or dropped shows here before
any metric reads it (the metrics read key vertices, not the head's angle).

    .venv/bin/python tools/experiments/head_tilt.py out.blend copy_rotations.blend mh_female_thin_tall_rig 120 839

Per file and armature: the angle between the head bone's axis (its Y: neck to crown) and world Z, every 5th frame
of the range, mean and largest, and the frame of the largest; then per frame the largest difference between the
files.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


def head_angles(bpy, path: str, names, frames) -> dict:
    """{armature: (F,) degrees between its head bone's axis and world Z at ``frames``} in the .blend ``path``."""
    import numpy as np
    bpy.ops.wm.open_mainfile(filepath=str(pathlib.Path(path).resolve()))
    scene = bpy.context.scene
    out = {}
    for name in names:
        ob = bpy.data.objects.get(name)
        heads = [b for b in ob.pose.bones if b.name.lower().endswith("head")] if ob is not None else []
        if not heads:
            raise SystemExit(f"error: no armature '{name}' with a head bone in {path}")
        angles = []
        for f in frames:
            scene.frame_set(f)
            y = np.asarray((ob.matrix_world @ heads[0].matrix).col[1][:3])
            angles.append(np.degrees(np.arccos(np.clip(y[2] / np.linalg.norm(y), -1.0, 1.0))))
        out[name] = np.asarray(angles)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("blend")
    ap.add_argument("other", help="a second .blend of the same clip and armatures ('-': none)")
    ap.add_argument("armatures", help="comma-separated armature object names")
    ap.add_argument("first", type=int)
    ap.add_argument("last", type=int)
    args = ap.parse_args(argv)
    import numpy as np

    import render_docs as rd
    rd.enable_addon()
    frames = list(range(args.first, args.last + 1, 5))
    names = args.armatures.split(",")
    runs = {p: head_angles(rd.bpy, p, names, frames) for p in (args.blend, args.other) if p != "-"}
    for path, per in runs.items():
        for name, a in per.items():
            print(f"{pathlib.Path(path).name} {name}: head from vertical mean {a.mean():.1f}°, "
                  f"largest {a.max():.1f}° (frame {frames[int(a.argmax())]})")
    if len(runs) == 2:
        a, b = runs.values()
        for name in names:
            d = a[name] - b[name]
            print(f"{name}: {pathlib.Path(args.blend).name} minus {pathlib.Path(args.other).name} "
                  f"mean {d.mean():+.1f}°, largest {d.max():+.1f}° (frame {frames[int(d.argmax())]})")
    return 0


if __name__ == "__main__":
    from extension import exit_after
    exit_after(main)
