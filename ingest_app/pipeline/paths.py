"""How `ImportedFile` names a log file: a file on the server by its absolute path; an uploaded file by its path
in the data folder (`uploads/<tenant id>/…`), the same on every host whatever its ACE_DATA_DIR, since each host
reads the upload from its own copy (`uploads`: a cache of what the storage holds)."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings

UPLOADS = "uploads"


def record_path(path: Path | str) -> str:
    """The name of the file at `path` (on this host) in `ImportedFile.path`."""
    text, data_dir = str(path), str(settings.ACE_DATA_DIR)
    if text.startswith(data_dir + os.sep + UPLOADS + os.sep):
        return text[len(data_dir) + 1 :]
    return text


def local_path(name: str) -> Path:
    """Where the file `ImportedFile.path` names is read on this host."""
    path = Path(name)
    return path if path.is_absolute() else Path(settings.ACE_DATA_DIR) / path
