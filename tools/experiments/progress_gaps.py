"""The seconds between consecutive progress Steps of a long retarget, up to its third solver step: what the
panel and the batch command show while copy-rotations, the solver's set-up and its first steps run.

    .venv/bin/python tools/experiments/progress_gaps.py [--frames 10000] [--threads 2]

The bench's scaling clip (tools/bench/run.py SCALING) tiled to ``--frames``; metrics and conflicts off (they report
every 0.5 s and per term). Prints one line per Step: the seconds since the previous one, then its message.
"""

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import common  # noqa: E402  (tools/bench/run.py: the add-on, the loader, the scaling clip)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=10000)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    mods, src, smo, tgt = common.scaling_case(args.frames)
    rt = mods["core.pipeline.retarget"]
    settings = mods["core.solver"].SolverSettings(iterations=10, num_threads=args.threads)
    job = rt.Retarget(src, smo, tgt, rt.RetargetOptions(settings=settings, metrics=False, conflicts=False))
    last = time.perf_counter()
    for st in job.steps():
        now = time.perf_counter()
        print(f"{now - last:6.2f} s  then: {st.message}", flush=True)
        last = now
        if st.message.startswith("Solving 3/"):
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
