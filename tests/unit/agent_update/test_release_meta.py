"""release.json and the package's control file: what a release says it is, and where it runs."""

from __future__ import annotations

import json

import pytest

from agent.update.release_meta import (
    ReleaseInfo,
    ReleaseMetaError,
    canonical_bytes,
    deb_version,
    from_deb_control,
    parse_release_json,
    unsupported,
)

CONTROL = """Package: jetfleet-agent
Version: 0.3.0-1
Section: misc
Priority: optional
Architecture: arm64
Maintainer: Jetfleet maintainers <jetfleet@localhost>
Installed-Size: 1234
Depends: python3.10, systemd
Description: Jetfleet gateway agent
 Serves the models its Jetfleet controller assigns.
"""


def test_release_json_round_trips_in_the_form_the_launcher_reads() -> None:
    info = ReleaseInfo(version="0.3.0", arch="aarch64", python="3.10", entry="bin/jetfleet-agent")
    text = canonical_bytes(info).decode()
    assert '  "entry": "bin/jetfleet-agent",\n' in text  # agent-launch's sed reads this line
    assert parse_release_json(text.encode()) == info


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"entry": "../../bin/sh"}, "entry"),
        ({"entry": "/bin/sh"}, "entry"),
        ({"version": "../x"}, "version"),
        ({"arch": "riscv64"}, "arch"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_release_json_refuses_what_it_cannot_trust(change: dict[str, object], words: str) -> None:
    data = {"version": "0.3.0", "arch": "x86_64", "python": "3.10", "entry": "bin/a"} | change
    with pytest.raises(ReleaseMetaError, match=words):
        parse_release_json(json.dumps(data).encode())


def test_deb_versions_lose_epoch_and_revision() -> None:
    assert deb_version("0.3.0-1") == "0.3.0"
    assert deb_version("1:0.3.0-2") == "0.3.0"
    assert deb_version("0.3.0") == "0.3.0"


def test_control_file_of_a_jetpack_6_build() -> None:
    info = from_deb_control(CONTROL, None)
    assert (info.version, info.arch, info.python, info.jetpack) == (
        "0.3.0",
        "aarch64",
        "3.10",
        ("6",),
    )
    assert not info.python_bundled
    assert info.entry == "bin/jetfleet-agent"


def test_control_file_of_a_bundled_python_build_runs_on_any_line() -> None:
    control = CONTROL.replace("Depends: python3.10, systemd", "Depends: systemd")
    info = from_deb_control(control, "3.12")
    assert (info.python, info.python_bundled, info.jetpack) == ("3.12", True, ())


def test_control_file_of_another_package_or_arch_is_refused() -> None:
    with pytest.raises(ReleaseMetaError, match="not jetfleet-agent"):
        from_deb_control(CONTROL.replace("jetfleet-agent", "jetfleet-controller"), None)
    with pytest.raises(ReleaseMetaError, match="architecture"):
        from_deb_control(CONTROL.replace("arm64", "armhf"), None)
    with pytest.raises(ReleaseMetaError, match="neither bundles"):
        from_deb_control(CONTROL.replace("python3.10, ", ""), None)


def test_where_a_release_runs() -> None:
    jp6 = from_deb_control(CONTROL, None)
    assert unsupported(jp6, "aarch64", "6.2") is None
    assert "JetPack 6" in (unsupported(jp6, "aarch64", "5.1.2") or "")
    assert "built for aarch64" in (unsupported(jp6, "x86_64", None) or "")
    assert unsupported(jp6, "aarch64", None) is None  # JetPack unknown: the self-check decides
