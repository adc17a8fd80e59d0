"""Foot and jerk diagnostics on the bench cases (tools/bench/run.py CASES, ../shared/assets), behind the
foot-locked definition (docs/metrics.md) and the solver's floor and smoothness settings (docs/solver.md).

    .venv/bin/python tools/experiments/diagnostics.py feet-sources
    .venv/bin/python tools/experiments/diagnostics.py feet-planted [CASE] ["{'w_sliding': 1.0}"]
    .venv/bin/python tools/experiments/diagnostics.py jerk [CASE] ["{'w_smooth': 1.0}"] [--max-frames 400]
    .venv/bin/python tools/experiments/diagnostics.py progress [CASE] [OVERRIDES] [--every 10]
    .venv/bin/python tools/experiments/diagnostics.py conflicts [CASE] [--max-frames 300]
    .venv/bin/python tools/experiments/diagnostics.py soles
    .venv/bin/python tools/experiments/diagnostics.py contacts [CASE] [OVERRIDES] [--max-frames 300]
    .venv/bin/python tools/experiments/diagnostics.py self-pen [CASE] [OVERRIDES] [--max-frames 300]
    .venv/bin/python tools/experiments/diagnostics.py floor [CASE] [OVERRIDES] [--max-frames 1000]
    .venv/bin/python tools/experiments/diagnostics.py locked [CASE] [OVERRIDES] [--max-frames 1000] [--around 6]

``feet-sources``: per source clip, the share of foot-frames labelled locked under the raw one-frame speed and
the windowed speed (1/15 s and 1/5 s) at several thresholds, and the median speed of grounded feet.
``feet-planted``: for one case (a substring of the clip name; default the Bandai walk), the speed and height
of the foot key vertices on frames where the source's are planted (W_floor = 1, speed < 2 cm/s), for the
source, copy-rotations and ReConForM (with optional SolverSettings overrides), and the lowest-foot height on
frames where the source foot is grounded.
``jerk``: for one case (default the Bandai kick), the mean jerk per unit of height (m/s³ / h_c) of each core
bone both characters map, for the source, copy-rotations and ReConForM, how ReConForM's change splits
between joints it brings closer to the source's jerk and the others, and the same mean over the key vertices (the
same surface points on both bodies, wherever each skeleton puts its joints).
``progress``: for one case (default the Bandai walk), the solver's printed progress per step: the raw loss (the
weighted sum of the terms, whose meaning changes with α), the objective relative to copy-rotations' at the same α
(``Progress.relative``, what the panel and the batch print) and each weighted term (docs/solver.md "Reading the
progress").
``soles``: per skeleton-only clip, its fitted body's planted soles above z = 0 (docs/metrics.md "Fitted bodies").
``conflicts``: for one case (default the Bandai kick), how many conflicts the solve lists (one per body part
and term pair) and their frame spans in all, and the costliest six (docs/solver.md "Conflicts").
``contacts``: for one case (default the CMU walk), the key-vertex contact F1 of copy-rotations and ReConForM split
by limb pair: true positives, false positives (the target touches where the source does not), false negatives (a
source contact lost), and the median target distance of the lost ones as a share of d_min (docs/metrics.md).
``self-pen``: for one case (default the salsa), where the self-penetration is: the mean area share of each
segment's surface inside each other segment's capsule (docs/metrics.md), the largest eight, for the source,
copy-rotations and ReConForM.
``floor``: for one case (default the salsa), what goes under the target's floor: for copy-rotations and ReConForM,
the frames with any mesh vertex under it and the deepest one, the solve's sole points' lowest height, each foot's
toe bend, and every burst of frames where a sole point is more than 1 mm under, with the source foot's contact
weight and height there (docs/solver.md "Floor terms").
``locked``: for one case (default the CMU walk), what its foot-locked F1 is an F1 of: per foot, the source's locked
frames (windowed speed under 1 % h/s, docs/metrics.md), copy-rotations' and ReConForM's true positives, false
positives and false negatives, and each run of ReConForM's misses with the source's and the target's speeds
(% h/s) and the solve's lock weight there (docs/solver.md "What meets the targets"); with ``--around N`` the
source's and ReConForM's speeds frame by frame from N frames before each run to N after it.
Every retarget goes through core.pipeline.retarget, as the product's.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys
import types

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _case(loader, bench, which, max_frames=None):
    clip, target, first, count = next(c for c in bench.CASES if which in c[0])
    src, smo, _ = loader.source(clip, first, count)
    if max_frames:
        smo = smo.slice(0, min(smo.num_frames, max_frames))
    _, tgt, _ = loader.character(target)
    return clip, target, src, smo, tgt


def _retarget(mods, src, smo, tgt, overrides, threads):
    rt, solver = mods["core.pipeline.retarget"], mods["core.solver"]
    settings = solver.SolverSettings.preset("balanced", num_threads=threads, **overrides)
    return rt.run(rt.Retarget(src, smo, tgt, rt.RetargetOptions(settings=settings, metrics=False, conflicts=False)))


def feet_sources(mods, loader, bench, met, track_cls):
    import numpy as np
    print("source | fps | h_c | grounded share | grounded-foot median raw speed mm/s | locked share: "
          "raw<0.1%h/s, raw<1%h/s, win1/15<0.1%, win1/15<1%, win1/15<5%, win1/5<1%")
    for clip, _, first, count in bench.CASES:
        src, smo, _ = loader.source(clip, first, count)
        ms = met.measure(track_cls(src, smo), 0.0)
        h, fps = float(src.height), smo.fps
        g = np.abs(ms.foot_height) <= met.GROUNDED_FRACTION * h
        raw = ms.foot_step_speed
        w15 = met.foot_speed_windowed(ms, fps, 1 / 15)
        w5 = met.foot_speed_windowed(ms, fps, 1 / 5)
        med = np.median(raw[g[:, :-1]]) * 1e3 if g[:, :-1].any() else float("nan")
        shares = [np.mean(raw < 0.001 * h), np.mean(raw < 0.01 * h), np.mean(w15 < 0.001 * h),
                  np.mean(w15 < 0.01 * h), np.mean(w15 < 0.05 * h), np.mean(w5 < 0.01 * h)]
        print(f"{pathlib.Path(clip).stem} | {fps:.0f} | {h:.3f} | {g.mean():.2f} | {med:.1f} | "
              + ", ".join(f"{x:.3f}" for x in shares), flush=True)


def feet_planted(mods, loader, bench, met, track_cls, which, overrides, threads):
    import importlib

    import numpy as np
    import torch
    sliding = importlib.import_module(f"{bench.MODULE}.core.descriptors.pose").sliding
    clip, target, src, smo, tgt = _case(loader, bench, which)
    o = _retarget(mods, src, smo, tgt, overrides, threads)
    job, ob = o.job, o.job.objective
    with torch.no_grad():
        p, _, _ = job._forward()
    vs = ob.src_vel.norm(dim=-1).numpy()
    wf = ob.wf_src.numpy()[:-1]
    vi = sliding(job.p_init, job.fps).norm(dim=-1).numpy()
    vr = sliding(p, job.fps).norm(dim=-1).numpy()
    print(f"{pathlib.Path(clip).stem} -> {pathlib.Path(target).stem}, overrides {overrides}")
    print("key vertex | planted frames | median speed mm/s: source, copy-rot, ReConForM | "
          "median height cm: source, copy-rot, ReConForM")
    names = src.keyverts.names
    for nm in ("left_sole", "right_sole", "left_toe_tip", "right_toe_tip", "left_heel", "right_heel"):
        i = names.index(nm)
        m = (wf[:, i] > 0.99) & (vs[:, i] < 0.02)
        if m.sum() < 2:
            print(f"{nm} | 0 | (source never planted; lowest {float(ob.src_h[:, i].min()) * 100:.1f} cm)")
            continue
        print(f"{nm} | {int(m.sum())} | {np.median(vs[m, i]) * 1e3:.1f}, {np.median(vi[m, i]) * 1e3:.1f}, "
              f"{np.median(vr[m, i]) * 1e3:.1f} | {np.median(ob.src_h[:-1][m, i].numpy()) * 100:.1f}, "
              f"{np.median(job.p_init[:-1][m, i, 2].numpy()) * 100:.1f}, {np.median(p[:-1][m, i, 2].numpy()) * 100:.1f}")
    s_ms = met.measure(o.source_track, 0.0)
    g = np.abs(s_ms.foot_height) <= met.GROUNDED_FRACTION * float(src.height)
    for label, motion in (("copy-rot", o.init_motion), ("ReConForM", o.motion)):
        ms = met.measure(track_cls(o.target, motion), 0.0)
        print(f"lowest-foot height on source-grounded frames, {label}: p10/p50/p90 cm "
              + "/".join(f"{x:.2f}" for x in np.percentile(ms.foot_height[g] * 100, [10, 50, 90])))


def jerk(mods, loader, bench, met, track_cls, which, overrides, threads, max_frames):
    import numpy as np
    clip, target, src, smo, tgt = _case(loader, bench, which, max_frames)
    o = _retarget(mods, src, smo, tgt, overrides, threads)
    measures = {"source": (met.measure(o.source_track, 0.0), float(src.height)),
                "copy-rot": (met.measure(track_cls(o.target, o.init_motion), 0.0), float(tgt.height)),
                "ReConForM": (met.measure(track_cls(o.target, o.motion), 0.0), float(tgt.height))}
    common = [n for n in measures["copy-rot"][0].joint_names if n in measures["source"][0].joint_names]
    per = {}
    for label, (ms, h) in measures.items():
        cols = [ms.joint_names.index(n) for n in common]
        per[label] = met.jerk_magnitude(ms.joints[:, cols], smo.fps).mean(0) / h      # (J,)
    print(f"{pathlib.Path(clip).stem} -> {pathlib.Path(target).stem}, {smo.num_frames} frames at {smo.fps:g} "
          f"fps, overrides {overrides}")
    print("joint | source | copy-rot | ReConForM | ReConForM − copy-rot  (mean jerk / h_c, 1/s³)")
    for j, name in enumerate(common):
        s, a, b = (per[k][j] for k in ("source", "copy-rot", "ReConForM"))
        print(f"{name} | {s:.1f} | {a:.1f} | {b:.1f} | {b - a:+.1f}")
    s, a, b = (per[k] for k in ("source", "copy-rot", "ReConForM"))
    print(f"mean | {s.mean():.1f} | {a.mean():.1f} | {b.mean():.1f} | {b.mean() - a.mean():+.1f}  "
          f"(ratio to the source: copy-rot {a.mean() / s.mean():.3f}, ReConForM {b.mean() / s.mean():.3f})")
    toward = np.abs(b - s) < np.abs(a - s)
    d = b - a
    print(f"change over copy-rot, summed over joints: {d.sum():+.1f}; on the {int(toward.sum())} joints it brings "
          f"closer to the source's jerk {d[toward].sum():+.1f}, on the {int((~toward).sum())} others "
          f"{d[~toward].sum():+.1f}")
    # the key vertices: the same surface points on both bodies, wherever each skeleton puts its joints
    kv = {"source": (o.source_track.keyverts[0], float(src.height)),
          "copy-rot": (track_cls(o.target, o.init_motion).keyverts[0], float(tgt.height)),
          "ReConForM": (track_cls(o.target, o.motion).keyverts[0], float(tgt.height))}
    kj = {k: met.jerk_magnitude(p, smo.fps).mean() / h for k, (p, h) in kv.items()}
    print(f"key vertices ({kv['source'][0].shape[1]}), mean jerk / h_c: source {kj['source']:.1f}, copy-rot "
          f"{kj['copy-rot']:.1f}, ReConForM {kj['ReConForM']:.1f} (ratio to the source: copy-rot "
          f"{kj['copy-rot'] / kj['source']:.3f}, ReConForM {kj['ReConForM'] / kj['source']:.3f})")


def progress(mods, loader, bench, which, overrides, threads, every):
    clip, target, src, smo, tgt = _case(loader, bench, which)
    rt, solver = mods["core.pipeline.retarget"], mods["core.solver"]
    settings = solver.SolverSettings.preset("balanced", num_threads=threads, **overrides)
    job = rt.Retarget(src, smo, tgt, rt.RetargetOptions(settings=settings, metrics=False, conflicts=False))
    print(f"{pathlib.Path(clip).stem} -> {pathlib.Path(target).stem}, {smo.num_frames} frames, overrides "
          f"{overrides}")
    print("step | alpha | raw loss | relative to copy-rotations | weighted terms")
    for st in job.steps():
        p = st.solver
        if p is not None and (p.step % every == 0 or p.step == p.total - 1):
            a = p.step / max(p.total - 1, 1)
            print(f"{p.step} | {a:.2f} | {p.loss:.3f} | {p.relative:.3f} | "
                  + ", ".join(f"{k} {v:.3f}" for k, v in p.terms.items()))
    s0, sh, s1 = job.job.start_loss
    print(f"copy-rotations' objective: {s0:.3f} at alpha 0, {sh:.3f} at alpha 0.5, {s1:.3f} at alpha 1")


def conflicts(mods, loader, bench, which, overrides, threads, max_frames):
    clip, target, src, smo, tgt = _case(loader, bench, which, max_frames)
    rt, solver = mods["core.pipeline.retarget"], mods["core.solver"]
    settings = solver.SolverSettings.preset("balanced", num_threads=threads, **overrides)
    o = rt.run(rt.Retarget(src, smo, tgt, rt.RetargetOptions(settings=settings, metrics=False)))
    cs = o.conflicts
    print(f"{pathlib.Path(clip).stem} -> {pathlib.Path(target).stem}, {smo.num_frames} frames: {len(cs)} conflicts "
          f"(one per body part and term pair), {sum(len(c.spans) for c in cs)} frame spans in all")
    for c in cs[:6]:
        print(f"{c.body_part} | {c.term_a} / {c.term_b} | cost {c.score:.2f} | worst cosine {c.cosine:.2f} | "
              + ", ".join(f"{a}-{b}" for a, b in c.spans))


def contacts(mods, loader, bench, which, overrides, threads, max_frames):
    import importlib
    from collections import defaultdict

    import numpy as np
    ms_mod = importlib.import_module(f"{bench.MODULE}.core.metrics.measures")
    met = importlib.import_module(f"{bench.MODULE}.core.metrics.scores")
    allowed = importlib.import_module(f"{bench.MODULE}.core.descriptors.weights").allowed_pairs
    track_cls = importlib.import_module(f"{bench.MODULE}.core.character.track").ClipTrack
    clip, target, src, smo, tgt = _case(loader, bench, which, max_frames)
    o = _retarget(mods, src, smo, tgt, overrides, threads)
    kv_s, kv_t = src.keyverts, o.target.keyverts
    order = [kv_t.names.index(n) for n in kv_s.names]
    ii, jj = np.nonzero(allowed(kv_s.limbs, None, True))
    limbs = np.asarray(kv_s.limbs)
    hs, ht = float(src.height), float(o.target.height)
    s_kv = ms_mod.measure(o.source_track, 0.0, kv_s.vertex_ids).keyverts
    dist = lambda p: np.linalg.norm(p[:, jj] - p[:, ii], axis=-1)           # (T, P)
    d_s = dist(s_kv) / (met.CONTACT_FRACTION * hs)                            # share of the source's d_min
    truth = d_s < 1
    print(f"{pathlib.Path(clip).stem} -> {pathlib.Path(target).stem}, {smo.num_frames} frames, overrides "
          f"{overrides}; source contacts {int(truth.sum())} pair-frames on {int(truth.any(0).sum())} pairs")
    for label, motion in (("copy-rot", o.init_motion), ("ReConForM", o.motion)):
        t_kv = ms_mod.measure(track_cls(o.target, motion), 0.0, kv_t.vertex_ids[order]).keyverts
        d = dist(t_kv) / (met.CONTACT_FRACTION * ht)                          # share of the target's d_min
        pred = d < 1
        tp, fp, fn = (truth & pred).sum(), (~truth & pred).sum(), (truth & ~pred).sum()
        print(f"{label}: F1 {2 * tp / max(2 * tp + fp + fn, 1):.3f}, precision {tp / max(tp + fp, 1):.3f}, "
              f"recall {tp / max(tp + fn, 1):.3f} (tp {tp}, fp {fp}, fn {fn})")
        rows = defaultdict(lambda: [0, 0, 0, [], [], []])
        for p in range(len(ii)):
            key = " / ".join(sorted((limbs[ii[p]], limbs[jj[p]])))
            r = rows[key]
            r[0] += int((truth[:, p] & pred[:, p]).sum())
            r[1] += int((~truth[:, p] & pred[:, p]).sum())
            lost = truth[:, p] & ~pred[:, p]
            r[2] += int(lost.sum())
            r[3].extend(d[lost, p].tolist())
            false = ~truth[:, p] & pred[:, p]
            r[4].extend(d_s[false, p].tolist())
            r[5].extend(d[false, p].tolist())
        print("  limb pair | tp | fp | fn | lost: median target distance / d_min | false: median source, target "
              "distance / d_min")
        med = lambda x: np.median(x) if x else float("nan")
        for key, (a, b, c, lost, fs, ft) in sorted(rows.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[:6]:
            print(f"  {key} | {a} | {b} | {c} | {med(lost):.2f} | {med(fs):.2f}, {med(ft):.2f}")


def self_pen(mods, loader, bench, which, overrides, threads, max_frames):
    import importlib

    import numpy as np
    ms_mod = importlib.import_module(f"{bench.MODULE}.core.metrics.measures")
    track_cls = importlib.import_module(f"{bench.MODULE}.core.character.track").ClipTrack
    clip, target, src, smo, tgt = _case(loader, bench, which, max_frames)
    o = _retarget(mods, src, smo, tgt, overrides, threads)
    print(f"{pathlib.Path(clip).stem} -> {pathlib.Path(target).stem}, {smo.num_frames} frames, overrides {overrides}")
    for label, track in (("source", o.source_track), ("copy-rot", track_cls(o.target, o.init_motion)),
                         ("ReConForM", track_cls(o.target, o.motion))):
        bones, parts = ms_mod.self_pen_parts(track)
        order = np.argsort(parts, axis=None)[::-1][:8]
        print(f"{label}: {100 * parts.sum():.3f} % in all (pairs summed) | "
              + ", ".join(f"{bones[k // len(bones)]} in {bones[k % len(bones)]} {100 * parts.flat[k]:.3f} %"
                          for k in order if parts.flat[k] > 0))


#: skeleton-only clips whose fitted bodies' soles ``soles`` reads
SOLE_CLIPS = ("NC_bandai_walk_normal_001.bvh", "NC_bandai_kick_normal_001.bvh", "NC_bandai_slash_normal_001.bvh",
              "NC_bandai_walk_giant_001.bvh", "cmu_07_01_walk.fbx", "cmu_salsa_60_15_lead.bvh")


def soles(mods, loader, bench, track_cls):
    """Per skeleton-only clip, its fitted body's lowest foot vertex above z = 0 on the frames where that foot is
    planted (slower than 1 % h_c/s, within 3 % h_c of the tracked floor), and the ankle joint's height there."""
    import importlib

    import numpy as np
    ground = importlib.import_module(f"{bench.MODULE}.core.contacts.ground")
    feet = importlib.import_module(f"{bench.MODULE}.core.contacts.feet")
    print("clip | h_c m | estimated floor cm | tracked floor range cm | per foot: planted frames, lowest foot "
          "vertex above z = 0 p10 / median cm, ankle joint median cm")
    for name in SOLE_CLIPS:
        ch, clip, _ = loader.source("motions/" + name)
        tr = track_cls(ch, clip)
        h, P = float(ch.height), tr.world_positions
        level = ground.track_ground(tr)
        lo, hi = feet.window_bounds(clip.num_frames, clip.fps)
        cells = []
        for k, side in enumerate(feet.SIDES):
            F = tr.foot_points[k]
            v = F[..., 2].argmin(1)
            low = F[np.arange(len(v)), v, 2]
            speed = np.linalg.norm(F[hi, v, :2] - F[lo, v, :2], axis=1) / np.maximum(hi - lo, 1) * clip.fps
            planted = (speed < 0.01 * h) & (low - level < 0.03 * h)
            if not planted.any():
                cells.append(f"{side}: never planted")
                continue
            ankle = P[planted, ch.skeleton.index(ch.bone_map[f"{side}_foot"]), 2]
            cells.append(f"{side}: {planted.sum()}, {100 * np.percentile(low[planted], 10):.1f} / "
                         f"{100 * np.median(low[planted]):.1f}, {100 * np.median(ankle):.1f}")
        print(f"{name} | {h:.3f} | {100 * ground.estimate_ground(tr):.1f} | {100 * np.ptp(level):.1f} | "
              + "; ".join(cells), flush=True)


