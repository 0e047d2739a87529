"""Token format, digests, expiry and durations."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from controller.auth.policy import Role
from controller.auth.tokens import (
    MalformedToken,
    TokenRecord,
    check_name,
    digest,
    mint,
    parse,
    parse_duration,
    rejection,
    secret_matches,
)

NOW = datetime(2026, 1, 31, 8, 0, tzinfo=timezone.utc)


def record(**changes: object) -> TokenRecord:
    base: dict[str, object] = {
        "id": "0123456789ab",
        "name": "alice",
        "role": Role.OPERATOR,
        "device_id": None,
        "secret_sha256": "0" * 64,
        "created_by": None,
        "created_at": NOW - timedelta(days=1),
        "expires_at": None,
        "revoked_at": None,
        "last_used_at": None,
    }
    base.update(changes)
    return TokenRecord(**base)  # type: ignore[arg-type]


def test_minted_tokens_parse_back_and_only_their_digest_matches() -> None:
    minted = mint()
    token_id, secret = parse(minted.wire)
    assert minted.wire == f"jf_{token_id}.{secret}"
    assert token_id == minted.id
    assert len(token_id) == 12
    assert minted.secret_sha256 == digest(secret)
    assert secret not in minted.secret_sha256
    assert secret_matches(secret, minted.secret_sha256)
    assert not secret_matches(
        secret[:-1] + ("A" if secret[-1] != "A" else "B"), minted.secret_sha256
    )
    assert mint().wire != minted.wire


@pytest.mark.parametrize(
    "wire",
    ["", "jf_", "jf_0123456789ab", "jf_0123456789ab.short", "xx_0123456789ab." + "a" * 43,
     "jf_0123456789AB." + "a" * 43, "jf_0123456789ab." + "a" * 42 + "!"],
)  # fmt: skip
def test_malformed_tokens_are_refused(wire: str) -> None:
    with pytest.raises(MalformedToken, match=r"expected jf_<id>\.<secret>"):
        parse(wire)


def test_revoked_and_expired_tokens_say_why() -> None:
    assert rejection(record(), NOW) is None
    assert rejection(record(expires_at=NOW + timedelta(seconds=1)), NOW) is None
    expired = rejection(record(expires_at=NOW), NOW)
    assert expired == "API token 0123456789ab (alice) expired at 2026-01-31 08:00:00 UTC"
    revoked = rejection(record(revoked_at=NOW - timedelta(hours=1)), NOW)
    assert revoked == "API token 0123456789ab (alice) was revoked at 2026-01-31 07:00:00 UTC"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30d", 30 * 86400), ("12h", 43200), ("90m", 5400), ("45s", 45), ("2w", 14 * 86400),
     ("1h30m", 5400), (" 1H ", 3600)],
)  # fmt: skip
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "30", "d", "1y", "1h x", "0s", "-1h"])
def test_bad_durations_say_what_to_write(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_token_names() -> None:
    assert check_name("ci-deployer@site.1") == "ci-deployer@site.1"
    for bad in ("", "-x", "a b", "x" * 65, "name\n"):
        with pytest.raises(ValueError, match="token name"):
            check_name(bad)
