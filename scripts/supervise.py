#!/usr/bin/env python3
"""Run the processes of the Procfile under supervisord, which restarts any that exits.

    python scripts/supervise.py [--procfile Procfile] [--print]

The Procfile stays the one list of process commands (what a PaaS or honcho runs too); this writes a
supervisord configuration for it into $ACE_DATA_DIR (default ./.ace) and runs supervisord in the
foreground. A process that exits or is killed (the kernel's OOM killer, a crash) is started again and
the others keep running; supervisord logs each exit and start. SIGINT or SIGTERM stops everything in
order (beat, then workers, then web), each with its own graceful signal and grace period; a process
still running after that is killed with its children.

While it runs, `supervisorctl -c $ACE_DATA_DIR/supervisord.conf status` (or `restart worker`) talks to it.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# By process name (or name prefix, the first that matches): the order to start in (stopped in reverse) and how
# long a graceful stop may take before supervisord kills. gunicorn finishes its requests (graceful timeout 30 s);
# a Celery worker finishes its tasks on SIGTERM (warm shutdown), and a task cut short is run again (acks_late).
_KINDS = {
    "webhooks": {"priority": 220, "stopwaitsecs": 70},  # the webhook deliveries' worker (before "web": a prefix)
    "web": {"priority": 100, "stopwaitsecs": 35},
    "worker": {"priority": 200, "stopwaitsecs": 60},
    "embedder": {"priority": 210, "stopwaitsecs": 60},  # the embedding queue's worker
    "beat": {"priority": 300, "stopwaitsecs": 10},
}
_OTHER = {"priority": 250, "stopwaitsecs": 30}
# The longest path a Unix socket may have (108 bytes on Linux, 104 on macOS), with room to spare.
_SOCKET_PATH_MAX = 100


def read_procfile(text: str) -> list[tuple[str, str]]:
    """The (name, command) lines of a Procfile, in order; comments and blank lines skipped."""
    processes = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, colon, command = line.partition(":")
        name, command = name.strip(), command.strip()
        if not colon or not name or not command or not name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"Procfile line {number} is not `name: command`: {line!r}")
        processes.append((name, command))
    if not processes:
        raise ValueError("the Procfile names no process")
    return processes


def _value(text: str) -> str:
    return text.replace("%", "%%")  # supervisord expands %(name)s in values


def supervisord_config(processes: list[tuple[str, str]], *, data_dir: Path, directory: Path) -> str:
    socket = data_dir / "supervisor.sock"
    password = secrets.token_urlsafe(24)  # for supervisorctl, which reads it from this (owner-only) file
    lines = [
        "[supervisord]",
        "nodaemon=true",
        f"logfile={_value(str(data_dir / 'supervisord.log'))}",
        "logfile_maxbytes=10MB",
        "logfile_backups=3",
        f"pidfile={_value(str(data_dir / 'supervisord.pid'))}",
        f"childlogdir={_value(str(data_dir))}",
        "loglevel=info",
    ]
    if os.geteuid() == 0:
        lines.append("user=root")  # said explicitly: supervisord otherwise logs a CRIT line about it
    if len(str(socket)) <= _SOCKET_PATH_MAX:
        lines += [
            "",
            "[unix_http_server]",
            f"file={_value(str(socket))}",
            "chmod=0700",
            "username=ace",
            f"password={password}",
            "",
            "[rpcinterface:supervisor]",
            "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
            "",
            "[supervisorctl]",
            f"serverurl=unix://{_value(str(socket))}",
            "username=ace",
            f"password={password}",
        ]
    for name, command in processes:
        kind = next((value for key, value in _KINDS.items() if name.startswith(key)), _OTHER)
        lines += [
            "",
            f"[program:{name}]",
            # A shell for the Procfile's ${VAR:-default}; exec, so that signals reach the program itself.
            f"command=/bin/sh -c {_value(shlex.quote('exec ' + command))}",
            f"directory={_value(str(directory))}",
            f"priority={kind['priority']}",
            "autostart=true",
            "autorestart=true",
            "startsecs=3",
            "startretries=100",
            "stopsignal=TERM",
            f"stopwaitsecs={kind['stopwaitsecs']}",
            "killasgroup=true",
            "stdout_logfile=/dev/stdout",
            "stdout_logfile_maxbytes=0",
            "redirect_stderr=true",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procfile", default=str(ROOT / "Procfile"))
    parser.add_argument("--print", action="store_true", help="print the configuration instead of running it")
    args = parser.parse_args(argv)
    processes = read_procfile(Path(args.procfile).read_text())
    data_dir = Path(os.environ.get("ACE_DATA_DIR") or ROOT / ".ace").resolve()
    config = supervisord_config(processes, data_dir=data_dir, directory=ROOT)
    if args.print:
        sys.stdout.write(config)
        return
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = data_dir / "supervisord.conf"
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(config)
    sys.exit(_run(Path(sys.executable).parent / "supervisord", path))


def _run(supervisord: Path, config: Path) -> int:
    """supervisord, its output (and the programs') passed on through our own stdout. supervisord opens
    /dev/stdout anew: when that is a file (`scripts/up > log`), its writes and the shell's would each keep
    their own offset and overwrite each other; a pipe has none. Signals are passed on."""
    process = subprocess.Popen([str(supervisord), "--configuration", str(config)], stdout=subprocess.PIPE)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda signum, frame: process.send_signal(signum))
    out = sys.stdout.buffer
    for line in process.stdout:
        out.write(line)
        out.flush()
    return process.wait()


if __name__ == "__main__":
    main()
