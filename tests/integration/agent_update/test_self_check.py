"""``jetfleet-agent self-check``: the gate a release passes before the switch, run for real."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from agent.service.self_check import check_release
from tests.agent_releases import make_release_tree
from tests.integration.agent_update.gateway import FACTORY_ENTRY


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("JETFLEET_")}
    return clean | {"JETFLEET_STATE_DIR": str(tmp_path / "state")} | extra


def test_the_release_answers_with_its_own_version(tmp_path: Path) -> None:
    tree = make_release_tree(tmp_path / "tree", "0.3.0")
    done = subprocess.run(
        [str(FACTORY_ENTRY), "self-check", "--release", str(tree), "--json"],
        capture_output=True,
        text=True,
        env=env(tmp_path),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["version"] == "0.3.0"
    assert answer["problems"] == []


def test_settings_the_release_cannot_parse_fail_the_check(tmp_path: Path) -> None:
    tree = make_release_tree(tmp_path / "tree", "0.3.0")
    config = tmp_path / "agent.toml"
    config.write_text('runtime = "tensorflow"\n')
    answer = check_release(tree / "bin" / "jetfleet-agent", ["--config", str(config)])
    assert answer.version == "0.3.0"
    assert len(answer.problems) == 1
    assert "settings do not parse" in answer.problems[0]


def test_an_entry_that_does_not_start_is_the_one_problem(tmp_path: Path) -> None:
    answer = check_release(tmp_path / "missing", [])
    assert answer.version is None
    assert "does not start" in answer.problems[0]
