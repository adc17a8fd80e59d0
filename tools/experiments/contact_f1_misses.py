"""The key-vertex contact F1's misses on bench cases, read on the mesh: for each source contact that the target does
not hold by the F1's rule (a key-vertex pair within d_min = 5 % of h_c in the source, not in the target), how far
apart the pair is in both, and how far apart the target's two body parts are there (the smallest distance between
the skinned vertices of the parts the two key vertices belong to). A miss whose parts are within a few millimetres
is a contact the viewer sees held, with the key vertices farther apart than d_min on a thicker body; one whose parts
are far apart is a contact lost.

    OMP_NUM_THREADS=1 .venv/bin/python tools/experiments/contact_f1_misses.py [--cases 0 5] \\
        [--const core.MODULE.NAME=VALUE] [--set NAME=VALUE]

Cases are ``tools/bench/common.py``'s CASES (indices), balanced preset; ../shared/assets needed. Prints per case
ReConForM's F1, its misses per key-vertex pair (frames, mean distances as a share of each height, the parts' gap
per frame) and the share of missed frames whose parts are within 0.5, 1 and 2 % of the target's height; then the
same for its extra contacts (pairs within d_min in the target, not in the source: the F1's false positives).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))


def misses(mod, outcome, extra: bool = False) -> list:
    """[(pair name, frames (F,), source distance / h_s (F,), target distance / h_t (F,), parts' gap / h_t (F,))]
    of the source contacts ``outcome``'s result does not hold by the F1's rule, or with ``extra`` of the target's
    contacts the source does not have (the F1's false positives); ``mod(name)``: ``core.<name>``."""
    import torch
    meas, scores = mod("metrics.measures"), mod("metrics.scores")
    track, parts = mod("character.track"), mod("rig.parts")
    src, tgt = outcome.source, outcome.target
    skv, tkv = src.keyverts, tgt.keyverts
    order = [tkv.names.index(n) for n in skv.names]
    t_ids = np.asarray(tkv.vertex_ids)[order]
    ii, jj = np.nonzero(mod("descriptors.weights").allowed_pairs(skv.limbs, None, True))
    hs, ht = float(src.height), float(tgt.height)
    d_min = scores.CONTACT_FRACTION
    S = np.asarray(outcome.source_track.vertices(skv.vertex_ids))
    t_track = track.ClipTrack(tgt, outcome.motion)
    P = np.asarray(t_track.vertices(t_ids))
    in_source, in_target = meas.pairs_closer(S, ii, jj, d_min * hs), meas.pairs_closer(P, ii, jj, d_min * ht)
    missed = (in_target & ~in_source) if extra else (in_source & ~in_target)
    seg, _, _ = parts.vertex_segments(tgt.skeleton, tgt.mesh, tgt.bone_map)
    seg = np.asarray(seg)
    out = []
    for k in np.nonzero(missed.any(0))[0]:
        frames = np.nonzero(missed[:, k])[0]
        a, b = seg[t_ids[ii[k]]], seg[t_ids[jj[k]]]
        gap = np.full(len(frames), np.nan)
        if a >= 0 and b >= 0 and a != b:
            A = np.asarray(t_track.vertices(np.nonzero(seg == a)[0], frames=list(frames)))
            B = np.asarray(t_track.vertices(np.nonzero(seg == b)[0], frames=list(frames)))
            gap = torch.cdist(torch.as_tensor(A), torch.as_tensor(B)).flatten(1).amin(1).numpy() / ht
        out.append((f"{skv.names[ii[k]]} – {skv.names[jj[k]]}", frames,
                    np.linalg.norm(S[frames, ii[k]] - S[frames, jj[k]], axis=-1) / hs,
                    np.linalg.norm(P[frames, ii[k]] - P[frames, jj[k]], axis=-1) / ht, gap))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, nargs="+", default=[0, 5])
    import common
    common.add_variant_options(ap)
    args = ap.parse_args(argv)
    mods, loader, settings = common.variant_start(args)
    mod = common.core
    for case in args.cases:
        srel, trel, first, count = common.CASES[case]
        src, smo, _ = loader.source(srel, first, count)
        _, tgt, _ = loader.character(trel)
        o = common.retarget(mods, src, smo, tgt, settings)
        print(f"== {pathlib.Path(srel).stem} → {pathlib.Path(trel).stem}: contact F1 {o.metrics['contact_f1']:.3f} "
              f"(copy-rotations {o.reference['contact_f1']:.3f})")
        for extra, what in ((False, "missed"), (True, "extra")):
            rows = misses(mod, o, extra)
            rows.sort(key=lambda r: -len(r[1]))
            print(f"  {what} (F1's {'false positives' if extra else 'false negatives'}):")
            for name, frames, ds, dt, gap in rows:
                print(f"  {name:<40} {len(frames):4d} frames  source {100 * ds.mean():.1f} %h  target "
                      f"{100 * dt.mean():.1f} %h  parts' gap %h: " + " ".join(f"{100 * g:.1f}" for g in gap[:10])
                      + (" …" if len(gap) > 10 else ""))
            gaps = np.concatenate([r[4] for r in rows]) if rows else np.zeros(0)
            gaps = gaps[np.isfinite(gaps)]
            if len(gaps):
                print(f"  {what} frames {len(gaps)}: parts within 0.5 % h {np.mean(gaps <= 0.005):.0%}, "
                      f"1 % h {np.mean(gaps <= 0.01):.0%}, 2 % h {np.mean(gaps <= 0.02):.0%}")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
