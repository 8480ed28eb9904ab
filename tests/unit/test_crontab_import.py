"""`cronos import crontab`'s conversion (cronos.client.crontab_import): every output goes through
the jobs-file checks `cronos apply` makes (the API's published schema, then the payload checks)."""

from __future__ import annotations

from typing import Any

import pytest

from api.jobs_file import jobs_file_schema
from cronos.client.crontab_import import CrontabInvalid, argv_of, convert, job_name, split_percent
from cronos.client.jobs_file import desired_jobs, parse

SCHEMA = jobs_file_schema()


def jobs(text: str, **kwargs: Any) -> list[dict[str, Any]]:
    """The jobs `cronos apply` would make of the converted crontab (its fields, defaults filled in)."""
    converted, _ = convert(text, "crontab", **kwargs)
    return [d.fields for d in desired_jobs([("out.yaml", parse("out.yaml", converted))], SCHEMA, {})]


def test_a_simple_command_is_its_argv_and_shell_syntax_runs_in_sh() -> None:
    made = jobs(
        "0 3 * * * /usr/local/bin/backup.sh --full 'two words'\n"
        "*/15 * * * * cd /srv/app && ./sync.sh >> /var/log/sync.log 2>&1\n"
        "@hourly echo $HOME | tee ~/x\n"
    )
    assert [j["payload"]["argv"] for j in made] == [
        ["/usr/local/bin/backup.sh", "--full", "two words"],
        ["/bin/sh", "-c", "cd /srv/app && ./sync.sh >> /var/log/sync.log 2>&1"],
        ["/bin/sh", "-c", "echo $HOME | tee ~/x"],  # `$` kept literally through apply's ${VAR} expansion
    ]
    assert [(j["kind"], j["cron_expression"], j["timezone"], j["timeout_s"]) for j in made] == [
        ("shell", "0 3 * * *", "UTC", 3600.0),
        ("shell", "*/15 * * * *", "UTC", 3600.0),
        ("shell", "@hourly", "UTC", 3600.0),
    ]
    assert "env" not in made[0]["payload"]


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("ls -l /tmp", ["ls", "-l", "/tmp"]),
        ('python3 -c "print(1)"', ["/bin/sh", "-c", 'python3 -c "print(1)"']),  # ( ) are shell syntax
        ("cd /tmp", ["/bin/sh", "-c", "cd /tmp"]),  # a builtin: no program of that name
        ("FOO=1 run", ["/bin/sh", "-c", "FOO=1 run"]),
        ("rm /tmp/*.log", ["/bin/sh", "-c", "rm /tmp/*.log"]),
        ("echo 'unclosed", ["/bin/sh", "-c", "echo 'unclosed"]),  # sh reports it when it runs, as under cron
        (r"date +\%Y-\%m-\%d", ["date", "+%Y-%m-%d"]),
        ("mail -s hi root%line one%line two", ["/bin/sh", "-c", "printf %s 'line one\nline two\n' | mail -s hi root"]),
    ],
)
def test_argv_of(command: str, argv: list[str]) -> None:
    assert argv_of(command, "/bin/sh", {}) == argv


def test_percent_is_crons() -> None:
    assert split_percent(r"a\%b") == ("a%b", None)
    assert split_percent(r"a\\%b") == ("a\\\\", "b\n")  # an escaped backslash does not escape the %
    assert split_percent(r"cmd%x\%y%z%") == ("cmd", "x%y\nz\n")
    assert split_percent("cmd%") == ("cmd", "")


def test_variables_apply_to_the_entries_below_them() -> None:
    converted, warnings = convert(
        "0 1 * * * /bin/first\n"
        "MAILTO=ops@example.com\n"
        "CRON_TZ=Europe/Paris\n"
        "FOO = 'bar baz'\n"
        "SHELL=/bin/bash\n"
        "0 2 * * * /bin/second\n"
        "PATH=/opt/bin:/usr/bin\n"
        "PYTHONPATH=/opt/lib\n"
        "0 3 * * * report\n",
        "crontab",
    )
    assert warnings == []
    assert (
        "# line 2: MAILTO is not carried: Cronos mails through a notification channel, not per job: "
        "cronos channels add mail --email ops@example.com --smtp-host HOST --from SENDER --on failed"
    ) in converted
    first, second, third = jobs_of(converted)
    assert (first["timezone"], first["payload"]) == ("UTC", {"argv": ["/bin/first"]})
    assert (second["timezone"], second["payload"]) == (
        "Europe/Paris",
        {"argv": ["/bin/second"], "env": {"FOO": "bar baz"}},
    )
    # A job's env may not set PATH or PYTHON*: the job's shell sets them, as cron's environment did.
    assert third["payload"]["argv"] == [
        "/bin/bash", "-c", "PATH=/opt/bin:/usr/bin; export PATH; PYTHONPATH=/opt/lib; export PYTHONPATH; report"
    ]  # fmt: skip
    assert third["payload"]["env"] == {"FOO": "bar baz"}


