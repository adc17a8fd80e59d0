"""What every section of `make bench` shares: the cases, the add-on enabled as Blender would, the asset loader,
the one retarget path, ``--set`` / ``--const`` parsing, clip tiling and the targets table.

Imported by ``run.py`` (the whole bench) and each ``bench_*.py`` section, and by ``tools/experiments``.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from settings_args import setting_overrides  # noqa: E402,F401  (the bench's --set, as the demo's)

ROOT = pathlib.Path(__file__).resolve().parents[2]
ASSETS = ROOT.parent / "shared" / "assets"
REPO_NAME = "reconform_bench"
MODULE = f"bl_ext.{REPO_NAME}.reconform"
#: (source clip, target character, first frame index, frame count or None for all)
CASES = [
    ("motions/NC_bandai_walk_normal_001.bvh", "characters/mh_male_heavy.glb", 0, None),
    ("motions/NC_bandai_slash_normal_001.bvh", "characters/mh_female_curvy_mixamorig.glb", 0, None),
    ("motions/NC_bandai_kick_normal_001.bvh", "characters/mh_teen_girl.glb", 0, None),
    ("motions/cmu_07_01_walk.fbx", "characters/mh_female_thin_tall.glb", 1, None),
    ("characters/mesh2motion_mannequin_ymca.glb", "characters/mh_male_muscular.glb", 0, None),
    ("motions/cmu_salsa_60_15_lead.bvh", "characters/mh_male_average.glb", 0, 1000),
]
SCALING = ("motions/NC_bandai_walk_giant_001.bvh", "characters/mh_female_average.glb", (75, 300, 1000, 3000))


def enable_addon():
    sys.path.insert(0, str(ROOT / "tools"))
    import retarget
    retarget.enable_addon(REPO_NAME)
    return {name: importlib.import_module(f"{MODULE}.{name}") for name in (
        "reconform_addon.bridge", "reconform_addon.pipeline", "core.pipeline.retarget", "core.solver", "core.types",
        "core.pipeline.windows", "core.character.track", "core.body")}


def core(name: str):
    """The enabled extension's module ``core.<name>`` (after ``enable_addon``)."""
    return importlib.import_module(f"{MODULE}.core.{name}")


class Loader:
    """Imports each asset once and keeps its Character (and Motion for sources)."""

    def __init__(self, mods, log):
        self.m = mods
        self.log = log
        self.cache = {}

    def character(self, rel):
        if rel not in self.cache:
            bridge, pipeline = self.m["reconform_addon.bridge"], self.m["reconform_addon.pipeline"]
            t = time.perf_counter()
            objs = bridge.import_file(str(ASSETS / rel))
            arm = bridge.find_armature(objs)
            ch = pipeline.prepare_character(arm, keyvert_count=41, fit_body=True)
            self.cache[rel] = (arm, ch, time.perf_counter() - t)
            self.log(f"  loaded {rel} ({time.perf_counter() - t:.1f} s)")
        return self.cache[rel]

    def source(self, rel, first=0, count=None):
        arm, ch, t_load = self.character(rel)
        key = ("motion", rel)
        if key not in self.cache:
            self.cache[key] = self.m["reconform_addon.bridge"].read_motion(arm, ch.skeleton)
        mo = self.cache[key]
        stop = mo.num_frames if count is None else min(mo.num_frames, first + count)
        return ch, mo.slice(first, stop), t_load


def time_methods(spent: dict, cls, *names, key=None):
    """Wrap the methods ``names`` of ``cls`` so that every call adds its seconds to ``spent['Cls.name']`` (the
    experiments that say where a solve's time goes); ``key(instance, name)``, when given, names the entry per call
    instead (None: not counted)."""
    for name in names:
        f = getattr(cls, name)
        default = f"{cls.__name__}.{name}"

        def wrapper(self, *a, _f=f, _name=name, _default=default, **kw):
            t = time.perf_counter()
            try:
                return _f(self, *a, **kw)
            finally:
                k = _default if key is None else key(self, _name)
                if k is not None:
                    spent[k] = spent.get(k, 0.0) + time.perf_counter() - t
        setattr(cls, name, wrapper)


def add_variant_options(ap):
    """``--const MODULE.NAME=VALUE`` (``set_constants``) and ``--set NAME=VALUE`` (a SolverSettings override) on an
    experiment's argument parser, read by ``variant_start``."""
    ap.add_argument("--const", action="append", default=[], metavar="MODULE.NAME=VALUE")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a SolverSettings override")


