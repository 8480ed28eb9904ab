"""Jobs files to validated jobs, and desired vs current jobs to a plan (cronos.client; pure)."""

from __future__ import annotations

import resource
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

from api.jobs_file import jobs_file_schema
from cronos.client.apply import TOOL, Action, Step, describe, digest, digest_matches, plan, summary
from cronos.client.jobs_file import ApplyInvalid, Desired, desired_jobs, parse
from cronos.redact import redact_payload

SCHEMA = jobs_file_schema()
SALT = b"0123456789abcdef"
FILE = """
jobs:
  - name: reindex
    cron_expression: "*/5 * * * *"
    payload: {action: reindex, target: users}
  - name: hook
    kind: http
    cron_expression: "0 * * * *"
    timeout_s: 30
    payload:
      url: https://example.com/hook
      headers: {Authorization: "Bearer ${CRONOS_APPLY_HOOK_TOKEN}"}
  - name: cleanup
    cron_expression: "@daily"
    status: paused
    payload: {action: cleanup, since: 2024-01-01}
"""


def _desired(text: str = FILE, environ: dict[str, str] | None = None) -> list[Desired]:
    env = {"CRONOS_APPLY_HOOK_TOKEN": "s3cret"} if environ is None else environ
    return desired_jobs([("jobs.yaml", parse("jobs.yaml", text))], SCHEMA, env)


def _stored(actions: list[Action]) -> list[dict[str, Any]]:
    """What the API would show after carrying out the creates: secrets redacted, ids given."""
    shown = []
    for number, action in enumerate(actions, start=1):
        assert action.step is Step.CREATE and action.body is not None
        body = dict(action.body)
        shown.append({**body, "id": number, "payload": redact_payload(body["kind"], body["payload"])})
    return shown


def _refusal(text: str, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ApplyInvalid) as caught:
        _desired(text, environ)
    return str(caught.value)


def test_the_published_schema_is_valid_and_fits_a_file() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(parse("f", FILE), SCHEMA)
    assert "managed_by" not in SCHEMA["$defs"]["JobCreate"]["properties"]  # apply sets it, a file does not


def test_defaults_are_filled_and_variables_expanded() -> None:
    reindex, hook, cleanup = _desired()
    assert reindex.fields["timezone"] == "UTC" and reindex.fields["kind"] == "task"
    assert reindex.fields["status"] == "active" and reindex.fields["timeout_s"] == 300.0
    assert hook.fields["payload"]["headers"] == {"Authorization": "Bearer s3cret"}
    assert cleanup.fields["payload"]["since"] == "2024-01-01"  # a YAML date is the text the API stores
    escaped = _desired(FILE.replace("${CRONOS_APPLY_HOOK_TOKEN}", "$${HOOK}$$"))[1]  # `$$` is a `$`
    assert escaped.fields["payload"]["headers"] == {"Authorization": "Bearer ${HOOK}$"}


def test_first_plan_creates_and_the_next_changes_nothing() -> None:
    first = plan(_desired(), [], prune=False, salt=SALT)
    assert [(a.step, a.name) for a in first] == [(Step.CREATE, "reindex"), (Step.CREATE, "hook"),
                                                 (Step.CREATE, "cleanup")]  # fmt: skip
    assert describe(first[2]) == "create     cleanup (paused)"
    hook = first[1].body
    assert hook is not None and hook["managed_by"]["tool"] == TOOL
    assert digest_matches(hook["payload"], hook["managed_by"]["secrets_digest"])
    assert first[0].body is not None and first[0].body["managed_by"]["secrets_digest"] is None  # no secret
    again = plan(_desired(), _stored(first), prune=True, salt=b"another salt....")
    assert {a.step for a in again} == {Step.UNCHANGED}
    assert summary(again) == "Nothing to change: 3 job(s) match the file(s)."


