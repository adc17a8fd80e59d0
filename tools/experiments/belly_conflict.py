"""The conflict list's constructed case (tests/core/test_conflicts.py: hands that meet in front of a big belly),
solved at several SolverSettings variants: each variant's conflicts at the list's threshold and at a looser one,
with their gradient cosines and scores (docs/solver.md "Conflicts").

    .venv/bin/python tools/experiments/belly_conflict.py "[{}, {'contact_state': 200.0}]" [--loose -0.3] [--flat] \
        [--belly 3] [--ahead 0.12] [--const core.MODULE.NAME=VALUE]

``--belly 3`` is the test's body (the default 2 is a milder one); ``--const`` sets a module constant of core for the run.

The balanced preset's 120 steps, 1 thread, as the test solves it.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="?", default="[{}]", help="a list of SolverSettings override dicts")
    ap.add_argument("--loose", type=float, default=-0.3, help="a second, looser cosine threshold")
    ap.add_argument("--flat", action="store_true", help="the same body without the belly (the test's nothing-to-trade)")
    ap.add_argument("--belly", type=float, default=2.0, help="the target's BodyParams.belly (the test's: 3)")
    ap.add_argument("--const", action="append", default=[], metavar="MODULE.NAME=VALUE")
    ap.add_argument("--ahead", type=float, default=None,
                    help="how far before the chest the hands meet, metres (default: the test's AHEAD)")
    args = ap.parse_args(argv)
    from tools.bench.common import set_constants
    set_constants(args.const, package="")
    import torch

    from core.body import BodyParams, make_body
    from core.character.complete import CharacterSpec, build_character
    from core.solver.conflicts import DEFAULT_THRESHOLD, detect_conflicts
    from core.pipeline.copy_rotations import copy_rotations
    from core.solver import SolveJob, SolverSettings
    from tests.core.test_conflicts import AHEAD, _hands_meet_in_front_of_the_belly

    torch.set_num_threads(1)
    src, motion = _hands_meet_in_front_of_the_belly(make_body(BodyParams(name="src", resolution=0.03), pose="T"),
                                                    AHEAD if args.ahead is None else args.ahead)
    belly = 0.0 if args.flat else args.belly
    sk, mesh, bm = make_body(BodyParams(name="target", resolution=0.03, belly=belly), pose="T")
    tgt = build_character(CharacterSpec(sk, mesh, bm), keyvert_count=41).character
    init = copy_rotations(src, motion, tgt)
    for variant in ast.literal_eval(args.variants):
        job = SolveJob(src, motion, tgt, init, SolverSettings(**{"num_threads": 1, **variant}))
        job.run()
        for threshold in (DEFAULT_THRESHOLD, args.loose):
            found = detect_conflicts(job, threshold=threshold)
            rows = "; ".join(f"{c.body_part} {c.term_a}/{c.term_b} cosine {c.cosine:.2f} score {c.score:.3f} "
                             f"frames {c.frames[0]}-{c.frames[1]}" for c in found[:4]) or "none"
            print(f"{variant} | threshold {threshold}: {rows}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
