"""Which archive members may be written into a release tree."""

from __future__ import annotations

import pytest

from agent.update.unpack_rules import (
    UnsafeMember,
    deb_member_path,
    file_mode,
    link_target,
    member_path,
    relocate_deb_link,
)


def test_member_names_are_normalised_relative_paths() -> None:
    assert member_path("./bin/jetfleet-agent") == "bin/jetfleet-agent"
    assert member_path("a//b/./c") == "a/b/c"
    assert member_path("./") is None


@pytest.mark.parametrize("name", ["/etc/passwd", "../x", "a/../../x", "a/\x00b", "a\\b", ""])
def test_unsafe_names_are_refused(name: str) -> None:
    with pytest.raises(UnsafeMember):
        member_path(name)


def test_the_deb_gives_only_its_venv_and_bundled_python() -> None:
    assert deb_member_path("./opt/jetfleet/venv/bin/python") == "venv/bin/python"
    assert deb_member_path("./opt/jetfleet/python/lib/x") == "python/lib/x"
    assert deb_member_path("./opt/jetfleet/venv") == "venv"
    assert deb_member_path("./usr/lib/systemd/system/jetfleet-agent.service") is None
    assert deb_member_path("./opt/jetfleet/venvx/a") is None


def test_links_stay_inside_the_tree() -> None:
    assert link_target("venv/bin/python3", "python") == "python"
    assert link_target("venv/lib64", "lib") == "lib"
    for target in ("../../../etc", "/etc/passwd", "../../.."):
        with pytest.raises(UnsafeMember):
            link_target("venv/bin/x", target)


def test_the_debs_absolute_links_are_relocated_and_the_system_python_allowed() -> None:
    assert relocate_deb_link("/opt/jetfleet/python/bin/python3") == "python/bin/python3"
    assert relocate_deb_link("/usr/bin/python3") is None
    bundled = "/opt/jetfleet/python/bin/python3"
    assert link_target("venv/bin/python", bundled, deb=True) == "../../python/bin/python3"
    system = "/usr/bin/python3.10"
    assert link_target("venv/bin/python", system, deb=True) == system
    with pytest.raises(UnsafeMember):
        link_target("venv/bin/python", system)  # not from a .deb
    with pytest.raises(UnsafeMember):
        link_target("venv/bin/python", "/usr/bin/env", deb=True)


def test_modes_lose_setuid_and_write_for_others() -> None:
    assert file_mode(0o4777) == 0o755
    assert file_mode(0o666) == 0o644
