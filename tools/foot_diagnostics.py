"""Foot diagnostics behind the foot-locked definition (docs/metrics.md) and the solver's floor settings
(docs/solver.md), on the bench cases (tools/bench.py CASES, ../shared/assets).

    .venv/bin/python tools/foot_diagnostics.py sources          # source foot-speed statistics per estimator
    .venv/bin/python tools/foot_diagnostics.py planted [CASE] ["{'root_init': 'copy'}"]

``sources``: per source clip, the share of foot-frames labelled locked under the raw one-frame speed and the
windowed speed (1/15 s and 1/5 s) at several thresholds, and the median speed of grounded feet.
``planted``: for one case (substring of the clip name, default the Bandai walk), the speed and height of the
foot key vertices on frames where the source's are planted (W_floor = 1, speed < 2 cm/s), for the source,
copy-rotations and ReConForM (with optional SolverSettings overrides), and the lowest-foot height on frames
where the source foot is grounded.
"""

from __future__ import annotations

import ast
import sys
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv):
    import numpy as np
    import torch
    from tools import bench
    torch.set_num_threads(2)
    mode = argv[0] if argv else "sources"
    mods = bench.enable_addon()
    import importlib
    met = importlib.import_module(f"{bench.MODULE}.core.metrics")
    loader = bench.Loader(mods, lambda s: None)
    if mode == "sources":
        print("source | fps | h_c | grounded share | grounded-foot median raw speed mm/s | locked share: "
              "raw<0.1%h/s, raw<1%h/s, win1/15<0.1%, win1/15<1%, win1/15<5%, win1/5<1%")
        for clip, _, first, count in bench.CASES:
            src, smo, _ = loader.source(clip, first, count)
            tr = met._track(src, smo, 0.0)
            h, fps = float(src.height), smo.fps
            g = np.abs(tr.foot_height) <= met.GROUNDED_FRACTION * h
            raw = tr.foot_speed
            w15 = met.foot_speed_windowed(tr, fps, 1 / 15)
            w5 = met.foot_speed_windowed(tr, fps, 1 / 5)
            med = np.median(raw[g[:, :-1]]) * 1e3 if g[:, :-1].any() else float("nan")
            shares = [np.mean(raw < 0.001 * h), np.mean(raw < 0.01 * h), np.mean(w15 < 0.001 * h),
                      np.mean(w15 < 0.01 * h), np.mean(w15 < 0.05 * h), np.mean(w5 < 0.01 * h)]
            print(f"{pathlib.Path(clip).stem} | {fps:.0f} | {h:.3f} | {g.mean():.2f} | {med:.1f} | "
                  + ", ".join(f"{x:.3f}" for x in shares), flush=True)
        return 0
    which = argv[1] if len(argv) > 1 else "walk_normal"
    overrides = ast.literal_eval(argv[2]) if len(argv) > 2 else {}
    clip, target, first, count = next(c for c in bench.CASES if which in c[0])
    src, smo, _ = loader.source(clip, first, count)
    _, tgt, _ = loader.character(target)
    solver = mods["core.solver"]
    init = mods["core.copy_rotations"].copy_rotations(src, smo, tgt)
    job = solver.SolveJob(src, smo, tgt, init, solver.SolverSettings.preset("balanced", num_threads=2, **overrides))
    out = job.run()
    with torch.no_grad():
        p, _ = job._forward()
    sliding = importlib.import_module(f"{bench.MODULE}.core.descriptors").sliding
    vs = job.src_vel.norm(dim=-1).numpy()
    wf = job.wf_src.numpy()[:-1]
    vi = sliding(job.p_init, job.fps).norm(dim=-1).numpy()
    vr = sliding(p, job.fps).norm(dim=-1).numpy()
    print(f"{pathlib.Path(clip).stem} -> {pathlib.Path(target).stem}, overrides {overrides}")
    print("key vertex | planted frames | median speed mm/s: source, copy-rot, ReConForM | "
          "median height cm: source, copy-rot, ReConForM")
    names = src.keyverts.names
    for nm in ("left_sole", "right_sole", "left_toe_tip", "right_toe_tip", "left_heel", "right_heel"):
        i = names.index(nm)
        m = (wf[:, i] > 0.99) & (vs[:, i] < 0.02)
        if m.sum() < 2:
            print(f"{nm} | 0 | (source never planted; lowest {float(job.src_h[:, i].min()) * 100:.1f} cm)")
            continue
        print(f"{nm} | {int(m.sum())} | {np.median(vs[m, i]) * 1e3:.1f}, {np.median(vi[m, i]) * 1e3:.1f}, "
              f"{np.median(vr[m, i]) * 1e3:.1f} | {np.median(job.src_h[:-1][m, i].numpy()) * 100:.1f}, "
              f"{np.median(job.p_init[:-1][m, i, 2].numpy()) * 100:.1f}, {np.median(p[:-1][m, i, 2].numpy()) * 100:.1f}")
    s_tr, a_tr, b_tr = met._track(src, smo, 0.0), met._track(tgt, init, 0.0), met._track(tgt, out, 0.0)
    g = np.abs(s_tr.foot_height) <= met.GROUNDED_FRACTION * float(src.height)
    for label, tr in (("copy-rot", a_tr), ("ReConForM", b_tr)):
        print(f"lowest-foot height on source-grounded frames, {label}: p10/p50/p90 cm "
              + "/".join(f"{x:.2f}" for x in np.percentile(tr.foot_height[g] * 100, [10, 50, 90])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
