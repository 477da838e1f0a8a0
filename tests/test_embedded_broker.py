"""The embedded broker (CELERY_BROKER_URL unset): a Valkey server started by the first connection, on a Unix
socket in the data folder, that keeps queued tasks when it stops or is killed, and that whoever connects next
starts again."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

import pytest
from kombu import Connection

from aceproject.embedded_broker import (
    broker_folder,
    broker_socket,
    embedded_broker_options,
    embedded_broker_running,
    embedded_broker_url,
    stop_embedded_broker,
)


@pytest.fixture
def data_dir(tmp_path):
    yield tmp_path
    stop_embedded_broker(tmp_path)


def connect(data_dir: Path) -> Connection:
    return Connection(embedded_broker_url(data_dir), transport_options=embedded_broker_options(data_dir, 60))


def put(data_dir: Path, *bodies) -> None:
    with connect(data_dir) as conn, conn.SimpleQueue("tasks") as queue:
        for body in bodies:
            queue.put(body)


def take(data_dir: Path, count: int) -> list:
    taken = []
    with connect(data_dir) as conn, conn.SimpleQueue("tasks") as queue:
        for _ in range(count):
            message = queue.get(timeout=5)
            message.ack()
            taken.append(message.payload)
    return taken


def test_the_first_connection_starts_it_and_queued_tasks_survive_a_stop(data_dir):
    assert not embedded_broker_running(data_dir)
    put(data_dir, {"n": 1}, {"n": 2}, {"n": 3})  # no server was running: the connection started one
    assert embedded_broker_running(data_dir)
    assert broker_socket(data_dir).parent == broker_folder(data_dir)
    assert stop_embedded_broker(data_dir) and not embedded_broker_running(data_dir)
    assert take(data_dir, 3) == [{"n": 1}, {"n": 2}, {"n": 3}]  # started again, the queue read from its file


def test_a_killed_server_is_started_again_by_the_next_connection_with_its_queue(data_dir):
    put(data_dir, {"before": "the kill"})
    pid = int((broker_folder(data_dir) / "valkey.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while embedded_broker_running(data_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not embedded_broker_running(data_dir)
    put(data_dir, {"after": "the kill"})  # whoever connects next starts it
    assert take(data_dir, 2) == [{"before": "the kill"}, {"after": "the kill"}]


def test_a_data_folder_too_deep_for_a_socket_path_gets_one_in_the_temporary_directory():
    deep = Path("/srv") / ("very-long-folder-name-" * 6) / "ace"
    path = broker_socket(deep)
    assert path.parent.parent == Path(tempfile.gettempdir()) and len(str(path)) < 100
    assert broker_socket(deep) == path  # the same data folder, the same socket
