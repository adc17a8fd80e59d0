"""Where a joint solve's extra time goes (docs/solver.md "Multi-character", "Timing"): one joint solve of K
characters of `make bench`'s partner timing set (tools/bench/bench_partners.py FIVE, 600 frames), then the same
members solved separately, with the seconds spent in the barrier between the characters (and its candidate
refreshes), in the partner terms' forward pass, and in the characters' own self-contact barriers (jointly and
separately).

    .venv/bin/python tools/experiments/group_cost.py [--k 5] [--iterations 120] [--const GAZE_SLACK_DIST=0.03]
        [--set w_gaze=0] [--profile] [--split] [--ops]

One run of each in one process, 1 thread ('balanced'); the rest of the joint solve's extra time is the
backward pass through the terms between characters. The candidate searches (the own key-vertex pairs, the own
barriers' candidates and hot entries) are printed summed over the characters and per character, jointly and
separately: a character that searches far more often in the joint solve moves far more there. Runs on older checkouts
too (it wraps the methods by name). ``--split`` also prints, for the joint and the separate solves, the seconds in the
members' pose maps (``SolveJob._forward``), their own terms (``SolveJob.terms_at``, their own barrier included), the
terms and the barrier between the characters, and the backward passes: where the joint solve's extra time is. ``--ops``
counts the operations the joint and the separate solves dispatch, and prices the joint solve's extra ones at eager
torch's cost per operation on this CPU (``step_ops.floor_ms``): the part of the extra time that is dispatch, whatever
the arithmetic.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))


def _refreshes(partners) -> str:
    """the partner terms' candidate refreshes: of their pairs and of their gaze entries"""
    if partners is None:
        return "no terms between the characters"
    return f"{partners.pairs.refreshes} pair and {getattr(partners, 'gaze_refreshes', '?')} gaze refreshes"