def variant_start(args) -> tuple:
    """An experiment's start from ``add_variant_options``' ``args``: torch on one thread, the add-on enabled, its
    constants set; returns (modules, a Loader, the balanced preset's SolverSettings on one thread with the
    overrides)."""
    import torch
    torch.set_num_threads(1)
    mods = enable_addon()
    set_constants(args.const)
    settings = mods["core.solver"].SolverSettings.preset("balanced", num_threads=1, **setting_overrides(args.set))
    return mods, Loader(mods, lambda s: None), settings


def module_constants(items, package: str = MODULE) -> list:
    """[(name, module, attribute, value)] of ``module.NAME=VALUE`` items (``VALUE`` a Python literal) on
    ``package.module``; stops naming a constant that the module lacks."""
    out = []
    for item in items:
        name, _, value = item.partition("=")
        module, _, attr = name.rpartition(".")
        mod = importlib.import_module(f"{package}.{module}" if package else module)
        if not hasattr(mod, attr):
            raise SystemExit(f"no module constant {name}")
        out.append((name, mod, attr, ast.literal_eval(value)))
    return out


def set_constants(items, package: str = MODULE):
    """Set each ``module.NAME=VALUE`` of ``items`` on ``package.module`` (``module_constants``: a variant of a
    module constant for a whole run, ``--const``); prints each."""
    for name, mod, attr, value in module_constants(items, package):
        setattr(mod, attr, value)
        print(f"{name} = {getattr(mod, attr)!r}")


def add_variant_arguments(ap):
    """``--set NAME=VALUE`` and ``--const core.MODULE.NAME=VALUE`` on the parser ``ap``: a variant of the solver for
    a section run alone (``variant_settings`` reads them)."""
    ap.add_argument("--set", action="append", default=[], help="solver setting override NAME=VALUE (repeatable)")
    ap.add_argument("--const", action="append", default=[], metavar="MODULE.NAME=VALUE",
                    help="module constant override, e.g. core.solver.surface_fields.PROBES=64 (repeatable)")


def variant_settings(solver, args):
    """``args``' quality preset at its threads with its ``--set`` overrides, once its ``--const`` constants are set
    (``add_variant_arguments``); ``solver``: the enabled extension's ``core.solver``."""
    set_constants(args.const)
    return solver.SolverSettings.preset(args.quality, num_threads=args.threads, **setting_overrides(args.set))


def tile(motion_cls, motion, frames):
    """The clip repeated (ping-pong, so it stays continuous) up to ``frames`` frames."""
    import numpy as np
    idx = []
    k = 0
    T = motion.num_frames
    while len(idx) < frames:
        idx.extend(range(T) if k % 2 == 0 else range(T - 1, -1, -1))
        k += 1
    idx = np.asarray(idx[:frames])
    return motion_cls(motion.rotations[idx], motion.locations[idx], motion.fps, motion.frame_start)


def scaling_case(frames: int, mods=None):
    """(mods, source, its clip tiled to ``frames`` frames, target) of the scaling line (``SCALING``), the add-on
    enabled when ``mods`` is None."""
    mods = mods or enable_addon()
    loader = Loader(mods, lambda s: None)
    src, smo, _ = loader.source(SCALING[0])
    _, tgt, _ = loader.character(SCALING[1])
    return mods, src, tile(mods["core.types"].Motion, smo, frames), tgt


def retarget(mods, src, smo, tgt, settings, metrics=True):
    """The one retarget path (core.pipeline.retarget, as the panel and the batch command run it) on prepared characters;
    returns its Outcome."""
    rt = mods["core.pipeline.retarget"]
    return rt.run(rt.Retarget(src, smo, tgt, rt.RetargetOptions(settings=settings, metrics=metrics,
                                                               conflicts=False)))


def _rss_kb(key="VmRSS:"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


def finish(out, lines, targets: dict, path, last_line: str):
    """The targets table ({label: (measured, pass)}) and ``last_line`` through ``out``, then every line written
    to ``path`` (markdown)."""
    out("| target | measured | pass |")
    out("|---|---|---|")
    for label, (value, ok) in targets.items():
        out(f"| {label} | {value} | {'PASS' if ok else 'FAIL'} |")
    out()
    out(last_line)
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)
