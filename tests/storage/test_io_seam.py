"""Storage code reaches the file system only through the environment it was given.

The faulty file system of the tests can only drop what it sees: a write,
sync, rename or removal made with ``os`` directly would escape it. This test
reads the storage package's source and refuses such calls outside io.py.
The read-only reader (reader.py, and _index_views.py of it) only reads, which cannot change what a
power cut leaves, and is allowed to open and map files itself, as is the
checker (verify.py). Closing a descriptor changes nothing on disk.
"""

from __future__ import annotations

import ast
from pathlib import Path

import seglog.storage

STORAGE = Path(seglog.storage.__file__).parent
# Calls of these modules' functions change files or their names.
FORBIDDEN = {
    "os": {
        "open",
        "write",
        "pwrite",
        "pwritev",
        "fsync",
        "fdatasync",
        "rename",
        "replace",
        "unlink",
        "remove",
        "rmdir",
        "mkdir",
        "makedirs",
        "truncate",
        "ftruncate",
        "posix_fallocate",
        "utime",
    },
    "shutil": {"rmtree", "move", "copy", "copyfile"},
    "fcntl": {"flock", "lockf"},
    "mmap": {"mmap"},
}
# Path methods that change the file system.
PATH_METHODS = {"mkdir", "unlink", "rmdir", "touch", "write_bytes", "write_text", "rename"}
ALLOWED_FILES = {"io.py"}
# The module-level functions of io.py act on the process's default environment;
# storage code uses the environment it was given instead (``self._env``, ``env``)
# so that two log directories in one process can run over different ones.
IO_HELPERS_ALLOWED = {"storage_error", "env_or_default"}
READ_ONLY_FILES = {"reader.py", "_index_views.py", "verify.py"}


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        attr = node.func.attr
        owner = node.func.value
        owner_name = owner.id if isinstance(owner, ast.Name) else None
        is_env = owner_name in {"io", "env"} or (
            isinstance(owner, ast.Attribute) and owner.attr in {"env", "_env"}
        )
        if owner_name == "io" and attr not in IO_HELPERS_ALLOWED and attr[0].islower():
            found.append(f"{path.name}:{node.lineno} io.{attr}() (use the env given)")
        elif owner_name in FORBIDDEN and attr in FORBIDDEN[owner_name]:
            if path.name in READ_ONLY_FILES and attr in {"open", "mmap"}:
                continue
            found.append(f"{path.name}:{node.lineno} {owner_name}.{attr}()")
        elif attr in PATH_METHODS and not is_env:
            found.append(f"{path.name}:{node.lineno} .{attr}()")
    for node in ast.walk(tree):
        # open(..., "w"/"a"/"x"/"+") writes without the seam.
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "open"
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and set(node.args[1].value) & set("wax+")
        ):
            found.append(f"{path.name}:{node.lineno} open(..., {node.args[1].value!r})")
    return found


def test_storage_changes_files_only_through_io() -> None:
    offences = [
        offence
        for path in sorted(STORAGE.glob("*.py"))
        if path.name not in ALLOWED_FILES
        for offence in _offences(path)
    ]
    assert offences == []


def test_the_check_sees_an_offence(tmp_path: Path) -> None:
    source = tmp_path / "bad.py"
    source.write_text(
        "import os, shutil\n"
        "os.fsync(3)\n"
        "shutil.rmtree('x')\n"
        "p.mkdir()\n"
        "io.rename(a, b)\n"
        "self._env.rename(a, b)\n"
        "open('f', 'wb')\n"
        "open('f', 'rb')\n"
    )
    assert _offences(source) == [
        "bad.py:2 os.fsync()",
        "bad.py:3 shutil.rmtree()",
        "bad.py:4 .mkdir()",
        "bad.py:5 io.rename() (use the env given)",
        "bad.py:7 open(..., 'wb')",
    ]
