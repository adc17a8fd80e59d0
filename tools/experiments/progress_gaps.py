"""The seconds between consecutive progress Steps of a long retarget, up to its third solver step: what the
panel and the batch command show while copy-rotations, the solver's set-up and its first steps run.

    .venv/bin/python tools/experiments/progress_gaps.py [--frames 10000] [--threads 2] [--whole]

The bench's scaling clip (tools/bench/run.py SCALING) tiled to ``--frames``; metrics and conflicts off (they report
every 0.5 s and per term). Prints one line per Step: the seconds since the previous one, then its message.
``--whole``: the whole retarget instead (10 solver steps, then the metrics of the result and of copy-rotations and
the conflicts, as tools/bench/run.py --memory-child runs it), printing only the longest silent stretch per phase.
"""

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
import common  # noqa: E402  (tools/bench/run.py: the add-on, the loader, the scaling clip)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=10000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--whole", action="store_true", help="the whole retarget; the longest silence per phase")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    mods, src, smo, tgt = common.scaling_case(args.frames)
    rt = mods["core.pipeline.retarget"]
    settings = mods["core.solver"].SolverSettings(iterations=10, num_threads=args.threads)
    job = rt.Retarget(src, smo, tgt, rt.RetargetOptions(settings=settings, metrics=args.whole,
                                                       conflicts=args.whole))
    last = time.perf_counter()
    longest = {}                 # phase: (seconds, the message that ended the silence)
    for st in job.steps():
        now = time.perf_counter()
        if args.whole:
            if now - last > longest.get(st.phase, (0.0, ""))[0]:
                longest[st.phase] = (now - last, st.message)
        else:
            print(f"{now - last:6.2f} s  then: {st.message}", flush=True)
        last = now
        if not args.whole and st.message.startswith("Solving 3/"):
            break
    for phase, (gap, message) in longest.items():
        print(f"{phase:15s} longest silence {gap:6.2f} s, ended by: {message}")
    if args.whole:
        print({k: round(v, 1) for k, v in job.outcome.timings.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
