"""Run seglog's broker under cProfile; the stats are written when it stops.

    .venv/bin/python bench/profile_broker.py OUT.prof --override log.dirs=... [...]

The arguments after OUT.prof are those of ``seglog serve``. Stop the broker
with SIGTERM or SIGINT (its clean shutdown) and OUT.prof is written; read it
with ``python -m pstats OUT.prof``. ``bench/broker_bench.py --profile`` starts
the broker this way and prints the top costs per request with
:func:`print_profile`, defined here. Only the event-loop
thread is profiled (background storage threads are not), in CPU time of that
thread (``time.thread_time_ns``): on a machine shared with the load generator,
wall time would charge whichever call was running when the scheduler took the
core away. Time waiting in epoll is therefore (nearly) zero.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

# (label, file name suffix, function name) of the stages of a request, for --profile.
_STAGES = (
    ("all of the event-loop thread", "", ""),
    ("dispatch.handle_frame (decode + handler + encode)", "broker/dispatch.py", "handle_frame"),
    ("  headers.decode_request", "protocol/headers.py", "decode_request"),
    ("  handlers.produce.produce", "handlers/produce.py", "produce"),
    ("    storage Log.append", "storage/log.py", "append"),
    ("      os.pwritev", "~", "<built-in method posix.pwritev>"),
    ("  handlers.fetch.fetch", "handlers/fetch.py", "fetch"),
    ("    storage Log.read", "storage/log.py", "read"),
    ("  headers.encode_response", "protocol/headers.py", "encode_response"),
    ("connection: Channel.buffer_updated (frames out)", "broker/connection.py", "buffer_updated"),
    ("connection: Channel.get_buffer", "broker/connection.py", "get_buffer"),
    ("connection: Channel.send", "broker/connection.py", "send"),
    ("connection: send_chunks (before)", "broker/connection.py", "send_chunks"),
    ("  os.sendfile", "~", "<built-in method posix.sendfile>"),
    ("socket recv_into", "~", "<method 'recv_into' of '_socket.socket' objects>"),
    ("socket recv", "~", "<method 'recv' of '_socket.socket' objects>"),
    ("socket send", "~", "<method 'send' of '_socket.socket' objects>"),
    ("asyncio StreamReader.read (before)", "asyncio/streams.py", "read"),
    ("epoll", "~", "<method 'poll' of 'select.epoll' objects>"),
)


def print_profile(path: Path, api: str, requests: int, name: str, top: int = 25) -> None:
    stats = pstats.Stats(str(path))
    entries = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for (_cc, _nc, tt, _ct, _callers) in entries.values())
    per = max(requests, 1)
    out = Console(width=200)
    stages = Table(title=f"{name}: CPU per {api} request by stage ({requests:,} requests)")
    stages.add_column("stage (cumulative)")
    stages.add_column("µs / request", justify="right")
    for label, suffix, func in _STAGES:
        if not func:
            seconds = total
        else:
            found = [v[3] for k, v in entries.items() if k[2] == func and k[0].endswith(suffix)]
            if not found:
                continue
            seconds = sum(found)
        stages.add_row(label, f"{seconds / per * 1e6:,.1f}")
    out.print(stages)
    table = Table(
        title=f"{name}: cProfile of the event-loop thread's CPU time, top functions by own "
        f"time, per {api} request"
    )
    table.add_column("function")
    table.add_column("calls / req", justify="right")
    table.add_column("own µs / req", justify="right")
    table.add_column("cumulative µs / req", justify="right")
    rows = sorted(entries.items(), key=lambda item: item[1][2], reverse=True)[:top]
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in rows:
        where = filename.split("/src/")[-1].split("site-packages/")[-1]
        table.add_row(
            f"{func} ({where}:{line})",
            f"{nc / max(requests, 1):,.1f}",
            f"{tt / max(requests, 1) * 1e6:,.1f}",
            f"{ct / max(requests, 1) * 1e6:,.1f}",
        )
    out.print(table)


def main() -> None:
    from seglog.cli.serve import serve  # only the broker side needs seglog

    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    profiler = cProfile.Profile(time.thread_time_ns, 1e-9)
    try:
        profiler.runcall(serve.main, args=sys.argv[2:], prog_name="seglog serve")
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    finally:
        profiler.dump_stats(out)


if __name__ == "__main__":
    main()
