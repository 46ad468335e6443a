"""Cut one node's power: its unsynced writes are lost, the other nodes keep theirs.

A node of ``seglog serve --nodes N`` is a process of its own. With
:data:`~seglog.cli.serve.TEST_NODE_HOOK` set to :data:`HOOK` and :data:`NODE`
to a node's index, that node runs over a :class:`NodeFaultyEnv`
(:mod:`tests.storage.faulty_env`'s image of what a disk would hold after a power
cut, kept for the partition directories the node writes). On SIGUSR1 it writes
that image to the file :data:`IMAGE` names and exits at once, as a machine losing
power would. The supervisor starts the node again (unclean, as after any crash);
before opening anything, the new node puts the image in place of its partition
directories, so that it finds only what had been fsynced, and recovers from that.

What the cut covers: the files inside the partition directories the node wrote.
The log directory's own entries and files (the topic list, checkpoints) are
shared with the supervisor and the other nodes, which write and sync them too;
they are left as they are (a node writes its own ones atomically and durably).
A partition directory counts as durable as it was when the node first touched it:
what another process (the controller creating a topic) or an earlier run of the
node left there is taken as on disk.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import shutil
import signal
import threading
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from types import FrameType

from seglog.broker.settings import BrokerSettings
from seglog.storage import filenames, io
from tests.storage.faulty_env import Fault, FaultyEnv

HOOK = "tests.broker.nodes.power_cut:install"
NODE = "SEGLOG_TEST_POWER_CUT_NODE"
"""The index (0-based) of the node whose power can be cut."""
IMAGE = "SEGLOG_TEST_POWER_CUT_IMAGE"
"""The file the node writes its durable image to when its power is cut."""
SIGNAL = signal.SIGUSR1
EXIT_CODE = 99
"""What a node whose power was cut exits with (the supervisor restarts it)."""

logger = logging.getLogger(__name__)


def applied_path(image: Path) -> Path:
    """Where the restarted node records what it put back: partition -> file sizes (JSON)."""
    return image.with_name(image.name + ".applied")


class NodeFaultyEnv(FaultyEnv):
    """A :class:`FaultyEnv` over a shared log directory, for the partitions one node writes."""

    def __init__(self, root: Path) -> None:
        #: The partition directories the node touched: their files count, from then
        #: on, as the image says (None: the directory did not exist yet then).
        self.partitions: dict[str, int | None] = {}
        self.cut = False
        super().__init__(root)

    def _snapshot_everything(self) -> int:
        # Other processes write below the root: each partition directory is taken
        # as it is when this node first touches it (_adopt), not all of it at start.
        return self._id(os.stat(self.root))

    def _adopt(self, relative: PurePosixPath | None) -> None:
        if relative is None or not relative.parts:
            return
        name = relative.parts[0]
        if name in self.partitions or filenames.parse_partition_dir(name) is None:
            return
        directory = self.root / name
        if not directory.exists():
            if len(relative.parts) == 1:
                # Being made by this node: what it holds is durable once synced.
                self.partitions[name] = None
            return
        if not directory.is_dir():
            return  # a file whose name reads as a partition's (".lock-node-1")
        for child in os.listdir(directory):
            self._record_file(str(directory / child))
        self._record_dir(directory)
        self.partitions[name] = self._id(os.stat(directory))

    def _check(
        self, op: str, target: object, action: str, *, paths: Sequence[object] = ()
    ) -> Fault | None:
        if self.cut:
            # The power is off: nothing more reaches the files (the process exits).
            threading.Event().wait()
        with self._lock:
            for path in paths or [target]:
                self._adopt(self._relative(path))
        return super()._check(op, target, action, paths=paths)

    def image(self) -> dict[str, dict[str, bytes]]:
        """What a power cut now leaves in each partition directory the node wrote."""
        out: dict[str, dict[str, bytes]] = {}
        for name, adopted in self.partitions.items():
            directory_id = adopted
            if directory_id is None:
                try:
                    st = os.stat(self.root / name)
                    directory_id = self._ids.get((st.st_dev, st.st_ino))
                except FileNotFoundError:
                    continue
            directory = self._durable.get(directory_id) if directory_id is not None else None
            entries = directory.entries if directory is not None else None
            files: dict[str, bytes] = {}
            for child, child_id in (entries or {}).items():
                node = self._durable.get(child_id)
                if node is None or node.kind == "f":
                    files[child] = node.data if node is not None else b""
            out[name] = files
        return out

    def power_cut_to(self, image_path: Path) -> None:
        """Stop every write, save the durable image to ``image_path``, and exit."""
        with self._lock:
            self.cut = True
            data = pickle.dumps(self.image())
            # Written whole, then renamed: the next start reads all of it or none.
            partial = image_path.with_name(image_path.name + ".partial")
            partial.write_bytes(data)
            os.replace(partial, image_path)
            os._exit(EXIT_CODE)


def restore(root: Path, image_path: Path) -> dict[str, dict[str, int]]:
    """Put the image a power cut left in place of the partition directories it names."""
    image: dict[str, dict[str, bytes]] = pickle.loads(image_path.read_bytes())
    restored: dict[str, dict[str, int]] = {}
    for name, files in image.items():
        directory = root / name
        if not directory.is_dir():
            continue  # deleted since (a topic deletion the controller carried out)
        shutil.rmtree(directory)
        directory.mkdir()
        for child, data in files.items():
            (directory / child).write_bytes(data)
        restored[name] = {child: len(data) for child, data in files.items()}
    return restored


def install(settings: BrokerSettings, node_index: int) -> None:
    """The node hook: on the chosen node, put back a cut's image, then arm the next cut."""
    if os.environ.get(NODE) != str(node_index):
        return
    image_path = Path(os.environ[IMAGE])
    root = settings.log_dir
    if image_path.exists():
        restored = restore(root, image_path)
        applied_path(image_path).write_text(json.dumps(restored))
        image_path.unlink()
    env = NodeFaultyEnv(root)
    io.set_default_env(env)

    def cut(signum: int, frame: FrameType | None) -> None:
        env.power_cut_to(image_path)

    signal.signal(SIGNAL, cut)
