"""How far an import has got, for whoever shows it (`manage.py ace_import` draws it on a terminal).

An import tells its `ImportProgress` the files and bytes it has to read once it has listed them (`start`), then how
many more it has stored as it goes (`advance`, as each batch commits: the files read to the end or passed over as
unchanged or refused, the bytes read), and `finish`es. Worker processes report to the process that started them,
which calls `advance` (see `workers.groups_in_processes`). The base class ignores it all: the upload endpoint and
the collector pass none.
"""

from __future__ import annotations


class ImportProgress:
    """Receives an import's progress; does nothing with it (subclass it to show it)."""

    files_total = files_done = bytes_total = bytes_done = 0

    def start(self, *, files_total: int, bytes_total: int) -> None:
        self.files_total, self.bytes_total = files_total, bytes_total

    def advance(self, *, files: int = 0, bytes_read: int = 0) -> None:
        self.files_done += files
        self.bytes_done += bytes_read

    def finish(self) -> None:
        """Every file was read (or the import stopped): called once, in the process that started it."""
