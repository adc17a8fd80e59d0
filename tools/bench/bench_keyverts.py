"""Key-vertex transfer speed (called by tools/bench/run.py; also runnable alone).

    .venv/bin/python tools/bench/bench_keyverts.py [--repeats 3]

Target: a 50 000-vertex character transfers in under 2 s on a 2-core CPU. The character is a
generated body (core.body, A-pose rest, so the T-posing through the bone map is part of the work) meshed
finely enough to have ~50k vertices; N = 41 and N = 96. Times are wall clock, warm (imports and the
template's own OT done once before), best and median of ``repeats`` runs; the machine may be shared.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def bench_keyverts(core=None, repeats: int = 3, out=print):
    """Run the key-vertex section. ``core(name)`` returns a core module (the add-on's when given)."""
    import importlib

    import numpy as np

    if core is None:
        sys.path.insert(0, str(ROOT))
        core = lambda name: importlib.import_module(name)  # noqa: E731
    body, kvm, types = core("core.body"), core("core.keyverts"), core("core.types")
    t = time.perf_counter()
    sk, mesh, bm = body.make_body(body.BodyParams(resolution=0.0044, name="bench50k"), pose="A")
    t_gen = time.perf_counter() - t
    ch = types.Character(sk, mesh, bm)
    out("")
    out(f"Key-vertex transfer (OT per limb), {mesh.num_verts} vertices, A-pose rest "
        f"(body generated in {t_gen:.1f} s):")
    out("")
    out("| N | best s | median s | target |")
    out("|---|---|---|---|")
    ok = True
    for n in (41, 96):
        kvm.transfer_keyverts(kvm.load_template(n).character, n, shortcut=False)  # warm: template self-OT
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            kv = kvm.transfer_keyverts(ch, n)
            times.append(time.perf_counter() - t)
        assert len(kv) == n
        best, med = min(times), float(np.median(times))
        ok &= med < 2.0
        out(f"| {n} | {best:.2f} | {med:.2f} | {'< 2 s: met' if med < 2.0 else '< 2 s: MISSED'} |")
    t = time.perf_counter()
    h = kvm.character_height(ch)
    out(f"\ncharacter_height: {h:.3f} m in {time.perf_counter() - t:.2f} s")
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    bench_keyverts(repeats=args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
