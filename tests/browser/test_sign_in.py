"""Console sign-in with OpenID Connect, end to end: a real browser, a real Cronos stack and a real
OpenID provider (django-oidc-provider, tests/browser/oidc_idp) started here, no mock.

alice (group `ops`, granted admin) signs in at the provider, lands back signed in, sees the jobs
and signs out, after which her session cookie opens nothing. bob (group `viewers`, granted read)
is refused a write with a problem body. A forged state, an expired sign-in and an ID token
whose nonce is not the one Cronos sent are refused.
"""

from __future__ import annotations

import asyncio
import http.client
import importlib.util
import json
import os
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import asyncpg
import pytest

from tests.browser.conftest import REPO, Stack
from tests.browser.test_console import call, wait
from tests.cluster.servers import free_port
from tests.serving import serving

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.browser,
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        importlib.util.find_spec("oidc_provider") is None or importlib.util.find_spec("authlib") is None,
        reason="needs the test extra's django-oidc-provider and authlib (pip install -e '.[test]')",
    ),
]

CLIENT_ID = "cronos-console"
CLIENT_SECRET = secrets.token_hex(32)
ADMIN_TOKEN = secrets.token_hex(32)
PASSWORD = secrets.token_urlsafe(16)
IDP_PORT = free_port()
IDP = f"http://127.0.0.1:{IDP_PORT}"
ISSUER = f"{IDP}/openid"


def STACK_ENV(base: str) -> dict[str, str]:  # read by tests/browser/conftest.py to start the stack
    return {
        "CRONOS_AUTH": "required",  # no protected mode: only a session (or a token) opens the console
        "CRONOS_ADMIN_TOKEN": ADMIN_TOKEN,
        "CRONOS_OIDC_ISSUER": ISSUER,
        "CRONOS_OIDC_CLIENT_ID": CLIENT_ID,
        "CRONOS_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "CRONOS_OIDC_REDIRECT_BASE": base,
        "CRONOS_OIDC_PROVIDER_NAME": "Test IdP",
        "CRONOS_OIDC_GROUPS": '{"ops": "admin", "viewers": "read"}',
    }


@dataclass(frozen=True)
class Provider:
    issuer: str


