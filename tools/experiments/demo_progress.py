"""The solver's printed progress on `make demo`'s scene (Source -> one of its targets), step by step: the relative
objective (what the panel and the batch print) and each weighted term (docs/solver.md "Reading the progress").

    .venv/bin/python tools/demo.py --out /tmp/d2                 # builds /tmp/d2/demo.blend
    .venv/bin/python tools/experiments/demo_progress.py /tmp/d2/demo.blend ["{'warmup': 0.4}"] [--target TallThin]

Overrides are SolverSettings fields on the demo's 'fast' preset.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))

import render_docs as rd  # noqa: E402  (enables the add-on; imports bpy)
from render_docs import bpy, mod  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("blend")
    ap.add_argument("overrides", nargs="?", default="{}")
    ap.add_argument("--target", default="TallThin")
    ap.add_argument("--quality", default="fast")
    args = ap.parse_args(argv)
    rd.enable_addon()
    bpy.ops.wm.open_mainfile(filepath=args.blend)
    pipeline, setup_file = mod("reconform_addon.pipeline"), mod("reconform_addon.setup_file")
    overrides = ast.literal_eval(args.overrides)
    inputs = pipeline.read_inputs(bpy.data.objects["Source"], bpy.data.objects[args.target], method="reconform")
    job = pipeline.make_job(inputs, setup_file.setup_options("reconform", {"quality": args.quality, **overrides}, {}))
    print(f"Source -> {args.target}, {args.quality} {overrides}")
    print("step | relative to copy-rotations | weighted terms")
    for s in job.steps():
        p = s.solver
        if p is not None and (p.step < 3 or p.step % 6 == 0 or p.step == p.total - 1):
            print(f"{p.step} | {p.relative:.3f} | " + ", ".join(f"{k} {v:.2f}" for k, v in p.terms.items()),
                  flush=True)
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
