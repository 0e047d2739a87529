"""``--artifact-store`` and its S3 options: parsed, or refused with the option named."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from controller.cli.main import cli
from controller.errors import InvalidInput
from controller.settings import ObjectStoreSettings, parse_artifact_store


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("s3://jetfleet", ("jetfleet", "")),
        ("s3://jetfleet/", ("jetfleet", "")),
        ("s3://jet.fleet-1/prod/artifacts/", ("jet.fleet-1", "prod/artifacts")),
    ],
)
def test_bucket_and_prefix(url: str, expected: tuple[str, str]) -> None:
    assert parse_artifact_store(url) == expected


@pytest.mark.parametrize("url", ["jetfleet", "file:///data", "s3://", "s3://UPPER", "s3://ab"])
def test_other_forms_are_refused_naming_the_option(url: str) -> None:
    with pytest.raises(InvalidInput, match="--artifact-store expects s3://BUCKET"):
        parse_artifact_store(url)


def test_the_url_reads_back() -> None:
    assert ObjectStoreSettings(bucket="b1c", prefix="p/q").url == "s3://b1c/p/q"
    assert ObjectStoreSettings(bucket="b1c").url == "s3://b1c"


def test_s3_options_need_an_artifact_store() -> None:
    result = CliRunner().invoke(cli, ["serve", "--s3-endpoint", "http://127.0.0.1:9"])
    assert result.exit_code == 2
    assert "need --artifact-store s3://BUCKET" in result.output


def test_a_bad_store_url_stops_the_start_with_one_line() -> None:
    result = CliRunner().invoke(cli, ["serve", "--artifact-store", "ftp://x"])
    assert result.exit_code == 1
    assert "Error: --artifact-store expects s3://BUCKET" in result.output
