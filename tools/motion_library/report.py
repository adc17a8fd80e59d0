"""The library report: one static HTML page, ``OUT/report/index.html``, with PNG figures beside it (no server).

One row per job (``OUT/<character>/<clip id>/<method id>/``: inputs.job_key): character, clip, method, frames,
time, and copy-rotations vs ReConForM metrics read from each job's
``report.json`` (``reference_metrics`` and ``metrics``; docs/metrics.md defines them). Failed jobs come first
with their one-line error, then the finished ones, worst first: the lowest mean of the result's F1 scores
(grounded, foot-locked, contact; the ones a job has). The worst jobs get a foot-height plot each.
"""

from __future__ import annotations

import glob
import html
import json
import os
import shutil
import time

from .inputs import key_parts
from .plots import METRICS
from .progress import read_failures
from .runner import LOG_NAME

SCORE_KEYS = ("grounded_f1", "locked_f1", "contact_f1")


def _load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def score(metrics) -> float:
    """Mean of the result's F1 scores this job has (None without any): lower is worse."""
    vals = [metrics.get(k) for k in SCORE_KEYS if metrics and metrics.get(k) is not None]
    return sum(vals) / len(vals) if vals else None


def collect(out_dir: str, plan=None) -> list:
    """One row per job (dicts): the planned jobs when given, else every job folder and failure in ``out_dir``."""
    failures = read_failures(os.path.join(out_dir, LOG_NAME))
    if plan is not None:
        wanted = [(p.task.key, p.task.hash) for p in plan]
    else:
        keys = sorted(os.path.relpath(os.path.dirname(p), out_dir).replace(os.sep, "/")
                      for p in glob.glob(os.path.join(out_dir, "*", "*", "*", "job.json")))
        wanted = [(k, None) for k in keys] + [(k, None) for k in sorted(failures) if k not in keys]
    rows = []
    for key, current in wanted:
        folder = os.path.join(out_dir, key)
        job = _load(os.path.join(folder, "job.json"))
        fail = failures.get(key)
        character, clip_id, method = key_parts(key)
        row = {"key": key, "character": character, "clip": clip_id, "method_id": method, "status": "not run"}
        if job is not None and (current is None or job.get("hash") == current):
            rep = _load(os.path.join(folder, "report.json")) or {}
            row.update(status="done", clip=os.path.basename(job.get("clip") or row["clip"]),
                       action=rep.get("source_action"), method=rep.get("method"), frames=rep.get("frames"),
                       frame_range=(rep.get("frame_start"), rep.get("frame_end")), seconds=job.get("seconds"),
                       cpu_s=job.get("cpu_s"),
                       peak_rss_mb=job.get("peak_rss_mb"), metrics=rep.get("metrics"),
                       reference=rep.get("reference_metrics"), notes=rep.get("notes") or [],
                       series=os.path.join(folder, "series.json"))
        elif fail is not None and (current is None or fail.get("hash") == current):
            row.update(status="failed", error=fail.get("error"), log=fail.get("log"))
        elif job is not None:
            row["status"] = "outdated"
        row["score"] = score(row.get("metrics"))
        rows.append(row)
    order = {"failed": 0, "done": 1, "outdated": 2, "not run": 3}
    rows.sort(key=lambda r: (order[r["status"]], r["score"] is None, r["score"] or 0.0, r["key"]))
    return rows


def _fmt(key: str, v) -> str:
    if v is None:
        return "–"
    if "pen" in key:
        return f"{100 * v:.2f}" if v >= 0.01 else f"{100 * v:.3f}"
    if key.startswith("jerk"):
        return f"{v:.0f}"
    return f"{v:.2f}"


def _cell(key: str, higher: bool, row: dict) -> str:
    """'copy-rotations → result' with a colour for better / worse, or the result alone."""
    m, r = row.get("metrics") or {}, row.get("reference") or {}
    if key not in m:
        return "<td>–</td>"
    if r.get(key) is None or m.get(key) is None:
        return f"<td>{_fmt(key, m.get(key))}</td>"
    a, b = r[key], m[key]
    cls = "same" if abs(a - b) < 1e-9 else ("better" if (b > a) == higher else "worse")
    return f'<td class="{cls}" data-v="{b}">{_fmt(key, a)} → <b>{_fmt(key, b)}</b></td>'


