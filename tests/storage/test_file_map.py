"""io.FileMap: a shared map of a file that holds no descriptor of its own."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from seglog.errors import StorageError
from seglog.storage import io


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_map_outlives_its_descriptor_and_holds_none(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(bytes(8192))
    before = _open_fds()
    fd = io.open_fd(path, os.O_RDWR)
    file_map = io.map_file(fd, 8192, writable=True, name=path)
    io.close_fd(fd)
    assert _open_fds() == before  # Python's mmap would keep a duplicate here
    struct.pack_into(">ii", file_map.buffer, 4096, 7, 8)
    io.flush_map(file_map, name=path)
    assert path.read_bytes()[4096:4104] == struct.pack(">ii", 7, 8)
    view = file_map.buffer
    file_map.close()
    file_map.close()  # idempotent
    # A reader that still holds the pages keeps them mapped.
    assert struct.unpack_from(">ii", view, 4096) == (7, 8)
    del view


def test_a_read_only_map_refuses_stores(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abcdefgh")
    fd = io.open_fd(path, os.O_RDONLY)
    try:
        file_map = io.map_file(fd, 8, writable=False, name=path)
    finally:
        io.close_fd(fd)
    assert bytes(file_map.buffer[2:5]) == b"cde"
    with pytest.raises(TypeError):
        file_map.buffer[0:1] = b"x"
    file_map.close()
    assert path.read_bytes() == b"abcdefgh"


def test_a_map_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abcdefgh")
    fd = io.open_fd(path, os.O_RDONLY)
    try:
        with pytest.raises(StorageError, match=str(path)):
            io.map_file(fd, 8, writable=True, name=path)  # a read-only descriptor
    finally:
        io.close_fd(fd)
    with pytest.raises(FileNotFoundError):
        io.open_fd(tmp_path / "missing", os.O_RDONLY)
