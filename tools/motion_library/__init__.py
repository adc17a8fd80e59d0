"""Whole motion libraries: many clips × many characters, resumable, on one machine or a Ray cluster.

``tools/library.py`` is the command; this package is its logic, importable without Blender (the parent process
never imports bpy or torch: every job is its own process running ``tools/retarget.py``, the single-clip
command, so a library job is exactly the retarget one clip gets).

    inputs.py    manifest (JSON / CSV) or globs + the shared set-up with per-character overrides -> [Job]
    jobs.py      what a job is on disk: its hash (inputs, set-up, options, code), its status (new / changed /
                 failed before / done), and ``run_job``: one retarget in a temporary folder, renamed into place
    engines.py   where jobs run: ``LocalPool`` (processes on this machine) or ``RayEngine`` (Ray tasks)
    runner.py    the one job runner both engines share: plan, submit, retry a crashed job once, Ctrl+C
    progress.py  the progress bar (tqdm) or lines and the JSON-lines log of every job's start and end
    report.py    the static HTML library report; plots.py its matplotlib figures
    cli.py       the command line

docs/library.md describes the command, the manifest, the resume rules, the engines, the report and the bench.
"""
