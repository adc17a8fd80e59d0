"""Fingerprints of short solves with the default settings and each quality preset, on synthetic characters: a
single pair (its source body as measured and as a fitted template), a warm-started re-solve of it (from the
result, and continuing the solve's optimiser), a couple's joint solve, and a walk up stairs (a terrain). Prints one
line per case: a SHA-256 of the result's rotations and root locations, and their largest absolute value.

Run it before and after a change that must not change results (a settings field turned into a module constant):
the lines must be identical. No assets needed; about two minutes on one thread::

    OMP_NUM_THREADS=1 .venv/bin/python tools/experiments/settings_fingerprint.py [--cases pair warm group terrain]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from dataclasses import replace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from core.body import SHORT_HEAVY, BodyParams, make_body  # noqa: E402
from core.character.complete import CharacterSpec, build_character  # noqa: E402
from core.character.track import ClipTrack  # noqa: E402
from core.contacts.terrain.shapes import stairs  # noqa: E402
from core.pipeline.copy_rotations import copy_rotations  # noqa: E402
from core.pipeline.placement import place_together  # noqa: E402
from core.pipeline.retarget import Retarget, RetargetOptions, run  # noqa: E402
from core.solver import GroupSolveJob, SolveJob, SolverSettings  # noqa: E402
from core.solver.settings import PRESETS  # noqa: E402
from core.types import Motion  # noqa: E402
from tests.core.synth import couple, facing, make_humanoid, walk_motion, with_face  # noqa: E402
from tools.make_demo_scene import walk_motion as demo_walk  # noqa: E402

THREADS = dict(num_threads=1)


def fingerprint(motion: Motion) -> str:
    """SHA-256 (first 16 hex digits) of the rotations and locations as float64, and their largest |value|."""
    rot, loc = np.asarray(motion.rotations, np.float64), np.asarray(motion.locations, np.float64)
    digest = hashlib.sha256(rot.tobytes() + loc.tobytes()).hexdigest()[:16]
    return f"{digest}  max|rot| {np.abs(rot).max():.9f}  max|loc| {np.abs(loc).max():.9f}"


def settings_variants(iterations=None):
    """{name: SolverSettings}: the defaults and every preset (``iterations`` overriding each when given)."""
    over = dict(THREADS, **({"iterations": iterations} if iterations else {}))
    out = {"default": SolverSettings(**over)}
    out.update({name: SolverSettings.preset(name, **over) for name in PRESETS})
    return out


def synth_pair():
    src = make_humanoid()
    tgt = make_humanoid(scale=0.8, girth=1.6, leg=0.8, name="tgt")
    m = walk_motion(src, frames=40, clap=True)
    ratio = tgt.skeleton.rest_global[0, 2, 3] / src.skeleton.rest_global[0, 2, 3]
    return src, m, tgt, Motion(m.rotations.copy(), m.locations * ratio, m.fps)


def case_pair():
    src, m, tgt, init = synth_pair()
    for name, s in settings_variants().items():
        yield f"pair {name}", SolveJob(src, m, tgt, init, s).run()
    fitted = replace(src, mesh=replace(src.mesh, fitted=True))
    yield "pair fitted-source fast", SolveJob(fitted, m, tgt, init, SolverSettings.preset("fast", **THREADS)).run()


def case_warm():
    src, m, tgt, init = synth_pair()
    s = SolverSettings.preset("fast", **THREADS)
    job = SolveJob(src, m, tgt, init, s)
    first = job.run()
    heavier = replace(s, w_dist=4.0)
    yield "warm re-solve", SolveJob(src, m, tgt, init, heavier, warm_start=first, warm_sixd=job.result_sixd()).run()
    yield "warm continued", SolveJob(src, m, tgt, init, heavier, warm_start=first, warm_sixd=job.result_sixd(),
                                     warm_state=job.optim).run()


def case_group():
    a, ma, b, mb = couple(frames=30)
    ta = with_face(make_humanoid(scale=1.25, girth=1.3, name="tall"))
    tb = with_face(make_humanoid(scale=0.8, name="short", object_matrix=facing(0.5 * np.pi, 3.0, 1.0)))
    tra, trb = ClipTrack(a, ma), ClipTrack(b, mb)
    inits = place_together([(a, ma, tra, ta, copy_rotations(a, ma, ta, tra)),
                            (b, mb, trb, tb, copy_rotations(b, mb, tb, trb))])
    for name, s in settings_variants().items():
        job = GroupSolveJob([SolveJob(a, ma, ta, inits[0], s, source_track=tra),
                             SolveJob(b, mb, tb, inits[1], s, source_track=trb)])
        for k, result in enumerate(job.run()):
            yield f"group {name} member {k}", result


def case_terrain():
    sk, mesh, bm = make_body(BodyParams(name="source"), pose="T")
    walk, _ = demo_walk(sk, mesh, steps=2)
    tsk, tmesh, tbm = make_body(SHORT_HEAVY, pose="T")
    src = build_character(CharacterSpec(sk, mesh, bm), keyvert_count=41).character
    tgt = build_character(CharacterSpec(tsk, tmesh, tbm), keyvert_count=41, need_mesh=True).character
    ground = stairs(start=(0.0, 0.5), direction=(0.0, -1.0), width=1.2, approach=0.3, steps=3, tread=0.3,
                    rise=0.17, landing=1.0)
    for name in ("default", "fast"):
        s = SolverSettings(**THREADS) if name == "default" else SolverSettings.preset(name, **THREADS)
        out = run(Retarget(src, walk, tgt, RetargetOptions(settings=s, ground=ground.surface, conflicts=False,
                                                           metrics=False, baseline_metrics=False)))
        yield f"terrain {name}", out.motion


CASES = {"pair": case_pair, "warm": case_warm, "group": case_group, "terrain": case_terrain}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    args = ap.parse_args(argv)
    for case in args.cases:
        for label, motion in CASES[case]():
            print(f"{label:28s} {fingerprint(motion)}", flush=True)


if __name__ == "__main__":
    main()
