"""The `cronos` command: starts roles, runs migrations and benchmarks, manages API tokens, and
calls the REST API (`cronos jobs|runs|apply`).

The one module of `cronos` that imports the role packages (lazily), because it starts them.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

import msgspec

from cronos import __version__, namespaces, runtime
from cronos.errors import BackendUnavailable, ConfigError, CronosError, InvalidInput
from cronos.logs import bind_global, setup_logging
from cronos.models import parse_queues
from cronos.roles import Role, serve
from cronos.settings import VARIABLES, Settings, load_settings

log = logging.getLogger("cronos.cli")


def _env_help() -> str:
    lines = ["environment (also read from ./.env):"]
    for name, (field, _parse, text) in VARIABLES.items():
        default = getattr(Settings(), field)
        lines.append(f"  {name:<28} {text} (default: {default!r})")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="cronos", description="Cronos distributed scheduler", epilog=_env_help(), formatter_class=fmt
    )
    parser.add_argument("--version", action="version", version=f"cronos {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser(
        "migrate", help="create the database if missing and apply migrations", epilog=_env_help(), formatter_class=fmt
    )
    sub.add_parser("api", help="serve the REST API on $PORT", epilog=_env_help(), formatter_class=fmt)
    sub.add_parser(
        "dispatcher", help="run a leader candidate (ticks -> ledger -> stream)", epilog=_env_help(), formatter_class=fmt
    )
    for name, text in (
        ("executor", "run jobs from the stream"),
        ("dev", "migrate, then api + dispatcher + executor in one process"),
    ):
        role = sub.add_parser(name, help=text, epilog=_env_help(), formatter_class=fmt)
        role.add_argument(
            "--import",
            dest="imports",
            action="append",
            default=[],
            metavar="MODULE",
            help="import MODULE to register @cronos.task functions (repeatable)",
        )
        role.add_argument(
            "--queue",
            dest="queues",
            metavar="A,B",
            help="serve only these queues, comma-separated (default: $CRONOS_QUEUES, else `default`)",
        )
    # Named here, not imported from cronos.bench: an installed wheel has no benchmarks.
    benchmarks = (
        "dispatch",
        "run",
        "e2e",
        "schedule",
        "apscheduler",
        "compare",
        "herd",
        "million",
        "ledger",
        "overload",
    )
    bench = sub.add_parser("bench", help=f"benchmarks: `cronos bench {'|'.join(benchmarks)} --help`")
    bench.add_argument("which", choices=benchmarks)
    bench.add_argument("rest", nargs=argparse.REMAINDER)
    _token_parser(sub)
    from cronos.client.apply_cli import add_command as add_apply
    from cronos.client.calendars_cli import add_commands as add_calendars
    from cronos.client.channels_cli import add_commands as add_channels
    from cronos.client.groups_cli import add_commands as add_groups
    from cronos.client.jobs_cli import add_commands as add_jobs
    from cronos.client.namespaces_cli import add_commands as add_namespaces

    add_jobs(sub, _OneLineParser)
    add_channels(sub, _OneLineParser)
    add_calendars(sub, _OneLineParser)
    add_groups(sub, _OneLineParser)
    add_namespaces(sub, _OneLineParser)
    add_apply(sub)
    _import_parser(sub)
    for command in _CLIENT_COMMANDS:
        if command != "namespaces":  # its commands name the namespace itself
            _add_namespace(sub.choices[command])
    return parser


def _add_namespace(parser: argparse.ArgumentParser) -> None:
    """`--namespace NAME` on a client command and each of its subcommands (before or after the action)."""
    if "--namespace" in parser._option_string_actions:  # a parser reached twice
        return
    parser.add_argument(
        "--namespace",
        default=argparse.SUPPRESS,
        help=f"the namespace to act in (default: $CRONOS_NAMESPACE, else {namespaces.DEFAULT})",
    )
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _add_namespace(child)


class _OneLineParser(argparse.ArgumentParser):
    """Bad arguments are one line on stderr (scripts capture stdout; humans read one line)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"cronos: {self.prog.removeprefix('cronos ')}: {message}\n")


def _token_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    token = sub.add_parser(
        "token",
        help="API tokens: create (shown once), list, revoke, reopen-local; straight in PostgreSQL ($DATABASE_URL)",
    )
    actions = token.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=_OneLineParser)
    create = actions.add_parser("create", help="create a token; its text is the last line of the output")
    create.add_argument("--name", required=True, help="unique name (the actor in the audit trail)")
    create.add_argument(
        "--scope", dest="scopes", action="append", required=True, metavar="SCOPE",
        help="read, write or admin (repeatable; admin holds write, write holds read)",
    )  # fmt: skip
    create.add_argument("--expires", metavar="AGE", help="lifetime such as 90d, 12h, 30m (default: never)")
    actions.add_parser("list", help="live tokens: name, scopes, created, last used, expires")
    revoke = actions.add_parser("revoke", help="revoke a token (refused at once by every API)")
    revoke.add_argument("name")
    actions.add_parser(
        "reopen-local",
        help="protected mode again: with no usable token, loopback clients act as admin (audited; "
        "once a token was created it never comes back by itself)",
    )


