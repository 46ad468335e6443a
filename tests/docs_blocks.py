"""The fenced blocks of README.md and docs/, and how a runnable one is run.

The markers and substitutions are documented in docs/architecture.md ("The docs and
their tests"): ``sh runnable`` / ``python runnable`` blocks run against a real broker
(``runnable-spark`` ones only in the Spark tests), a ``text output`` block right after
one is what it must print, and ``properties`` blocks are parsed by the broker's parser.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# What a page says, and what the test's broker and interpreter stand for.
DOC_BOOTSTRAP = "127.0.0.1:9092"
DOC_DATA = "./data"
DOC_BIN = ".venv/bin/"

RUNNABLE = ("sh runnable", "python runnable")
RUNNABLE_SPARK = ("sh runnable-spark", "python runnable-spark")
OUTPUT = "text output"
# Generous: a block is a handful of commands; the Spark one starts a JVM under load.
BLOCK_TIMEOUT = 600


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: Path
    line: int
    info: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, in order (fences at the start of a line)."""
    found: list[Block] = []
    fence: str | None = None
    info = ""
    start = 0
    body: list[str] = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if fence is None:
            if line.startswith("```"):
                fence = line[: len(line) - len(line.lstrip("`"))]
                info = line[len(fence) :].strip()
                start = number
                body = []
        elif line.strip() == fence:
            found.append(Block(page, start, info, "\n".join(body) + "\n"))
            fence = None
        else:
            body.append(line)
    assert fence is None, f"{page}:{start}: a fenced block is never closed"
    return found


def runnable_pages(*, spark: bool) -> list[Path]:
    """Pages with blocks to run (with Spark blocks only when ``spark``)."""
    wanted = RUNNABLE_SPARK if spark else RUNNABLE
    return [p for p in PAGES if any(b.info in wanted for b in blocks(p))]


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    # The blocks run from their own directory: this checkout's source stays first.
    paths = [str(ROOT / "src"), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(
        str((ROOT / p).resolve()) if not os.path.isabs(p) else p for p in paths
    )
    # As a new user has it: no interpreter chosen for Spark's workers, no venv active.
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV"):
        env.pop(name, None)
    return env


def substitute(text: str, bootstrap: str, data: Path) -> str:
    """A block as it runs against the test's broker and interpreter."""
    bin_dir = str(Path(sys.executable).parent) + "/"
    return (
        text.replace(DOC_BOOTSTRAP, bootstrap)
        .replace(DOC_DATA, str(data))
        .replace(DOC_BIN, bin_dir)
    )


def run_block(block: Block, bootstrap: str, data: Path, work: Path) -> str:
    """Run one runnable block; its stdout. Fails with the block's stderr if it fails."""
    code = substitute(block.text, bootstrap, data)
    if block.info.startswith("sh"):
        args = ["bash", "-e", "-o", "pipefail", "-c", code]
        stdin = None
    else:
        args = [sys.executable, "-"]
        stdin = code
    done = subprocess.run(
        args,
        cwd=work,
        env=_environment(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, (
        f"{block.where} exited {done.returncode}\n--- block\n{code}\n"
        f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )
    return done.stdout


def _lines(text: str) -> list[str]:
    return sorted(line.rstrip() for line in text.splitlines() if line.strip())


def run_page(page: Path, bootstrap: str, data: Path, work: Path, *, spark: bool) -> int:
    """Run the page's runnable blocks in order, checking each ``text output``; how many ran."""
    wanted = RUNNABLE + RUNNABLE_SPARK if spark else RUNNABLE
    found = blocks(page)
    ran = 0
    for i, block in enumerate(found):
        if block.info not in wanted:
            continue
        printed = run_block(block, bootstrap, data, work)
        ran += 1
        following = found[i + 1] if i + 1 < len(found) else None
        if following is not None and following.info == OUTPUT:
            assert _lines(printed) == _lines(following.text), (
                f"{block.where} printed something else than {following.where} shows:\n{printed}"
            )
    return ran
