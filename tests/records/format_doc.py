"""The worked examples of docs/format.md, as bytes, so tests can hold the document to the code."""

from __future__ import annotations

import re
from pathlib import Path

FORMAT_MD = Path(__file__).resolve().parents[2] / "docs" / "format.md"
_HEX_LINE = re.compile(r"^((?:[0-9a-f]{2} )*[0-9a-f]{2})(?: {2,}|$)")


def worked_examples() -> list[bytes]:
    """The hex of each code block that follows a paragraph starting "Worked example"."""
    examples: list[bytes] = []
    want = in_block = False
    current: list[str] = []
    for line in FORMAT_MD.read_text(encoding="utf-8").splitlines():
        if line.startswith("Worked example"):
            want = True
        elif line.startswith("```"):
            if in_block and want:
                examples.append(bytes.fromhex(" ".join(current)))
                want = False
            in_block = not in_block
            current = []
        elif in_block and want:
            match = _HEX_LINE.match(line)
            assert match, f"not a hex line in a worked example: {line!r}"
            current.append(match.group(1))
    return examples
