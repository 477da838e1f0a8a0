"""kombu's redis transport for the embedded broker (aceproject/embedded_broker.py registers its URL scheme)."""

from pathlib import Path

from kombu.transport import redis as kombu_redis

from aceproject.embedded_broker import ensure_embedded_broker


class Channel(kombu_redis.Channel):
    """kombu's redis channel that starts the embedded server before it connects (on the first connection of a
    process, and on every reconnection: a server that died is started again by whoever notices)."""

    def _connparams(self, asynchronous=False):
        data_dir = self.connection.client.transport_options.get("ace_data_dir")
        if data_dir:
            ensure_embedded_broker(Path(data_dir))
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel
    driver_name = "valkey (embedded)"
