"""The schema registry's requests per second, against the HTTP floor of the same server.

    .venv/bin/python bench/registry_bench.py            # ~1 minute
    .venv/bin/python bench/registry_bench.py --quick    # smoke run

A broker (``python -m seglog serve`` as a subprocess) serving the registry,
alone and as ``--nodes 2``; one client on one keep-alive connection
(http.client), one request at a time, so each figure is a request's whole
round trip. Rows:

  floor            GET /schemas/types: the server's HTTP cost, no registry state
  get by id        GET /schemas/ids/{id} over N registered schemas (what a
                   deserializer asks, once per id it meets)
  latest version   GET /subjects/{s}/versions/latest
  register new     POST /subjects/{s}/versions of a new schema: checked against
                   the subject's level, appended to _schemas and fsynced
  register again   the same request for a schema the subject has (what a
                   serializer sends on start)

With 2 nodes each row runs through node 2: _schemas' partition is led by
node 1, so reads catch up from it over the nodes' control channel and
registrations are handed to it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def free_ports(count: int) -> int:
    """A base port with ``count`` free ports from it."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            base = int(sock.getsockname()[1])
        if base + count > 65535:
            continue
        try:
            for i in range(count):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue


def start(root: Path, nodes: int) -> tuple[subprocess.Popen[bytes], int]:
    port, registry = free_ports(nodes), free_ports(nodes)
    args = [sys.executable, "-m", "seglog", "serve", "--nodes", str(nodes)]
    for key, value in {
        "log.dirs": str(root / "data"),
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "schema.registry.port": str(registry),
    }.items():
        args += ["--override", f"{key}={value}"]
    log = open(root / "broker.log", "wb")  # noqa: SIM115 (kept open for the process)
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            for i in range(nodes):
                socket.create_connection(("127.0.0.1", registry + i), timeout=0.2).close()
            return process, registry + nodes - 1
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"the broker did not start: {(root / 'broker.log').read_text()}")


def schema(i: int) -> dict[str, str]:
    fields = [{"name": f"f{j}", "type": "long", "default": 0} for j in range(i % 7 + 1)]
    return {"schema": json.dumps({"type": "record", "name": f"R{i % 20}", "fields": fields})}


class Client:
    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method: str, path: str, body: object = None) -> object:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
        self.connection.request(method, path, data, headers)
        reply = self.connection.getresponse()
        answer = json.loads(reply.read())
        if reply.status != 200:
            raise RuntimeError(f"{method} {path}: {reply.status} {answer}")
        return answer


def rate(count: int, request: Callable[[int], object]) -> float:
    request(0)  # not timed: the first of each kind
    began = time.perf_counter()
    for i in range(count):
        request(i)
    return count / (time.perf_counter() - began)


def measure(nodes: int, count: int, writes: int) -> list[tuple[str, float]]:
    with tempfile.TemporaryDirectory(prefix="seglog-registry-bench-") as directory:
        process, port = start(Path(directory), nodes)
        try:
            client = Client(port)
            ids = [
                client.call("POST", f"/subjects/s{i % 20}-value/versions", schema(i))
                for i in range(200)
            ]
            known = [int(answer["id"]) for answer in ids]  # type: ignore[index]
            return [
                ("floor", rate(count, lambda i: client.call("GET", "/schemas/types"))),
                (
                    "get by id",
                    rate(count, lambda i: client.call("GET", f"/schemas/ids/{known[i % 200]}")),
                ),
                (
                    "latest version",
                    rate(
                        count,
                        lambda i: client.call("GET", f"/subjects/s{i % 20}-value/versions/latest"),
                    ),
                ),
                (
                    "register new",
                    rate(
                        writes,
                        lambda i: client.call(
                            "POST", f"/subjects/n{i}-value/versions", schema(1000 + i)
                        ),
                    ),
                ),
                (
                    "register again",
                    rate(
                        count,
                        lambda i: client.call(
                            "POST", f"/subjects/s{i % 20}-value/versions", schema(i % 200)
                        ),
                    ),
                ),
            ]
        finally:
            process.terminate()
            process.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run")
    args = parser.parse_args()
    count, writes = (200, 50) if args.quick else (3000, 500)
    alone = measure(1, count, writes)
    two = measure(2, count, writes)
    print(f"one client, one request at a time; {count:,} reads, {writes:,} registrations")
    print(f"{'request':<16} {'alone req/s':>12} {'via node 2 req/s':>17}")
    for (label, one), (_, other) in zip(alone, two, strict=True):
        print(f"{label:<16} {one:>12,.0f} {other:>17,.0f}")


if __name__ == "__main__":
    main()
