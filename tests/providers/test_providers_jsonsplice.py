"""The span splicer edits exactly the members it is asked to, in every layout."""

from __future__ import annotations

import json

import pytest

from driftdesk.providers.jsonsplice import (
    JsonEditError,
    dump_value,
    parse_document,
    remove_member,
    scan_object,
    set_member,
)


def _set(text: str, key: str, value: object) -> str:
    _, top = parse_document(text)
    return set_member(text, top, key, dump_value(value))


def _remove(text: str, key: str) -> str:
    _, top = parse_document(text)
    return remove_member(text, top, key)


def test_replace_keeps_everything_around_the_value() -> None:
    text = '{\n  "a" :  1.50,\n  "b": "x"\n}'
    assert _set(text, "a", 2) == '{\n  "a" :  2,\n  "b": "x"\n}'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a":1}', '{"a":1,"k":"v"}'),
        ('{"a": 1, "b": 2}', '{"a": 1, "b": 2, "k": "v"}'),
        ('{\n    "a": 1\n}\n', '{\n    "a": 1,\n    "k": "v"\n}\n'),
        ('{\n\t"a": 1\n}', '{\n\t"a": 1,\n\t"k": "v"\n}'),
        ('{\r\n  "a": 1\r\n}\r\n', '{\r\n  "a": 1,\r\n  "k": "v"\r\n}\r\n'),
        ("{}", '{"k": "v"}'),
    ],
)
def test_append_follows_the_file_style(text: str, expected: str) -> None:
    assert _set(text, "k", "v") == expected
    assert json.loads(expected)["k"] == "v"


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    [
        ('{\n  "a": 1,\n  "b": 2,\n  "c": 3\n}', "b", '{\n  "a": 1,\n  "c": 3\n}'),
        ('{\n  "a": 1,\n  "b": 2\n}', "a", '{\n  "b": 2\n}'),
        ('{\n  "a": 1,\n  "b": 2\n}', "b", '{\n  "a": 1\n}'),
        ('{"a": 1}', "a", "{}"),
        ('{"a":1,"b":2,"a":3}', "a", '{"b":2}'),
        ('{"a": 1}', "zzz", '{"a": 1}'),
    ],
)
def test_remove(text: str, key: str, expected: str) -> None:
    assert _remove(text, key) == expected


def test_nested_objects_are_opaque_values() -> None:
    text = '{"outer": {"k": {"deep": [1, {"k": 2}]}}, "k": 0}'
    _, top = parse_document(text)
    assert [m.key for m in top.members] == ["outer", "k"]
    inner = scan_object(text, top.members[0].value_start)
    assert [m.key for m in inner.members] == ["k"]


@pytest.mark.parametrize("text", ["", "{", '{"a": }', "[]", '"s"', '{"a": 1} x'])
def test_invalid_documents_are_refused(text: str) -> None:
    with pytest.raises(JsonEditError):
        parse_document(text)
