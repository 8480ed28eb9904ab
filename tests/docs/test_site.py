"""The documentation site builds with `mkdocs build --strict`: a broken link or anchor, a page
missing from the navigation or a bad configuration fails the suite (issue 23, item 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.docs.blocks import REPO

MKDOCS = Path(sys.executable).parent / "mkdocs"


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about its successor
    argv = [str(MKDOCS), "build", "--strict", "--config-file", str(config), "--site-dir", str(site)]
    return subprocess.run(argv, cwd=config.parent, env=env, capture_output=True, text=True, timeout=50)


def test_the_site_builds_strictly_and_offline(tmp_path: Path) -> None:
    built = _build(REPO / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr[-4000:]
    index = (tmp_path / "site" / "index.html").read_text()
    # No web fonts or CDN assets: the site reads offline and tells no third party who reads it.
    assert "fonts.googleapis" not in index and "fonts.gstatic" not in index
    for page in ("quickstart", "tutorial", "concepts", "migrating", "reference/jobs", "design", "deploying"):
        assert (tmp_path / "site" / page / "index.html").exists(), page


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The check can fail: the same configuration over a copy of the pages with one dead link."""
    docs = tmp_path / "docs"
    (docs / "reference").mkdir(parents=True)
    for page in (REPO / "docs").rglob("*.md"):
        (docs / page.relative_to(REPO / "docs")).write_text(page.read_text())
    (docs / "img").symlink_to(REPO / "docs" / "img")
    (docs / "concepts.md").write_text((docs / "concepts.md").read_text() + "\n[gone](design.md#no-such-section)\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text((REPO / "mkdocs.yml").read_text())
    built = _build(config, tmp_path / "site")
    assert built.returncode != 0 and "no-such-section" in built.stderr, built.stderr[-2000:]
