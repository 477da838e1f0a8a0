"""What an installation keeps in its data folder (ACE_DATA_DIR) beside the embedded database and broker: its
secret key, and the file-system broker's queue folders (when CELERY_BROKER_URL=filesystem://). Each is made
when first needed, never when the settings are read, so a command that needs neither (`ace_db status`,
`makemigrations --check`, `--help`) writes nothing."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from django.utils.functional import SimpleLazyObject

from platform_kit.files import private_folder

BROKER_FOLDERS = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")


def secret_key(data_dir: Path) -> SimpleLazyObject:
    """The secret key of an installation that sets no SECRET_KEY: made and kept in the data folder the first
    time something signs (a login, a password reset link), so that logins survive restarts."""
    return SimpleLazyObject(lambda: _read_or_make_key(data_dir / "secret_key"))


def _read_or_make_key(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    from django.core.management.utils import get_random_secret_key

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Written aside, then linked into place: of processes starting together (web workers), one key wins and
    # every process reads it whole.
    descriptor, written = tempfile.mkstemp(dir=path.parent, prefix=".secret_key.")
    try:
        with os.fdopen(descriptor, "w") as handle:  # mkstemp made it 0600
            handle.write(get_random_secret_key())
        try:
            os.link(written, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(written)
    return path.read_text().strip()


def filesystem_broker_options(data_dir: Path) -> dict:
    """kombu's file-system transport options (CELERY_BROKER_URL=filesystem://) for a queue in the data folder
    (the folders are made by `make_broker_folders` when Celery is first configured in a process)."""
    broker = data_dir / "broker"
    return {
        "data_folder_in": str(broker / "queue"),
        "data_folder_out": str(broker / "queue"),
        "processed_folder": str(broker / "processed"),
        "store_processed": False,
        "control_folder": str(broker / "control"),
    }


def make_broker_folders(options: dict) -> None:
    for name in BROKER_FOLDERS:
        if options.get(name):
            # kombu writes each message as a file with the umask's mode: the folders keep them private.
            private_folder(Path(options[name]).parent)
            private_folder(options[name])
