"""A couple retargeted onto copies of itself (the set-up of tests/core/test_group.py::
test_a_couple_retargeted_onto_itself_comes_back_as_the_source): how far each solve ends from the source, per
pair solved alone and jointly at several shares of the single solve's learning rates (``group.PARTNER_STEP``,
docs/solver.md "Multi-character", "Step size"); also the joint solve with the follow frozen.

    .venv/bin/python tools/experiments/group_step.py [--steps 1.0 0.8 0.7 0.5] [--frames 30]

Printed per row: key-vertex error to the source, max / mean in mm, lead then follow, and the largest
weighted L_dir between the characters over the steps (its scale is 1).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from dataclasses import replace

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.pipeline.copy_rotations import copy_rotations

from core.pipeline.placement import place_together  # noqa: E402
from core.solver import GroupSolveJob, SolveJob, SolverSettings, group  # noqa: E402
from core.character.track import ClipTrack  # noqa: E402
from tests.core.synth import couple  # noqa: E402


def errors(pairs, motions):
    out = []
    for (src, mo, tgt), m in zip(pairs, motions):
        e = np.linalg.norm(ClipTrack(tgt, m).keyverts[0] - ClipTrack(src, mo).keyverts[0], axis=-1) * 1e3
        out.append(f"{e.max():5.2f} / {e.mean():5.3f}")
    return "   ".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=float, nargs="+", default=[1.0, 0.8, 0.7, 0.5])
    ap.add_argument("--frames", type=int, default=30)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    a, ma, b, mb = couple(frames=args.frames)
    a2 = replace(a, skeleton=replace(a.skeleton, name="lead copy"))
    b2 = replace(b, skeleton=replace(b.skeleton, name="follow copy"))
    pairs = [(a, ma, a2), (b, mb, b2)]
    s = SolverSettings(num_threads=1)
    tracks = [ClipTrack(src, mo) for src, mo, _ in pairs]
    inits = place_together([(src, mo, tr, tgt, copy_rotations(src, mo, tgt, tr))
                            for (src, mo, tgt), tr in zip(pairs, tracks)])

    def members():
        return [SolveJob(src, mo, tgt, init, s, source_track=tr)
                for (src, mo, tgt), init, tr in zip(pairs, inits, tracks)]

    print("key-vertex error to the source, mm (max / mean): lead   follow;  largest partner L_dir")
    print(f"alone                   {errors(pairs, [m.run() for m in members()])}")
    default = group.PARTNER_STEP
    try:
        for step in args.steps + ["frozen"]:
            group.PARTNER_STEP = 1.0 if step == "frozen" else step
            job = GroupSolveJob(members())
            if step == "frozen":             # the follow does not move: only the lead corrects their terms
                job._setup()
                job.base_lrs[2:] = [0.0] * (len(job.base_lrs) - 2)
            res = job.run()
            worst = max(h.get("partner_dir", 0.0) for h in job.history)
            label = "together, follow frozen" if step == "frozen" else f"together at {step:.2f}x"
            print(f"{label:<24}{errors(pairs, res)};  {worst:.3g}")
    finally:
        group.PARTNER_STEP = default


if __name__ == "__main__":
    main()
