"""Where the self-contact barrier's time goes (docs/solver.md "Self barrier"): the issue 16 case (the Bandai
kick tiled to 300 frames onto mh_teen_girl, 'balanced', 1 thread) solved with ``w_self_barrier`` 0 and 1, twice each
in turn, with the seconds spent in the barrier's forward, its refreshes and their candidate searches, and how often
the key-vertex pairs, the barrier's candidates and its hot entries were searched again.

    .venv/bin/python tools/experiments/self_barrier_cost.py
"""

from __future__ import annotations

import importlib
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))


def main() -> int:
    import common
    import bench_artist
    mods, src, tgt, motion = bench_artist.issue_case(300, threads=1)
    rt, solver = mods["core.pipeline.retarget"], mods["core.solver"]
    barrier = importlib.import_module(f"{common.MODULE}.core.solver.barrier")
    spent = {}
    common.time_methods(spent, barrier.PartnerBarrier, "weighted", "_refresh", "_candidates")
    for w in (0.0, 1.0, 0.0, 1.0):
        settings = solver.SolverSettings.preset("balanced", num_threads=1, w_self_barrier=w)
        spent.clear()
        t0 = time.perf_counter()
        out = rt.run(rt.Retarget(src, motion, tgt, rt.RetargetOptions(settings=settings, metrics=False,
                                                                       conflicts=False)))
        seconds = time.perf_counter() - t0
        b = out.job.own_barrier
        pairs = out.job.objective.pairs
        extra = f"; key-vertex pair refreshes {pairs.refreshes}" + ("" if b is None else (
            f"; barrier forward {spent.get('PartnerBarrier.weighted', 0.0):.2f} s, refreshes {spent.get('PartnerBarrier._refresh', 0.0):.2f} s "
            f"(candidate searches {spent.get('PartnerBarrier._candidates', 0.0):.2f} s) on {b.refreshes} steps, "
            f"{sum(int(c[0].numel()) for c in b._cand)} candidates, {sum(int(h[0][0].numel()) for h in b._hot)} hot, "
            f"{b.last_entries} active entries at "
            f"the end, {b.block_refreshes} candidate and {b.hot_refreshes} hot-entry refreshes"))
        print(f"w_self_barrier {w:g}: {seconds:.2f} s{extra}; load average {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
