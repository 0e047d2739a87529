import pytest

from shared.topics import Channel, TopicError, Topics, check_device_id


def test_device_topics_follow_the_contract_layout() -> None:
    topics = Topics()
    assert topics.device("gw-01", Channel.DESIRED) == "jetfleet/v1/gw-01/desired"
    assert topics.every_device(Channel.TELEMETRY) == "jetfleet/v1/+/telemetry"


def test_prefix_is_configurable_and_round_trips() -> None:
    topics = Topics("plant7/jetfleet")
    topic = topics.device("orin.nx_2", Channel.EVENTS)
    assert topic == "plant7/jetfleet/orin.nx_2/events"
    assert topics.parse(topic) == ("orin.nx_2", Channel.EVENTS)


@pytest.mark.parametrize(
    "topic",
    [
        "other/v1/gw/desired",  # foreign prefix
        "jetfleet/v1/gw/unknown",  # unknown channel
        "jetfleet/v1/gw/extra/desired",  # too deep
        "jetfleet/v1/-bad/status",  # device id not allowed
    ],
)
def test_parse_rejects_topics_that_are_not_ours(topic: str) -> None:
    assert Topics().parse(topic) is None


@pytest.mark.parametrize("device_id", ["", "a/b", "+", "#", "-x", "x" * 65, "über"])
def test_device_ids_that_would_break_topics_or_paths_are_refused(device_id: str) -> None:
    with pytest.raises(TopicError, match="invalid device id"):
        check_device_id(device_id)


@pytest.mark.parametrize("prefix", ["", "/abs", "trail/", "a/+/b", "a/#"])
def test_bad_prefixes_are_refused(prefix: str) -> None:
    with pytest.raises(TopicError):
        Topics(prefix)