def test_changes_become_updates_pauses_resumes_and_only_managed_jobs_are_pruned() -> None:
    current = _stored(plan(_desired(), [], prune=False, salt=SALT))
    current[2]["status"] = "paused"
    unmanaged = {**current[0], "id": 9, "name": "by-hand", "managed_by": None}
    edited = FILE.replace('"*/5 * * * *"', '"*/10 * * * *"').replace("status: paused", "status: active")
    edited = edited.replace("  - name: hook", "  - name: gone-hook")  # `hook` left the file
    actions = plan(_desired(edited), [*current, unmanaged], prune=True, salt=SALT)
    steps = [(a.step, a.name, a.changed) for a in actions]
    assert (Step.UPDATE, "reindex", ("cron_expression",)) in steps
    assert (Step.RESUME, "cleanup", ()) in steps
    assert (Step.CREATE, "gone-hook", ()) in steps
    assert steps[-1] == (Step.DELETE, "hook", ())  # deletions last, and never `by-hand`
    update = next(a for a in actions if a.step is Step.UPDATE)
    assert update.body == {"cron_expression": "*/10 * * * *"}  # only what changed
    assert not any(a.step is Step.DELETE for a in plan(_desired(edited), current, prune=False, salt=SALT))


def test_pruned_children_are_deleted_before_their_parents() -> None:
    """The API refuses to delete a job another names in `parents`: a pruned chain goes leaf first."""
    current = _stored(plan(_desired(), [], prune=False, salt=SALT))
    ids = [job["id"] for job in current]
    current[0]["parents"] = [ids[1]]  # reindex runs after hook, cleanup after reindex
    current[2]["parents"] = [ids[0]]
    actions = plan([], current, prune=True, salt=SALT)
    assert [(a.step, a.name) for a in actions] == [
        (Step.DELETE, "cleanup"), (Step.DELETE, "reindex"), (Step.DELETE, "hook"),
    ]  # fmt: skip


def test_a_changed_secret_is_seen_through_the_digest() -> None:
    current = _stored(plan(_desired(), [], prune=False, salt=SALT))
    actions = plan(_desired(environ={"CRONOS_APPLY_HOOK_TOKEN": "rotated"}), current, prune=False, salt=SALT)
    update = next(a for a in actions if a.step is Step.UPDATE)
    assert update.name == "hook" and update.changed == ("payload (secrets)",)
    assert update.body is not None and update.body["payload"]["headers"]["Authorization"] == "Bearer rotated"
    assert update.body["kind"] == "http"
    assert digest_matches(update.body["payload"], update.body["managed_by"]["secrets_digest"])
    current[1]["managed_by"]["secrets_digest"] = None  # another write changed the payload: the API dropped it
    again = plan(_desired(), current, prune=False, salt=SALT)
    assert [a.changed for a in again if a.step is Step.UPDATE] == [("payload (secrets)",)]


def test_an_existing_job_of_the_same_name_is_adopted() -> None:
    current = _stored(plan(_desired(), [], prune=False, salt=SALT))
    current[0]["managed_by"] = None
    actions = plan(_desired(), current, prune=False, salt=SALT)
    adopted = next(a for a in actions if a.name == "reindex")
    assert adopted.step is Step.UPDATE and adopted.changed == ("managed_by",)
    assert adopted.body == {"managed_by": {"tool": TOOL, "secrets_digest": None}}