def floor(mods, loader, bench, which, overrides, threads, max_frames):
    import importlib

    import numpy as np
    track_cls = importlib.import_module(f"{bench.MODULE}.core.character.track").ClipTrack
    clip, target, src, smo, tgt = _case(loader, bench, which, max_frames)
    o = _retarget(mods, src, smo, tgt, overrides, threads)
    job = o.job
    ids, side = np.asarray(job.sole_ids), np.asarray(job.sole_side)
    print(f"{pathlib.Path(clip).stem} -> {pathlib.Path(target).stem}, {smo.num_frames} frames, overrides {overrides}, "
          f"{len(ids)} sole points")
    lows = {}
    for label, motion in (("copy-rot", o.init_motion), ("ReConForM", o.motion)):
        tr = track_cls(o.target, motion)
        z = tr.vertices(np.arange(o.target.mesh.num_verts))[..., 2]
        zs = tr.vertices(ids)[..., 2]
        lows[label] = np.stack([zs[:, side == k].min(1) for k in (0, 1)], 1)             # (T, 2)
        bends = []
        for s in ("left", "right"):
            b = o.target.bone_map.get(f"{s}_toes")
            if b is not None:
                qw = np.abs(motion.rotations[:, o.target.skeleton.index(b), 0])     # WXYZ: the angle from the rest pose
                angle = np.degrees(2.0 * np.arccos(np.clip(qw, 0.0, 1.0)))
                bends.append(f"{s} mean {angle.mean():.1f}°, max {angle.max():.1f}°")
        print(f"{label}: {int((z < 0).any(1).sum())} frames with a vertex under the floor, deepest "
              f"{1000 * z.min():.1f} mm; sole points lowest {1000 * zs.min():.1f} mm, {int((zs < -3e-3).any(1).sum())} "
              f"frames below -3 mm; toe bend from the rest pose: {', '.join(bends) or 'no toe bones'}")
    feet = job.feet
    if feet is None or feet.contact_w is None:
        return
    w, h = feet.contact_w.numpy(), feet.contact_h.numpy()
    for k in (0, 1):
        under = lows["ReConForM"][:, k] < -1e-3
        starts = np.nonzero(under & ~np.r_[False, under[:-1]])[0]
        for t0 in starts:
            t1 = t0 + int(np.argmin(under[t0:])) if not under[t0:].all() else len(under)
            a, b = max(0, t0 - 2), min(len(under), t1 + 2)
            print(f"  foot {k}, frames {t0}-{t1 - 1}: lowest sole point {1000 * lows['ReConForM'][t0:t1, k].min():.1f}"
                  f" mm; frames {a}-{b - 1}: source contact weight "
                  + " ".join(f"{x:.1f}" for x in w[a:b, k]) + " | its height mm "
                  + " ".join(f"{1000 * x:.0f}" for x in h[a:b, k]) + " | copy-rot's lowest sole point mm "
                  + " ".join(f"{1000 * x:.0f}" for x in lows["copy-rot"][a:b, k]))