def _import_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    source = sub.add_parser(
        "import",
        help="convert another scheduler's jobs into a jobs file for `cronos apply` (printed on stdout)",
    )
    formats = source.add_subparsers(dest="format", required=True, metavar="FORMAT", parser_class=_OneLineParser)
    crontab = formats.add_parser(
        "crontab",
        help="a crontab (as `crontab -l` prints it): each entry a `shell` job; @reboot left out, a bad line refused",
    )
    crontab.add_argument("file", metavar="FILE", help="the crontab file, or - for stdin")
    crontab.add_argument(
        "--system", action="store_true",
        help="/etc/crontab's and /etc/cron.d's format: a user name before each command (noted, not kept)",
    )  # fmt: skip
    crontab.add_argument(
        "--timeout-s", type=float, default=3600.0, metavar="SECONDS",
        help="each job's timeout_s (cron has none; the API's default is 300): default 3600",
    )  # fmt: skip


def _import_path() -> None:
    """`--import myapp.tasks` finds `myapp` in the current folder, as `python -m` and other runners do:
    the `cronos` script's own folder (the venv's bin) is sys.path[0], not the folder it runs from."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def _roles(command: str, settings: Settings, imports: Sequence[str]) -> list[Role]:
    roles: list[Role] = []
    if command in ("api", "dev"):
        from api.service import ApiService

        roles.append(ApiService(settings))
    if command in ("dispatcher", "dev"):
        from dispatcher.service import Dispatcher

        roles.append(Dispatcher(settings))
    if command in ("executor", "dev"):
        from executor.service import Executor

        roles.append(Executor(settings, imports=list(imports)))
    return roles


async def _main(args: argparse.Namespace, settings: Settings) -> int:
    from cronos.store.db import migrate

    if args.command == "token":
        from cronos.client.token_cli import run_token_command

        return await run_token_command(args, settings)
    if args.command in ("migrate", "dev"):
        applied = await migrate(settings.database_url)
        log.info("migrations done", extra={"event": "db.migrations_done", "applied": applied})
        if args.command == "migrate":
            return 0
    roles = _roles(args.command, settings, getattr(args, "imports", []))  # a configuration error first
    # Probes and metrics from the start: while a backend is awaited, alive (/livez) but not ready.
    probe = None
    if settings.metrics_port and args.command in ("dispatcher", "executor"):
        from cronos import probes

        probe = probes.serve(settings)
    try:
        if await _check_cluster(args.command, settings):
            await serve(roles)
    finally:
        if probe is not None:
            await probe.close()
    return 0


async def _check_cluster(command: str, settings: Settings) -> bool:
    """Refuse to start (ClusterMismatch) when the Redis keys are another cluster's (cronos.identity);
    False when stopped (SIGTERM, SIGINT) while waiting for a backend."""
    from cronos.store.identity import gate

    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    try:
        # The API answers while a backend is down: it starts unchecked then, not waiting.
        return await gate(settings, wait=command != "api", stopping=stopping)
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def _queues(text: str) -> tuple[str, ...]:
    try:
        return parse_queues(text)
    except InvalidInput as exc:
        raise ConfigError(f"--queue: {exc.message}") from None


# Clients of the REST API ($CRONOS_API_URL), not roles: no database, no event loop.
_CLIENT_COMMANDS = ("jobs", "runs", "apply", "channels", "calendars", "blackouts", "groups", "namespaces")
# Converters: no API, no database; their stdout is the result.
_OFFLINE_COMMANDS = ("import",)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
        if getattr(args, "queues", None) is not None:
            settings = msgspec.structs.replace(settings, executor_queues=_queues(args.queues))
        if getattr(args, "namespace", None) is not None:
            try:
                named = namespaces.check(args.namespace, "--namespace")
            except InvalidInput as exc:
                raise ConfigError(str(exc)) from None
            settings = msgspec.structs.replace(settings, namespace=named)
    except ConfigError as exc:
        print(f"cronos: configuration error: {exc}", file=sys.stderr)
        return 2
    # A benchmark prints a table: its own INFO lines would break it up (warnings still show).
    # So would `token`'s (its migration lines): its stdout is for scripts, stderr one line on error.
    quiet = args.command in ("bench", "token", *_CLIENT_COMMANDS, *_OFFLINE_COMMANDS) and settings.log_level == "INFO"
    level = "WARNING" if quiet else settings.log_level
    setup_logging(level, settings.log_format)
    bind_global(node_id=settings.node_id)
    try:
        if args.command == "bench":
            try:
                from cronos.bench import main as bench
            except ModuleNotFoundError as exc:  # an installed wheel: the benchmarks are not in it
                raise ConfigError("the benchmarks run from a source checkout of Cronos (make setup)") from exc
            return bench(args.which, settings, args.rest)
        if args.command in _CLIENT_COMMANDS:  # synchronous REST API calls
            from cronos.client.apply_cli import run_apply
            from cronos.client.channels_cli import run_channels
            from cronos.client.groups_cli import run_command as run_groups
            from cronos.client.jobs_cli import run_command
            from cronos.client.namespaces_cli import run_command as run_namespaces

            if args.command == "channels":
                return run_channels(args, settings)
            if args.command == "groups":
                return run_groups(args, settings)
            if args.command == "namespaces":
                return run_namespaces(args, settings)
            return run_apply(args, settings) if args.command == "apply" else run_command(args, settings)
        if args.command == "import":
            from cronos.client.import_cli import run_import

            return run_import(args)
        if getattr(args, "imports", None):
            _import_path()
        return runtime.run(_main(args, settings), settings.event_loop)
    except BackendUnavailable as exc:
        print(f"cronos: {exc}", file=sys.stderr)
        return 1
    except CronosError as exc:
        print(f"cronos: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `cronos jobs list | head`: the reader is gone, so is the rest of the output
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
