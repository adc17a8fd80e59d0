"""The library report's figures (matplotlib, Agg, PNG files next to the page).

- ``feet``: one job's foot heights over time (left and right foot, as % of each character's height): the
  source, copy-rotations and the result, with the grounded band of docs/metrics.md shaded;
- ``metrics``: per metric, every job's copy-rotations value (x) against its ReConForM value (y), the diagonal
  drawn: points on the better side of it are jobs the solve improved;
- ``throughput``: each job's wall time against its frame count.
"""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

#: (metric key, label, higher is better, scale for display)
METRICS = (("grounded_f1", "grounded F1", True, 1.0), ("locked_f1", "foot-locked F1", True, 1.0),
           ("contact_f1", "contact F1", True, 1.0), ("floor_pen_mean", "floor penetration (% area)", False, 100.0),
           ("self_pen_mean", "self-penetration (% area)", False, 100.0), ("jerk_mean", "jerk (m/s³)", False, 1.0))
COLOURS = {"source": "#222222", "copy_rotations": "#9a9a9a", "result": "#1f6fd1"}
LABELS = {"source": "source", "copy_rotations": "copy-rotations", "result": "result"}


def _save(fig, path):
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)


def feet(series: dict, title: str, path: str):
    """Foot heights over time of one job (``series.json`` of tools/retarget.py --series)."""
    fh = series.get("foot_height") or {}
    start, band = series.get("frame_start", 1), 100.0 * series.get("grounded_fraction", 0.01)
    fig, axes = plt.subplots(2, 1, figsize=(9, 4.6), sharex=True)
    for side, ax in enumerate(axes):
        ax.axhspan(-band, band, color="#e3f0d8", zorder=0, label=f"grounded (±{band:g} % of height)")
        ax.axhline(0.0, color="#5a8a3a", lw=0.8, zorder=1)
        for name in ("source", "copy_rotations", "result"):
            if name in fh:
                ys = [100.0 * v for v in fh[name][side]]
                style = dict(lw=1.6 if name == "result" else 1.2, ls="--" if name == "copy_rotations" else "-")
                ax.plot(range(start, start + len(ys)), ys, color=COLOURS[name], label=LABELS[name], **style)
        ax.set_ylabel(f"{('left', 'right')[side]} foot\n% of height")
        ax.grid(alpha=0.3)
    axes[0].set_title(title, fontsize=10)
    axes[-1].set_xlabel("frame")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].legend(loc="upper right", fontsize=8, ncol=4, framealpha=0.9)
    fig.tight_layout()
    _save(fig, path)


def metrics(rows: list, path: str) -> bool:
    """Copy-rotations against ReConForM per metric over the library; False when no job has both."""
    pairs = [r for r in rows if r.get("metrics") and r.get("reference")]
    if not pairs:
        return False
    fig, axes = plt.subplots(2, 3, figsize=(11, 7))
    for ax, (key, label, higher, scale) in zip(axes.ravel(), METRICS):
        xy = [(r["reference"][key] * scale, r["metrics"][key] * scale) for r in pairs
              if r["reference"].get(key) is not None and r["metrics"].get(key) is not None]
        if not xy:
            ax.set_axis_off()
            continue
        xs, ys = zip(*xy)
        lo, hi = min(min(xs), min(ys)), max(max(xs), max(ys))
        pad = 0.05 * (hi - lo or 1.0)
        better = sum((y > x) if higher else (y < x) for x, y in xy)
        ax.fill_between([lo - pad, hi + pad], [lo - pad, hi + pad], hi + pad if higher else lo - pad,
                        color="#e3f0d8", zorder=0)
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="#777777", lw=0.8)
        ax.scatter(xs, ys, s=18, color="#1f6fd1", alpha=0.75 if len(xy) < 500 else 0.25, zorder=2)
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(lo - pad, hi + pad)
        ax.set_title(f"{label}: better in {better} of {len(xy)}", fontsize=9)
        ax.set_xlabel("copy-rotations", fontsize=8)
        ax.set_ylabel("ReConForM", fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle("Each dot is a job; the shaded side of the diagonal is better than copy-rotations", fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    return True


def throughput(rows: list, path: str) -> bool:
    """Wall time per job against its frames, one colour per method; False when no job finished."""
    done = [r for r in rows if r.get("seconds") and r.get("frames")]
    if not done:
        return False
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for method, colour in (("reconform", "#1f6fd1"), ("copy_rotations", "#9a9a9a")):
        pts = [(r["frames"], r["seconds"]) for r in done if r.get("method") == method]
        if pts:
            ax.scatter(*zip(*pts), s=20, color=colour, alpha=0.8, label=method.replace("_", "-"))
    ax.set_xlabel("frames")
    ax.set_ylabel("job wall time (s)")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Time per job (process start, imports, retarget, outputs)", fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    return True
