"""Where capaudit's processes import from: never the current directory, unless it holds capaudit itself.

``python -m audit.cli`` (and ``python -c``, an interactive session) puts the
current directory first on ``sys.path``; a ``joblib.py`` or ``numpy.py``
there would be imported in place of the library, in the audit's process and
in every worker started from it (loky and dask workers inherit the parent's
``sys.path``; a worker interpreter started with ``python -m`` puts its own
current directory first).  Only a config's ``callable`` imports from the
config's folder and the current directory (:func:`audit.config.user_import_path`),
and cluster workers receive such modules by value (:mod:`audit.sampling`).
This module imports nothing but the standard library, so that it can run
before any library is imported.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SAFE_PATH = "PYTHONSAFEPATH"
"""Python >= 3.11: an interpreter started with it set does not put its script's folder or current directory on
``sys.path``; 3.10 ignores it."""


def drop_current_directory() -> None:
    """Remove the current directory (``""`` or its path) from ``sys.path`` for good.

    Kept when capaudit itself is imported from there (a checkout run as
    ``python -m audit.cli``): it is then capaudit's own folder.
    """
    here = Path.cwd().resolve()
    if Path(__file__).resolve().parents[1] == here:
        return
    sys.path[:] = [entry for entry in sys.path if Path(entry or os.curdir).resolve() != here]


@contextmanager
def safe_worker_path() -> Iterator[None]:
    """Worker interpreters started meanwhile (loky's ``python -m``, dask's ``python -c``) do not put their current
    directory on ``sys.path`` (:data:`SAFE_PATH`); they get this process's path, which holds it only where it does."""
    saved = os.environ.get(SAFE_PATH)
    os.environ[SAFE_PATH] = "1"
    try:
        yield
    finally:
        if saved is None:
            del os.environ[SAFE_PATH]
        else:
            os.environ[SAFE_PATH] = saved
