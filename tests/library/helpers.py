"""Helpers for the library tests: stand-in clips and characters, the stand-in job interpreter, a run."""

import io
import json
import os
import stat
import sys

from tests.conftest import ROOT
from tools.motion_library import inputs
from tools.motion_library.engines import LocalPool
from tools.motion_library.runner import Options, Runner

STAND_IN = ROOT / "tests" / "library" / "stand_in_job.py"
LIBRARY = ROOT / "tools" / "library.py"


def stand_in_python(tmp_path) -> str:
    """An executable that behaves as ``python tools/retarget.py ARGS`` would (tests/library/stand_in_job.py)."""
    path = tmp_path / "stand_in_python"
    path.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{STAND_IN}' \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def clip(folder, name, **spec):
    """A stand-in clip: its behaviour (tests/library/stand_in_job.py) as JSON in a .bvh file."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec))
    return str(path)


def character(folder, name):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"character {name}")
    return str(path)


def run(out, jobs, workers=2, options=None, engine=None):
    """Plan and run ``jobs`` into ``out`` on a local pool; (plan, summary, progress text)."""
    stream = io.StringIO()
    runner = Runner(str(out), jobs, options or Options(), stream=stream, tty=False)
    plan = runner.plan()
    summary = runner.run(plan, engine or LocalPool(workers))
    return plan, summary, stream.getvalue()


def jobs_for(clips, characters, setup=None):
    return inputs.glob_jobs(clips, characters, setup or {})


def events(out, kind=None):
    path = os.path.join(out, "library_log.jsonl")
    with open(path, encoding="utf-8") as f:
        evs = [json.loads(line) for line in f if line.strip()]
    return [e for e in evs if kind is None or e["event"] == kind]
