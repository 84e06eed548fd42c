"""A local Apache Kafka for kafkron: provision, configure, start, probe, stop.

`kafkron broker start` fetches Kafka's jars from Maven Central once (with
``mvn dependency:copy-dependencies`` on this package's ``pom.xml``) into a cache,
formats KRaft storage for a single node that is both broker and controller on
127.0.0.1, starts ``kafka.Kafka`` in the background and returns only once a metadata
request succeeds. Users with their own cluster set ``KAFKRON_BOOTSTRAP`` and never
touch this package.

Environment (all optional):

- ``KAFKRON_BROKER_PORT``: client port, default 9092 (the controller uses port + 1).
- ``KAFKRON_CACHE_DIR``: jars and default data dirs, default ``~/.cache/kafkron``.
- ``KAFKRON_BROKER_DATA_DIR``: data dir, default ``<cache>/broker-<port>``.
- ``KAFKRON_MAVEN_REPO``: Maven local repository for the download (``-Dmaven.repo.local``).
- ``KAFKRON_BROKER_JAVA_OPTS``: extra JVM options of the broker (e.g. ``-Xmx4g``).
"""

from actors.broker.errors import BrokerError
from actors.broker.layout import BrokerLayout
from actors.broker.process import BrokerStatus, start, status, stop

__all__ = ["BrokerError", "BrokerLayout", "BrokerStatus", "start", "status", "stop"]
