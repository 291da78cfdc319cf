"""The layering docs/architecture.md describes, checked on the import graph of the source.

Every import counts, those under ``if TYPE_CHECKING:`` too: a reader follows them all.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("msgclient", "protocols")
ADAPTERS = ("protocols.pulsarwire", "protocols.kafkawire")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imported(module: str, path: Path) -> Iterator[str]:
    """The modules ``module`` imports, by any import statement (of this tree or not)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from package import submodule`` imports the submodule, not the package.
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        else:
            continue
        yield from (name for name in names if name != module)


GRAPH = {
    module: {name for name in _imported(module, path) if name in MODULES}
    for module, path in MODULES.items()
}


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in GRAPH[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    return components


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_import_graph_has_no_cycle() -> None:
    assert _cycles() == []


def test_a_cycle_would_be_found() -> None:
    GRAPH["msgclient.errors"].add("msgclient.options")  # options imports errors
    try:
        assert any({"msgclient.errors", "msgclient.options"} <= set(c) for c in _cycles())
    finally:
        GRAPH["msgclient.errors"].discard("msgclient.options")


def test_the_contract_imports_neither_the_core_nor_an_adapter() -> None:
    imported = GRAPH["msgclient.contract"]
    assert imported, "the contract's imports were not read"
    assert not [m for m in imported if _within(m, "msgclient.core") or _within(m, "protocols")]


def test_the_core_imports_no_adapter() -> None:
    core = [m for m in GRAPH if _within(m, "msgclient.core")]
    assert len(core) > 20
    assert {m: GRAPH[m] & {t for t in MODULES if _within(t, "protocols")} for m in core} == {
        m: set() for m in core
    }


def test_no_core_module_serves_one_adapter_only() -> None:
    """Code that one protocol alone uses lives in that adapter."""
    lonely = {}
    for module in (m for m in MODULES if _within(m, "msgclient.core")):
        users = {user for user, imported in GRAPH.items() if module in imported}
        for adapter in ADAPTERS:
            if users and all(_within(u, adapter) for u in users):
                lonely[module] = adapter
    assert lonely == {}


@pytest.mark.parametrize("session", ["protocols.pulsarwire.session", "protocols.kafkawire.session"])
def test_the_sessions_do_no_io(session: str) -> None:
    """Sans-IO: a session imports no event loop and nothing that owns a socket; the I/O is
    its adapter's connection class's."""
    imported = set(_imported(session, MODULES[session]))
    assert "msgclient.core.network.events" in imported  # what it hands the connection
    io = {
        "asyncio",
        "msgclient.core.network.connection",
        "protocols.pulsarwire.connection",
        "protocols.kafkawire.connection",
        "protocols.kafkawire.node_sender",
    }
    assert io & imported == set()


def test_a_shadowing_protocols_module_is_named_in_the_error(tmp_path: Path) -> None:
    shadow = tmp_path / "protocols.py"
    shadow.write_text("# not msgclient's adapters\n")
    script = textwrap.dedent(
        """
        import sys
        from msgclient.contract import load_backend
        from msgclient.errors import AdapterLoadError
        from msgclient.options import ClientOptions
        from msgclient.url import parse_service_url
        try:
            load_backend(parse_service_url("pulsar://localhost"), ClientOptions())
        except AdapterLoadError as error:
            print(error)
            sys.exit(3)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n{script}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 3, done.stderr
    message = done.stdout
    assert "pulsar://" in message and "protocols.pulsarwire.adapter:PulsarBackend" in message
    assert str(shadow) in message
