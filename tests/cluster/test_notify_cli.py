"""`cronos channels ...` as real processes against `cronos dev` (API, dispatcher, executor), with a
real HTTP receiver checking Standard Webhooks signatures: add, list, test (sent by the leader),
show with its deliveries, delete; bad input is one line and a non-zero exit."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from standardwebhooks import Webhook

from tests.cluster.cli_api import api_process, as_json, cli, ok, one_line_error
from tests.notify_receivers import http_receiver

pytestmark = pytest.mark.cluster


async def test_channels_commands_add_test_show_and_delete(tmp_path: Path, database_url: str, key_prefix: str) -> None:
    with api_process(tmp_path, database_url, key_prefix, "dev", CRONOS_HTTP_ALLOW_NETS="127.0.0.0/8") as url:

        async def run(*args: str) -> subprocess.CompletedProcess[str]:
            return await asyncio.to_thread(cli, tmp_path, url, *args)

        ok(await run("jobs", "create", "--name", "nightly", "--cron-expression", "0 3 1 1 *", "--payload",
                     '{"action": "reindex"}'))  # fmt: skip
        async with http_receiver(statuses=[500, 200]) as receiver:
            rules = ("--on", "failed,recovered", "--after-failures", "2", "--rate-limit", "1h")
            added = ok(await run("channels", "add", "hook", "--webhook", receiver.url, "--job", "nightly", *rules))
            secret = added.strip().splitlines()[-1].rsplit(" ", 1)[-1]
            assert secret.startswith("whsec_"), added
            listed = ok(await run("channels", "list"))
            assert "hook" in listed and "jobs 1" in listed and "after 2 failures, 1 per 3600s" in listed
            assert secret not in listed
            tested = ok(await run("channels", "test", "hook", "--wait", "30"))  # 500 first: retried, then sent
            assert tested.startswith("Test notification 1 sent."), tested
            got = receiver.accepted()[0]
            assert Webhook(secret).verify(got.body, got.headers)["type"] == "cronos.test"
        shown = ok(await run("channels", "show", "hook"))
        assert "recent deliveries" in shown and "sent" in shown and secret not in shown
        deliveries = as_json(await run("channels", "show", "hook", "--json"))["deliveries"]
        assert [(d["kind"], d["state"], d["attempts"]) for d in deliveries] == [("test", "sent", 2)]
        refused = await run("channels", "add", "bad", "--webhook", "http://10.0.0.1/x")
        assert refused.returncode == 1 and "$.url: refused by the SSRF guard" in one_line_error(refused)
        missing = await run("channels", "add", "mail", "--email", "ops@example.com")
        assert missing.returncode == 1 and "--email: needs --smtp-host and --from" in one_line_error(missing)
        assert ok(await run("channels", "delete", "hook")).strip() == "Deleted channel hook."
        assert as_json(await run("channels", "list", "--json")) == []
