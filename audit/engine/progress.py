"""What the terminal shows while an audit waits on the mechanism: a progress bar per stage, and its heartbeat.

Every stage that calls the mechanism draws a bar on stderr from its first
call: the dataset search (``[neighbours] strategy = "search"``, in
candidates screened), the structure pilot (:func:`audit.sampling.structure.fix_layout`,
in datasets drawn) and the engine's stages (:class:`OutputsBar`, in outputs
per dataset drawn).  A heartbeat thread redraws the bar every
:data:`HEARTBEAT` seconds with the seconds since the mechanism last
answered, so that a slow or hanging mechanism shows at once, not after
``run.sample_timeout`` (600 s by default).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

HEARTBEAT = {True: 1.0, False: 30.0}
"""Seconds between the progress bar's redraws while no output comes in, on a terminal and elsewhere (a CI log)."""


class ProgressBar:
    """A stage's bar (``desc``, counted in ``unit``), drawn at the first :meth:`show` or :meth:`update` (the
    stage's first mechanism call), with a heartbeat: ``"waiting on the mechanism for N s"`` once no progress came
    in for a heartbeat's interval.  Nothing is drawn when ``enabled`` is false or the stage never starts.
    """

    def __init__(self, desc: str, unit: str, enabled: bool, total: int | None = None, scale: bool = False):
        self.desc, self.unit, self.enabled, self.total, self.scale = desc, unit, enabled, total, scale
        self.bar: Any = None
        self._status = ""
        self.last = time.monotonic()
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.heartbeat: threading.Thread | None = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stopped.set()
        if self.heartbeat is not None:
            self.heartbeat.join()
        if self.bar is not None:
            self.bar.close()

    def _draw(self) -> Any:
        """The tqdm bar and its heartbeat, made on first use."""
        if self.bar is None:
            from tqdm import tqdm  # on the first call: not on `import audit.commands.api`

            terminal = sys.stderr.isatty()
            self.bar = tqdm(total=self.total, desc=self.desc, unit=self.unit, unit_scale=self.scale, file=sys.stderr,
                            disable=not self.enabled, **({} if terminal else {"mininterval": HEARTBEAT[False]}))
            if self.enabled:
                self.heartbeat = threading.Thread(target=self._beat, args=(HEARTBEAT[terminal],), daemon=True)
                self.heartbeat.start()
        return self.bar

    def _beat(self, interval: float) -> None:
        while not self.stopped.wait(interval):
            idle = time.monotonic() - self.last
            waiting = f"waiting on the mechanism for {idle:.0f} s" if idle >= interval else ""
            self.bar.set_postfix_str("; ".join(text for text in (self.status, waiting) if text), refresh=True)

    def show(self, done: int, total: int) -> None:
        """``done`` of ``total`` are finished (0 at the stage's first call: the bar appears)."""
        with self.lock:
            self.total = total
            bar = self._draw()
            self.last = time.monotonic()
            bar.total, bar.n = total, done
            bar.refresh()

    def update(self, count: int) -> None:
        """``count`` more are finished (called from several threads at once)."""
        with self.lock:
            self.last = time.monotonic()
            self._draw().update(count)

    @property
    def status(self) -> str:
        return self._status

    @status.setter
    def status(self, text: str) -> None:
        self._status = text
        self._draw().set_postfix_str(text, refresh=True)


class OutputsBar(ProgressBar):
    """The engine's bar, in outputs per dataset drawn (every stage, every pair), shown from the first mechanism
    call (the memory check's).

    Each unit is counted at first for the outputs it may draw (``planned``; a
    search in rounds: the most it may draw, so the total stays put); the best
    policy's screen fixes its later stages (:meth:`replan`), and the unit's end
    sets its share to what it drew (a failed pair draws no more).  ``status``
    says what runs (the memory check's first outputs, a round and its lower
    bound against the claim).
    """

    def __init__(self, planned: int, units: int, enabled: bool):
        super().__init__("audit", "outputs", enabled, units * planned, scale=True)
        self.planned = planned
        self.unit_planned = self.drawn = 0
        self._draw()

    def update(self, outputs: int) -> None:
        with self.lock:  # the staged search draws several pairs at once, in threads
            self.drawn += outputs
        super().update(outputs)

    def start(self) -> None:
        self.unit_planned, self.drawn, self.status = self.planned, 0, ""

    def replan(self, planned: int) -> None:
        """The running unit will draw ``planned`` outputs per dataset in all."""
        self.bar.total += planned - self.unit_planned
        self.unit_planned = planned
        self.bar.refresh()

    def finish(self) -> None:
        self.replan(self.drawn)
