"""How the surface reach reads a source's hand touches against the mesh measure: on the source's own clip and body, the
hand-region touches of ``hand_contact_held`` (the hand's skin within ``hand_contacts.TOUCH_FRACTION`` of a region's,
vertex to vertex) beside the reach's reading of the same hand and region (its nearest probe to the fields of the
region's parts that the reach keeps a hand on), docs/solver.md "Surface contacts".

    OMP_NUM_THREADS=1 .venv/bin/python tools/experiments/touch_reads.py --cases 1 --zoo demo:big_head slash:big_head \\
        [--const core.MODULE.NAME=VALUE]

``--cases``, ``--zoo``: as ``case_lines.py`` (only the source is read; the target is not solved). Per case: the
measure's touches on the regions the reach reads (a fitted body's other hand and forearm, ``reach.FITTED_PARTS``; a
captured body's trunk, head and thighs, ``reach.PARTS``), the probes' reading there (p10 / p50 / p90, % of the height),
and at each probe threshold how many of those touches it finds and how many hand-region-frames it adds that the
measure reads as not touching.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))

#: the probe thresholds read (shares of the height)
THRESHOLDS = (0.005, 0.0075, 0.01, 0.015)


def touch_reads(core, character, motion) -> tuple:
    """(measure (T, 2, R) share of the height: each hand's gap to each of ``hand_contacts.REGIONS`` on the mesh
    measure, probes (T, 2, R): the reach's nearest probe to the region's kept parts, ``reach.hand_distances``, +inf
    where it reads none) of ``motion`` on ``character``. ``core``: ``common.core``."""
    sf, rc = core("solver.surface_fields"), core("solver.reach")
    hc, mv = core("metrics.hand_contacts"), core("metrics.mesh_volume")
    ClipTrack = core("character.track").ClipTrack
    T = motion.rotations.shape[0]
    margin = np.full(T, max(THRESHOLDS) * float(character.height))          # hand gaps read out to the widest threshold
    m = core("progress").drive(mv.mesh_measuring(ClipTrack(character, motion), None, 0.0, None, hand_margin=margin))
    measure = m.hand_gap / character.height
    fields = sf.surface_fields(character)
    read = None if fields is None else rc.hand_distances(fields, ClipTrack(character, motion))
    if read is None:
        raise SystemExit(f"{character.name}: no surface fields with hand probes to read")
    d, names, tested = read
    d = d.numpy()                                                                                  # (T, H, F)
    kept = rc.kept_parts(character)
    region = {bone: r for r, (_, bones) in enumerate(hc.REGIONS) for bone in bones}
    probes = np.full(measure.shape, np.inf)
    for h, hand in enumerate(names):
        for f, part in enumerate(fields.field_names):
            if rc.unsided(part) in kept and part in region and tested[h, f]:
                k = (slice(None), hc.HANDS.index(hand), region[part])
                probes[k] = np.minimum(probes[k], d[:, h, f])
    return measure, probes


def main(argv=None) -> int:
    import bench_zoo
    import common
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_zoo.add_case_options(ap)
    common.add_variant_options(ap)
    args = ap.parse_args(argv)
    mods, loader, _ = common.variant_start(args)
    hc = common.core("metrics.hand_contacts")
    for label, src, smo, _ in bench_zoo.chosen_cases(args, mods, loader):
        measure, probes = touch_reads(common.core, src, smo)
        read = np.isfinite(probes)
        touch = measure <= hc.TOUCH_FRACTION
        both = touch & read
        body = "fitted" if src.mesh.fitted else "captured"
        print(f"== {label} (the source's {body} body): {int(touch.sum())} touches on the mesh, "
              f"{int(both.sum())} on regions the reach reads")
        if both.any():
            p10, p50, p90 = np.percentile(probes[both], [10, 50, 90]) * 100
            print(f"  the probes' reading there: p10 {p10:.2f}, p50 {p50:.2f}, p90 {p90:.2f} % of the height")
        for x in THRESHOLDS:
            found = (probes <= x) & read
            print(f"  probes within {100 * x:.2f} %: {int((found & touch).sum())} of the {int(both.sum())} found, "
                  f"{int((found & ~touch).sum())} added")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
