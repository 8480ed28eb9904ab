"""`cronos import crontab`: a crontab's text to a jobs file `cronos apply` reads. Pure: no I/O.

Each entry becomes a `shell` job that runs what cron would run:
- a simple command (words, quotes, no shell syntax) becomes its argv (shlex, as sh splits it);
  anything else (pipes, redirects, `&&`, `$VAR`, globs, `~`, a builtin such as `cd`) becomes
  `[$SHELL, -c, command]`, $SHELL being /bin/sh unless the crontab sets SHELL=;
- `%` is cron's: the first unescaped one ends the command, the rest is its stdin (`%` a newline),
  `\\%` a literal `%`;
- `NAME=value` lines apply to the entries below them: CRON_TZ= (and TZ=, unless CRON_TZ is set)
  is the schedule's `timezone`; MAILTO= and the other cron settings are noted, not carried;
  PATH, LD_* and PYTHON* (a job's `env` may not set them: they choose what runs) are set by the
  job's shell instead; any other variable goes into each job's `env`;
- `@reboot` has no equivalent (nothing boots): a comment says so and the entry is left out.
Names are derived from the command and a digest of the entry, so they stay the same when other
lines change; identical entries get -2, -3. A line that is neither a comment, a variable nor an
entry Cronos accepts is refused with its line number.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from cronos.errors import CronosError, InvalidInput
from cronos.schedule import parse_schedule

# What cron's environment lines mean (they are not the job's environment).
_NOTED = {
    "MAILTO": "Cronos mails through a notification channel, not per job: "
    "cronos channels add mail --email {value} --smtp-host HOST --from SENDER --on failed",
    "MAILFROM": "an email channel names its sender (cronos channels add --from)",
    "CRON_CORRECT_USER": "not a Cronos setting",
    "RANDOM_DELAY": "use each job's jitter_s instead",
}
# Names a job's `env` may not set (cronos.payloads): carried by the job's shell instead.
_SHELL_ONLY = re.compile(r"PATH$|LD_|PYTHON")
_VARIABLE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)")
_ENTRY = re.compile(r"\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(.*)")
_MACRO = re.compile(r"\s*(@\S+)\s+(.*)")
# A command of only these characters splits the same under shlex as under sh: it needs no shell.
_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./'\" \t-]+")
# sh builtins and keywords that exist as no program (or mean something else as one).
_BUILTINS = frozenset((
    "cd", ".", "source", "export", "set", "unset", "umask", "ulimit", "exec", "eval", "exit", "trap", "wait", "read",
    "alias", "shift", "return", "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case",
    "esac", "function",
))  # fmt: skip
_HEADER = """\
# A jobs file for `cronos apply -f FILE` (check first: `cronos apply -f FILE --dry-run`),
# converted by `cronos import crontab` from {source}: one `shell` job per crontab entry.
# Shell jobs run only on executors started with CRONOS_ALLOW_SHELL=true, and only an admin
# token may create them. Where Cronos differs from cron (change the fields below to taste):
# - a run still running when its next tick comes skips that tick (concurrency_policy: forbid);
#   cron starts another one (concurrency_policy: allow);
# - each run is stopped after timeout_s seconds; cron never stops one;
# - a tick missed while no executor could run it runs once if at most misfire_grace_s (60) late
#   (misfire_policy: run_once); cron never runs a missed tick (misfire_policy: skip);
# - a run's output is kept with the run (`cronos runs get ID`), never mailed.
"""


class CrontabInvalid(CronosError):
    """A crontab line that cannot be converted; the message names the source and the line."""


@dataclass(slots=True)
class _State:
    """What the lines above an entry set: it applies to every entry below."""

    env: dict[str, str] = field(default_factory=dict)
    shell_vars: dict[str, str] = field(default_factory=dict)  # PATH, LD_*, PYTHON*
    shell: str = "/bin/sh"
    cron_tz: str | None = None
    tz: str | None = None

    @property
    def timezone(self) -> str:
        return self.cron_tz or self.tz or "UTC"


def split_percent(command: str) -> tuple[str, str | None]:
    """Cron's `%` (as Vixie cron's do_command): (the command sh runs, its stdin or None). In the
    command `\\%` is a `%` and the first unescaped `%` ends it; in the stdin `%` is a newline and
    `\\%` a `%`, and cron ends the stdin with a newline."""
    out: list[str] = []
    escaped = False
    for i, ch in enumerate(command):
        if escaped:  # the character after a backslash: kept, and never an escape itself
            escaped = False
            if ch == "%":
                out[-1] = "%"
            else:
                out.append(ch)
            continue
        if ch == "%":
            return "".join(out), _stdin(command[i + 1 :])
        escaped = ch == "\\"
        out.append(ch)
    return "".join(out), None


def _stdin(text: str) -> str:
    out: list[str] = []
    escaped = False
    for ch in text:
        if escaped and ch != "%":
            out.append("\\")
        elif not escaped and ch == "%":
            ch = "\n"
        escaped = ch == "\\"
        if not escaped:
            out.append(ch)
    if escaped:
        out.append("\\")
    data = "".join(out)
    return data if not data or data.endswith("\n") else data + "\n"


def argv_of(command: str, shell: str, shell_vars: Mapping[str, str]) -> list[str]:
    """The argv that runs `command` as cron would: split when no shell is needed, else `shell -c`."""
    command, stdin = split_percent(command)
    command = command.strip()
    if stdin is not None:
        command = f"printf %s {shlex.quote(stdin)} | {command}"
    try:
        words = shlex.split(command) if _PLAIN.fullmatch(command) else []
    except ValueError:  # an unclosed quote: the shell reports it when the job runs, as under cron
        words = []
    if words and not shell_vars and words[0] not in _BUILTINS and "=" not in words[0]:
        return words
    prefix = "".join(f"{name}={shlex.quote(value)}; export {name}; " for name, value in shell_vars.items())
    return [shell, "-c", prefix + command]


def _slug(command: str) -> str:
    """A few words of the command, lower-case, for a name a person recognises."""
    words: list[str] = []
    tokens = command.split()
    if len(tokens) > 3 and tokens[0] == "cd" and tokens[2] in ("&&", ";"):  # `cd DIR && run`: name the run
        tokens = tokens[3:]
    for token in tokens:
        if any(c in token for c in "|&;<>()`$%"):
            break
        word = re.sub(r"[^a-z0-9]+", "-", token.strip("'\"").rstrip("/").rpartition("/")[2].lower()).strip("-")
        if word and not token.startswith("-") and "=" not in token and word not in ("sh", "bash", "c"):
            words.append(word)
        if len(words) == 3:
            break
    return "-".join(words)[:48].strip("-") or "job"


def job_name(schedule: str, command: str) -> str:
    """`<words of the command>-<digest of the entry>`: the same for the same entry wherever it is."""
    digest = hashlib.sha256(f"{schedule}\n{command}".encode()).hexdigest()[:8]
    return f"{_slug(command)}-{digest}"


def _escape(value: Any) -> Any:
    """`$` as `$$`: apply reads `${NAME}` as an environment variable, and a crontab means it literally."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, list):
        return [_escape(v) for v in value]
    if isinstance(value, dict):
        return {k: _escape(v) for k, v in value.items()}
    return value


