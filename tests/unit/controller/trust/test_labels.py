"""Which labels a device gets: the operator's or its token's, never the ones it asks for."""

from __future__ import annotations

import pytest

from controller.errors import InvalidInput
from controller.trust.labels import check_labels, describe, ignored_labels


def test_labels_the_token_does_not_grant_are_ignored() -> None:
    granted = {"site": "line-1"}
    asked = {"site": "evil", "tier": "gold"}
    assert ignored_labels(asked, granted) == {"site": "evil", "tier": "gold"}
    assert ignored_labels({"site": "line-1"}, granted) == {}
    assert ignored_labels({}, granted) == {}


def test_a_log_line_shows_a_bounded_number_of_bounded_labels() -> None:
    many = {f"k{i:02d}": "v" * 300 for i in range(20)}
    line = describe(many)
    assert line.endswith(" (+12 more)")
    assert all(len(part) <= 64 for part in line.split(" (")[0].split(","))
    assert describe({"b": "2", "a": "1"}) == "a=1,b=2"


@pytest.mark.parametrize(
    ("labels", "needle"),
    [
        ({"a,b": "x"}, "label key 'a,b'"),
        ({"site": "a=b"}, "no ',' or '='"),
        ({f"k{i}": "v" for i in range(65)}, "at most 64"),
    ],
)
def test_bad_labels_are_refused_naming_the_problem(labels: dict[str, str], needle: str) -> None:
    with pytest.raises(InvalidInput, match=needle):
        check_labels(labels)
