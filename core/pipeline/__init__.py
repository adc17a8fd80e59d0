"""The retarget as one generator: the single path the panel, the batch command, the demo and the bench drive.

Modules: ``retarget`` (``Retarget``: characters, source track, copy-rotations, the solve, metrics, conflicts, as
Steps; ``Outcome``), ``copy_rotations`` (the baseline and the solver's initial guess), ``placement`` (several
characters placed together at the start), ``group`` (``RetargetGroup``: several characters together, §6.1), ``windows``
(a long clip as overlapping windows stitched with a C² crossfade), ``live`` (the window around the current frame while
an artist scrubs). docs/architecture.md lists the steps.
"""
