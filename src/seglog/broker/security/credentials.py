"""Where users come from: SCRAM credentials in the log directory, PLAIN users from files.

SCRAM credentials are kept as Kafka keeps them (salt, StoredKey, ServerKey,
iterations; never the password) in ``scram-credentials.json`` in the log
directory, readable by its owner only::

    {"version": 1,
     "users": {"alice": {"SCRAM-SHA-256": {"salt": "...", "stored_key": "...",
                                           "server_key": "...", "iterations": 4096}}}}

The broker changes it through AlterUserScramCredentials; ``seglog users``
changes it directly. Both replace the file whole (write, fsync, rename), and
the broker rereads it when its modification time or size changes, so a user
added with the CLI can log in at once.

PLAIN users come from Kafka's JAAS configuration (``user_<name>="<password>"``
options of ``PlainLoginModule`` in ``sasl.jaas.config``) and from the file
named by ``sasl.plain.users.file`` (``name=password`` lines, reread when it
changes).
"""

from __future__ import annotations

import contextlib
import fcntl
import hmac
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from seglog.broker.security.scram import MECHANISMS, ScramCredential
from seglog.config import jaas_options, parse_properties
from seglog.storage.io import fsync_dir, fsync_file, rename

SCRAM_FILE = "scram-credentials.json"


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` atomically with a file only its owner can read."""
    tmp = path.with_name(path.name + ".tmp")
    descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(text.encode())
        fsync_file(handle)
    rename(tmp, path)
    fsync_dir(path.parent)


class _Watched:
    """A file reread when its modification time or size changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None

    def changed(self) -> bool:
        try:
            info = self.path.stat()
            stamp: tuple[int, int] | None = (info.st_mtime_ns, info.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp == self._stamp and stamp is not None:
            return False
        self._stamp = stamp
        return True


class ScramStore:
    """The SCRAM credentials of a log directory."""

    def __init__(self, log_dir: Path) -> None:
        self.path = Path(log_dir) / SCRAM_FILE
        self._watched = _Watched(self.path)
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def _refresh(self) -> None:
        if not self._watched.changed():
            return
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            self._users = {}
            return
        self._users = {
            user: {m: ScramCredential.from_json(c) for m, c in mechanisms.items()}
            for user, mechanisms in data.get("users", {}).items()
        }

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        """The credential of ``user`` for ``mechanism``, if there is one."""
        self._refresh()
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """Every user's credentials by mechanism."""
        self._refresh()
        return {user: dict(mechanisms) for user, mechanisms in self._users.items()}

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # The broker and `seglog users` may both write: one at a time, each on
        # the latest contents.
        with open(self.path.with_name(SCRAM_FILE + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._watched = _Watched(self.path)  # force a reread under the lock
                self._refresh()
                yield
                self._save()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _save(self) -> None:
        data: dict[str, Any] = {
            "version": 1,
            "users": {
                user: {m: c.to_json() for m, c in sorted(mechanisms.items())}
                for user, mechanisms in sorted(self._users.items())
                if mechanisms
            },
        }
        write_private(self.path, json.dumps(data, indent=1) + "\n")
        self._watched.changed()

    def change(
        self,
        upserts: list[tuple[str, str, ScramCredential]],
        deletions: list[tuple[str, str]],
    ) -> list[tuple[str, str]]:
        """Apply deletions then upserts in one write; the deletions that found nothing."""
        missing: list[tuple[str, str]] = []
        with self._locked():
            for user, mechanism in deletions:
                if self._users.get(user, {}).pop(mechanism, None) is None:
                    missing.append((user, mechanism))
                if user in self._users and not self._users[user]:
                    del self._users[user]
            for user, mechanism, credential in upserts:
                assert mechanism in MECHANISMS
                self._users.setdefault(user, {})[mechanism] = credential
        return missing


class PlainUsers:
    """PLAIN users: the JAAS ``user_<name>`` options, then the users file."""

    def __init__(self, jaas: str | None, users_file: str | None) -> None:
        self._jaas = {
            name.removeprefix("user_"): password
            for name, password in (jaas_options(jaas) if jaas else {}).items()
            if name.startswith("user_")
        }
        self._file = _Watched(Path(users_file)) if users_file else None
        self._from_file: dict[str, str] = {}

    def check(self, user: str, password: str) -> bool:
        """Whether ``password`` is ``user``'s (compared in constant time)."""
        if self._file is not None and self._file.changed():
            try:
                self._from_file = parse_properties(self._file.path.read_text())
            except FileNotFoundError:
                self._from_file = {}
        expected = self._jaas.get(user, self._from_file.get(user))
        if expected is None:
            # Compare anyway, so that timing does not tell which users exist.
            hmac.compare_digest(password.encode(), password.encode())
            return False
        return hmac.compare_digest(expected.encode(), password.encode())
