"""The dependency rule of docs/architecture.md, checked on every import statement (those inside functions too):
platform_kit imports no app; webhooks_app → strategies_app → memory_app → sessions_app, never back; no app reaches
into another app's admin or API for tools; and no module imports itself again through others."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "platform_kit",
    "sessions_app",
    "ingest_app",
    "memory_app",
    "strategies_app",
    "webhooks_app",
    "retention_app",
    "portability_app",
    "mcp_app",
    "gateway_app",
    "aceproject",
)
# What each package may import, besides itself and the platform kit.
ALLOWED = {
    "platform_kit": set(),
    "sessions_app": set(),
    # Above the ledger: it writes sessions through the ledger's services; the ledger never imports it.
    "ingest_app": {"sessions_app"},
    "memory_app": {"sessions_app"},
    "strategies_app": {"memory_app", "sessions_app"},
    # Above the others: it listens to their signals, and none of them knows it exists.
    "webhooks_app": {"strategies_app", "memory_app", "ingest_app", "sessions_app"},
    # Rooms of cross-app features: each above the apps it spans, and no app imports a room.
    "retention_app": {"sessions_app", "ingest_app", "memory_app"},
    "mcp_app": {"sessions_app", "memory_app", "strategies_app"},
    # The LLM gateway: records calls through the ledger's turn services and injects the memory's context.
    "gateway_app": {"sessions_app", "memory_app"},
    "portability_app": {"sessions_app", "ingest_app", "memory_app", "strategies_app", "webhooks_app", "retention_app"},
    "aceproject": {
        "sessions_app",
        "ingest_app",
        "memory_app",
        "strategies_app",
        "webhooks_app",
        "retention_app",
        "portability_app",
        "mcp_app",
        "gateway_app",
    },
}
# An app's surfaces: what no other app imports (the kit holds what they share).
SURFACES = ("admin", "api", "views", "serializers", "urls")
# Surfaces a room may read: the MCP server is a second door onto the REST API, and checks a tool's arguments with
# the API's own serializers (the same bounds, the same messages).
ROOM_READS = {"mcp_app": {"memory_app.serializers", "sessions_app.api.serializers"}}


# aceproject wires the project together and holds nothing else: the settings, the URLs, the Celery app, the WSGI
# and gunicorn entry points, the embedded servers (database, broker, the data folder) and the commands about the
# whole project (ace_bootstrap: the first start's admin user and every app's sample data; ace_db, ace_broker: the
# embedded servers; ace_citus: the SQL that moves the database onto Citus). Code of its own goes to an app, a room or
# the kit.
ACEPROJECT_WIRING = {
    "__init__.py",
    "apps.py",
    "settings.py",
    "urls.py",
    "celery.py",
    "wsgi.py",
    "asgi.py",
    "gunicorn_conf.py",
    "data_folder.py",
    "embedded_db.py",
    "embedded_backend/__init__.py",
    "embedded_backend/base.py",
    "embedded_broker.py",
    "embedded_broker_transport.py",
    "management/__init__.py",
    "management/commands/__init__.py",
    "management/commands/ace_bootstrap.py",
    "management/commands/ace_db.py",
    "management/commands/ace_broker.py",
    "management/commands/ace_citus.py",
}


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    return modules


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of the project's own modules (a `from package import module` names the module)."""

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # `from .text import x`, `from .. import y`: relative to this module's package
                    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                targets |= {resolve(f"{base}.{alias.name}") or resolve(base) for alias in node.names}
            elif isinstance(node, ast.Import):
                targets |= {resolve(alias.name) for alias in node.names}
        graph[name] = {target for target in targets if target and target != name}
    return graph


def test_every_import_follows_the_dependency_rule():
    graph = _imports(_modules())
    wrong = []
    for module, targets in graph.items():
        package = module.split(".")[0]
        for target in targets:
            other = target.split(".")[0]
            if other in (package, "platform_kit"):
                continue
            if other not in ALLOWED[package]:
                wrong.append(f"{module} imports {target}: {package} may not depend on {other}")
            elif target in ROOM_READS.get(package, ()):
                continue
            elif package != "aceproject" and set(target.split(".")[1:2]) & set(SURFACES):
                wrong.append(f"{module} imports {target}: another app's {target.split('.')[1]} (use platform_kit)")
    assert wrong == []
    assert len(graph) > 100  # the walk found the project


def test_no_module_imports_itself_through_others():
    graph = _imports(_modules())
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(module):  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = set()
            while not component or module not in component:
                component.add(stack.pop())
            on_stack.difference_update(component)
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    assert cycles == []


def test_aceproject_holds_only_the_wiring():
    folder = ROOT / "aceproject"
    found = {
        path.relative_to(folder).as_posix()
        for path in folder.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert sorted(found - ACEPROJECT_WIRING) == []
    assert "settings.py" in found  # the walk found the project


def _raw_imports(path: Path) -> set[str]:
    """Every absolute module name a file imports, third-party ones too (a relative import: its package's name)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            names |= {node.module or ""} if not node.level else set()
            names |= (
                {f"{node.module}.{alias.name}" for alias in node.names} if node.module and not node.level else set()
            )
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return names


def test_the_parsers_never_touch_the_database():
    """ingest_app/importers reads bytes into records and nothing else: neither it nor anything it imports, however
    far, loads Django's database layer, a database driver or a model (the pipeline writes; the parsers do not).
    Settings they may read (the import limits)."""
    modules = _modules()
    graph = _imports(modules)
    seen, todo = set(), [name for name in modules if name.startswith("ingest_app.importers")]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph[name])
    touching = sorted(
        f"{name} imports {raw}"
        for name in seen
        for raw in _raw_imports(modules[name])
        if raw.split(".")[0] in ("psycopg", "psycopg2", "rest_framework", "celery")
        or raw.startswith(("django.db", "django.apps", "django.contrib"))
        or ".models" in f".{raw}"
    )
    assert touching == []
    assert "ingest_app.importers.registry" in seen and len(seen) > 15  # the walk found the parsers