def test_a_digest_is_salted_and_only_our_own_parameters_are_trusted() -> None:
    payload = {"url": "https://x.test", "headers": {"Authorization": "Bearer a"}}
    first, second = digest(payload, b"a" * 16), digest(payload, b"b" * 16)
    assert first != second and digest_matches(payload, first) and digest_matches(payload, second)
    assert not digest_matches({**payload, "headers": {"Authorization": "Bearer b"}}, first)
    assert not digest_matches(payload, first.replace("$16384$", "$1048576$"))
    assert not digest_matches(payload, None) and not digest_matches(payload, "scrypt$x")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("jobs: [{name: a, cron_expression: '* * * * *', payload: {action: x}, timeout_s: 0}]",
         ("job 'a'", "$.timeout_s", "more than 0")),
        ("jobs: [{name: a, cron_expression: '61 * * * *', payload: {action: x}}]", ("job 'a'", "$.cron_expression")),
        ("jobs: [{name: a, cron_expression: '* * * * *', payload: {}}]", ("job 'a'", "$.payload", "'action'")),
        ("jobs: [{name: a, cron_expression: '* * * * *', kind: cron, payload: {}}]", ("$.kind", "task")),
        ("jobs: [{name: a, cron_expression: '* * * * *', payload: {action: x}, colour: red}]", ("'colour'",)),
        ("jobs: [{cron_expression: '* * * * *', payload: {action: x}}]", ("jobs[0]", "'name'")),
        ("jobs: [{name: a, cron_expression: '* * * * *', payload: {action: x, token: '${CRONOS_APPLY_GONE}'}}]",
         ("job 'a'", "$.payload.token", "${CRONOS_APPLY_GONE} is not set")),
        ("jobs: [{name: a, cron_expression: '* * * * *', kind: shell, payload: {argv: [ls], env: {PATH: x}}}]",
         ("$.payload.env", "PATH")),
        ("jobs: {name: a}", ("$.jobs", "array")),
        ("jobs: [{name: a, cron_expression: '* * * * *' payload: x}]", ("not valid YAML", "line 1")),
    ],
)  # fmt: skip
def test_a_bad_file_is_refused_naming_the_file_the_job_and_the_field(text: str, words: tuple[str, ...]) -> None:
    message = _refusal(text)
    assert message.startswith("jobs.yaml: ") and "\n" not in message
    assert all(word in message for word in words), message


def test_a_refusal_never_quotes_a_value() -> None:
    text = "jobs: [{name: a, cron_expression: '* * * * *', kind: http, payload: {url: 'https://x.test', "
    message = _refusal(text + "headers: {Authorization: 12345678}}}]")
    assert "$.payload.headers.Authorization" in message and "12345678" not in message


def test_a_name_is_one_job_across_files() -> None:
    one = ("a.yaml", parse("a.yaml", "jobs: [{name: x, cron_expression: '@daily', payload: {action: y}}]"))
    with pytest.raises(ApplyInvalid, match=r"b.yaml: job 'x': the name is also used in a.yaml"):
        desired_jobs([one, ("b.yaml", one[1])], SCHEMA, {})


ONE_OFF = """
jobs:
  - name: once
    run_at: 2030-01-01T02:00:00+02:00
    payload: {action: migrate}
  - name: window
    cron_expression: "@hourly"
    end_at: "2030-01-01T00:00:00Z"
    payload: {action: reindex}
"""


def test_one_offs_and_windows_compare_as_instants_and_an_ended_job_is_not_resumed() -> None:
    first = plan(_desired(ONE_OFF), [], prune=False, salt=SALT)
    assert [a.step for a in first] == [Step.CREATE, Step.CREATE]
    stored = _stored(first)
    stored[0]["run_at"] = "2030-01-01T00:00:00Z"  # the API shows the same instant in UTC
    stored[1]["status"] = "completed"  # the leader ended it
    assert {a.step for a in plan(_desired(ONE_OFF), stored, prune=False, salt=SALT)} == {Step.UNCHANGED}
    later = plan(
        _desired(ONE_OFF.replace("2030-01-01T00:00:00Z", "2031-01-01T00:00:00Z")), stored, prune=False, salt=SALT
    )
    update = next(a for a in later if a.step is Step.UPDATE)
    assert update.body == {"end_at": "2031-01-01T00:00:00Z", "status": "active"}  # a new window revives it
    with pytest.raises(ApplyInvalid, match=r"job .once.: \$\.(cron_expression|run_at)"):  # one of the two
        _desired(ONE_OFF.replace("    run_at:", '    cron_expression: "@daily"\n    run_at:'))