def _unquote(value: str) -> str:
    """A variable's value as cron reads it: surrounding blanks dropped, then one pair of quotes."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _check_zone(zone: str) -> None:
    parse_schedule("@daily", zone)  # InvalidSchedule (an InvalidInput) naming the zone


def _variable(name: str, value: str, state: _State, number: int) -> str | None:
    """Apply one `NAME=value` line to the state; a comment for the output, if any."""
    if name == "CRON_TZ":
        _check_zone(value)
        state.cron_tz = value
        return None
    if name == "TZ":
        _check_zone(value)
        state.tz = value
        state.env[name] = value
        return None
    if name == "SHELL":
        if not value:
            raise InvalidInput("SHELL", "is empty")
        state.shell = value
        return None
    if name in _NOTED:
        return f"line {number}: {name} is not carried: {_NOTED[name].format(value=value or 'TO')}"
    if _SHELL_ONLY.match(name):
        state.shell_vars[name] = value
        return None
    state.env[name] = value
    return None


def _entry(line: str) -> tuple[str, str] | None:
    """(schedule, command) of an entry line; None when it is not one."""
    if line.lstrip().startswith("@"):
        macro = _MACRO.fullmatch(line)
        return (macro[1], macro[2]) if macro else None
    entry = _ENTRY.fullmatch(line)
    return (" ".join(entry.groups()[:5]), entry[6]) if entry else None


def convert(
    text: str, source: str = "crontab", *, timeout_s: float = 3600.0, system: bool = False
) -> tuple[str, list[str]]:
    """(the jobs file, warnings for stderr) of a crontab's text; CrontabInvalid naming the line.
    `system`: /etc/crontab or /etc/cron.d's format, a user name between the schedule and the command
    (noted with the job: Cronos runs every shell job as one user, CRONOS_SHELL_USER)."""
    state = _State()
    blocks: list[str] = []
    notes: list[str] = []
    warnings: list[str] = []
    names: set[str] = set()
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.removesuffix("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{source}: line {number}"
        if "\x00" in line:
            raise CrontabInvalid(f"{where}: holds a NUL byte")
        try:
            if (variable := _VARIABLE.fullmatch(line)) is not None:
                if (note := _variable(variable[1], _unquote(variable[2]), state, number)) is not None:
                    notes.append(note)
                continue
            entry = _entry(line)
            if entry is None:
                raise CrontabInvalid(
                    f"{where}: not a crontab entry (5 time fields and a command, @daily-style and a command, "
                    "or NAME=value)"
                )
            schedule, command = entry
            user = ""
            if system:
                user, _, command = re.sub(r"\s", " ", command.strip(), count=1).partition(" ")
                if not command.strip():
                    raise CrontabInvalid(f"{where}: the entry has no user and command (a system crontab's format)")
            if schedule.lower() == "@reboot":
                warning = f"line {number}: @reboot is left out: nothing boots in Cronos; start it with your service"
                notes.append(f"{warning} (systemd ExecStartPre=, an init container)")
                warnings.append(f"{where}: @reboot is left out (see the comment in the output)")
                continue
            if not command.strip():
                raise CrontabInvalid(f"{where}: the entry has no command")
            parse_schedule(schedule, state.timezone)
        except InvalidInput as exc:
            raise CrontabInvalid(f"{where}: {exc.field}: {exc.message}") from None
        name = job_name(schedule, command)
        unique, n = name, 1
        while unique in names:
            n += 1
            unique = f"{name}-{n}"
        names.add(unique)
        payload: dict[str, Any] = {"argv": argv_of(command, state.shell, state.shell_vars)}
        if state.env:
            payload["env"] = dict(state.env)
        job = {
            "name": unique,
            "kind": "shell",
            "cron_expression": schedule,
            "timezone": state.timezone,
            "timeout_s": timeout_s,
            "payload": payload,
        }
        dumped = yaml.safe_dump([_escape(job)], sort_keys=False, allow_unicode=True, width=1_000_000)
        comment = f"  # line {number}: {line.strip()}\n"
        if user:
            comment += f"  # cron ran it as {user}; Cronos runs shell jobs as CRONOS_SHELL_USER\n"
        blocks.append(comment + "".join(f"  {row}\n" for row in dumped.splitlines()))
    if not blocks:
        raise CrontabInvalid(f"{source}: no crontab entry to convert")
    head = _HEADER.format(source=source) + "".join(f"# {note}\n" for note in notes)
    return head + "jobs:\n" + "".join(blocks), warnings
