"""The served OpenAPI schema, fuzzed: schemathesis sends schema-driven requests (valid ones, and ones the schema
says are invalid) to a real server over HTTP, with a tenant's real API key, and every answer must be a
documented status code, content type, headers and body, and never a 5xx.

All four phases run: the schema's examples, coverage (the invalid values of every parameter and body field,
deterministically: the negative cases that must be a documented 4xx), fuzzing (random valid and invalid data)
and stateful (chains of calls that reuse the ids the API returned). Coverage leaves out its valid boundary
values (a third of its cases and half of its time: requests that write, each a tenth of a second on two busy
cores); fuzzing sends valid data to every operation. Bounded and reproducible: a fixed seed (ACE_FUZZ_SEED)
and ACE_FUZZ_EXAMPLES cases per operation in fuzzing (default 5, about two minutes on two cores).
`ACE_FUZZ_EXAMPLES=50 scripts/test tests/test_api_fuzz.py -s` fuzzes ten times harder and prints the report.
"""

import json
import os
import subprocess
import sys
import urllib.request

import pytest

from sessions_app.models import Tenant
from tests.support.factories import SessionFactory, api_key_for

CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)
# Valid and invalid data in every phase but coverage, which sends only the invalid values of every parameter and
# body field (its valid boundary values, a third of its cases and half of its time, are left to fuzzing).
CONFIG = """
[generation]
mode = "all"

[phases.coverage.generation]
mode = "negative"
"""
EXAMPLES = int(os.environ.get("ACE_FUZZ_EXAMPLES", "5"))
SEED = int(os.environ.get("ACE_FUZZ_SEED", "20261202"))


def fuzz(base_url: str, key: str, report_dir, *, phases: str) -> dict:
    """One schemathesis run against the server; its JSON report."""
    report = report_dir / f"{phases.replace(',', '-')}.json"
    # The schema as the server serves it, fetched here: its generation takes longer under load than the 10 s
    # schemathesis gives a schema to arrive.
    schema = report_dir / "schema.yaml"
    with urllib.request.urlopen(f"{base_url}/api/schema/", timeout=120) as response:
        schema.write_bytes(response.read())
    config = report_dir / "schemathesis.toml"
    config.write_text(CONFIG)
    command = [
        sys.executable,
        "-c",
        "from schemathesis.cli import schemathesis; schemathesis()",
        "--config-file",
        str(config),
        "run",
        str(schema),
        "--url",
        base_url,
        "--header",
        f"Authorization: Bearer {key}",
        "--checks",
        ",".join(CHECKS),
        "--phases",
        phases,
        "--max-examples",
        str(EXAMPLES),
        "--seed",
        str(SEED),
        "--generation-database",
        "none",
        "--workers",
        "1",
        "--continue-on-failure",
        "--request-timeout",
        "30",
        "--suppress-health-check",
        "all",
        "--no-color",
        "--output-truncate",
        "false",
        "--report",
        "json",
        "--report-json-path",
        str(report),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1200, cwd=report_dir)
    (report_dir / "output.txt").write_text(result.stdout + result.stderr)
    assert report.exists(), result.stdout[-5000:] + result.stderr[-5000:]
    summary = json.loads(report.read_text())
    summary["_output"] = result.stdout
    summary["_returncode"] = result.returncode
    return summary


@pytest.mark.django_db(transaction=True)
def test_the_served_schema_survives_fuzzing(live_server, tmp_path):
    key = api_key_for("fuzz")
    # Something to find: a session of the tenant (the fuzzer's own writes add more as it goes).
    SessionFactory(tenant=Tenant.objects.get(name="fuzz"), name="fuzzed", tool="chat", user_id="fuzzer")
    outcome = fuzz(live_server.url, key, tmp_path, phases="examples,coverage,fuzzing,stateful")
    print(outcome["_output"][-20000:])
    assert outcome["operations"]["tested"] == outcome["operations"]["total"] > 40
    assert outcome["test_cases"]["generated"] > 1000
    assert outcome["failures"] == [] and outcome["errors"] == [], outcome["_output"][-20000:]
    assert outcome["_returncode"] == 0, outcome["_output"][-20000:]