def _summary(rows: list) -> str:
    done = [r for r in rows if r["status"] == "done"]
    counts = {s: sum(r["status"] == s for r in rows) for s in ("done", "failed", "outdated", "not run")}
    frames = sum(r.get("frames") or 0 for r in done)
    secs = sum(r.get("seconds") or 0 for r in done)
    cpu = sum(r.get("cpu_s") or 0 for r in done)
    lines = [f"<p>{len(rows)} jobs: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
             + f". {frames} frames retargeted in {secs / 60:.1f} job-minutes ({cpu / 60:.1f} CPU-minutes)"
             + (f" (peak memory per job up to {max(r.get('peak_rss_mb') or 0 for r in done):.0f} MB)" if done else "")
             + ".</p>"]
    pairs = [r for r in done if r.get("metrics") and r.get("reference")]
    if pairs:
        items = []
        for key, label, higher, scale in METRICS:
            xy = [(r["reference"][key], r["metrics"][key]) for r in pairs
                  if r["reference"].get(key) is not None and r["metrics"].get(key) is not None]
            if xy:
                better = sum((b > a) if higher else (b < a) for a, b in xy)
                mean_a, mean_b = (sum(v) / len(xy) for v in zip(*xy))
                items.append(f"<li>{label}: copy-rotations {_fmt(key, mean_a)} → ReConForM <b>{_fmt(key, mean_b)}"
                             f"</b> (mean of {len(xy)}; better in {better})</li>")
        lines.append("<ul>" + "".join(items) + "</ul>")
    return "\n".join(lines)


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Library report — {title}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; }} th, td {{ padding: 3px 8px; border-bottom: 1px solid #ddd; }}
th {{ background: #f3f3f3; cursor: pointer; position: sticky; top: 0; text-align: left; }}
td.better {{ background: #e3f0d8; }} td.worse {{ background: #f8dcdc; }} tr.failed td {{ background: #fdeaea; }}
tr.failed td.err {{ color: #a00; }} img {{ max-width: 100%; border: 1px solid #ddd; margin: 4px 0; }}
.small {{ color: #666; font-size: 12px; }}
</style></head><body>
<h1>Library report</h1>
<p class="small">{out} · written {when} · worst jobs first (failed, then the lowest mean F1 of the result:
grounded, foot-locked, contact) · cells read copy-rotations → <b>ReConForM</b>; green: better, red: worse ·
metrics defined in docs/metrics.md · click a column to sort</p>
{summary}
{figures}
<h2>Jobs</h2>
<table id="jobs"><thead><tr><th>#</th><th>status</th><th>character</th><th>clip</th><th>method</th><th>frames</th>
<th>time (s)</th><th>score</th>{metric_heads}<th>files</th></tr></thead><tbody>
{rows}
</tbody></table>
<script>
document.querySelectorAll('#jobs th').forEach(function (th, col) {{
  th.addEventListener('click', function () {{
    var body = document.querySelector('#jobs tbody'), rows = Array.from(body.rows);
    var dir = th.dataset.dir === 'asc' ? -1 : 1; th.dataset.dir = dir === 1 ? 'asc' : 'desc';
    function val(r) {{ var c = r.cells[col], v = c.dataset.v !== undefined ? c.dataset.v : c.textContent;
                      var n = parseFloat(v); return isNaN(n) ? v : n; }}
    rows.sort(function (a, b) {{ var x = val(a), y = val(b); return (x > y ? 1 : x < y ? -1 : 0) * dir; }});
    rows.forEach(function (r) {{ body.appendChild(r); }});
  }});
}});
</script>
</body></html>
"""


def _row(n: int, r: dict, out_dir: str, report_dir: str) -> str:
    e = html.escape
    if r["status"] == "failed":
        log = r.get("log")
        link = f'<a href="{e(os.path.relpath(log, report_dir))}">log</a>' if log else ""
        return (f'<tr class="failed"><td>{n}</td><td>failed</td><td>{e(r["character"])}</td><td>{e(r["clip"])}</td>'
                f'<td>{e(r["method_id"])}</td><td colspan="{3 + len(METRICS)}" class="err">{e(str(r.get("error")))}'
                f'</td><td>{link}</td></tr>')
    if r["status"] != "done":
        return (f'<tr><td>{n}</td><td>{e(r["status"])}</td><td>{e(r["character"])}</td><td>{e(r["clip"])}</td>'
                f'<td>{e(r["method_id"])}</td><td colspan="{4 + len(METRICS)}"></td></tr>')
    folder = os.path.relpath(os.path.join(out_dir, r["key"]), report_dir)
    shown = r.get("action") and r["action"] != os.path.splitext(r["clip"])[0]
    clip = e(r["clip"]) + (f' <span class="small">{e(r["action"])}</span>' if shown else "")
    fr = r.get("frame_range") or (None, None)
    sc = "–" if r["score"] is None else f"{r['score']:.2f}"
    cells = "".join(_cell(k, higher, r) for k, _, higher, _ in METRICS)
    return (f'<tr><td>{n}</td><td>done</td><td>{e(r["character"])}</td><td>{clip}</td>'
            f'<td>{e(r["method_id"] or str(r.get("method")))}</td><td data-v="{r.get("frames")}">{r.get("frames")} '
            f'<span class="small">{fr[0]}–{fr[1]}</span></td><td>{(r.get("seconds") or 0):.1f}</td>'
            f'<td data-v="{r["score"] if r["score"] is not None else ""}">{sc}</td>{cells}'
            f'<td><a href="{e(folder)}/report.json">report</a> · <a href="{e(folder)}">folder</a></td></tr>')


def write(out_dir: str, plan=None, worst: int = 6) -> str:
    """Write ``OUT/report/index.html`` and its figures (replacing an older report); returns the page's path."""
    out_dir = os.path.abspath(out_dir)
    rows = collect(out_dir, plan)
    final = os.path.join(out_dir, "report")
    tmp = final + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    figures = _figures(rows, tmp, final, worst)
    page = PAGE.format(title=html.escape(os.path.basename(out_dir)), out=html.escape(out_dir),
                       when=time.strftime("%Y-%m-%d %H:%M"), summary=_summary(rows), figures=figures,
                       metric_heads="".join(f"<th>{html.escape(label)}</th>" for _, label, _, _ in METRICS),
                       rows="\n".join(_row(n + 1, r, out_dir, final) for n, r in enumerate(rows)))
    with open(os.path.join(tmp, "index.html"), "w", encoding="utf-8") as f:
        f.write(page)
    old = final + ".old"
    shutil.rmtree(old, ignore_errors=True)
    if os.path.isdir(final):
        os.rename(final, old)
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return os.path.join(final, "index.html")


def _figures(rows: list, folder: str, final: str, worst: int) -> str:
    """The figures' HTML (files written into ``folder``); a line saying why when matplotlib is missing."""
    try:
        from . import plots
    except ImportError:
        return ("<p><i>Figures need matplotlib: pip install -r requirements-library.txt, then "
                "tools/library.py --report-only --out ...</i></p>")
    parts = []
    if plots.metrics(rows, os.path.join(folder, "metrics.png")):
        parts.append('<h2>Copy-rotations vs ReConForM across the library</h2><img src="metrics.png">')
    shown = 0
    feet = []
    for r in rows:
        if shown >= worst:
            break
        series = _load(r.get("series") or "") if r["status"] == "done" else None
        if series and series.get("foot_height"):
            shown += 1
            sc = "" if r["score"] is None else f" — score {r['score']:.2f}"
            title = f"{r['clip']} onto {r['character']} ({r['method_id'] or r.get('method')}){sc}"
            plots.feet(series, title, os.path.join(folder, f"feet_{shown}.png"))
            feet.append(f'<img src="feet_{shown}.png" alt="{html.escape(r["key"])}">')
    if feet:
        parts.append(f"<h2>Foot height over time: the {len(feet)} worst jobs</h2>" + "\n".join(feet))
    if plots.throughput(rows, os.path.join(folder, "throughput.png")):
        parts.append('<h2>Time per job</h2><img src="throughput.png">')
    return "\n".join(parts)
