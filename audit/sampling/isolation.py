"""Audited code in a forked child: its results come back through a pipe, it can be killed, it never outlives the audit.

A mechanism may raise, call ``sys.exit``, kill its process or hang; run in a
child forked from the audit's process (:func:`fork`), it costs only what the
parent decides (its pair's rows, a pilot's layout), and a child whose parent
is killed is killed with it.  ``os.fork`` rather than a
``multiprocessing.Process``: a dask worker is a daemonic process, which
``multiprocessing`` forbids children; and the child shares the parent's
imported modules, so it starts in milliseconds.  Its callers:
:mod:`audit.sampling.sampler` (each batch of chunks),
:func:`audit.sampling.structure.fix_layout` (the structure pilot) and, through
:func:`call`, the dataset search's screening and a one-run audit's training run
(:func:`audit.engine.one_run.train_isolated`, through
:func:`audit.sampling.chunk_pools.isolated_call`).  This module imports only
the standard library, so that any module may use it without an import cycle.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

FORK = sys.platform.startswith("linux")
"""Whether audited code runs in forked children; elsewhere (Windows; macOS, where forking a process with threads
is unsafe) in the audit's own process, without a timeout."""


def fork(work: Callable[[Callable[[Any], None]], Any]) -> tuple[multiprocessing.connection.Connection, Child]:
    """Fork a child that runs ``work(send)`` and exits; ``send(result)`` puts a picklable result on the pipe.

    Returns the pipe's reading end (EOF once the child ended, whatever
    ended it) and the child.  The child exits with ``os._exit`` (the
    parent's atexit handlers and buffers, inherited by the fork, are not
    run) and is killed when its parent ends (:func:`_die_with`).
    """
    parent = os.getpid()
    with _FORK_LOCK:  # no other thread's child inherits this sender: a dead child's pipe reads EOF at once
        receiver, sender = multiprocessing.Pipe(duplex=False)
        with warnings.catch_warnings():  # forking a process with threads: the child only runs the audited code
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            try:
                receiver.close()
                _die_with(parent)
                work(sender.send)
            finally:
                os._exit(0)
        sender.close()
    return receiver, Child(pid)


_FORK_LOCK = threading.Lock()
"""Held from a child's pipe to its fork: samplers may run in several threads (the staged search draws its pairs together)."""


def _die_with(parent: int) -> None:
    """Linux: end this child when its parent ends (the audit killed with kill -9, a cluster worker gone), so that a
    hung mechanism does not outlive the audit (``prctl(PR_SET_PDEATHSIG, SIGKILL)``)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl: the child may outlive a killed parent
        return
    if os.getppid() != parent:  # the parent ended before the request
        os._exit(1)


class Child:
    """A forked child: kill it, wait for it, read its exit code (negative: the signal that ended it)."""

    def __init__(self, pid: int):
        self.pid, self.exitcode = pid, None

    def is_alive(self) -> bool:
        if self.exitcode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.exitcode = os.waitstatus_to_exitcode(status)
        return self.exitcode is None

    def kill(self) -> None:
        if self.is_alive():
            os.kill(self.pid, signal.SIGKILL)

    def join(self) -> None:
        if self.exitcode is None:
            self.exitcode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])


def call(function: Callable[[], Any], timeout: float | None) -> Any:
    """``function()`` in a child forked from this process (:func:`fork`), its result sent back; the child is
    killed after ``timeout`` seconds (None: no limit).  Where :data:`FORK` is false, in this process, without a
    limit.  The dataset search screens each candidate so (:func:`audit.inputs.pair_search.screen_candidates`): a call
    that never returns, C code included, costs its child, not the audit.

    Raises
    ------
    TimeoutError
        When the child ran past ``timeout`` (it is killed).
    ChildProcessError
        When the child ended without a result (``os._exit``, a crash, the out-of-memory killer, or
        ``function`` raised: callers catch what they expect themselves); ``args[0]`` is its exit code.
    """
    if not FORK:
        return function()
    receiver, child = fork(lambda send: send(function()))
    try:
        if not receiver.poll(timeout):
            raise TimeoutError(f"ran past {timeout:g} s")
        try:
            return receiver.recv()
        except (EOFError, OSError):
            child.join()
            raise ChildProcessError(child.exitcode) from None
    finally:
        child.kill()
        child.join()
        receiver.close()
