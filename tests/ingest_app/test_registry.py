"""The registry of agent tools (ingest_app/importers/registry.py): every tool declared once, in its own folder, and
the places that cannot import it kept in step with it: the `ImportTool` choices (a model field's, in the API
schema and the migrations) and the push client's copy of the layouts (test_push.py). No database."""

from __future__ import annotations

import pytest

from ingest_app.importers import registry
from ingest_app.importers.detect import explain_detection, is_log_name
from ingest_app.importers.jsonl import read_head
from ingest_app.management.commands import ace_import
from ingest_app.models import ImportTool


def test_the_import_tool_choices_are_the_registrys_tools_in_its_order():
    """`ImportTool` (ingest_app/models) does not import the registry: the models load in every process, the parsers
    only where an import runs (tests/test_startup.py). It is kept equal to it: values, labels, member names and
    order. A new tool: its choice here, and `manage.py makemigrations`."""
    expected = [("AUTO", "auto", "auto (detect per file)")]
    expected += [(tool.member, tool.name, tool.label) for tool in registry.TOOLS]
    assert [(choice.name, choice.value, choice.label) for choice in ImportTool] == expected


def test_ace_imports_help_lists_the_registrys_tools():
    """`ace_import --help` lists where each tool keeps its logs without loading the importers (test_startup):
    its copy is kept equal to the registry's, a fork beside the tool it forks."""
    assert ace_import.TOOL_LOGS == tuple((tool.label, tool.where) for tool in registry.by_family())


def test_each_tool_is_declared_once_in_its_own_folder():
    assert len(set(registry.NAMES)) == len(registry.TOOLS)
    for tool in registry.TOOLS:
        package = tool.samples.parent
        assert package.name == tool.member.lower() and (package / "__init__.py").is_file()
        assert tool.parser.tool == tool.name
        assert tool.document_parser is None or tool.document_parser.tool == tool.name
        assert (tool.store is None) == (tool.layout is not None)  # a tree of log files, or a store
        assert not tool.fork_of or tool.fork_of in registry.NAMES


@pytest.mark.parametrize("tool", [tool for tool in registry.TOOLS if tool.store is None], ids=lambda tool: tool.name)
def test_every_sample_log_of_a_tool_is_detected_as_that_tools(tool):
    logs = [path for path in sorted(tool.samples.rglob("*")) if path.is_file() and is_log_name(path)]
    assert logs
    for path in logs:
        assert explain_detection(path, read_head(path)).tool == tool.name, path
