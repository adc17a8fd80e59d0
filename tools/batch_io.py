"""The batch command's console and outputs (tools/retarget.py): quiet means quiet, and outputs are all or none.

``Console``: the command's own lines go to the real stdout (progress) and stderr (``error:`` lines); whatever
else writes to file descriptors 1 and 2 — Blender, the importers and exporters, in C or Python — goes to an
unnamed temporary file (deleted when closed) unless ``verbose``.

``Outputs``: every output path (``--out``, ``--report``, each ``--export``) is checked before any work
(``check``: not a folder, its folder creatable and writable, checked with a probe file that is removed at
once), written under a temporary name beside its final place (``stage``: a hidden file in the same folder, so
that a .blend's relative paths stay right; a hidden folder for a .gltf and its .bin and textures) and renamed
into place only once every output is written (``commit``); ``discard`` removes whatever was staged and the
folders it created. A failed or interrupted run therefore leaves no output behind.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile


class Console:
    """The command's own output, and Blender's captured (see the module docstring)."""

    def __init__(self, verbose: bool = False):
        sys.stdout.flush()
        sys.stderr.flush()
        self.out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8", errors="replace")
        self.err = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
        self._saved = None
        self._log = None
        if not verbose:
            self._log = tempfile.TemporaryFile()
            self._saved = (os.dup(1), os.dup(2))
            os.dup2(self._log.fileno(), 1)
            os.dup2(self._log.fileno(), 2)

    def error(self, msg: str) -> None:
        """One ``error: <msg>`` line on the real stderr."""
        self.err.write(f"error: {msg}\n")
        self.err.flush()

    def restore(self) -> None:
        """Give file descriptors 1 and 2 back and drop what was captured."""
        sys.stdout.flush()
        sys.stderr.flush()
        if self._saved is not None:
            os.dup2(self._saved[0], 1)
            os.dup2(self._saved[1], 2)
            for fd in self._saved:
                os.close(fd)
            self._saved = None
        if self._log is not None:
            self._log.close()
            self._log = None
        self.out.flush()
        self.err.flush()


class OutputError(Exception):
    """An output path that cannot be written (one line naming the option and the path)."""


def _nearest_existing(path: str) -> str:
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


class Outputs:
    """The run's output files: checked first, staged, then committed all together (module docstring).

    Args:
        paths: (option, path) pairs, e.g. ("--out", "result.blend").
    """

    def __init__(self, paths):
        self.paths = [(opt, os.path.abspath(p)) for opt, p in paths]
        self._staged = []     # (staged path, final path, staging folder or None)
        self._made = []       # folders this run created, deepest last

    def check(self) -> None:
        """Raise OutputError for the first path that cannot be written; writes nothing that stays."""
        seen = {}
        for opt, path in self.paths:
            if path in seen:
                raise OutputError(f"{opt} {path}: the same file is also given to {seen[path]}.")
            seen[path] = opt
            if os.path.isdir(path):
                raise OutputError(f"{opt} {path}: is a folder; give a file path.")
            folder = os.path.dirname(path)
            base = _nearest_existing(folder)
            if not os.path.isdir(base):
                raise OutputError(f"{opt} {path}: '{base}' is a file, not a folder.")
            try:
                fd, probe = tempfile.mkstemp(prefix=".reconform-probe-", dir=base)
                os.close(fd)
                os.remove(probe)
            except OSError as ex:
                raise OutputError(f"{opt} {path}: cannot create files in '{base}' ({ex.strerror or ex}).") from None

    def _makedirs(self, folder: str) -> None:
        missing = []
        while not os.path.isdir(folder):
            missing.append(folder)
            folder = os.path.dirname(folder)
        for d in reversed(missing):
            os.mkdir(d)
            self._made.append(d)

    def stage(self, path: str) -> str:
        """Where to write the output whose final path is ``path`` (its folder created)."""
        path = os.path.abspath(path)
        folder, name = os.path.split(path)
        self._makedirs(folder)
        stem, ext = os.path.splitext(name)
        if ext.lower() == ".gltf":   # the .gltf, its .bin and textures: a hidden folder, moved out together
            tmp = tempfile.mkdtemp(prefix=".reconform-partial-", dir=folder)
            staged = os.path.join(tmp, name)
            self._staged.append((staged, path, tmp))
        else:
            fd, staged = tempfile.mkstemp(prefix=f".{stem}.reconform-partial-", suffix=ext, dir=folder)
            os.close(fd)
            os.remove(staged)   # a free name: the writer creates the file (Blender would back up an existing one)
            self._staged.append((staged, path, None))
        return staged

    def commit(self) -> None:
        """Rename every staged output into place (each a rename within its folder)."""
        for staged, final, tmp in self._staged:
            if tmp is None:
                os.replace(staged, final)
            else:
                for name in os.listdir(tmp):
                    os.replace(os.path.join(tmp, name), os.path.join(os.path.dirname(final), name))
                os.rmdir(tmp)
        self._staged = []
        self._made = []

    def discard(self) -> None:
        """Remove everything staged and the folders this run created (nothing is left of a failed run)."""
        for staged, _, tmp in self._staged:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            elif os.path.exists(staged):
                os.remove(staged)
        self._staged = []
        for d in reversed(self._made):
            try:
                os.rmdir(d)
            except OSError:
                pass
        self._made = []
