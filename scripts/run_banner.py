"""What `make run` prints before the cluster's logs: where the console is, a first curl, the CLI.

Usage: .venv/bin/python scripts/run_banner.py [TASK_MODULE ...]
The port is the one `cronos dev` will serve on ($PORT, else ./.env, else 3002).
"""

from __future__ import annotations

import sys

from cronos.errors import ConfigError
from cronos.settings import Settings, load_settings

EXAMPLES = "cronos.example_tasks"
# The README's first job (its `reindex` action is cronos/example_tasks.py's).
FIRST_JOB = (
    '{"name": "Sync Database Indexes", "cron_expression": "*/5 * * * *", '
    '"payload": {"action": "reindex", "target": "users"}}'
)
OWN_JOB = '{"name": "my-job", "cron_expression": "*/5 * * * *", "payload": {"action": "NAME-OF-YOUR-TASK"}}'


def banner(port: int, tasks: list[str]) -> str:
    url = f"http://localhost:{port}"
    loaded = ", ".join(tasks) or "none but the built-in noop and sleep"
    return f"""\
Cronos is starting (migrate, then API + dispatcher + executor in one process; Ctrl-C stops it).
  console:  {url}/
  try:      curl -s {url}/health
            curl -s -XPOST {url}/api/jobs -H 'content-type: application/json' \\
              -d '{FIRST_JOB if EXAMPLES in tasks else OWN_JOB}'
  tasks:    {loaded} (your own: make run TASKS=myapp.tasks, with myapp/ in this folder or on PYTHONPATH)
  CLI:      .venv/bin/cronos --help   (e.g. .venv/bin/cronos jobs list)
"""


def main(tasks: list[str]) -> int:
    try:
        port = load_settings().port
    except ConfigError:  # `cronos dev` says what is wrong, in one line
        port = Settings().port
    print(banner(port, tasks), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
