"""cronos.selectors: label checks, the selector grammar, and matching (the oracle the SQL is tested against)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronos import selectors
from cronos.errors import InvalidInput

JOBS = {
    "a": {"team": "data", "env": "prod", "tier": "gold"},
    "b": {"team": "data", "env": "staging"},
    "c": {"team": "web", "tier": "silver"},
    "d": {},
}


def _chosen(text: str) -> set[str]:
    reqs = selectors.parse(text)
    return {name for name, labels in JOBS.items() if selectors.matches(reqs, labels)}


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("team=data", {"a", "b"}),
        ("team==data", {"a", "b"}),
        ("team=data,env!=prod", {"b"}),
        ("env!=prod", {"b", "c", "d"}),
        ("tier in (gold,silver)", {"a", "c"}),
        ("tier in (gold, silver), team=web", {"c"}),
        ("tier notin (gold)", {"b", "c", "d"}),
        ("tier", {"a", "c"}),
        ("!tier", {"b", "d"}),
        ("team=data,team=web", set()),
        ("example.com/team=data", set()),
    ],
)
def test_requirements_all_hold(text: str, names: set[str]) -> None:
    assert _chosen(text) == names


@pytest.mark.parametrize("text", ["", " ", "team=data,", "=data", "team in ()", "team in (a,)", "te am=x", "-x=1"])
def test_a_selector_that_does_not_parse_names_the_field(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        selectors.parse(text, "$.selector")
    assert caught.value.field == "$.selector"


def test_labels_have_kubernetes_limits_and_the_refusal_names_the_label() -> None:
    ok = {"team": "data", "app.kubernetes.io/name": "etl", "empty": "", "a_b.c-d": "X_1.2-3"}
    assert selectors.check_labels(ok) == ok
    for bad, field in [
        ({"team": "a" * 64}, "$.labels.team"),
        ({"-team": "x"}, "$.labels.-team"),
        ({"Team.Io/x": "y"}, "$.labels.Team.Io/x"),
        ({"k": "bad value"}, "$.labels.k"),
        ({"x" * 64: "y"}, f"$.labels.{'x' * 64}"),
    ]:
        with pytest.raises(InvalidInput) as caught:
            selectors.check_labels(bad)
        assert caught.value.field == field, bad
    with pytest.raises(InvalidInput, match="at most 64"):
        selectors.check_labels({f"k{i}": "v" for i in range(65)})


def test_the_jsonpath_names_each_requirement() -> None:
    path = selectors.jsonpath(selectors.parse("team=data,tier in (a,b),env!=prod,x,!y"))
    assert path == (
        '($."team" == "data") && ($."tier" == "a" || $."tier" == "b") && !($."env" == "prod") '
        '&& exists($."x") && !exists($."y")'
    )


_word = st.sampled_from(["a", "b", "c"])


@given(
    st.dictionaries(st.sampled_from(["k1", "k2", "k3"]), _word, max_size=3),
    st.lists(st.tuples(st.sampled_from(["k1", "k2", "k3"]), st.sampled_from(["=", "!=", "in", "notin", "", "!"]),
                       st.lists(_word, min_size=1, max_size=2)), min_size=1, max_size=3),
)  # fmt: skip
def test_parse_reads_back_what_was_written(labels: dict[str, str], parts: list[tuple[str, str, list[str]]]) -> None:
    texts = []
    for key, op, values in parts:
        if op in ("in", "notin"):
            texts.append(f"{key} {op} ({','.join(values)})")
        elif op in ("=", "!="):
            texts.append(f"{key}{op}{values[0]}")
        else:
            texts.append(f"{op}{key}")
    reqs = selectors.parse(",".join(texts))
    assert len(reqs) == len(parts)
    expected = all(
        (op == "=" and labels.get(k) == v[0]) or (op == "!=" and labels.get(k) != v[0])
        or (op == "in" and labels.get(k) in v) or (op == "notin" and labels.get(k) not in v)
        or (op == "" and k in labels) or (op == "!" and k not in labels)
        for k, op, v in parts
    )  # fmt: skip
    assert selectors.matches(reqs, labels) is expected


_keys = st.from_regex(selectors.KEY_PATTERN, fullmatch=True)
_values = st.from_regex(selectors.VALUE_PATTERN, fullmatch=True)
_space = st.sampled_from(["", " ", "  "])


@st.composite
def _requirement(draw: st.DrawFn) -> str:
    key, value, pad = draw(_keys), draw(_values), draw(_space)
    shape = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "", "!"]))
    if shape in ("in", "notin"):
        names = draw(st.lists(_values.filter(bool), min_size=1, max_size=3))
        return f"{pad}{key} {shape}{pad}({pad}{(pad + ',' + pad).join(names)}{pad}){pad}"
    if shape in ("", "!"):
        return f"{pad}{shape}{pad}{key}{pad}"
    return f"{pad}{key}{pad}{shape}{pad}{value}{pad}"


@settings(max_examples=60)
@given(st.lists(_requirement(), min_size=1, max_size=3).map(",".join))
def test_the_api_schemas_pattern_and_the_parser_agree(text: str) -> None:
    assert re.search(selectors.SELECTOR_PATTERN, text), text  # what the OpenAPI document allows
    assert selectors.parse(text)  # is accepted: no schema-valid 422


@given(
    st.dictionaries(st.from_regex(selectors.KEY_PATTERN, fullmatch=True),
                    st.from_regex(selectors.VALUE_PATTERN, fullmatch=True), max_size=5)
)  # fmt: skip
def test_every_label_the_api_schema_allows_is_accepted(labels: dict[str, str]) -> None:
    assert selectors.check_labels(labels) == labels
