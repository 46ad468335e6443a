"""The parent process of ``seglog serve --nodes N``: prepares the directory, runs the nodes.

Theory of operation:

1. Take the log directory's ``.lock`` (a second, unrelated ``seglog serve``
   on the same directory is refused, as with one node) and hold it to the end.
2. Prepare the directory for the nodes: write ``meta.properties`` if missing,
   consume the clean-shutdown marker (the nodes are told whether their
   partitions were closed cleanly), give every partition without a live
   leader one, and when the node count changed balance every topic's leaders
   over the nodes (:func:`~seglog.broker.nodes.assignment.reassign`): the
   topic list is complete before any node reads it.
3. Start node ``i`` as ``python -m seglog serve ... --node-index i``. A node
   that exits while the supervisor is not stopping (a crash, ``kill -9``) is
   started again after a short back-off, as unclean: it recovers its
   partitions from their recovery points while the others keep serving.
4. On SIGTERM or SIGINT, send SIGTERM to every node and wait for each to close
   its partitions and write its checkpoints. If all of them stopped cleanly,
   leave the clean-shutdown marker, release the lock and exit 0.

A node that fails within its first seconds at the very first start (a port in
use, a bad setting) stops the whole supervisor: restarting it would only fail
again.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from seglog.broker.nodes import assignment
from seglog.broker.nodes.cluster import Cluster
from seglog.broker.settings import BrokerSettings
from seglog.errors import LogDirLockedError
from seglog.storage import checkpoints, io
from seglog.storage.log_dir import LOCK_FILE, read_topic_list, write_topic_list

logger = logging.getLogger(__name__)

BACKOFF_FIRST = 0.2
BACKOFF_MAX = 10.0
STABLE_SECONDS = 30.0
"""A node that ran this long before dying is restarted after the shortest back-off again."""
STOP_TIMEOUT = 120.0


@dataclass
class _Node:
    index: int
    node_id: int
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    restarts: int = 0
    backoff: float = BACKOFF_FIRST
    due: float = 0.0
    served: bool = False
    """Whether the node ever accepted a connection: until then, an exit means it cannot start."""


class Supervisor:
    """Runs ``settings.nodes`` broker processes over one log directory."""

    def __init__(self, settings: BrokerSettings, node_args: Sequence[str]) -> None:
        """``node_args`` are the ``seglog serve`` arguments every node gets (file, overrides)."""
        self.settings = settings
        self.count = settings.nodes
        self._node_args = list(node_args)
        self._stopping = False
        self._lock_fd: int | None = None
        self._env = io.env_or_default(None)
        self.nodes = [_Node(i, settings.node_id + i) for i in range(self.count)]

    # ------------------------------------------------------------ preparing

    def _lock(self) -> None:
        path = self.settings.log_dir
        self._env.mkdir(path)
        fd = self._env.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT)
        if not self._env.lock(fd):
            self._env.close(fd)
            raise LogDirLockedError(
                f"{path} is in use by another process (its {LOCK_FILE} is locked)"
            )
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            self._env.unlock(self._lock_fd)
            self._env.close(self._lock_fd)
            self._lock_fd = None

    def _prepare(self) -> bool:
        """Make the directory ready for the nodes; whether it was shut down cleanly."""
        path = self.settings.log_dir
        for node in self.nodes:
            if (path / Cluster.lock_file_of(node.node_id)).exists() and _held(path, node.node_id):
                raise LogDirLockedError(
                    f"{path} is in use: node {node.node_id} of another process still runs"
                )
        if not checkpoints.read_meta_properties(path, env=self._env):
            import base64

            checkpoints.write_meta_properties(
                path,
                node_id=self.settings.node_id,
                cluster_id=base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="),
                directory_id=uuid.uuid4(),
                env=self._env,
            )
        clean = checkpoints.consume_clean_shutdown(path, env=self._env)
        topics = read_topic_list(path, env=self._env)
        if assignment.reassign(topics, [node.node_id for node in self.nodes]):
            write_topic_list(path, topics, env=self._env)
        return clean

    # --------------------------------------------------------------- running

    def _command(self, node: _Node, clean: bool) -> list[str]:
        level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
        if not isinstance(level, str) or level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            level = "INFO"
        args = [sys.executable, "-m", "seglog", "--log-level", level, "serve", *self._node_args]
        args += ["--node-index", str(node.index)]
        if clean:
            args.append("--node-clean")
        return args

    def _start(self, node: _Node, clean: bool) -> None:
        # Its own process group: a Ctrl-C in a terminal reaches the supervisor
        # only, which stops the nodes itself (and does not take their exits for crashes).
        node.process = subprocess.Popen(self._command(node, clean), process_group=0)
        node.started = time.monotonic()
        ports = ", ".join(
            f"{x.name} {x.host or '*'}:{x.port + node.index}" for x in self.settings.listeners
        )
        logger.info(
            "node %d%s runs as process %d on %s",
            node.node_id,
            " (controller)" if node.index == 0 else "",
            node.process.pid,
            ports,
        )

    def _accepts(self, node: _Node) -> bool:
        """Whether the node's first listener accepts connections."""
        listener = self.settings.listeners[0]
        host = listener.host if listener.host not in ("", "0.0.0.0", "::") else "localhost"
        try:
            with socket.create_connection((host, listener.port + node.index), timeout=0.5):
                return True
        except OSError:
            return False

    def _on_signal(self, signum: int, frame: object) -> None:
        self._stopping = True

    def run(self) -> int:
        """Run the nodes until SIGTERM or SIGINT; the exit code (0 after a clean stop)."""
        self._lock()
        try:
            clean = self._prepare()
            previous = {
                sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)
            }
            try:
                for node in self.nodes:
                    self._start(node, clean)
                failed = self._watch()
            finally:
                # Whatever happened above, no node is left running without its supervisor.
                stopped_cleanly = self._stop_all()
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
            if failed is not None:
                return failed
            if stopped_cleanly:
                checkpoints.write_clean_shutdown(self.settings.log_dir, env=self._env)
                logger.info("all %d nodes stopped cleanly", self.count)
                return 0
            logger.error("not every node stopped cleanly: they recover at the next start")
            return 1
        finally:
            self._unlock()

    def _watch(self) -> int | None:
        """Restart nodes that die until asked to stop; an exit code if a node cannot start."""
        first_start = True
        while not self._stopping:
            now = time.monotonic()
            for node in self.nodes:
                process = node.process
                if process is not None:
                    code = process.poll()
                    if code is None:
                        continue
                    ran = now - node.started
                    if first_start and node.restarts == 0 and code > 0 and not node.served:
                        logger.error(
                            "node %d could not start (exit code %d): stopping", node.node_id, code
                        )
                        self._stopping = True
                        return code
                    if ran >= STABLE_SECONDS:
                        node.backoff = BACKOFF_FIRST
                    logger.error(
                        "node %d (process %d) exited with %s; starting it again in %.1f s",
                        node.node_id,
                        process.pid,
                        f"signal {-code}" if code < 0 else f"code {code}",
                        node.backoff,
                    )
                    node.process = None
                    node.due = now + node.backoff
                    node.backoff = min(node.backoff * 2, BACKOFF_MAX)
                elif now >= node.due:
                    node.restarts += 1
                    # Whatever it had open was not closed: recover from the recovery points.
                    try:
                        self._start(node, clean=False)
                    except OSError as exc:
                        logger.error("cannot start node %d: %s", node.node_id, exc)
                        node.due = now + node.backoff
                        node.backoff = min(node.backoff * 2, BACKOFF_MAX)
            if first_start:
                # The first start is over once every node serves: a node that exits
                # before it ever accepted a connection could not start (a port taken,
                # a bad setting), however long a busy machine took to get there.
                for node in self.nodes:
                    if not node.served and node.process is not None:
                        node.served = self._accepts(node)
                first_start = not all(n.served for n in self.nodes)
            time.sleep(0.05)
        return None

    def _stop_all(self) -> bool:
        """SIGTERM every node, wait for each; True if every one exited 0."""
        logger.info("stopping %d nodes", self.count)
        running = [n for n in self.nodes if n.process is not None]
        clean = len(running) == len(self.nodes)
        for node in running:
            assert node.process is not None
            if node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for node in running:
            assert node.process is not None
            try:
                code = node.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logger.error("node %d did not stop in time: killing it", node.node_id)
                node.process.kill()
                code = node.process.wait()
            if code != 0:
                logger.error("node %d exited with code %d", node.node_id, code)
                clean = False
        return clean


def _held(path: Path, node_id: int) -> bool:
    from seglog.broker.nodes.cluster import lock_held

    return lock_held(path / Cluster.lock_file_of(node_id))


def run_supervisor(settings: BrokerSettings, node_args: Sequence[str]) -> int:
    """Run ``settings.nodes`` nodes until a signal stops them; the exit code."""
    Cluster.check(settings, settings.nodes)
    return Supervisor(settings, node_args).run()