def test_expectations_in_a_file_are_checked_and_compared_like_any_field() -> None:
    text = FILE.replace("    payload: {action: reindex, target: users}\n",
                        "    payload: {action: reindex, target: users}\n"
                        "    expectations: {finish_within_s: 600, success_every_s: 86400}\n")  # fmt: skip
    desired = _desired(text)
    assert desired[0].fields["expectations"] == {"finish_within_s": 600, "success_every_s": 86400}
    assert desired[1].fields["expectations"] is None
    created = plan(desired, [], prune=False, salt=SALT)
    stored = _stored(created)
    stored[0]["expectations"] = {"finish_within_s": 600.0, "success_every_s": 86400.0}  # as the API shows them
    assert [a.step for a in plan(desired, stored, prune=False, salt=SALT)] == [Step.UNCHANGED] * 3
    tightened = _desired(text.replace("finish_within_s: 600", "finish_within_s: 60"))
    update = plan(tightened, stored, prune=False, salt=SALT)[0]
    assert update.step is Step.UPDATE and update.changed == ("expectations",)
    assert "expectations" in _refusal(text.replace("finish_within_s: 600", "finish_within_s: -1"))
    assert "expectations" in _refusal(text.replace("finish_within_s: 600", "finish_in: 1"))


def test_a_chain_in_a_file_compares_with_its_defaults_filled() -> None:
    text = FILE.replace("    payload: {action: reindex, target: users}\n",
                        "    payload: {action: reindex, target: users}\n"
                        "    parents: [7]\n    chain: {join: {timeout_s: 60}}\n")  # fmt: skip
    desired = _desired(text)
    stored = _stored(plan(desired, [], prune=False, salt=SALT))
    stored[0]["chain"] = {"join": {"timeout_s": 60.0, "on_timeout": "skip"}}  # as the API shows it
    assert [a.step for a in plan(desired, stored, prune=False, salt=SALT)] == [Step.UNCHANGED] * 3
    update = plan(_desired(text.replace("timeout_s: 60", "timeout_s: 90")), stored, prune=False, salt=SALT)[0]
    assert update.step is Step.UPDATE and update.changed == ("chain",)


_HTTP = "jobs: [{name: a, cron_expression: '* * * * *', kind: http, payload: {url: 'https://x.test/p', "
_RUNNER = {"CRONOS_API_TOKEN": "admin-token-of-the-runner", "DATABASE_URL": "postgresql://u:pw@db/x",
           "CRONOS_APPLY_T": "t0ken"}  # fmt: skip


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [  # a variable without the prefix: the runner's own, never read
        (_HTTP + "headers: {Authorization: 'Bearer ${CRONOS_API_TOKEN}'}}}]", "$.payload.headers.Authorization",
         "${CRONOS_API_TOKEN}: apply reads only variables named CRONOS_APPLY_*"),
        ("jobs: [{name: a, cron_expression: '@daily', payload: {action: x, note: 'db=${DATABASE_URL}'}}]",
         "$.payload.note", "${DATABASE_URL}"),
        # the prefix, but where anyone with a read token would see it
        ("jobs: [{name: a, cron_expression: '@daily', payload: {action: x}, owner: '${CRONOS_APPLY_T}'}]",
         "$.owner", "only where the API keeps the value secret"),
        ("jobs: [{name: a, cron_expression: '@daily', payload: {action: x, target: '${CRONOS_APPLY_T}'}}]",
         "$.payload.target", "only where the API keeps the value secret"),
        (_HTTP + "headers: {X-Team: '${CRONOS_APPLY_T}'}}}]", "$.payload.headers.X-Team", "secret"),
        (_HTTP + "body: {user: '${CRONOS_APPLY_T}'}}}]", "$.payload.body.user", "secret"),
    ],
)  # fmt: skip
def test_apply_expands_only_its_own_variables_and_only_into_secrets(text: str, field: str, words: str) -> None:
    message = _refusal(text, _RUNNER)
    assert message.startswith("jobs.yaml: job 'a': ") and "\n" not in message, message
    assert f"{field}: " in message and words in message, message
    assert not any(value in message for value in _RUNNER.values()), message


