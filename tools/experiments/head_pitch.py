"""How a salsa couple's heads are held, read on the key vertices (the same surface points on every body), in the
source, copy-rotations, each character solved alone and the joint solve (docs/solver.md "The head's attitude").

    .venv/bin/python tools/experiments/head_pitch.py [--case 15] [--set NAME=VALUE ...] [--const MODULE.NAME=VALUE ...]

Per character and motion: the face's pitch (the elevation of face_center − head_back above the horizontal, + =
face up) and the head's bend from the torso (the angle between head_top − neck_back and neck_back − belly), mean
and at the 95th percentile, each solve's largest pitch excess over the source's, and how far each solve turned the
head from copy-rotations' (``core.solver.head.head_turn``: the metrics' head_turn). 'balanced', 1 thread.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))

#: key vertices read (all in the 41)
NAMES = ("face_center", "head_back", "head_top", "neck_back", "belly")


def head_angles(kv: np.ndarray, names: list) -> tuple:
    """((T,) face pitch in degrees, (T,) head's bend from the torso in degrees) of (T, V, 3) key-vertex paths."""
    p = {n: kv[:, names.index(n)] for n in NAMES}
    face = p["face_center"] - p["head_back"]
    pitch = np.degrees(np.arcsin(np.clip(face[:, 2] / np.linalg.norm(face, axis=1), -1.0, 1.0)))
    up, torso = p["head_top"] - p["neck_back"], p["neck_back"] - p["belly"]
    cos = np.sum(up * torso, 1) / (np.linalg.norm(up, axis=1) * np.linalg.norm(torso, axis=1))
    return pitch, np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="15", choices=("01", "05", "15"))
    ap.add_argument("--set", action="append", default=[], help="a solver setting NAME=VALUE (Python literal)")
    ap.add_argument("--const", action="append", default=[], help="a module constant MODULE.NAME=VALUE")
    ap.add_argument("--series", default=None, help="FIRST:LAST:STEP: print each motion's face pitch on those frames")
    args = ap.parse_args(argv)
    import ast
    import torch
    torch.set_num_threads(1)
    import common
    import bench_partners as bp
    mods = bp.modules()
    common.set_constants(args.const)
    loader = common.Loader(mods, lambda s: None)
    rt, grp = mods["core.pipeline.retarget"], mods["core.pipeline.group"]
    track_mod = importlib.import_module(f"{common.MODULE}.core.character.track")
    label, lead, follow, t_lead, t_follow = next(c for c in bp.CASES if c[0].endswith(args.case))
    pairs = bp.load_pairs(loader, [(lead, t_lead, 0.0), (follow, t_follow, 0.0)], bp.FIRST, bp.FRAMES)
    overrides = {k: ast.literal_eval(v) for k, v in (s.split("=", 1) for s in args.set)}
    settings = mods["core.solver"].SolverSettings.preset("balanced", num_threads=1, **overrides)
    opts = rt.RetargetOptions(settings=settings, conflicts=False, metrics=False)
    joint = grp.run_group(grp.RetargetGroup(pairs, opts))
    print(f"{label}, {bp.FRAMES} frames, settings {overrides or 'balanced'}, constants {args.const or 'as they are'}, "
          f"load average {os.getloadavg()[0]:.1f}")

    def kv_of(character, motion, names):
        ids = character.keyverts.vertex_ids[[character.keyverts.names.index(n) for n in names]]
        return track_mod.ClipTrack(character, motion).vertices(ids)

    head_mod = importlib.import_module(f"{common.MODULE}.core.solver.head")
    for (src, mo, tgt), member in zip(pairs, joint.members):
        alone = rt.run(rt.Retarget(src, mo, tgt, dataclasses.replace(opts, init_motion=member.init_motion),
                                   source_track=member.source_track))
        names = list(NAMES)
        s_ids = member.source.keyverts.vertex_ids[[member.source.keyverts.names.index(n) for n in names]]
        src_pitch, src_bend = head_angles(np.asarray(member.source_track.vertices(s_ids)), names)
        print(f"{member.target.name}: source face pitch mean {src_pitch.mean():+.1f}°, bend from the torso mean "
              f"{src_bend.mean():.1f}°")
        series = {"source": (src_pitch, src_bend)}
        for how, motion in (("copy-rotations", member.init_motion), ("alone", alone.motion),
                            ("joint", member.motion)):
            pitch, bend = series[how] = head_angles(np.asarray(kv_of(member.target, motion, names)), names)
            d = pitch - src_pitch
            print(f"  {how:>15}: face pitch mean {pitch.mean():+6.1f}°, 95th percentile "
                  f"{np.percentile(pitch, 95):+6.1f}°;"
                  f" over the source's: mean {d.mean():+5.1f}°, largest {d.max():+5.1f}° (frame {int(d.argmax())});"
                  f" bend from the torso mean {bend.mean():5.1f}° (source {src_bend.mean():.1f}°), "
                  f"largest excess {np.max(bend - src_bend):+5.1f}°")
            theta = head_mod.head_turn(member.target, motion, member.init_motion)
            print(f"  {how:>15}  head turned from copy-rotations': mean {theta.mean():5.1f}°, 95th percentile "
                  f"{np.percentile(theta, 95):5.1f}°, largest {theta.max():5.1f}° (frame {int(theta.argmax())}); "
                  f"frames beyond 15° {int((theta > 15).sum())}, beyond 30° {int((theta > 30).sum())}")
        if args.series:
            first, last, step = (int(v) for v in args.series.split(":"))
            frames = np.arange(first, min(last, len(src_pitch) - 1) + 1, step)
            print("    frame        " + " ".join(f"{f:6d}" for f in frames))
            for how, (pitch, bend) in series.items():
                print(f"    {how:>14} pitch " + " ".join(f"{v:+6.1f}" for v in pitch[frames]))
                print(f"    {how:>14} bend  " + " ".join(f"{v:6.1f}" for v in bend[frames]))
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