def _counting(ops: dict):
    """A TorchDispatchMode adding every operation it sees to ``ops[mode.kind]``."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        kind = "joint"

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ops[self.kind] += 1
            return func(*args, **(kwargs or {}))
    return Count()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=5, choices=range(2, 6))
    ap.add_argument("--iterations", type=int, default=120)
    ap.add_argument("--profile", action="store_true", help="the joint solve under cProfile: the 30 costliest "
                    "functions by their own time, then by cumulative time")
    ap.add_argument("--split", action="store_true", help="seconds per part of the joint and the separate solves")
    ap.add_argument("--ops", action="store_true", help="count the operations the joint and the separate solves "
                    "dispatch (their seconds then include the counting: read the counts, not the times), and what "
                    "as many cost at eager torch's floor on this CPU (step_ops.py --floor)")
    ap.add_argument("--const", action="append", default=[], metavar="NAME=VALUE",
                    help="a module constant of core.solver.partners / barrier / group / core.contacts.partners for this run "
                         "(GAZE_SLACK_DEG, GAZE_SLACK_DIST, MARGIN, ...)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a SolverSettings field for both the joint and the separate solves (w_partner=0, ...)")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    import common
    fields = common.setting_overrides(args.set)
    import bench_partners as bp
    mods = bp.modules()
    loader = common.Loader(mods, lambda s: None)
    pairs = bp.load_pairs(loader, bp.FIVE[:args.k], bp.FIRST, 600)
    solver, cr = mods["core.solver"], mods["core.pipeline.copy_rotations"]
    barrier = importlib.import_module(f"{common.MODULE}.core.solver.barrier")
    partners = importlib.import_module(f"{common.MODULE}.core.solver.partners")
    for item in args.const:
        name, _, value = item.partition("=")
        owners = [m for m in (barrier, partners, importlib.import_module(f"{common.MODULE}.core.contacts.partners"),
                              importlib.import_module(f"{common.MODULE}.core.solver.group"))
                  if hasattr(m, name)]
        if not owners:
            raise SystemExit(f"no module constant {name}")
        for m in owners:
            setattr(m, name, float(value))
    tracks = [mods["core.character.track"].ClipTrack(s, m) for s, m, _ in pairs]
    inits = cr.place_together([(s, m, tr, t, cr.copy_rotations(s, m, t, tr))
                               for (s, m, t), tr in zip(pairs, tracks)])
    spent = {}
    common.time_methods(spent, partners.PartnerObjective, "weighted")

    def barrier_key(bar, name):       # the characters' own barriers apart from the one between them
        if not (bar.blocks and bar.blocks[0][0] == bar.blocks[0][1]):
            return f"PartnerBarrier.{name}"
        return "own barriers" if name == "weighted" else None   # an own barrier's searches are in its weighted()
    common.time_methods(spent, barrier.PartnerBarrier, "weighted", "_candidates", key=barrier_key)
    if args.split:
        import torch as _torch
        common.time_methods(spent, importlib.import_module(f"{common.MODULE}.core.solver.job").SolveJob, "_forward",
                           "terms_at")
        common.time_methods(spent, _torch.Tensor, "backward", key=lambda *_: "backward")
    settings = solver.SolverSettings.preset("balanced", num_threads=1, iterations=args.iterations, **fields)
    jobs = [solver.SolveJob(s, m, t, i, settings, source_track=tr) for (s, m, t), i, tr in zip(pairs, inits, tracks)]
    group = solver.GroupSolveJob(jobs, settings)
    ops = {"joint": 0, "separate": 0}
    count = _counting(ops) if args.ops else None
    if count is not None:
        count.kind = "joint"
        count.__enter__()
    t0 = time.perf_counter()
    if args.profile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.runcall(group.run)
        for key in ("tottime", "cumulative"):
            pstats.Stats(prof).sort_stats(key).print_stats(30)
    else:
        group.run()
    joint = time.perf_counter() - t0
    own_joint = spent.get("own barriers", 0.0)
    parts = ("SolveJob._forward", "SolveJob.terms_at", "own barriers", "PartnerObjective.weighted",
             "PartnerBarrier.weighted", "backward")
    split_joint = {k: spent.get(k, 0.0) for k in parts}       # the separate solves' seconds: what they add
    spent["own barriers"] = 0.0
    if count is not None:
        count.kind = "separate"
    t0 = time.perf_counter()
    alone = []
    for (s, m, t), i, tr in zip(pairs, inits, tracks):
        alone.append(solver.SolveJob(s, m, t, i, settings, source_track=tr))
        alone[-1].run()
    separate = time.perf_counter() - t0
    if count is not None:
        count.__exit__(None, None, None)

    def searches(members):
        """the members' own key-vertex pair refreshes, own barrier candidate and hot-entry refreshes (summed)"""
        bars = [m.own_barrier for m in members if m.own_barrier is not None]
        return (sum(m.objective.pairs.refreshes for m in members), sum(b.block_refreshes for b in bars),
                sum(b.hot_refreshes for b in bars))
    bar = group.barrier
    if bar is None:
        between = "no barrier between the characters"
    else:
        between = (f"barrier {spent.get('PartnerBarrier.weighted', 0.0):.1f} s (candidate searches "
                   f"{spent.get('PartnerBarrier._candidates', 0.0):.1f} s over {bar.refreshes} steps that refreshed, "
                   f"{bar.block_refreshes} pair refreshes of {len(bar.blocks)} pairs, "
                   f"{sum(int(c[0].numel()) for c in bar._cand if c is not None)} candidates and "
                   f"{sum(int(h[0][0].numel()) for h in bar._hot if h is not None)} hot entries at the end)")
    print(f"{' '.join(args.const + args.set) or 'defaults'}: K = {args.k}, 600 frames, {args.iterations} steps, "
          f"load average {os.getloadavg()[0]:.1f}: joint {joint:.1f} s, separate {separate:.1f} s "
          f"({joint / separate:.3f}x); {between}; partner terms' forward "
          f"{spent.get('PartnerObjective.weighted', 0.0):.1f} s ({_refreshes(group.partners)}); "
          f"the characters' own barriers {own_joint:.1f} s "
          f"jointly, {spent['own barriers']:.1f} s separately; own pair / barrier / hot-entry refreshes summed over "
          f"the characters {'/'.join(map(str, searches(jobs)))} jointly, {'/'.join(map(str, searches(alone)))} "
          "separately")
    per = lambda members: " ".join("/".join(map(str, searches([m]))) for m in members)     # noqa: E731
    print(f"  per character: {per(jobs)} jointly, {per(alone)} separately")
    if count is not None:
        import step_ops
        floor = step_ops.floor_ms(20000) / 20000          # milliseconds an operation
        extra = ops["joint"] - ops["separate"]
        print(f"operations dispatched (forward and backward, set-up included): joint {ops['joint']}, separate "
              f"{ops['separate']} ({ops['joint'] / max(ops['separate'], 1):.3f}x); the joint solve's "
              f"{extra} more at eager torch's floor ({1e3 * floor:.2f} µs an operation on this CPU): "
              f"{extra * floor / 1e3:.2f} s")
    if args.split:
        print("seconds per part, joint / separate (terms_at includes the own barriers):")
        for k in parts:
            alone_s = spent.get(k, 0.0) - (0.0 if k == "own barriers" else split_joint[k])
            print(f"  {k}: {split_joint[k]:.2f} / {alone_s:.2f}")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
