"""A real character's own clip retargeted onto itself through the product's path (``core.pipeline.retarget``, as the
panel runs it): how far the result's joints end from the source's, and how high the solve lifts the hips against
where L_reg anchors them (docs/solver.md "The root's start").

    OMP_NUM_THREADS=1 .venv/bin/python tools/experiments/self_retarget.py \\
        [--character characters/mesh2motion_mannequin_ymca.glb] [--frames N] [--const core.MODULE.NAME=VALUE] \\
        [--set NAME=VALUE]

A self-retarget is no identity test on a real clip: the floor terms stand the character on the floor its feet track
(a capture's floor may drift; copy-rotations, placing the clip once, sinks with it), so the solve lifts it, and
what L_reg then charges to the limbs shows as joints that turn away from the source's. Prints the source's floor
(its tracked drift), the worst joints (largest angle to the source's over the frames, the frame, how many frames
are over 5°), the key vertices' distance to the source's (mean and largest), and the hips' rise per tenth of the
clip beside L_reg's anchor lift (``objective.Objective.reg_lift``; none where the source stands on one floor).
``--character``: a path under ../shared/assets whose file carries its own clip.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))

#: a joint is listed among the worst when it turns this far from the source's on some frame (degrees)
LISTED_DEG = 5.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--character", default="characters/mesh2motion_mannequin_ymca.glb",
                    help="a character file with its own clip, under ../shared/assets")
    ap.add_argument("--frames", type=int, default=None, help="the clip's first N frames (default: all)")
    ap.add_argument("--joints", type=int, default=6, help="worst joints listed")
    import common
    from bench_gpu import angles_deg
    common.add_variant_options(ap)
    args = ap.parse_args(argv)
    mods, loader, settings = common.variant_start(args)
    import torch
    src, motion, _ = loader.source(args.character, 0, args.frames)
    o = common.retarget(mods, src, motion, src, settings, metrics=False)
    job = o.job
    ang = angles_deg(o.motion.rotations, motion.rotations)
    level = np.asarray(job.source_ground_level)
    drift = f"tracked, {1000 * level.min():+.1f} to {1000 * level.max():+.1f} mm" if level.ndim else \
        f"one level, {1000 * float(level):+.1f} mm"
    print(f"{args.character}, {motion.num_frames} frames: the source's floor {drift}")
    print(f"joints: the largest angle to the source's {ang.max():.2f}°, mean {ang.mean():.3f}°")
    for k in np.argsort(-ang.max(0))[:args.joints]:
        if ang[:, k].max() < LISTED_DEG and k != int(np.argmax(ang.max(0))):
            break
        print(f"  {src.skeleton.names[k]}: {ang[:, k].max():.2f}° at frame {int(ang[:, k].argmax())}, over "
              f"{LISTED_DEG:g}° on {int((ang[:, k] > LISTED_DEG).sum())} of {len(ang)} frames")
    with torch.no_grad():
        p, _, _ = job._forward()
        rise = job._root_world[:, 2].double().cpu().numpy()
    dk = (p - job.objective.src_p).norm(dim=-1).double().cpu().numpy()
    print(f"key vertices from the source's: mean {1000 * dk.mean():.1f} mm, largest {1000 * dk.max():.1f} mm")
    lift = job.objective.reg_lift
    tenths = np.unique(np.linspace(0, len(rise) - 1, 11).round().astype(int))
    print("hips' rise from copy-rotations (mm) at frames " + ", ".join(str(t) for t in tenths) + ": "
          + ", ".join(f"{1000 * rise[t]:.1f}" for t in tenths))
    if lift is not None:
        lz = lift[:, 2].double().cpu().numpy()
        print("L_reg's anchor lift (mm) there: " + ", ".join(f"{1000 * lz[t]:.1f}" for t in tenths))
    else:
        print("L_reg's anchor lift: none")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
