"""The shape of the package: imports point one way (no module imports one that imports it
back, not even inside a function), no module over 450 lines nor a function over 55, and the
command line's verbs are one visible table. The
shape of the tests: every test that starts a process of its own is marked e2e, so that
`-m "not e2e"` is the fast loop it says it is."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "submission"
TESTS = REPO / "tests"


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


MODULE_LINES = 450      # a module over this says two things: split it by concept (docs/layout.md)
FUNCTION_LINES = 55     # a function over this does several things: name each one


def too_long(path: Path, root: Path) -> list[str]:
    """The module at `path` (named from `root`) if it is over MODULE_LINES lines, and each of its functions over
    FUNCTION_LINES (from its `def` to its last line, its docstring and nested functions in it)."""
    text, shown = path.read_text(), path.relative_to(root)
    found = [f"{shown}: {len(text.splitlines())} lines"] if len(text.splitlines()) > MODULE_LINES else []
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > FUNCTION_LINES:
                found.append(f"{shown}:{node.lineno} {node.name}(): {lines} lines")
    return found


def test_the_length_check_counts_a_module_and_each_function(tmp_path):
    short = tmp_path / "short.py"
    short.write_text("def f():\n" + "    x = 1\n" * (FUNCTION_LINES - 1))
    assert too_long(short, tmp_path) == []
    long = tmp_path / "long.py"
    long.write_text("def f():\n" + "    x = 1\n" * FUNCTION_LINES + "\n" * MODULE_LINES)
    assert too_long(long, tmp_path) == [f"long.py: {FUNCTION_LINES + 1 + MODULE_LINES} lines",
                              f"long.py:1 f(): {FUNCTION_LINES + 1} lines"]


def test_no_module_of_the_package_is_over_450_lines_nor_a_function_over_55():
    found = [item for path in sorted(PACKAGE.rglob("*.py")) for item in too_long(path, REPO)]
    assert found == [], "too long: " + "; ".join(found)


def test_the_results_folder_module_imports_none_of_its_readers():
    graph = package_graph()
    readers = {"submission.campaign", "submission.score", "submission.package",
               "submission.report", "submission.preflight"}
    assert not {m for m in graph["submission.results"] if m.startswith(tuple(readers))}


def test_the_making_of_the_beton_imports_none_of_the_loaders():
    """data/ (sources, checks, prepare) lies below loaders/, which reads it; the loader kinds
    (loader_kinds.py), which prepare and the settings' declarations read, import nothing."""
    graph = package_graph()
    assert {"submission.loaders.protocol", "submission.loaders.run_loaders"} <= set(graph)
    upward = sorted(f"{name} -> {imported}" for name, imports in graph.items()
                    if name.startswith("submission.data.") for imported in imports
                    if imported.startswith("submission.loaders"))
    assert upward == []
    assert graph["submission.loader_kinds"] == set()


def _asks_which_loader(node: ast.AST) -> bool:
    """A comparison of a `train_loader` (or a loader's `kind`) with a word, or an isinstance on a
    loader class: what the loader kinds' properties answer instead."""
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        named = any(isinstance(o, ast.Attribute) and o.attr in ("train_loader", "kind") for o in operands)
        words = [c for o in operands for c in ast.walk(o) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
        return named and any(w.value in ("ffcv", "torchvision", "device") for w in words)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "hasattr",
                                                                                           "getattr"):
        return any(isinstance(n, ast.Name) and n.id in ("FfcvLoader", "TrainLoader", "DeviceLoader", "EpochIterator")
                   or isinstance(n, ast.Constant) and n.value in ("batches_ahead", "close", "is_alive")
                   for a in node.args for n in ast.walk(a))
    return False


def test_nothing_outside_the_loader_kinds_asks_which_loader_it_holds():
    found = [f"{path.relative_to(REPO)}:{node.lineno}" for path in sorted(PACKAGE.rglob("*.py"))
             for node in ast.walk(ast.parse(path.read_text(), filename=str(path))) if _asks_which_loader(node)]
    assert found == []
    assert _asks_which_loader(ast.parse('config.train_loader == "device"').body[0].value)
    assert _asks_which_loader(ast.parse('c.train_loader in ("torchvision", "device")').body[0].value)
    assert _asks_which_loader(ast.parse('hasattr(train_loader, "close")').body[0].value)


def test_every_verb_is_a_function_and_in_the_usage():
    from submission import cli
    usage = [line.split()[0] for line in cli.__doc__.splitlines()[1:] if line.startswith("  ")]
    assert list(cli.VERBS) == usage
    for verb, command in cli.VERBS.items():
        assert dataclasses.is_dataclass(command.options), verb
        assert command.run.__name__ == f"cmd_{verb}"


