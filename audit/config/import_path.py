"""Where capaudit's processes import from: never the current directory, unless it holds capaudit itself.

``python -m audit.commands.cli`` (and ``python -c``, an interactive session) puts the
current directory first on ``sys.path``; a ``joblib.py`` or ``numpy.py``
there would be imported in place of the library, in the audit's process and
in every worker started from it (loky and dask workers inherit the parent's
``sys.path``; a worker interpreter started with ``python -m`` puts its own
current directory first).  Only a config's ``callable`` imports from the
config's folder and the current directory (:func:`user_import_path`),
and cluster workers receive such modules by value (:mod:`audit.sampling.sampler`).
This module imports nothing but the standard library, so that it can run
before any library is imported; :func:`import_frozen` imports the audit's
libraries quickly in processes that only audit.
"""

from __future__ import annotations

import gc
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
    ``python -m audit.commands.cli``): it is then capaudit's own folder.
    """
    here = Path.cwd().resolve()
    if Path(__file__).resolve().parents[2] == here:
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


AUDIT_MODULES = ("audit.commands.api", "audit.engine.run", "audit.report.audit_report")
"""What an audit imports before its report is written (the attacks, the engine, the report; scikit-learn is imported
by the feature maps that fit one of its learners, :mod:`attacks.features`; no plotting library: the report's figures
are SVG written by :mod:`audit.report.svg`)."""


def import_frozen(modules: tuple[str, ...] = AUDIT_MODULES) -> None:
    """Import ``modules`` with the cyclic garbage collector paused, then freeze what is loaded (``gc.freeze``).

    For processes that import capaudit to audit and end (the command line, a
    loky worker): collections during the imports walk every object the
    libraries have created so far (docs/speed.md), and
    collections during the audit walk them again, as do forked children,
    which copy the memory pages the walk touches.  Frozen objects are never
    collected: not for a library, where the caller's own objects would be
    frozen with them.
    """
    import importlib

    enabled = gc.isenabled()
    gc.disable()
    try:
        for module in modules:
            importlib.import_module(module)
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


@contextmanager
def user_import_path(base_dir: Path) -> Iterator[None]:
    """Put ``base_dir`` and the current directory at the front of ``sys.path`` for the duration."""
    added = [str(directory) for directory in (base_dir, Path.cwd()) if str(directory) not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for directory in added:
            sys.path.remove(directory)