def locked(mods, loader, bench, met, track_cls, which, overrides, threads, max_frames, around=0):
    import numpy as np
    clip, target, src, smo, tgt = _case(loader, bench, which, max_frames)
    o = _retarget(mods, src, smo, tgt, overrides, threads)
    fps, hs, ht = smo.fps, float(src.height), float(tgt.height)
    speed = {"source": 100 * met.foot_speed_windowed(met.measure(o.source_track, 0.0), fps) / hs}     # (2, T) % h/s
    for label, motion in (("copy-rot", o.init_motion), ("ReConForM", o.motion)):
        speed[label] = 100 * met.foot_speed_windowed(met.measure(track_cls(o.target, motion), 0.0), fps) / ht
    lock = None if o.job.feet is None or o.job.feet.lock_w is None else o.job.feet.lock_w.numpy().T    # (2, T)
    limit = 100 * met.LOCKED_FRACTION
    print(f"{pathlib.Path(clip).stem} -> {pathlib.Path(target).stem}, {smo.num_frames} frames at {fps:g} fps, "
          f"overrides {overrides}; locked: windowed foot speed < {limit:g} % h/s")
    truth = speed["source"] < limit
    for label in ("copy-rot", "ReConForM"):
        pred = speed[label] < limit
        tp, fp, fn = (int((truth & pred).sum()), int((~truth & pred).sum()), int((truth & ~pred).sum()))
        print(f"{label}: source locked foot-frames {int(truth.sum())} of {truth.size}; TP {tp}, FP {fp}, FN {fn}; "
              f"F1 {met.f1_counts(tp, fp, fn):.3f}")
    pred = speed["ReConForM"] < limit
    for k, side in enumerate(("left", "right")):
        miss = truth[k] != pred[k]
        starts = np.nonzero(miss & ~np.r_[False, miss[:-1]])[0]
        for t0 in starts:
            t1 = t0 + int(np.argmin(miss[t0:])) if not miss[t0:].all() else miss.shape[1]
            kinds = {bool(x) for x in truth[k, t0:t1]}            # a run may hold both: FN where the source is locked
            kind = "FN" if kinds == {True} else "FP" if kinds == {False} else "FN and FP"
            def span(x):
                return f"{x[t0:t1].min():.2f}–{x[t0:t1].max():.2f}"
            print(f"  {side} foot, frames {t0}–{t1 - 1} ({kind}): source {span(speed['source'][k])}, copy-rot "
                  f"{span(speed['copy-rot'][k])}, ReConForM {span(speed['ReConForM'][k])} % h/s"
                  + ("" if lock is None else f"; lock weight {span(lock[k])}"))
            if around:                  # the speeds frame by frame around the run
                a, b = max(0, t0 - around), min(truth.shape[1], t1 + around)
                for label in ("source", "ReConForM"):
                    print(f"    {label:9s} frames {a}–{b - 1}: " + " ".join(f"{v:.2f}" for v in speed[label][k, a:b]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("feet-sources", "feet-planted", "jerk", "progress", "conflicts",
                                            "soles", "contacts", "self-pen", "floor", "locked"))
    ap.add_argument("case", nargs="?", default=None, help="a substring of a bench clip's name")
    ap.add_argument("overrides", nargs="?", default="{}", help="SolverSettings overrides (a Python dict)")
    ap.add_argument("--max-frames", type=int, default=400, help="jerk: first frames of the clip")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--every", type=int, default=10, help="progress: print every N-th step")
    ap.add_argument("--around", type=int, default=0, help="locked: print the speeds of this many frames each side "
                    "of every miss")
    args = ap.parse_args(argv)
    import importlib

    import torch
    from tools.bench import common as bench
    torch.set_num_threads(args.threads)
    mods = bench.enable_addon()
    # the metrics' constants and the per-clip measures (core.metrics.measures: measure, jerk_magnitude, ...) as one name
    met = types.SimpleNamespace(**{**vars(importlib.import_module(f"{bench.MODULE}.core.metrics.scores")),
                                   **vars(importlib.import_module(f"{bench.MODULE}.core.metrics.measures"))})
    track_cls = importlib.import_module(f"{bench.MODULE}.core.character.track").ClipTrack
    loader = bench.Loader(mods, lambda s: None)
    overrides = ast.literal_eval(args.overrides)
    if args.mode == "feet-sources":
        feet_sources(mods, loader, bench, met, track_cls)
    elif args.mode == "soles":
        soles(mods, loader, bench, track_cls)
    elif args.mode == "progress":
        progress(mods, loader, bench, args.case or "walk_normal", overrides, args.threads, args.every)
    elif args.mode == "feet-planted":
        feet_planted(mods, loader, bench, met, track_cls, args.case or "walk_normal", overrides, args.threads)
    elif args.mode == "jerk":
        jerk(mods, loader, bench, met, track_cls, args.case or "kick", overrides, args.threads, args.max_frames)
    elif args.mode == "self-pen":
        self_pen(mods, loader, bench, args.case or "salsa", overrides, args.threads, args.max_frames)
    elif args.mode == "floor":
        floor(mods, loader, bench, args.case or "salsa", overrides, args.threads, args.max_frames)
    elif args.mode == "locked":
        locked(mods, loader, bench, met, track_cls, args.case or "07_01", overrides, args.threads, args.max_frames,
               args.around)
    elif args.mode == "contacts":
        contacts(mods, loader, bench, args.case or "07_01", overrides, args.threads, args.max_frames)
    else:
        conflicts(mods, loader, bench, args.case or "kick", overrides, args.threads, args.max_frames)
    return 0


if __name__ == "__main__":
    sys.exit(main())
