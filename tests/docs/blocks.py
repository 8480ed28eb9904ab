"""The fenced blocks of the README and the documentation pages, as tests/docs reads them.

A block in a shell language (```sh, ```console, ...) holds commands: each is run by
tests/docs/test_commands.py unless the block is preceded by `<!-- not run: why -->`. A block
preceded by `<!-- file: PATH -->` is a file the page asks the reader to write (PATH relative to
the folder the page's commands run in).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "zsh", "console", "shell-session"})
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_NOT_RUN = re.compile(r"^\s*<!--\s*not run:(?P<reason>.*?)-->\s*$")
_FILE = re.compile(r"^\s*<!--\s*file:\s*(?P<path>\S+)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    not_run: str | None  # the reason given, when the block is excused
    file: str | None  # where the page asks the reader to write it

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"

    def commands(self) -> list[str]:
        """The command lines (continuations joined); a console block's commands are its `$ ` lines."""
        commands: list[str] = []
        pending = ""
        for raw in self.text.splitlines():
            line = raw.rstrip()
            if not pending:
                if self.language in ("console", "shell-session"):
                    if not line.lstrip().startswith("$ "):
                        continue
                    line = line.lstrip()[2:]
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            commands.append((pending + line).strip())
            pending = ""
        if pending:
            commands.append(pending.strip())
        return commands


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, indent = opening["fence"], opening["indent"]
        language = opening["info"].strip().split(" ")[0].lower()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        body = "\n".join(line.removeprefix(indent) for line in lines[i + 1 : end])
        before = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        not_run = _NOT_RUN.match(before)
        file = _FILE.match(before)
        found.append(
            Block(
                page=page,
                line=i + 1,
                language=language,
                text=body,
                not_run=not_run["reason"].strip() if not_run else None,
                file=file["path"] if file else None,
            )
        )
        i = end + 1
    return found


def markers(page: Path) -> int:
    """How many lines of the page are a `not run` or a `file` comment (each must sit on a block)."""
    return sum(1 for line in page.read_text().splitlines() if _NOT_RUN.match(line) or _FILE.match(line))


def command_blocks(page: Path) -> list[Block]:
    return [block for block in blocks(page) if block.language in SHELL_LANGUAGES]
