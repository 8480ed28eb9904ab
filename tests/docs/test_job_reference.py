"""docs/reference/jobs.md is what scripts/gen_job_reference.py makes of the OpenAPI document:
the job reference cannot drift from the API (issue 23, item 1)."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests.docs.blocks import REPO


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_job_reference", REPO / "scripts" / "gen_job_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_job_reference_is_the_generated_one() -> None:
    generator = _generator()
    page = (REPO / "docs" / "reference" / "jobs.md").read_text()
    assert page == generator.render(generator.spec()), "run .venv/bin/python scripts/gen_job_reference.py"


def test_every_field_of_a_job_is_in_the_reference() -> None:
    from api.schemas import JobCreate, JobOut

    page = (REPO / "docs" / "reference" / "jobs.md").read_text()
    for field in (*JobCreate.__struct_fields__, *JobOut.__struct_fields__):
        assert f"| `{field}` |" in page, field


def test_a_field_without_a_description_stops_the_generator() -> None:
    generator = _generator()
    document = generator.spec()
    document["components"]["schemas"]["JobCreate"]["properties"]["surprise"] = {"type": "integer"}
    try:
        generator.render(document)
    except SystemExit as exc:
        assert "JobCreate.surprise" in str(exc)
    else:
        raise AssertionError("a field nobody described was rendered")
