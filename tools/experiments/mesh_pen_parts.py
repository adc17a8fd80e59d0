"""Where a case's mesh self-penetration comes from: the bench line's shared volume (docs/metrics.md "Mesh
self-penetration") split by part pair, which part's surface lies inside which, on which frames and how deep, for
the result and for copy-rotations.

    OMP_NUM_THREADS=1 .venv/bin/python tools/experiments/mesh_pen_parts.py [--cases 1] [--zoo ymca:wide_hips] \\
        [--top 8] [--const core.MODULE.NAME=VALUE] [--set NAME=VALUE]

``--cases``: ``tools/bench/common.py``'s CASES (indices); ``--zoo``: morphology zoo cases as clip:body
(``tools/bench/bench_zoo.py``). Balanced preset; ../shared/assets needed.

Each probe of the measure (``core.metrics.mesh_volume``) that lies inside the body on a frame is put on the part
whose surface vertex nearest to it, among the parts it is read against, is that frame's; its depth × area / 2 goes
to (its part, that part). The rows sum to the line's value, the mean share over the clip (``mesh_volume.depths``
and ``shared_volume``, as the metrics read them).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections import defaultdict

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))


def pen_parts(core, character, motion) -> tuple:
    """{(part, inside part): [mean share of the body volume, {frames}, deepest m]} of ``motion`` on ``character``."""
    import torch
    mv, parts = core("metrics.mesh_volume"), core("rig.parts")
    track = core("character.track").ClipTrack(character, motion)
    _, names, _ = parts.vertex_segments(character.skeleton, character.mesh, character.bone_map)
    surf = mv.surfaces(character, character.keyverts.vertex_ids)[0]
    skin = mv.skinning(track, surf.ids)
    area = torch.as_tensor(surf.probe_area)
    out = defaultdict(lambda: [0.0, set(), 0.0])
    T = track.num_frames
    with torch.no_grad():
        for sl, S_rot, S_t in track.skinning_chunks(32):
            x, n = skin(S_rot, S_t)
            d = mv.depths(surf, x, n).to(area.dtype)                                                # (B, S)
            for b, s in zip(*torch.nonzero(d > 0, as_tuple=True)):
                b, s = int(b), int(s)
                v = int(surf.probe[s])
                g = int(surf.part[v])
                union = np.nonzero(surf.allowed[g][surf.part])[0]
                inside = int(surf.part[union[int((x[b, union] - x[b, v]).norm(dim=-1).argmin())]])
                row = out[(names[g], names[inside])]
                row[0] += 0.5 * float(d[b, s] * area[s]) / surf.volume / T
                row[1].add(sl.start + b)
                row[2] = max(row[2], float(d[b, s]) * surf.scale)
    return dict(out)


def _frames(frames: set) -> str:
    f = sorted(frames)
    return ", ".join(map(str, f)) if len(f) <= 6 else f"{', '.join(map(str, f[:4]))} … {f[-1]} ({len(f)} frames)"


def main(argv=None) -> int:
    import bench_zoo
    import common
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_zoo.add_case_options(ap)
    common.add_variant_options(ap)
    ap.add_argument("--top", type=int, default=8, help="part pairs shown per motion, the largest first")
    args = ap.parse_args(argv)
    mods, loader, settings = common.variant_start(args)
    for label, src, smo, tgt in bench_zoo.chosen_cases(args, mods, loader):
        outcome = common.retarget(mods, src, smo, tgt, settings, metrics=False)
        print(f"== {label} ({smo.rotations.shape[0]} frames)")
        for name, motion in (("ReConForM", outcome.motion), ("copy-rot", outcome.init_motion)):
            rows = pen_parts(common.core, tgt, motion)
            print(f"  {name}: mean shared volume {100 * sum(r[0] for r in rows.values()):.5f} % of the body volume")
            for (part, inside), (share, frames, deepest) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:args.top]:
                print(f"    {part} in {inside}: {100 * share:.5f} %, deepest {1000 * deepest:.1f} mm, frames "
                      f"{_frames(frames)}")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
