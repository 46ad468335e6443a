"""What the long-running commands share: progress on a terminal, one summary line, signals.

``produce``, ``consume``, ``verify``, ``dump-log`` (and ``mirror``, through its
own display) follow the same rules:

- Progress is drawn on stderr, and only when stderr is a terminal (``TERM`` not
  ``dumb``): a bar with totals where the total is known, a spinner with counts
  and a rate where it is not. ``FORCE_COLOR`` and friends do not turn it on: a
  CI log would fill with redraws. stdout never carries it, so piped data stays
  exactly the data.
- While the display runs, what the command writes to stderr, and to stdout when
  stdout is the same terminal, is printed above it instead of through it.
- The command always ends with one summary line on stderr, on its own line,
  after stdout is flushed (so ``2>&1`` keeps the summary last), also when a
  signal stopped it.

:class:`Signals` turns SIGINT and SIGTERM into a flag the command looks at
between units of work, so that what was done is counted exactly; a command
marks the places where it may be stopped at once (a blocking read of stdin)
by setting :attr:`Signals.raising`. A second signal always stops at once.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, TextIO

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column
from rich.text import Text

BYTES = "bytes"

_SIGNAL_NAMES: dict[int, str] = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}


def size_text(nbytes: float) -> str:
    """A byte count for people: ``512 B``, ``1.5 KiB``, ``3.25 MiB``, ``1.02 GiB``."""
    if nbytes < 1024:
        return f"{nbytes:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        nbytes /= 1024
        if nbytes < 1024 or unit == "TiB":
            break
    return f"{nbytes:.2f} {unit}" if nbytes < 10 else f"{nbytes:.1f} {unit}"


def amount_text(amount: float, unit: str) -> str:
    """``amount`` of ``unit`` for people: a size for bytes, a grouped count otherwise."""
    if unit == BYTES:
        return size_text(amount)
    return f"{amount:,.0f} {unit}"


def plural(count: int, noun: str) -> str:
    """``1 partition``, ``2 partitions``, ``3 batches``."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {noun}es" if noun.endswith(("ch", "s", "x")) else f"{count} {noun}s"


def progress_wanted() -> bool:
    """True when stderr is a terminal that can redraw a line."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by something odd, or closed
        return False
    return tty and os.environ.get("TERM", "").lower() not in ("dumb", "unknown")


def _stdout_on_the_terminal() -> bool:
    """True when stdout is the very terminal stderr is (not another one, not a pipe)."""
    try:
        if not sys.stdout.isatty():
            return False
        return os.path.samestat(os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno()))
    except (AttributeError, ValueError, OSError):
        return False


class Rate:
    """Records a second over the last few seconds, from a counter sampled when drawn."""

    def __init__(self, count: Callable[[], int], window: float = 3.0) -> None:
        self._count = count
        self._window = window
        self._samples: deque[tuple[float, int]] = deque()

    def __call__(self) -> float:
        now, value = time.monotonic(), self._count()
        samples = self._samples
        samples.append((now, value))
        while len(samples) > 2 and now - samples[1][0] >= self._window:
            samples.popleft()
        then, before = samples[0]
        return (value - before) / (now - then) if now > then else 0.0


class _Amount(ProgressColumn):
    """``1,234 / 5,000 records`` or ``1.20 MiB / 4.00 MiB`` (just the count without a total)."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        done = amount_text(task.completed, self.unit)
        if task.total is None:
            return Text(done)
        if self.unit != BYTES:
            done = f"{task.completed:,.0f}"  # the unit once, after the total
        return Text(f"{done} / {amount_text(task.total, self.unit)}")


