"""Looking at topics: never creating one, and every broker asked after a creation."""

from __future__ import annotations


def test_looking_at_topics_never_creates_one() -> None:
    """aiokafka's describe_topics asks with allow_auto_topic_creation true: on a cluster
    with auto.create.topics.enable (Kafka's default) a `topics check` of a missing topic
    would have created it with the broker's defaults."""
    from aiokafka.protocol.metadata import MetadataRequest_v4, MetadataRequest_v5

    from topics.admin import metadata_request

    for version in (MetadataRequest_v4, MetadataRequest_v5):
        built = metadata_request(["ns.commands"]).build(version)
        assert built.allow_auto_topic_creation is False
