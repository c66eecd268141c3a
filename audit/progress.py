"""The audit's progress bar on stderr: outputs per dataset drawn, with a heartbeat while the mechanism runs."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from tqdm import tqdm

HEARTBEAT = {True: 1.0, False: 30.0}
"""Seconds between the progress bar's redraws while no output comes in, on a terminal and elsewhere (a CI log)."""


class OutputsBar:
    """The progress bar, in outputs per dataset drawn (every stage, every pair), shown from the first mechanism call.

    Each unit is counted at first for the outputs it may draw (``planned``; a
    search in rounds: the most it may draw, so the total stays put); the best
    policy's screen fixes its later stages (:meth:`replan`), and the unit's end
    sets its share to what it drew (a failed pair draws no more).  ``status``
    says what runs (the memory check's first outputs, a round and its lower
    bound against the claim); a heartbeat thread redraws the bar while a chunk
    runs, with the seconds since the last outputs came in, so that a slow or
    hanging mechanism shows before ``run.sample_timeout``.
    """

    def __init__(self, planned: int, units: int, enabled: bool):
        self.planned = planned
        terminal = sys.stderr.isatty()
        self.bar = tqdm(total=units * planned, desc="audit", unit="outputs", unit_scale=True, file=sys.stderr,
                        disable=not enabled, **({} if terminal else {"mininterval": HEARTBEAT[False]}))
        self.unit_planned = self.drawn = 0
        self._status = ""
        self.last = time.monotonic()
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.heartbeat = threading.Thread(target=self._beat, args=(HEARTBEAT[terminal],), daemon=True)
        if enabled:
            self.heartbeat.start()

    def __enter__(self) -> OutputsBar:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stopped.set()
        if self.heartbeat.is_alive():
            self.heartbeat.join()
        self.bar.close()

    def _beat(self, interval: float) -> None:
        while not self.stopped.wait(interval):
            idle = time.monotonic() - self.last
            waiting = f"waiting on the mechanism for {idle:.0f} s" if idle >= interval else ""
            self.bar.set_postfix_str("; ".join(text for text in (self.status, waiting) if text), refresh=True)

    def update(self, outputs: int) -> None:
        with self.lock:  # the staged search draws several pairs at once, in threads
            self.drawn += outputs
            self.last = time.monotonic()
            self.bar.update(outputs)

    def start(self) -> None:
        self.unit_planned, self.drawn, self.status = self.planned, 0, ""

    @property
    def status(self) -> str:
        return self._status

    @status.setter
    def status(self, text: str) -> None:
        self._status = text
        self.bar.set_postfix_str(text, refresh=True)

    def replan(self, planned: int) -> None:
        """The running unit will draw ``planned`` outputs per dataset in all."""
        self.bar.total += planned - self.unit_planned
        self.unit_planned = planned
        self.bar.refresh()

    def finish(self) -> None:
        self.replan(self.drawn)
