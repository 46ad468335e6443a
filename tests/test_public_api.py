"""The names a user imports from ``seglog`` are a promise: adding or removing one is a decision."""

from __future__ import annotations

import seglog

EXPECTED = {
    "AppendInfo",
    "Codec",
    "CorruptRecordError",
    "Header",
    "InvalidConfigError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "Log",
    "LogConfig",
    "LogDir",
    "LogDirSettings",
    "LogReadResult",
    "OffsetOutOfRangeError",
    "Record",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "SeglogError",
    "SimpleRecord",
    "StorageError",
    "TimestampAndOffset",
    "TopicExistsError",
    "TopicInfo",
    "UnknownTopicOrPartitionError",
    "__version__",
    "build_batch",
    "decode_entries",
    "decode_records",
}


def test_all_is_exactly_the_public_api() -> None:
    assert set(seglog.__all__) == EXPECTED
    for name in seglog.__all__:
        assert hasattr(seglog, name), name


def test_public_names_are_documented() -> None:
    for name in seglog.__all__:
        if name.startswith("_"):
            continue
        assert getattr(seglog, name).__doc__, f"{name} has no docstring"


def test_readme_example_runs(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The library example of docs/quickstart.md works as written."""
    from pathlib import Path

    page = Path(__file__).parent.parent / "docs" / "quickstart.md"
    readme = page.read_text(encoding="utf-8")
    opening = "```python runnable\nfrom seglog import"
    start = readme.index(opening)
    code = readme[start + opening.index("\n") + 1 : readme.index("```", start + 10)]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(code, "docs/quickstart.md", "exec"), namespace)
    assert (tmp_path / "library-data" / "orders-0").is_dir()
