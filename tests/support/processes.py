"""For tests that run one of the project's own processes (ace_mcp, gunicorn) against the test database."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def database_url() -> str:
    """The test database, for a process of its own (the embedded server listens on a socket directory)."""
    params = connection.get_connection_params()
    user, password = quote(params.get("user") or "", safe=""), quote(params.get("password") or "", safe="")
    host, port, name = params.get("host") or "", params.get("port") or "", params["dbname"]
    if host.startswith("/"):
        return f"postgres://{user}:{password}@/{name}?host={quote(host)}" + (f"&port={port}" if port else "")
    return f"postgres://{user}:{password}@{host}:{port}/{name}"


def process_env(**extra: str) -> dict:
    """The environment of such a process: the test database, the suite's embedder (conftest), no preloading."""
    return {
        **os.environ,
        "DATABASE_URL": database_url(),
        "ACE_EMBEDDER": "hash",  # the suite's embedder, so every process shares one vector space
        "ACE_EMBEDDER_PRELOAD": "false",
        "PYTHONPATH": str(ROOT),
        **extra,
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def gunicorn_serving(**env: str):
    """gunicorn serving the project as the Procfile does (one worker) on a free port, with `env` added to the
    process's environment; yields the port once it accepts connections."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "aceproject.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        cwd=ROOT,
        env=process_env(**env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert process.poll() is None, process.stderr.read().decode()[-2000:]
                assert time.monotonic() < deadline, "gunicorn did not start"
                time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


def stop_process_group(process: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM to a process started with `start_new_session=True` and its children; SIGKILL after `timeout`."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def procfile() -> dict[str, str]:
    """The Procfile's processes, name → command, read as scripts/up reads them (scripts/supervise.py)."""
    import runpy

    read_procfile = runpy.run_path(str(ROOT / "scripts" / "supervise.py"))["read_procfile"]
    return dict(read_procfile((ROOT / "Procfile").read_text()))