class _Speed(ProgressColumn):
    """The recent rate in the task's unit, blank until there is one."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.speed
        if speed is None:
            return Text("")
        return Text(f"{amount_text(speed, self.unit)}/s")


class _Status(ProgressColumn):
    """Whatever the command reports about itself, asked for at each redraw."""

    def __init__(self, status: Callable[[], str]) -> None:
        super().__init__()
        self.status = status

    def render(self, task: Task) -> Text:
        return Text(self.status())


class _LinesAboveDisplay(io.RawIOBase):
    """A stream whose whole lines rich prints above the live display.

    Used as sys.stdout (when it is the terminal the display is on) and
    sys.stderr while the display runs, so that data and warnings scroll above
    the bar instead of being drawn through it. It is a full text stream with a
    ``buffer`` (click, and ``consume``'s bytes, write there); rich's own
    FileProxy is not: click finds the real stream's buffer through it.
    """

    def __init__(self, console: Console) -> None:
        super().__init__()
        self._console = console
        self._partial = b""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        size = len(data)
        lines = (self._partial + bytes(data)).split(b"\n")
        self._partial = lines.pop()
        if lines:
            self._print(lines)
        return size

    def finish(self) -> None:
        """Print what is left of a last line without its newline."""
        if self._partial:
            self._print([self._partial])
            self._partial = b""

    def _print(self, lines: list[bytes]) -> None:
        text = "\n".join(line.decode("utf-8", errors="backslashreplace") for line in lines)
        # A Text is printed as it is: no markup, no highlighting, control codes dropped;
        # soft_wrap leaves long lines to the terminal to wrap.
        self._console.print(Text(text), soft_wrap=True)


def _text_stream(raw: _LinesAboveDisplay) -> TextIO:
    return io.TextIOWrapper(
        io.BufferedWriter(raw),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
        write_through=True,
    )


class Activity:
    """A progress display on stderr while a command works, and its summary line.

    ``total`` (in ``unit``) draws a bar with the time left; without it a
    spinner shows the count and the rate. ``status``, when given, is called at
    each redraw and shown after the counts: the command's own figures (for
    ``produce``: sent, delivered, failed, rate). Nothing is drawn, and every
    method but :meth:`summary` costs next to nothing, when stderr is not a
    terminal.
    """

    def __init__(
        self,
        command: str,
        description: str,
        *,
        total: float | None = None,
        unit: str = "records",
        status: Callable[[], str] | None = None,
        show: bool | None = None,
    ) -> None:
        self.command = command
        self.started = time.monotonic()
        self.shown = progress_wanted() if show is None else show
        self._progress: Progress | None = None
        self._task = TaskID(0)
        self._redirected: list[tuple[str, TextIO, TextIO, _LinesAboveDisplay]] = []
        if not self.shown:
            return
        columns: list[ProgressColumn | str] = []
        if total is None:
            columns.append(SpinnerColumn())
        # A long topic or file name is cut, so that the figures keep their room.
        name = Column(max_width=32, no_wrap=True, overflow="ellipsis")
        columns.append(TextColumn("{task.description}", table_column=name))
        if total is not None:
            columns.append(BarColumn())
        if status is None:
            columns += [_Amount(unit), _Speed(unit)]
        else:
            columns.append(_Status(status))
        columns.append(TimeElapsedColumn())
        if total is not None:
            columns.append(TimeRemainingColumn())
        self._progress = Progress(
            *columns,
            # Drawn only on a real terminal (checked above), whatever FORCE_COLOR says.
            # The real stderr, fixed now: sys.stderr is replaced while the display runs.
            console=Console(file=sys.stderr, force_terminal=True),
            transient=True,  # the summary line replaces the display
            redirect_stdout=False,  # done by _LinesAboveDisplay, which click writes through
            redirect_stderr=False,
            refresh_per_second=8,
        )
        self._task = self._progress.add_task(description, total=total)

    def __enter__(self) -> Activity:
        if self._progress is None:
            return self
        self._progress.start()
        names = ["stdout", "stderr"] if _stdout_on_the_terminal() else ["stderr"]
        for name in names:
            raw = _LinesAboveDisplay(self._progress.console)
            stream = _text_stream(raw)
            self._redirected.append((name, getattr(sys, name), stream, raw))
            setattr(sys, name, stream)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Take the display off the terminal (again: nothing)."""
        while self._redirected:
            name, original, stream, raw = self._redirected.pop()
            setattr(sys, name, original)
            stream.flush()
            raw.finish()
        if self._progress is not None:
            self._progress.stop()

    @property
    def elapsed(self) -> float:
        """Seconds since the activity was created."""
        return time.monotonic() - self.started

    def advance(self, amount: float = 1) -> None:
        """``amount`` more of the unit is done."""
        if self._progress is not None:
            self._progress.advance(self._task, amount)

    def update(
        self,
        *,
        completed: float | None = None,
        total: float | None = None,
        description: str | None = None,
    ) -> None:
        """Set how much is done, the total, or the words in front of the bar."""
        if self._progress is not None:
            self._progress.update(
                self._task, completed=completed, total=total, description=description
            )

    def summary(self, text: str) -> None:
        """Stop the display and write ``seglog <command>: <text>`` as one line on stderr."""
        self.stop()
        # The data first, when both streams go to one file; a reader that left
        # (``| head``) does not keep the summary from stderr.
        with contextlib.suppress(BrokenPipeError, ValueError):
            sys.stdout.flush()
        click.echo(f"seglog {self.command}: {text}", err=True)


class Interrupted(Exception):
    """A signal arrived where the command may stop at once (see :class:`Signals`)."""


class Signals:
    """SIGINT and SIGTERM while a command runs: remembered, and raised only where safe.

    The first signal sets :attr:`received`; the command looks at it between
    units of work and finishes what it started (a producer waits for the
    records already sent). While :attr:`raising` is true (a blocking read, or
    work that may be dropped at any point) it also raises :class:`Interrupted`,
    and a second signal raises it wherever the command is. Outside the main
    thread (where Python cannot catch signals) nothing is installed.
    """

    def __init__(self, *, raising: bool = False) -> None:
        self.raising = raising
        self.received: int | None = None
        self.count = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():
            for signum in _SIGNAL_NAMES:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.received is None:
            self.received = signum
        if self.raising or self.count > 1:
            raise Interrupted

    def stopped(self) -> bool:
        """True once a signal arrived (a call, so that it is read afresh each time)."""
        return self.received is not None

    @property
    def name(self) -> str:
        """``SIGINT`` or ``SIGTERM``: the first signal received."""
        return _SIGNAL_NAMES.get(self.received or 0, "a signal")

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports a command a signal stopped (130)."""
        return 128 + (self.received or signal.SIGINT)


__all__ = [
    "BYTES",
    "Activity",
    "Interrupted",
    "Rate",
    "Signals",
    "amount_text",
    "plural",
    "progress_wanted",
    "size_text",
]
