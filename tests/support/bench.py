"""The benchmarks' scripts as modules, for the tests that run a harness end to end (bench/locomo.py,
bench/memory_eval.py)."""

import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


@contextmanager
def bench_module(stem: str):
    """bench/<stem>.py, loaded as a module under the name bench_<stem>. The scripts import their siblings
    (benchlib, locomo) as top-level modules, so bench/ is on sys.path while the module is in use."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{stem}", BENCH / f"{stem}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCH))
