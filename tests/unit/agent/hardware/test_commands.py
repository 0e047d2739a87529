import sys

from agent.hardware.commands import (
    NOT_INSTALLED,
    TIMED_OUT,
    default_runner,
    failure_reason,
)


def test_a_missing_tool_answers_not_installed() -> None:
    returncode, output = default_runner(["nvpmodel-that-does-not-exist", "-q"])
    assert returncode == NOT_INSTALLED
    assert output == "nvpmodel-that-does-not-exist not installed (not found on PATH)"


def test_output_and_errors_come_back_together() -> None:
    code = "import sys; print('NV Power Mode: 15W'); print('0'); sys.stderr.write('warn\\n')"
    returncode, output = default_runner([sys.executable, "-c", code])
    assert returncode == 0
    assert "NV Power Mode: 15W\n0\n" in output
    assert "warn" in output


def test_a_hung_tool_is_cut_off() -> None:
    returncode, output = default_runner(
        [sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=0.3
    )
    assert returncode == TIMED_OUT
    assert output.endswith("did not answer within 0.3 s")


def test_failure_reason_quotes_the_command_and_its_first_line() -> None:
    reason = failure_reason(
        ["dpkg-query", "-W", "nvidia-l4t-core"],
        1,
        "\ndpkg-query: no packages found matching nvidia-l4t-core\n",
    )
    assert reason == (
        "`dpkg-query -W nvidia-l4t-core` exited 1: "
        "dpkg-query: no packages found matching nvidia-l4t-core"
    )
    assert failure_reason(["nvpmodel"], NOT_INSTALLED, "nvpmodel not installed") == (
        "nvpmodel not installed"
    )
