"""Files that hold tenant data (uploaded logs, export zips, the broker's queues): readable by the service's own
user only, whatever the process's umask — files 0600, folders 0700 (docs/security.md, "Files on disk").

`os.open(…, mode)` and `mkdir(mode)` are masked by the umask, which can only take permissions away: a umask of
002 leaves a new file 0664. So each file and folder made here is also given its mode explicitly (fchmod, chmod),
and one that already exists with a looser mode (made by an earlier version) is tightened when it is reached.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import IO

PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700
# The umask a child process that writes tenant data (the embedded broker) runs with: its files 0600.
PRIVATE_UMASK = 0o077


def private_folder(path: Path | str, *, within: Path | str | None = None) -> Path:
    """Make `path` (and its missing parents) a folder only the owner can enter (0700), and tighten those between
    `within` (exclusive, e.g. ACE_DATA_DIR) and it that exist with a looser mode. Returns the path."""
    path = Path(path)
    top = Path(within) if within is not None else None
    missing = []
    folder = path
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
    tighten = set(missing)
    if top is not None and path.is_relative_to(top):
        folder = path
        while folder != top:
            tighten.add(folder)
            folder = folder.parent
    tighten.add(path)
    for folder in tighten:
        _chmod(folder, PRIVATE_FOLDER)
    return path


def private_open(path: Path | str, mode: str = "wb") -> IO:
    """`open(path, mode)` for a binary or text file readable by its owner only (0600), made so from the start:
    no moment when another user could open it. An existing file is tightened too (appending to an old one); a
    device or a pipe (`/dev/stdout`, `/dev/null`) is written as it is."""
    flags = {
        "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
        "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
        "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
    }[mode[0]]
    if "+" in mode:
        flags = (flags & ~os.O_WRONLY) | os.O_RDWR
    descriptor = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), PRIVATE_FILE)
    try:
        if stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.fchmod(descriptor, PRIVATE_FILE)
        return os.fdopen(descriptor, mode)
    except BaseException:
        os.close(descriptor)
        raise


def private_tree(path: Path | str) -> None:
    """Tighten a folder made by another program (a broker's queue folder) and everything in it: folders 0700,
    files 0600. Sockets and links are left as they are."""
    path = Path(path)
    if not path.is_dir():
        return
    _chmod(path, PRIVATE_FOLDER)
    for folder, folders, files in os.walk(path):
        for name in folders:
            _chmod(Path(folder) / name, PRIVATE_FOLDER)
        for name in files:
            file = Path(folder) / name
            if file.is_file() and not file.is_symlink():
                _chmod(file, PRIVATE_FILE)


def _chmod(path: Path, mode: int) -> None:
    try:
        if (path.stat().st_mode & 0o777) != mode:
            path.chmod(mode)
    except FileNotFoundError:  # gone meanwhile (a queue file taken by a worker)
        pass
