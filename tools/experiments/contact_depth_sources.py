"""Where a case's contact depth comes from, and whether the surface barrier sees it: on each frame whose contact depth
(docs/metrics.md "Contact depth") is over a share of the target's height, the surface point that sets it (its part,
and the part it lies inside), its depth by the mesh measure, and what the solver's surface barrier reads there (the
field of that part at that point, and whether the point's segment probes that field at all), then the same frames
counted by what the barrier makes of them.

    OMP_NUM_THREADS=1 .venv/bin/python tools/experiments/contact_depth_sources.py [--cases 1] \\
        [--zoo slash:big_belly] [--over 0.01] [--source] [--const core.MODULE.NAME=VALUE] [--set NAME=VALUE]

``--cases``: ``tools/bench/common.py``'s CASES (indices); ``--zoo``: morphology zoo cases as clip:body
(``tools/bench/bench_zoo.py``'s CLIPS and BODIES, the body without its ``zoo_`` prefix; the zoo's eight bodies are
built together, as the bench builds them). ``--source``: the source's own clip read on its own body instead of a
result (how deep the capture itself overlaps where it has contacts). Balanced preset; ../shared/assets needed.

A frame is counted as **not probed** when the point's segment carries no probes of the barrier or does not read the
field of the part it lies in (``surface_fields.PROBE_SEGMENTS``, the neighbours ``segment_exclusion`` leaves out),
**read short** when the barrier's field reads less than half the measure's depth there, and **read** otherwise (the
barrier sees it and other terms hold the point there).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections import Counter

import numpy as np

#: the inside part's probes read within this share of the height of the point (the other side of the contact)
BACK_RADIUS = 0.05

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))


def depth_sources(core, src, smo, tgt, motion, over: float) -> list:
    """[(frame, contact depth m, point's part, part it is inside, barrier's read m or None, status, the inside part's
    probes' deepest read in the point's part's field within BACK_RADIUS × h of the point, m or None)] for each frame
    of ``motion`` (``tgt``'s) whose contact depth exceeds ``over`` × the target's height, deepest first. ``core``:
    ``common.core``, the enabled add-on's ``core.<name>`` modules."""
    import torch
    series = []
    scores = core("metrics.scores")
    core("progress").drive(scores.evaluations(src, smo, tgt, [motion], series=series))
    depth = series[0]["contact_depth"]
    h = float(tgt.height)
    frames = [t for t in np.argsort(-np.nan_to_num(depth, nan=-1.0)) if depth[t] > over * h]
    if not frames:
        return []
    mv, parts = core("metrics.mesh_volume"), core("rig.parts")
    sf, su, track_mod = core("solver.surface_fields"), core("solver.surface"), core("character.track")
    track = track_mod.ClipTrack(tgt, motion)
    surf = mv.surfaces(tgt, tgt.keyverts.vertex_ids)[1]       # every surface vertex a probe, as the contact depth reads
    _, seg_names, _ = parts.vertex_segments(tgt.skeleton, tgt.mesh, tgt.bone_map)
    fields = sf.surface_fields(tgt)
    world = sf.world_points(fields, track) if fields is not None else None
    grid = su.field_tensor(fields, torch.float64) if fields is not None else None
    Mo = torch.as_tensor(tgt.skeleton.object_matrix, dtype=torch.float64)
    skin = mv.skinning(track, surf.ids)
    with torch.no_grad():
        (x, normals), = [skin(R, t) for _, R, t in track.skinning_chunks(track.num_frames)]
        at = torch.as_tensor(frames)
        d = torch.zeros((track.num_frames, len(surf.probe)))
        d[at] = mv.depths(surf, x[at], lambda b, q: normals(at[b], q)) * surf.scale    # (T, M) metres, those frames
    out = []
    for t in frames:
        s = int(torch.argmin((d[t] - float(depth[t])).abs()))                   # the vertex that sets the frame
        v = surf.probe[s]
        g = int(surf.part[v])
        allowed = np.nonzero(surf.allowed[g][surf.part])[0]
        inside = int(surf.part[allowed[int((x[t, allowed] - x[t, v]).norm(dim=-1).argmin())]])
        read, status = None, "not probed"
        name_g, name_in = seg_names[g], seg_names[inside]
        p = x[t, v].double() @ Mo[:3, :3].T + Mo[:3, 3]                        # the point, world
        if fields is not None and name_in in fields.field_names:
            f = fields.field_names.index(name_in)
            M, c = su.box_maps(fields, world[t:t + 1])
            u = (M[0, f] @ p + c[0, f])[None]
            inside_box = bool((u.abs() <= 1).all())
            read = max(0.0, -float(su.read_fields(grid, u, torch.tensor([f])))) if inside_box else 0.0
            rows = [i for i, n in enumerate(fields.probe_names) if n == name_g]
            if rows and fields.tested[rows[0], f]:
                status = "read" if read >= 0.5 * float(depth[t]) else "read short"
        back = None         # the other side: the inside part's probes near the point, in the point's part's field
        if fields is not None and name_g in fields.field_names:
            rows = [i for i, n in enumerate(fields.probe_names) if n == name_in]
            if rows:
                probes = world[t, 4 * fields.num_fields:][rows]
                near = [r for r, q in zip(rows, probes) if float((q - p).norm()) < BACK_RADIUS * float(tgt.height)]
                if near:
                    sd = su.surface_depths(fields, world[t:t + 1])[0]           # (Q, F)
                    back = float(sd[near, fields.field_names.index(name_g)].max())
        out.append((int(t), float(depth[t]), name_g, name_in, read, status, back))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--over", type=float, default=0.01, help="frames deeper than this share of the height")
    ap.add_argument("--source", action="store_true",
                    help="read the source's own clip on its own body (how deep the capture itself overlaps)")
    import bench_zoo
    import common
    bench_zoo.add_case_options(ap)
    common.add_variant_options(ap)
    args = ap.parse_args(argv)
    mods, loader, settings = common.variant_start(args)
    runs = bench_zoo.chosen_cases(args, mods, loader)
    for label, src, smo, tgt in runs:
        if args.source:             # the source onto itself: its own contacts, its own surfaces
            label, tgt, motion = f"{label}, the source on its own body", src, smo
        else:
            motion = common.retarget(mods, src, smo, tgt, settings, metrics=False).motion
        rows = depth_sources(common.core, src, smo, tgt, motion, args.over)
        h = float(tgt.height)
        print(f"== {label}: {len(rows)} frames with a contact depth over {100 * args.over:g} % of the height")
        for t, dep, g, inside, read, status, back in rows[:12]:
            r = "no field" if read is None else f"{1000 * read:.1f} mm"
            b = "" if back is None else f"; {inside}'s probes near it read {1000 * back:.1f} mm in {g}'s field"
            print(f"  frame {t:4d}  {1000 * dep:5.1f} mm ({100 * dep / h:.2f} %h)  {g} inside {inside}; "
                  f"its field reads {r} there: {status}{b}")
        for (g, inside, status), n in Counter((g, i, s) for _, _, g, i, _, s, _ in rows).most_common():
            print(f"  {n:4d} frames: {g} inside {inside}, {status}")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
