"""The joint solve of a salsa couple with solver variants side by side (docs/solver.md "Multi-character",
"Barrier"): its partner metrics, the mean of the two targets' own metrics, and its solve time.

    .venv/bin/python tools/experiments/barrier_weights.py --case 15 "[{'w_barrier': 0}, {}]" [--frames 720]

Each variant is a dict of SolverSettings overrides on the 'balanced' preset (1 thread); upper-case keys set the
module constants of ``core.solver.group`` and ``core.solver.partners`` of that name for the variant
('PARTNER_STEP': the members' step scale in a group, 'SCALE_CAP': the partner terms' scale cap). Every variant
starts from the same copy-rotations placed together (``bench_partners``' cases and clip range).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import pathlib
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))

import common  # noqa: E402  (the bench's loader; enables the add-on)
import bench_partners as bp  # noqa: E402  (the partner bench's cases and formatting)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variants", help="Python list of dicts of SolverSettings overrides")
    ap.add_argument("--case", default="15", choices=("01", "05", "15"))
    ap.add_argument("--frames", type=int, default=bp.FRAMES)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    mods = bp.modules()
    rt, grp = mods["core.pipeline.retarget"], mods["core.pipeline.group"]
    loader = common.Loader(mods, lambda s: None)
    label, lead, follow, t_lead, t_follow = next(c for c in bp.CASES if c[0].endswith(args.case))
    pairs = bp.load_pairs(loader, [(lead, t_lead, 0.0), (follow, t_follow, 0.0)], bp.FIRST, args.frames)
    cols = bp.PARTNER + tuple(f"own {k}" for k in bp.OWN)
    print(f"{label}: {pathlib.Path(t_lead).stem} & {pathlib.Path(t_follow).stem}, {args.frames} frames, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| variant | " + " | ".join(cols) + " | solve s |")
    consts = [importlib.import_module(f"{common.MODULE}.core.solver.{m}") for m in ("group", "partners")]
    defaults = {(mod, k): getattr(mod, k) for mod in consts for k in dir(mod) if k.isupper()}
    for variant in ast.literal_eval(args.variants):
        overrides = {k: v for k, v in variant.items() if not k.isupper()}
        for (mod, k), v in defaults.items():      # module constants: PARTNER_STEP, SCALE_CAP, ...
            setattr(mod, k, variant.get(k, v))
        settings = mods["core.solver"].SolverSettings.preset("balanced", num_threads=1, **overrides)
        t0 = time.perf_counter()
        out = grp.run_group(grp.RetargetGroup(pairs, rt.RetargetOptions(settings=settings, conflicts=False)))
        stats = out.solver_stats
        p = out.partner_metrics
        row = [bp.fmt(p[k], k) for k in bp.PARTNER]
        row += [bp.fmt(bp.mean([m.metrics[k] for m in out.members]), k) for k in bp.OWN]
        print(f"| {variant} | " + " | ".join(row) + f" | {stats.get('solve_s', time.perf_counter() - t0):.1f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
