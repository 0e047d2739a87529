from __future__ import annotations

import pytest

from controller.errors import InvalidInput
from controller.fleet.selectors import parse_selector


def test_every_term_must_match() -> None:
    selector = parse_selector("site=berlin,tier=edge")
    assert selector.matches({"site": "berlin", "tier": "edge", "extra": "x"})
    assert not selector.matches({"site": "berlin"})
    assert not selector.matches({"site": "paris", "tier": "edge"})


def test_not_equal_matches_absent_or_different_values() -> None:
    selector = parse_selector("site=berlin, tier!=lab")
    assert selector.matches({"site": "berlin"})
    assert selector.matches({"site": "berlin", "tier": "edge"})
    assert not selector.matches({"site": "berlin", "tier": "lab"})


def test_round_trips_to_text() -> None:
    assert str(parse_selector("a=1, b!=2")) == "a=1,b!=2"


@pytest.mark.parametrize("text", ["", "site", "site=berlin,", "=x", "a b=c", "k=v v"])
def test_malformed_selector_names_the_term(text: str) -> None:
    with pytest.raises(InvalidInput, match="selector"):
        parse_selector(text)
