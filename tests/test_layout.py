"""The shape of the package: imports point one way (no module imports one that imports it
back, not even inside a function), and the command line's verbs are one visible table."""
from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "submission"


def module_files(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the package (a package's own name
    for its __init__.py)."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that `name` imports, at any depth of its code (function-level
    imports included), relative imports resolved; `from pkg import mod` counts as mod."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package[:len(package) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:        # submission.x.attr -> submission.x
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def package_graph() -> dict[str, set[str]]:
    modules = module_files(PACKAGE)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def test_the_cycle_finder_finds_function_level_and_relative_imports(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from .sub import b\n")
    (package / "sub" / "b.py").write_text("def late():\n    from .. import a\n")
    (package / "c.py").write_text("import pkg.a\n")
    modules = module_files(package)
    graph = {name: imported_modules(name, path, modules) for name, path in modules.items()}
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.a"}
    assert import_cycles(graph) == [["pkg.a", "pkg.sub.b"]]


def test_the_package_has_no_import_cycles():
    cycles = import_cycles(package_graph())
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_results_folder_module_imports_none_of_its_readers():
    graph = package_graph()
    readers = {"submission.campaign", "submission.score", "submission.package",
               "submission.report", "submission.preflight"}
    assert not {m for m in graph["submission.results"] if m.startswith(tuple(readers))}


def test_every_verb_is_a_function_and_in_the_usage():
    from submission import cli
    usage = [line.split()[0] for line in cli.__doc__.splitlines()[1:] if line.startswith("  ")]
    assert list(cli.VERBS) == usage
    for verb, function in cli.VERBS.items():
        assert callable(function), verb
        assert function.__name__ == f"cmd_{verb}"
