"""How large a record batch each of the namespace's topics accepts (``max.message.bytes``).

Read once when a scheduler starts and again before a shard is rebuilt after a
refused transaction (an operator may have changed a topic meanwhile). A topic whose
config cannot be read counts as the broker default, 1 MiB.
"""

from __future__ import annotations

from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from topics.admin import admin_client
from topics.names import Settings, TopicKind

MAX_MESSAGE_BYTES = "max.message.bytes"
BROKER_DEFAULT_BYTES = 1_048_588


async def topic_limits(settings: Settings) -> dict[TopicKind, int]:
    names = {settings.topic(kind): kind for kind in TopicKind}
    limits = {kind: BROKER_DEFAULT_BYTES for kind in TopicKind}
    resources = [
        ConfigResource(ConfigResourceType.TOPIC, name, {MAX_MESSAGE_BYTES: None}) for name in names
    ]
    async with admin_client(settings) as admin:
        for response in await admin.describe_configs(resources):
            for error_code, _message, _type, name, entries in response.resources:
                if error_code != 0 or name not in names:
                    continue
                for entry in entries:
                    if entry[0] == MAX_MESSAGE_BYTES and entry[1]:
                        limits[names[name]] = int(entry[1])
    return limits