# ---- the e2e marker ---------------------------------------------------------------
# conftest's helpers that start `python -m submission`; any call of the subprocess module
PROCESS_HELPERS = {"run_submission", "campaign_from_a_terminal"}


def _marks_e2e(node: ast.AST) -> bool:
    """Whether `node` (a decorator, or pytestmark's value) holds pytest.mark.e2e."""
    return any(isinstance(n, ast.Attribute) and n.attr == "e2e" and isinstance(n.value, ast.Attribute)
               and n.value.attr == "mark" for n in ast.walk(node))


def _starts_a_process(function: ast.AST, subprocess_names: set[str], starters: set[str]) -> bool:
    """Whether `function` calls the subprocess module, a process helper of conftest or a
    function of its file in `starters`, or takes a fixture of its file in `starters`."""
    arguments = getattr(function, "args", None)
    if arguments and {a.arg for a in arguments.args + arguments.kwonlyargs} & starters:
        return True
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        called = node.func
        if isinstance(called, ast.Name) and called.id in PROCESS_HELPERS | starters | subprocess_names:
            return True
        if isinstance(called, ast.Attribute) and isinstance(called.value, ast.Name) \
                and called.value.id in subprocess_names:
            return True
    return False


def unmarked_process_tests(path: Path) -> list[str]:
    """The test functions of `path` that start a process of their own (directly, through a
    function or fixture of the same file, or through conftest's run_submission and
    campaign_from_a_terminal) without the e2e marker, on them or on the whole module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    subprocess_names = set()      # `import subprocess [as x]`, `from subprocess import run`
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            subprocess_names |= {a.asname or a.name for a in node.names if a.name == "subprocess"}
        elif isinstance(node, ast.ImportFrom) and node.module == "subprocess":
            subprocess_names |= {a.asname or a.name for a in node.names}
    module_marked = any(isinstance(node, ast.Assign) and _marks_e2e(node.value)
                        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
                        for node in tree.body)
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    starters: set[str] = set()
    while True:                   # helpers of helpers: until no function is added
        found = {name for name, node in functions.items() if name not in starters
                 and not name.startswith("test_") and _starts_a_process(node, subprocess_names, starters)}
        if not found:
            break
        starters |= found
    return [name for name, node in functions.items()
            if name.startswith("test_") and not module_marked
            and not any(_marks_e2e(d) for d in node.decorator_list)
            and _starts_a_process(node, subprocess_names, starters)]


def test_the_marker_check_finds_each_way_a_test_starts_a_process(tmp_path):
    (tmp_path / "test_unmarked.py").write_text(
        "import subprocess as sp\n"
        "import pytest\n"
        "from conftest import campaign_from_a_terminal, run_submission\n"
        "def _bench():\n    return sp.run(['python', '-m', 'submission.bench'])\n"
        "def _through_a_helper():\n    return _bench()\n"
        "@pytest.fixture\ndef started():\n    yield sp.Popen(['sleep', '9'])\n"
        "def test_direct():\n    import subprocess\n    subprocess.run(['true'])\n"
        "def test_submission():\n    run_submission('run')\n"
        "def test_terminal():\n    with campaign_from_a_terminal('run'):\n        pass\n"
        "def test_helper():\n    _through_a_helper()\n"
        "def test_fixture(started):\n    pass\n"
        "@pytest.mark.e2e\ndef test_marked():\n    run_submission('run')\n"
        "@pytest.mark.parametrize('x', [1])\ndef test_in_process(x):\n    assert sp.PIPE\n")
    assert unmarked_process_tests(tmp_path / "test_unmarked.py") == [
        "test_direct", "test_submission", "test_terminal", "test_helper", "test_fixture"]
    (tmp_path / "test_module.py").write_text(
        "import pytest\nfrom subprocess import run\n"
        "pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]\n"
        "def test_direct():\n    run(['true'])\n")
    assert unmarked_process_tests(tmp_path / "test_module.py") == []
    (tmp_path / "test_module.py").write_text(
        "import pytest\nfrom subprocess import run\n"
        "pytestmark = pytest.mark.timeout(60)\n"
        "def test_direct():\n    run(['true'])\n")
    assert unmarked_process_tests(tmp_path / "test_module.py") == ["test_direct"]


def test_every_test_that_starts_a_process_is_marked_e2e():
    unmarked = [f"{path.relative_to(REPO)}::{name}" for path in sorted(TESTS.rglob("test_*.py"))
                for name in unmarked_process_tests(path)]
    assert unmarked == [], "start processes of their own without @pytest.mark.e2e: " + ", ".join(unmarked)
