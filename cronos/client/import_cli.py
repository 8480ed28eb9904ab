"""`cronos import crontab FILE|-`: the I/O around cronos.client.crontab_import.

The jobs file goes to stdout (redirect it to a file, then `cronos apply -f FILE --dry-run`);
what was left out goes to stderr too, one line each. A line that cannot be converted stops it:
one line on stderr naming the line, exit 1, nothing on stdout.
"""

from __future__ import annotations

import argparse
import sys

from cronos.client.crontab_import import CrontabInvalid, convert


def _read(path: str) -> tuple[str, str]:
    """(the name to show, the text) of FILE, or of stdin for `-`."""
    if path == "-":
        return "stdin", sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as file:
            return path, file.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise CrontabInvalid(f"{path}: cannot read it: {exc}") from None


def run_import(args: argparse.Namespace) -> int:
    source, text = _read(args.file)
    if not 0 < args.timeout_s <= 86_400:
        raise CrontabInvalid("--timeout-s: must be more than 0 and at most 86400 (the API's limit)")
    jobs_file, warnings = convert(text, source, timeout_s=args.timeout_s, system=args.system)
    sys.stdout.write(jobs_file)
    for warning in warnings:
        print(f"cronos: {warning}", file=sys.stderr)
    return 0
