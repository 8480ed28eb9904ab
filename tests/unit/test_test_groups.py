"""make test's groups (tests/conftest.py) name test files and tests that exist: a renamed file would
otherwise leave the paired group (back to serial) or a long test would come back into make test."""

from __future__ import annotations

import ast

from tests.conftest import LONG_TESTS, PAIRED_FILES, SERIAL_FOLDERS, TESTS


def test_every_paired_file_exists_in_a_serial_folder() -> None:
    for path in PAIRED_FILES:
        assert (TESTS / path).is_file(), path
        assert path.split("/")[0] in SERIAL_FOLDERS, path


def test_every_long_test_exists() -> None:
    for entry in LONG_TESTS:
        path, _, function = entry.partition("::")
        assert (TESTS / path).is_file(), entry
        if function:
            tree = ast.parse((TESTS / path).read_text())
            names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
            assert function in names, entry