@pytest.fixture(scope="module")
def provider(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    root = tmp_path_factory.mktemp("idp")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "DJANGO_SETTINGS_MODULE": "tests.browser.oidc_idp.settings",
        "OIDC_IDP_SECRET_KEY": secrets.token_hex(32),
        "OIDC_IDP_DB": str(root / "idp.sqlite3"),
        "OIDC_IDP_SITE": IDP,
        "OIDC_IDP_PASSWORD": PASSWORD,
        "OIDC_IDP_CLIENT_ID": CLIENT_ID,
        "OIDC_IDP_CLIENT_SECRET": CLIENT_SECRET,
        "OIDC_IDP_REDIRECT": f"{stack.base}/auth/callback",
    }
    subprocess.run([sys.executable, "-m", "tests.browser.oidc_idp.seed"], env=env, cwd=REPO, check=True, timeout=120)
    argv = [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{IDP_PORT}", "--noreload"]
    discovery = f"{ISSUER}/.well-known/openid-configuration"
    with serving(argv, ready=discovery, log=root / "idp.log", what="the provider", env=env, cwd=REPO,
                 start_new_session=True):  # fmt: skip
        yield Provider(ISSUER)


def _log_in_at_provider(driver: Any, who: str) -> None:
    """On the provider's login page (where the console sent the browser): name, password, submit."""
    from selenium.webdriver.common.by import By

    wait(driver, lambda d: d.find_element(By.ID, "id_username"), what="the provider's login page")
    driver.find_element(By.ID, "id_username").send_keys(who)
    driver.find_element(By.ID, "id_password").send_keys(PASSWORD)
    driver.find_element(By.ID, "idp-submit").click()


def _sign_in(driver: Any, stack: Stack, who: str) -> None:
    from selenium.webdriver.common.by import By

    driver.delete_all_cookies()  # the provider's and the console's (one host, two ports): nobody signed in
    driver.get(f"{stack.base}/#/jobs")
    # The jobs need a session or a token: the token dialog offers the provider beside the pasted token.
    button = wait(driver, lambda d: (b := d.find_element(By.ID, "token-signin")).is_displayed() and b, what="sign-in")
    assert button.text == "Sign in with Test IdP"
    assert driver.find_element(By.ID, "token-input").is_displayed()  # tokens stay for those who hold one
    button.click()
    _log_in_at_provider(driver, who)
    wait(driver, lambda d: d.find_element(By.ID, "who").text == f"{who}@example.com", what=f"{who} signed in")


def _page_fetch(driver: Any, method: str, path: str, *, csrf: bool) -> dict[str, Any]:
    """A request the console's page makes itself (its cookie goes along), with or without its CSRF header."""
    script = """
      const [method, path, csrf, done] = arguments;
      const state = await (await fetch("/auth/session")).json();
      const headers = csrf ? {"X-CSRF-Token": state.csrf} : {};
      const r = await fetch(path, {method, headers, credentials: "same-origin"});
      done({status: r.status, body: await r.json().catch(() => null)});
    """
    return driver.execute_async_script(f"(async () => {{ {script} }})()", method, path, csrf)  # type: ignore[no-any-return]


def _with_cookie(stack: Stack, path: str, session: str) -> int:
    request = urllib.request.Request(stack.base + path, headers={"Cookie": f"cronos_session={session}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_people_sign_in_by_group_and_sign_out(browser: Any, stack: Stack, provider: Provider) -> None:
    from selenium.webdriver.common.by import By

    driver = browser
    job = call(stack, "POST", "/api/jobs", {"name": "nightly-report", "cron_expression": "0 3 * * *",
               "payload": {"action": "browser.ok"}, "status": "paused"}, token=ADMIN_TOKEN)  # fmt: skip

    _sign_in(driver, stack, "alice")
    wait(driver, lambda d: "nightly-report" in d.find_element(By.ID, "main").text, what="the jobs, signed in")
    cookie = driver.get_cookie("cronos_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax" and cookie["path"] == "/", cookie
    assert _with_cookie(stack, "/api/jobs", cookie["value"]) == 200
    triggered = _page_fetch(driver, "POST", f"/api/jobs/{job['id']}/trigger", csrf=True)
    assert triggered["status"] == 202, triggered

    driver.find_element(By.ID, "sign-out").click()
    wait(driver, lambda d: d.find_element(By.ID, "sign-in").is_displayed(), what="signed out")
    assert _with_cookie(stack, "/api/jobs", cookie["value"]) == 401  # the session ended on the server

    _sign_in(driver, stack, "bob")
    wait(driver, lambda d: "nightly-report" in d.find_element(By.ID, "main").text, what="bob reads the jobs")
    refused = _page_fetch(driver, "POST", f"/api/jobs/{job['id']}/trigger", csrf=True)
    assert refused["status"] == 403 and refused["body"]["type"] == "urn:cronos:problem:forbidden", refused
    assert "`oidc:bob@example.com` holds read" in refused["body"]["detail"]
    forged = _page_fetch(driver, "POST", f"/api/jobs/{job['id']}/trigger", csrf=False)
    assert forged["status"] == 403 and forged["body"]["type"] == "urn:cronos:problem:csrf", forged


def _begin(stack: Stack) -> tuple[str, str]:
    """GET /auth/login as the browser's first step, without following it: the provider URL and the state."""
    conn = http.client.HTTPConnection(urlsplit(stack.base).netloc, timeout=10)
    conn.request("GET", "/auth/login")
    resp = conn.getresponse()
    assert resp.status == 302, resp.read()
    location = resp.headers["Location"]
    conn.close()
    return location, parse_qs(urlsplit(location).query)["state"][0]


def _refusal(driver: Any) -> dict[str, Any]:
    from selenium.webdriver.common.by import By

    return json.loads(wait(driver, lambda d: d.find_element(By.TAG_NAME, "body").text, what="the callback's answer"))  # type: ignore[no-any-return]


def _expire_sign_ins(stack: Stack) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(stack.database_url)
        try:
            await conn.execute("UPDATE oidc_logins SET expires_at = now() - interval '1 second'")
        finally:
            await conn.close()

    asyncio.run(run())


def test_a_forged_state_an_expired_sign_in_and_a_wrong_nonce_are_refused(
    browser: Any, stack: Stack, provider: Provider
) -> None:
    driver = browser
    driver.delete_all_cookies()
    driver.get(f"{stack.base}/auth/callback?state=forged&code=anything")
    forged = _refusal(driver)
    assert forged["status"] == 400 and "state" in forged["detail"], forged

    # bob is signed in at the provider, which then answers each request for a code at once.
    driver.get(f"{IDP}/accounts/login/?next=/openid/.well-known/openid-configuration")
    _log_in_at_provider(driver, "bob")

    for case in ("expired", "nonce"):
        location, state = _begin(stack)
        driver.get(f"{stack.base}/health")
        driver.add_cookie({"name": "cronos_login", "value": state, "path": "/auth/"})  # this browser began it
        if case == "expired":
            _expire_sign_ins(stack)
        else:  # the provider signs an ID token for another nonce than the one Cronos keeps
            parts = urlsplit(location)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()} | {"nonce": secrets.token_urlsafe(16)}
            location = urlunsplit(parts._replace(query=urlencode(query)))
        driver.get(location)
        refused = _refusal(driver)
        assert refused["status"] == 400 and refused["type"] == "urn:cronos:problem:sign-in-refused", refused
        assert ("expired" if case == "expired" else "nonce") in refused["detail"], refused
        assert driver.get_cookie("cronos_session") is None  # nobody was signed in
