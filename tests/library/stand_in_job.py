"""A stand-in for the job process (``python tools/retarget.py ARGS``) that keeps tools/retarget.py's contract
(outputs at the paths given, exit 0 / 1 with one ``error:`` line, reports with metrics and series) in a
fraction of a second, so the runner's process handling (kill, cancel, timeout, retry, atomic publish) is
tested without Blender. The real command runs in the tests marked ``assets``.

Behaviour comes from the clip file, a JSON object (keys optional):
    {"sleep": seconds before writing, "sleep_after": seconds after the first output, "exit": status,
     "error": message (printed as 'error: ...', exit 1), "kill_once": flag file (SIGKILL itself the first time,
     creating the flag), "kill_always": true, "skip": output suffix not to write, "score": F1 of the result}
Invoked as ``stand_in_job.py RETARGET_PATH ARGS`` (an interpreter) or as a Blender binary (``-b ... -- ARGS``).
"""

import json
import os
import signal
import sys
import time


def main(argv):
    if "--" in argv:
        argv = argv[argv.index("--") + 1:]
    else:
        argv = argv[1:]          # the retarget script's path
    args, outs, k = {}, [], 0
    while k < len(argv):
        if argv[k] in ("--out", "--export"):
            outs.append(argv[k + 1])
            k += 2
        elif argv[k] == "--frames":
            args["frames"] = (int(argv[k + 1]), int(argv[k + 2]))
            k += 3
        else:
            args[argv[k].lstrip("-")] = argv[k + 1]
            k += 2
    try:
        with open(args["source"], encoding="utf-8") as f:
            spec = json.load(f)
    except (OSError, ValueError) as ex:
        print(f"error: Cannot import '{args['source']}': {ex}", file=sys.stderr)
        return 1
    with open(args["setup"], encoding="utf-8") as f:
        setup = json.load(f)
    print(f"threads {os.environ.get('OMP_NUM_THREADS')} setup {json.dumps(setup)}", flush=True)
    print(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}", flush=True)
    time.sleep(spec.get("sleep", 0))
    if spec.get("kill_always") or (spec.get("kill_once") and not os.path.exists(spec["kill_once"])):
        if spec.get("kill_once"):
            open(spec["kill_once"], "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    if spec.get("error"):
        print(f"error: {spec['error']}", file=sys.stderr)
        return 1
    if spec.get("exit"):
        return int(spec["exit"])
    start, end = args.get("frames", (1, 30))
    n = end - start + 1
    score = float(spec.get("score", 0.9))
    metrics = {"grounded_f1": score, "locked_f1": score, "contact_f1": score, "floor_pen_mean": 0.001,
               "self_pen_mean": 0.002, "jerk_mean": 100.0}
    reference = {k: (v * 0.8 if k.endswith("f1") else v * 1.5) for k, v in metrics.items()}
    method = setup.get("method") or "copy_rotations"
    report = {"method": method, "frames": n, "frame_start": start, "frame_end": end, "source_action": "Take",
              "metrics": metrics, "reference_metrics": reference if method == "reconform" else None, "notes": []}
    series = {"fps": 30.0, "frame_start": start, "frames": n, "method": method, "grounded_fraction": 0.01,
              "foot_height": {name: [[0.01 * ((t % 10) / 10.0) for t in range(n)]] * 2
                              for name in ("source", "copy_rotations", "result")}}
    for i, path in enumerate(outs + [args["report"], args["series"]]):
        if spec.get("skip") and path.endswith(spec["skip"]):
            continue
        with open(path, "w", encoding="utf-8") as f:
            json.dump(report if path == args["report"] else series if path == args["series"] else {"out": path}, f)
        if i == 0:
            time.sleep(spec.get("sleep_after", 0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
