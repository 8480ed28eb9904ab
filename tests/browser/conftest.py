"""A real Cronos stack (`cronos dev`: API, dispatcher, executor in one process) on a database and
Redis key prefix of its own, and headless Chromium driven by Selenium with Debian's chromedriver.

Nothing downloads a browser: the suite uses /usr/bin/chromium and /usr/bin/chromedriver (Debian's
`chromium` and `chromium-driver`, installed by .ci/run) and skips, saying so, where they are missing.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cronos.settings import VARIABLES
from cronos.store.db import migrate
from tests.cluster.servers import cronos_command, free_port
from tests.conftest import _drop_database
from tests.services import Services, key_prefix_of_its_own, with_database
from tests.serving import serving

CHROMIUM = os.environ.get("CRONOS_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CRONOS_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
ARTIFACTS = Path("artifacts") / "browser"
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Stack:
    base: str  # http://127.0.0.1:PORT
    node_id: str
    database_url: str
    log: Path


@pytest.fixture(scope="module")
def stack_prefix(services: Services) -> Iterator[str]:
    """The stack's Redis key prefix; its keys go after the stack has stopped."""
    with key_prefix_of_its_own(services.redis_url) as prefix:
        yield prefix


@pytest.fixture(scope="module")
def stack(
    services: Services, stack_prefix: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Stack]:
    name = f"cronos_b_{uuid.uuid4().hex[:12]}"
    dsn = with_database(services.pg_admin_dsn, name)
    asyncio.run(migrate(dsn))  # creates the database too
    port, node = free_port(), f"browser-{uuid.uuid4().hex[:6]}"
    root = tmp_path_factory.mktemp("stack")
    log = root / "cronos.log"
    base = f"http://127.0.0.1:{port}"
    own = getattr(request.module, "STACK_ENV", {})  # a test module's own settings (a function of the base URL)
    clean = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    env = {
        **clean,
        "PORT": str(port),
        "CRONOS_API_HOST": "127.0.0.1",
        "DATABASE_URL": dsn,
        "REDIS_URL": services.redis_url,
        "CRONOS_KEY_PREFIX": stack_prefix,
        "CRONOS_NODE_ID": node,
        "CRONOS_LOG_FORMAT": "json",
        "CRONOS_LEADER_TTL_MS": "1500",
        "CRONOS_ALLOW_SHELL": "true",  # the edit form's tests open a shell job (none of them runs it)
        "PYTHONPATH": str(REPO),  # for --import tests.browser.tasks
        **(own(base) if callable(own) else own),
    }
    try:
        argv = [*cronos_command(), "dev", "--import", "tests.browser.tasks"]
        # start_new_session: Ctrl-C on the test run reaches pytest, which stops the stack itself.
        with serving(argv, ready=f"{base}/health", log=log, what="cronos dev /health", env=env, cwd=REPO,
                     start_new_session=True):  # fmt: skip
            yield Stack(base, node, dsn, log)
    finally:
        asyncio.run(_drop_database(services.pg_admin_dsn, name))


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.skip(f"needs Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER}); .ci/run installs them")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("needs the selenium package (pip install -e '.[test]')")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,900", "--force-device-scale-factor=1", "--lang=en-US"):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the page's console, for JS errors
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
