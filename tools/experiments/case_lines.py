"""The bench's per-case target lines (``tools/bench/bench_targets.py``) and key-vertex contact F1 for chosen cases,
bench cases or morphology zoo cases, in under a minute each: a setting or constant checked on the cases it is meant
to change before the whole bench is run.

    OMP_NUM_THREADS=1 .venv/bin/python tools/experiments/case_lines.py [--cases 1] [--zoo slash:big_belly] \\
        [--const core.MODULE.NAME=VALUE] [--set NAME=VALUE]

``--cases``: ``tools/bench/common.py``'s CASES (indices); ``--zoo``: zoo cases as clip:body
(``tools/bench/bench_zoo.py``'s CLIPS and BODIES, the body without its ``zoo_`` prefix). Balanced preset, as the bench;
../shared/assets needed.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    import bench_targets
    import bench_zoo
    import common
    bench_zoo.add_case_options(ap)
    common.add_variant_options(ap)
    args = ap.parse_args(argv)
    mods, loader, settings = common.variant_start(args)
    for label, src, smo, tgt in bench_zoo.chosen_cases(args, mods, loader):
        t = time.perf_counter()
        o = common.retarget(mods, src, smo, tgt, settings)
        print(f"== {label} ({smo.num_frames} frames, {time.perf_counter() - t:.0f} s)")
        for line in bench_targets.case_targets(o.reference, o.metrics, float(src.height), float(tgt.height)):
            print(f"  {line.label} | {line.measured} | {'PASS' if line.passed else 'FAIL'}")
        print(f"  key-vertex contact F1 | {o.metrics['contact_f1']:.3f} (copy-rot {o.reference['contact_f1']:.3f})")
        st = o.solver_stats
        print(f"  solve {st.get('solve_s', float('nan')):.1f} s; the contact state yielded on "
              f"{st.get('yield_steps', 0)} steps, {st.get('yield_frames', 0)} frames over them")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