def test_an_expanded_variable_lands_only_where_the_api_shows_stars() -> None:
    text = _HTTP + (
        "headers: {Authorization: 'Bearer ${CRONOS_APPLY_T}', X-Api-Key: '${CRONOS_APPLY_T}'}, "
        "body: {password: '${CRONOS_APPLY_T}'}}}]"
    )
    (job,) = _desired(text, _RUNNER)
    payload = job.fields["payload"]
    assert payload["headers"] == {"Authorization": "Bearer t0ken", "X-Api-Key": "t0ken"}
    assert payload["body"] == {"password": "t0ken"}
    assert "t0ken" not in str(redact_payload("http", payload))


# Nine levels of nine aliases: 351 bytes, 9**9 (387 million) values once expanded.
BOMB = "".join(f"{a}: &{a} [{', '.join([f'*{b}'] * 9) if b else ', '.join(['lol'] * 9)}]\n"
               for b, a in zip(["", *"abcdefgh"], "abcdefghi", strict=True)) + "jobs: []\n"  # fmt: skip


def test_a_yaml_alias_bomb_is_refused_in_one_line() -> None:
    assert len(BOMB) < 520
    # In a child capped at 1 GiB of address space: a regression fails here, it cannot take the machine.
    code = "import sys; from cronos.client.jobs_file import parse; parse('jobs.yaml', sys.stdin.read())"
    done = subprocess.run(
        [sys.executable, "-c", code], input=BOMB, capture_output=True, text=True, timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30)),
    )  # fmt: skip
    assert done.returncode != 0 and "MemoryError" not in done.stderr, done.stderr[-500:]
    last = (done.stderr.strip().splitlines() or [f"no output, exit {done.returncode}"])[-1]
    assert last.endswith(
        "ApplyInvalid: jobs.yaml: YAML aliases expand to more than 100000 values: write the values out"
    ), last
    with pytest.raises(ApplyInvalid, match=r"^r.yaml: YAML aliases expand"):
        parse("r.yaml", "jobs: &a [*a]")  # an alias inside its own anchor
    with pytest.raises(ApplyInvalid, match=r"^d.yaml: YAML nested too deeply$"):
        parse("d.yaml", "[" * 5000 + "]" * 5000)


def test_aliases_within_the_bound_still_load() -> None:
    shared = "defaults: &d {action: x, target: users}\njobs: [{name: a, cron_expression: '@daily', payload: *d}]\n"
    (job,) = desired_jobs([("f.yaml", {k: v for k, v in parse("f.yaml", shared).items() if k == "jobs"})], SCHEMA, {})
    assert job.fields["payload"] == {"action": "x", "target": "users"}
    wide = "x: &x [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\ny: [" + ", ".join(["*x"] * 9000) + "]\n"  # 99,002 values
    assert len(parse("w.yaml", wide)["y"]) == 9000


SCHEDULES = """
jobs:
  - name: office-sync
    cron_expression: "0 8 * * 1-5"
    schedules:
      - {cron: "0 10 * * 6", timezone: UTC}
      - {every: 90m, anchor: "2026-01-01T01:00:00+01:00"}
    payload: {action: reindex}
"""


def test_schedules_are_checked_and_compare_as_the_api_stores_them() -> None:
    first = plan(_desired(SCHEDULES), [], prune=False, salt=SALT)
    assert first[0].body is not None and first[0].body["schedules"][1]["every"] == "1h30m"
    stored = _stored(first)
    stored[0]["schedules"][1] = {"every": "1h30m", "anchor": "2026-01-01T00:00:00Z"}  # the same instant in UTC
    assert {a.step for a in plan(_desired(SCHEDULES), stored, prune=False, salt=SALT)} == {Step.UNCHANGED}
    later = plan(_desired(SCHEDULES.replace("0 10 * * 6", "0 11 * * 6")), stored, prune=False, salt=SALT)
    assert [a.changed for a in later] == [("schedules",)]
    with pytest.raises(ApplyInvalid, match=r"job .office-sync.: \$\.schedules\[0\]\.cron"):
        _desired(SCHEDULES.replace("0 10 * * 6", "0 25 * * 6"))