def jobs_of(converted: str) -> list[dict[str, Any]]:
    return [d.fields for d in desired_jobs([("out.yaml", parse("out.yaml", converted))], SCHEMA, {})]


def test_tz_is_the_zone_unless_cron_tz_says_otherwise() -> None:
    made = jobs("TZ=America/New_York\n0 1 * * * /bin/a\nCRON_TZ=Asia/Tokyo\n0 1 * * * /bin/b\n")
    assert [(j["timezone"], j["payload"]["env"]) for j in made] == [
        ("America/New_York", {"TZ": "America/New_York"}),
        ("Asia/Tokyo", {"TZ": "America/New_York"}),
    ]


def test_reboot_is_left_out_with_a_comment_and_a_warning() -> None:
    converted, warnings = convert("@reboot /bin/start\n@daily /bin/daily\n", "ct")
    assert warnings == ["ct: line 1: @reboot is left out (see the comment in the output)"]
    assert "# line 1: @reboot is left out" in converted
    assert [j["payload"]["argv"] for j in jobs_of(converted)] == [["/bin/daily"]]


def test_names_are_stable_and_unique() -> None:
    text = (
        "0 3 * * * /usr/local/bin/backup.sh --full\n5 * * * * /bin/other\n0 3 * * * /usr/local/bin/backup.sh --full\n"
    )
    names = [j["name"] for j in jobs(text)]
    digest = job_name("0 3 * * *", "/usr/local/bin/backup.sh --full")
    assert names[0] == digest and names[2] == f"{digest}-2" and digest.startswith("backup-sh-")
    # Another line added above changes no name: apply updates the same jobs.
    assert [j["name"] for j in jobs("@daily /bin/new\n" + text)][1:] == names
    assert job_name("*/15 * * * *", "cd /srv/app && ./sync.sh >> x").startswith("sync-sh-")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# fine\n\n61 * * * * /bin/x\n", "crontab: line 3: $.cron_expression: "),
        ("0 1 * * *\n", "crontab: line 1: not a crontab entry"),
        ("@daily /bin/a\nnonsense\n", "crontab: line 2: not a crontab entry"),
        ("CRON_TZ=Mars/Olympus\n@daily /bin/a\n", "crontab: line 1: $.timezone: unknown time zone"),
        ("@every /bin/a\n", "crontab: line 1: $.cron_expression: "),
        ("@daily /bin/a\0\n", "crontab: line 1: holds a NUL byte"),
        ("# only comments\n", "crontab: no crontab entry to convert"),
    ],
)
def test_bad_input_names_the_line(text: str, message: str) -> None:
    with pytest.raises(CrontabInvalid) as caught:
        convert(text, "crontab")
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_a_system_crontab_has_a_user_before_the_command() -> None:
    text = "17 * * * *\troot\tcd / && run-parts --report /etc/cron.hourly\n@daily backup /usr/local/bin/backup\n"
    converted, _ = convert(text, "/etc/crontab", system=True)
    assert [j["payload"]["argv"] for j in jobs_of(converted)] == [
        ["/bin/sh", "-c", "cd / && run-parts --report /etc/cron.hourly"],
        ["/usr/local/bin/backup"],
    ]
    assert "# cron ran it as backup; Cronos runs shell jobs as CRONOS_SHELL_USER" in converted
    with pytest.raises(CrontabInvalid, match=r"^/etc/crontab: line 1: the entry has no user and command"):
        convert("25 6 * * * root\n", "/etc/crontab", system=True)


def test_multi_line_and_unusual_text_survives_the_yaml() -> None:
    """A stdin of several lines, quotes, `#`, `${...}`, `:` and non-ASCII reach the job unchanged."""
    made = jobs("NOTE=a: 'b' # c ${D} é\n@daily mail -s \"x: y\" root%line one%  indented%%end\n")
    assert made[0]["payload"] == {
        "argv": ["/bin/sh", "-c", "printf %s 'line one\n  indented\n\nend\n' | mail -s \"x: y\" root"],
        "env": {"NOTE": "a: 'b' # c ${D} é"},
    }
