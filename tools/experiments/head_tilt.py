"""How far each named armature's head bone leans from the vertical over a retarget's output .blend, against
another .blend of the same clip (copy-rotations' result, say): a head thrown back or dropped shows here before
any metric reads it (the metrics read key vertices, not the head's angle).

    .venv/bin/python tools/experiments/head_tilt.py out.blend copy_rotations.blend mh_female_thin_tall_rig 120 839

Per file and armature: the angle between the head bone's axis (its Y: neck to crown) and world Z, every 5th frame
of the range, mean and largest, and the frame of the largest; then per frame the largest difference between the
files. With ``--chain``, the same split along the head's ancestors (hips to head): each bone's tilt from the
vertical (the first file minus the second) and the angle between the two files' rotations of the bone relative to
its parent, mean and at the frame where the head's difference is largest: which joint of the spine, neck or head
adds the lean.
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


def chain_angles(bpy, path: str, name: str, frames) -> tuple:
    """(bone names hips → head, (F, B) tilt from world Z in degrees, (F, B, 3, 3) rotation of each bone relative to
    its parent) of the armature ``name`` in the .blend ``path``."""
    import numpy as np
    bpy.ops.wm.open_mainfile(filepath=str(pathlib.Path(path).resolve()))
    scene = bpy.context.scene
    ob = bpy.data.objects[name]
    bone = next(b for b in ob.pose.bones if b.name.lower().endswith("head"))
    chain = []
    while bone is not None:
        chain.insert(0, bone)
        bone = bone.parent
    tilt, local = [], []
    for f in frames:
        scene.frame_set(f)
        mats = np.asarray([np.asarray((ob.matrix_world @ b.matrix).to_3x3().normalized()) for b in chain])
        ys = mats[:, :, 1]
        tilt.append(np.degrees(np.arccos(np.clip(ys[:, 2], -1.0, 1.0))))
        parents = np.concatenate([np.eye(3)[None], mats[:-1]])
        local.append(np.swapaxes(parents, 1, 2) @ mats)
    return [b.name for b in chain], np.asarray(tilt), np.asarray(local)


def print_chain(bpy, a_path: str, b_path: str, name: str, frames) -> None:
    """Print the ``--chain`` split of ``name``'s head lean, ``a_path`` minus ``b_path``: per bone its tilt's
    difference and the angle between the two files' rotations of the bone relative to its parent."""
    import numpy as np
    names, tilt_a, local_a = chain_angles(bpy, a_path, name, frames)
    _, tilt_b, local_b = chain_angles(bpy, b_path, name, frames)
    worst = int(np.argmax(tilt_a[:, -1] - tilt_b[:, -1]))
    rel = np.swapaxes(local_b, -1, -2) @ local_a
    turn = np.degrees(np.arccos(np.clip((np.trace(rel, axis1=-2, axis2=-1) - 1.0) / 2.0, -1.0, 1.0)))
    print(f"{name}: per bone, {pathlib.Path(a_path).name} against {pathlib.Path(b_path).name} (mean | at frame "
          f"{frames[worst]}, the head's largest)")
    for k, bone in enumerate(names):
        dt = tilt_a[:, k] - tilt_b[:, k]
        print(f"  {bone:>24}: tilt difference {dt.mean():+6.1f}° | {dt[worst]:+6.1f}°   rotation from its parent "
              f"differs by {turn[:, k].mean():5.1f}° | {turn[worst, k]:5.1f}°")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("blend")
    ap.add_argument("other", help="a second .blend of the same clip and armatures ('-': none)")
    ap.add_argument("armatures", help="comma-separated armature object names")
    ap.add_argument("first", type=int)
    ap.add_argument("last", type=int)
    ap.add_argument("--chain", action="store_true", help="split the lean along the head's ancestors")
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
            if args.chain:
                print_chain(rd.bpy, args.blend, args.other, name, frames)
    return 0


if __name__ == "__main__":
    from extension import exit_after
    exit_after(main)
