"""A salsa couple solved jointly (or each alone) with SolverSettings variants: how far each target's head, neck,
chest and knee turn away from copy-rotations, and how high each one looks (docs/solver.md "Gaze").

    .venv/bin/python tools/experiments/partner_heads.py "[{'w_gaze': 0}, {}]" [--case 15]
        [--first 200] [--frames 240] [--alone]

Each variant is a dict of SolverSettings overrides on the 'balanced' preset; ``--alone`` solves each pair of the
couple by itself instead (the same placed start). Printed per target: the mean and largest angle (degrees) between
a bone's world rotation in the result and in copy-rotations, and the gaze's elevation (degrees above the horizon,
``core.contacts.gaze``'s direction from the three head key vertices) in the result, copy-rotations and the source: a
tall partner who looks down at a short one has a negative elevation; one who is made to keep a captured upward line
to a shorter partner's face has a positive one. Then the partner metrics of a joint solve.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import pathlib
import sys

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))

import common  # noqa: E402  (the bench's loader; enables the add-on)
import bench_partners as bp  # noqa: E402  (the partner bench's cases)

BONES = ("head", "neck", "chest", "left_lower_leg")


def angles(Ra: np.ndarray, Rb: np.ndarray) -> np.ndarray:
    """Angles (degrees) between rotation matrices Ra and Rb (..., 3, 3)."""
    R = np.swapaxes(Ra, -1, -2) @ Rb
    return np.degrees(np.arccos(np.clip((np.trace(R, axis1=-2, axis2=-1) - 1.0) / 2.0, -1.0, 1.0)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variants", help="Python list of dicts of SolverSettings overrides")
    ap.add_argument("--case", default="15", choices=("01", "05", "15"))
    ap.add_argument("--first", type=int, default=200, help="first clip frame (index)")
    ap.add_argument("--frames", type=int, default=240)
    ap.add_argument("--alone", action="store_true", help="solve each pair by itself")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    mods = bp.modules()
    rt, grp, track = mods["core.pipeline.retarget"], mods["core.pipeline.group"], mods["core.character.track"]
    gaze = importlib.import_module(f"{common.MODULE}.core.contacts.gaze")
    loader = common.Loader(mods, lambda s: None)
    label, lead, follow, t_lead, t_follow = next(c for c in bp.CASES if c[0].endswith(args.case))
    pairs = bp.load_pairs(loader, [(lead, t_lead, 0.0), (follow, t_follow, 0.0)], args.first, args.frames)
    print(f"{label}, clip frames {args.first}–{args.first + args.frames - 1}, "
          f"{'each pair alone' if args.alone else 'joint solve'}, load average {os.getloadavg()[0]:.1f}")

    def elevation(character, motion, setup):
        kp = torch.as_tensor(track.ClipTrack(character, motion).keyverts[0])
        d = gaze.gaze_directions(kp, setup, motion.fps).numpy()
        return np.degrees(np.arcsin(np.clip(d[:, 2], -1.0, 1.0)))

    for variant in ast.literal_eval(args.variants):
        settings = mods["core.solver"].SolverSettings.preset("balanced", num_threads=1, **variant)
        options = rt.RetargetOptions(settings=settings, conflicts=False)
        if args.alone:
            members, partner = [rt.run(rt.Retarget(*pair, options)) for pair in pairs], None
        else:
            out = grp.run_group(grp.RetargetGroup(pairs, options))
            members, partner = out.members, out.partner_metrics
        print(f"{variant}:")
        for (src, smo, _), m in zip(pairs, members):
            tgt, bm = m.target, m.target.bone_map
            Rr = track.ClipTrack(tgt, m.motion).world_rotations
            Rc = track.ClipTrack(tgt, m.init_motion).world_rotations
            turns = []
            for b in BONES:
                if b in bm:
                    a = angles(Rc[:, tgt.skeleton.index(bm[b])], Rr[:, tgt.skeleton.index(bm[b])])
                    turns.append(f"{b} {a.mean():.1f}/{a.max():.0f}°")
            g = gaze.gaze_setup(tgt)
            er, ec = elevation(tgt, m.motion, g), elevation(tgt, m.init_motion, g)
            es = elevation(src, smo, gaze.gaze_setup(src, smo))
            print(f"  {tgt.name}: turned from copy-rot (mean/max) " + ", ".join(turns)
                  + f"; gaze elevation mean/max {er.mean():+.0f}/{er.max():+.0f}° (copy-rot {ec.mean():+.0f}/"
                  f"{ec.max():+.0f}°, source {es.mean():+.0f}/{es.max():+.0f}°)")
        if partner is not None:
            print(f"  partner contact F1 {partner['partner_contact_f1']:.3f}, hand-to-partner error "
                  f"{100 * partner['hand_partner_error_mean']:.2f} % h, gaze error "
                  f"{partner['gaze_angle_error_mean']:.1f}°", flush=True)
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
