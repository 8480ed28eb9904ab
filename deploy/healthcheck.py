"""Container health probe for every Cronos role (the image's HEALTHCHECK).

Answers "is this process alive and its event loop responsive?", not "are the backends up":
a PostgreSQL outage must not get healthy processes restarted (GET /health reports that).

- api, dev: GET /openapi.json on $PORT (static: served without touching PostgreSQL, unlike
  /metrics, which counts jobs, and /health)
- dispatcher, executor: GET /livez on $CRONOS_METRICS_PORT, answered by the role's event loop
  (cronos/probes.py: 503 when the loop is stuck; /metrics there is served by a thread and
  answered while it was); when that is 0/unset there is no port to ask, so a running PID 1 is all
  we can check
- migrate (one-shot) or anything else: healthy while it runs

Standard library only: it runs with the image's Python and nothing else.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence

TIMEOUT_S = 2.0


def role_of(cmdline: Sequence[str]) -> str:
    """The cronos sub-command in PID 1's command line ('' when not found)."""
    roles = ("api", "dev", "dispatcher", "executor", "migrate", "bench")
    return next((arg for arg in cmdline if arg in roles), "")


def probe_target(role: str, env: Mapping[str, str]) -> tuple[int, str] | None:
    """(port, path) to GET for this role, or None when it has nothing to ask."""
    if role in ("api", "dev"):
        return int(env.get("PORT") or 3002), "/openapi.json"
    if role in ("dispatcher", "executor"):
        port = int(env.get("CRONOS_METRICS_PORT") or 0)
        return (port, "/livez") if port else None
    return None


def check(role: str, env: Mapping[str, str], host: str = "127.0.0.1") -> tuple[bool, str]:
    target = probe_target(role, env)
    if target is None:
        return True, f"{role or 'process'}: running (no port to probe)"
    url = f"http://{host}:{target[0]}{target[1]}"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            ok = response.status == 200
            return ok, f"{role}: {url} -> {response.status}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return False, f"{role}: {url} -> {exc}"


def _pid1_cmdline() -> list[str]:
    try:
        with open("/proc/1/cmdline", "rb") as f:
            return [part.decode(errors="replace") for part in f.read().split(b"\0") if part]
    except OSError:
        return []


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    role = args[0] if args else role_of(_pid1_cmdline())
    ok, detail = check(role, os.environ)
    print(detail)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
