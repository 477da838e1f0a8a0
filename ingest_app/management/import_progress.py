"""The progress bar `manage.py ace_import` draws on a terminal: files done of all, bytes read of all, the rate in
MB/s and the time left, redrawn in place on one line (tqdm).

It appears at once for an import of `AT_ONCE_BYTES` or more, else once it has run for `DELAY_SECONDS` (a small
import prints its summary and nothing else), and tqdm is imported only then: `ace_import --help` and short
imports never load it.
"""

from __future__ import annotations

import time

from ingest_app.pipeline.progress import ImportProgress

DELAY_SECONDS = 0.5
AT_ONCE_BYTES = 4_000_000  # more than a second's work on a small machine: worth a line from the start


class TerminalProgress(ImportProgress):
    """Draws an import's progress on `stream` (a terminal), in place."""

    def __init__(self, stream, *, delay: float = DELAY_SECONDS):
        self.stream = stream
        self.delay = delay
        self.started = time.monotonic()
        self.bar = None

    def start(self, *, files_total: int, bytes_total: int) -> None:
        super().start(files_total=files_total, bytes_total=bytes_total)
        self.started = time.monotonic()

    def advance(self, *, files: int = 0, bytes_read: int = 0) -> None:
        super().advance(files=files, bytes_read=bytes_read)
        if self.bar is None:
            if not self.bytes_total:
                return
            if self.bytes_total < AT_ONCE_BYTES and time.monotonic() - self.started < self.delay:
                return
            self.bar = self._new_bar()
        self._draw()

    def finish(self) -> None:
        if self.bar is None:
            return
        self.files_done = max(self.files_done, self.files_total)
        self.bytes_done = max(self.bytes_done, self.bytes_total)
        self._draw(refresh=True)
        self.bar.close()
        self.bar = None

    def _new_bar(self):
        from tqdm import tqdm

        bar = tqdm(
            total=self.bytes_total,
            desc=self._files(),
            unit="B",
            unit_scale=True,
            unit_divisor=1000,  # MB/s, as the docs give rates
            file=self.stream,
            dynamic_ncols=True,
            mininterval=0.2,
            smoothing=0,  # the rate (and the time left) over the whole import so far: steadier than the last batch's
            leave=True,
            bar_format="Importing {desc} {percentage:3.0f}%|{bar}| {n_fmt}B/{total_fmt}B "
            "[{elapsed}<{remaining}, {rate_fmt}]",
        )
        bar.start_t = time.time() - (time.monotonic() - self.started)  # elapsed (and the rate) from the import's start
        return bar

    def _draw(self, *, refresh: bool = False) -> None:
        bar = self.bar
        bar.set_description_str(self._files(), refresh=False)
        bar.update(min(self.bytes_done, self.bytes_total) - bar.n)  # redraws at most every `mininterval`
        if refresh:
            bar.refresh()

    def _files(self) -> str:
        return f"{min(self.files_done, self.files_total):,}/{self.files_total:,} files"
