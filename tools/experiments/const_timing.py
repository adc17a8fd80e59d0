"""Solve time with and without module constants, in one process: each chosen case is retargeted (no metrics)
with the defaults and with the ``--const`` values in turn, ``--repeat`` times each, and the solve's seconds are
printed with the ratio of the fastest of each (the machine's load moves both alike, docs/solver.md "Speed and
memory"). The solver's ``yield_steps`` are printed beside (docs/solver.md "The contact state yields to the self
barrier").

    .venv/bin/python tools/experiments/const_timing.py --cases 0 3 --zoo salsa_follow:long_arms \\
        --const core.solver.yielding.CONTACT_YIELDS_TO_BARRIER=False [--repeat 2]
"""

from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    import bench_zoo
    import common
    bench_zoo.add_case_options(ap)
    ap.add_argument("--const", action="append", default=[], metavar="MODULE.NAME=VALUE", required=True,
                    help="the module constants of the variant timed against the defaults (repeatable)")
    ap.add_argument("--set", action="append", default=[], help="a SolverSettings override for both runs")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    consts = args.const
    args.const = []
    mods, loader, settings = common.variant_start(args)
    variant = [(mod, attr, getattr(mod, attr), value) for _, mod, attr, value in common.module_constants(consts)]
    for label, src, smo, tgt in bench_zoo.chosen_cases(args, mods, loader):
        seconds, steps = {"defaults": [], "variant": []}, {}
        for _ in range(args.repeat):
            for which in ("defaults", "variant"):
                for mod, attr, default, value in variant:
                    setattr(mod, attr, value if which == "variant" else default)
                o = common.retarget(mods, src, smo, tgt, settings, metrics=False)
                seconds[which].append(o.solver_stats["solve_s"])
                steps[which] = o.solver_stats.get("yield_steps", 0)
        for mod, attr, default, _ in variant:
            setattr(mod, attr, default)
        d, v = min(seconds["defaults"]), min(seconds["variant"])
        print(f"{label}: solve {', '.join(f'{s:.1f}' for s in seconds['defaults'])} s with the defaults "
              f"({steps['defaults']} yielding steps), {', '.join(f'{s:.1f}' for s in seconds['variant'])} s with "
              f"the variant ({steps['variant']}); fastest defaults / variant {d / v:.2f}")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
