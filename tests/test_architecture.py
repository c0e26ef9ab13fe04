"""The shape of the code, as docs/architecture.md declares it: the import layers (import-linter's
contracts in pyproject.toml), the size limits, user commands only in scripts/, and public API
only. Each test names what broke and where."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULE_LINES = 600  # a module of sr/ a reader can hold
FUNCTION_LINES = 60  # a function's body, its docstring excluded
SCRIPT_LINES = 300  # a user command: argument parsing and output, its logic in sr/
SCRIPTS = 6  # scripts/ holds the commands users run, no more

# The only places allowed to touch another library's private name: each is one function that
# wraps it, with a comment naming the library version and a test that fails when it changes.
PRIVATE_ALLOWED: set[tuple[str, str]] = set()
PRIVATE_NAME = re.compile(r"_[A-Za-z][A-Za-z0-9_]*[A-Za-z0-9]")  # _x, not _x_ (_target_)


def python_files(*folders: str) -> list[Path]:
    files = [ROOT / "train.py"]
    for folder in folders:
        files += sorted((ROOT / folder).rglob("*.py"))
    return files


def function_lengths(path: Path):
    """``(name, first line, lines)`` of every function in ``path``, its docstring excluded."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = node.end_lineno - node.lineno + 1
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    lines -= first.end_lineno - first.lineno + 1
            yield node.name, node.lineno, lines


def test_import_layers_and_no_cycles():
    """lint-imports: the layers contract over sr and no cycle inside any package."""
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    run = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout and "3 kept" in run.stdout, run.stdout


def test_sr_modules_and_functions_are_short():
    long_modules = [
        f"{p.relative_to(ROOT)}: {n} lines"
        for p in python_files("sr")
        if (n := len(p.read_text().splitlines())) > MODULE_LINES and p.name != "train.py"
    ]
    long_functions = [
        f"{p.relative_to(ROOT)}:{line} {name}: {n} lines"
        for p in python_files("sr")
        for name, line, n in function_lengths(p)
        if n > FUNCTION_LINES
    ]
    assert not long_modules, f"modules over {MODULE_LINES} lines: {long_modules}"
    assert not long_functions, f"functions over {FUNCTION_LINES} lines: {long_functions}"


def test_scripts_are_the_user_commands():
    scripts = sorted((ROOT / "scripts").glob("*.py"))
    assert len(scripts) <= SCRIPTS, (
        f"scripts/ holds {[p.name for p in scripts]}: studies go to benchmarks/"
    )
    long = [
        f"{p.name}: {n}" for p in scripts if (n := len(p.read_text().splitlines())) > SCRIPT_LINES
    ]
    assert not long, f"scripts over {SCRIPT_LINES} lines (move the logic into sr/): {long}"


PATH_EDITS = ("insert", "append", "extend", "remove", "pop", "clear")


def sys_path_edits(rel: str, text: str) -> list[str]:
    """Where ``text`` changes ``sys.path`` (a call of one of :data:`PATH_EDITS` on it, an
    assignment to it or to an item or slice of it, ``+=``), and where it imports ``tests``."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Attribute) and node.attr in PATH_EDITS:
            target = node.value
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            target = next((x for x in targets if "sys.path" in ast.unparse(x)), None)
            target = target.value if isinstance(target, ast.Subscript) else target
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            tests = [n for n in names if n.split(".")[0] == "tests"]
            found += [f"{rel}:{node.lineno} imports {n}" for n in tests]
            continue
        else:
            continue
        if target is not None and ast.unparse(target) == "sys.path":
            found.append(f"{rel}:{node.lineno} {ast.unparse(node).splitlines()[0]}")
    return found


def test_no_sys_path_edits_and_no_command_needs_tests():
    """The package is installed (``pip install -e .``): no ``sys.path`` edit in ``train.py``,
    ``sr/``, ``scripts/`` or ``benchmarks/`` (a study that imports the test oracles runs as
    ``python -m benchmarks.<name>`` from the project root), and no user command (``train.py``,
    ``sr/``, ``scripts/``) imports ``tests``."""
    found = [
        use
        for p in python_files("sr", "scripts", "benchmarks")
        for use in sys_path_edits(str(p.relative_to(ROOT)), p.read_text())
        if not (use.startswith("benchmarks/") and " imports tests" in use)
    ]
    assert not found, "sys.path edited or tests/ imported: " + "; ".join(found)


def train_imports(source: str) -> list[int]:
    """Lines of ``source`` that import ``sr.train`` (or a module of it), at any depth."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        if any(n == "sr.train" or n.startswith("sr.train.") for n in names):
            lines.append(node.lineno)
        elif node.__class__ is ast.ImportFrom and node.module == "sr":
            lines += [node.lineno] * any(a.name == "train" for a in node.names)
    return lines


def test_the_commands_that_read_runs_import_no_training_app():
    """``scripts/`` load, evaluate, upscale and export models through ``sr.loading`` and the
    layers below it: none imports ``sr.train`` (the package's own layers are import-linter's
    ``forbidden`` contract); a check that catches each way of writing the import."""
    found = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in python_files("scripts")
        if p.parent.name == "scripts"  # train.py, the app's entry point, is not one of them
        for line in train_imports(p.read_text())
    ]
    assert not found, "scripts import the training app: " + ", ".join(found)
    caught = ("import sr.train.app\n", "from sr.train import loop\n", "from sr import train\n")
    for source in (*caught, "def f():\n    from sr.train.checkpoint import x\n"):
        assert train_imports(source), source
    assert not train_imports("from sr.loading.models import load_model\nimport sr.trainer\n")


@pytest.mark.parametrize(
    "source",
    [
        "import sys\nsys.path.insert(0, 'x')\n",
        "import sys\nsys.path.append('x')\n",
        "import sys\nsys.path = ['x']\n",
        "import sys\nsys.path[:0] = ['x']\n",
        "import sys\nsys.path += ['x']\n",
        "from tests.oracles.realesrgan import bench_degradation\n",
        "import tests.oracles\n",
    ],
)
def test_the_sys_path_check_catches_each_kind(source):
    assert sys_path_edits("probe.py", source)
    assert not sys_path_edits("probe.py", "import sys\nx = list(sys.path)\nsys.exit(0)\n")


ATTR_FUNCTIONS = ("getattr", "hasattr", "setattr", "delattr")


def private_strings(node: ast.Call | ast.Compare) -> list[str]:
    """Private names given as strings: ``getattr(x, "_y")`` (x not self), a private class name
    compared (``name == "_Y"``), a private name passed to a call (``get_tensor("_Y")``)."""
    if isinstance(node, ast.Compare):
        values = [node.left, *node.comparators]
    elif isinstance(node.func, ast.Name) and node.func.id in ATTR_FUNCTIONS:
        owner = node.args[0] if node.args else None
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            return []
        values = node.args[1:2]
    else:
        values = [
            a for a in node.args if isinstance(a, ast.Constant) and str(a.value)[1:2].isupper()
        ]
    return [
        v.value
        for v in values
        if isinstance(v, ast.Constant)
        and isinstance(v.value, str)
        and PRIVATE_NAME.fullmatch(v.value)
    ]


def private_uses(rel: str, text: str) -> list[str]:
    """Uses of a private name of another object or module in the file ``rel`` of text ``text``:
    ``x._name`` where ``x`` is not ``self`` or ``cls``, imports of a module path or name that
    starts with ``_``, and strings naming a library's ``_internal`` module."""
    tree = ast.parse(text)
    found = []
    for func in [tree, *ast.walk(tree)]:
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
            continue
        name = getattr(func, "name", "<module>")
        if (rel, name) in PRIVATE_ALLOWED:
            continue
        body = func.body if isinstance(func, ast.Module) else [func]
        for node in (n for top in body for n in ast.walk(top)):
            if isinstance(node, ast.Attribute):
                attr, owner = node.attr, node.value
                private = attr.startswith("_") and not attr.endswith("_")  # not _target_, __x__
                if private and not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                    found.append(f"{rel}:{node.lineno} .{attr}")
            elif isinstance(node, ast.ImportFrom | ast.Import):
                modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                modules += [a.name for a in node.names]
                for module in modules:
                    if any(
                        part.startswith("_") and not part.startswith("__")
                        for part in module.split(".")
                    ):
                        found.append(f"{rel}:{node.lineno} import {module}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if "._internal" in node.value:  # a library's _internal module by name
                    found.append(f"{rel}:{node.lineno} {node.value!r}")
            if isinstance(node, ast.Call | ast.Compare):
                found += [f"{rel}:{node.lineno} {name!r}" for name in private_strings(node)]
    return found


def test_no_private_api_of_other_libraries():
    """Public API only (one wrapped, tested function per unavoidable exception)."""
    files = python_files("sr", "scripts") + sorted((ROOT / "benchmarks").rglob("*.py"))
    found = sorted(
        {use for p in files for use in private_uses(str(p.relative_to(ROOT)), p.read_text())}
    )
    assert not found, "private names used: " + "; ".join(found)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import hydra._internal.core_plugins as p\n", "import hydra._internal.core_plugins"),
        ("def f(m):\n    return m._nodes_by_depth\n", "._nodes_by_depth"),
        ("X = 'hydra._internal.core_plugins.basic_sweeper.BasicSweeper'\n", "_internal"),
        ("def f(o):\n    return getattr(o, '_iterations', None)\n", "'_iterations'"),
        (
            "def f(r):\n    return r.get_tensor('_CHECKPOINTABLE_OBJECT_GRAPH')\n",
            "_CHECKPOINTABLE",
        ),
    ],
)
def test_the_private_api_check_catches_each_kind(source, expected):
    assert any(expected in use for use in private_uses("probe.py", source))
    assert not private_uses("probe.py", "class A:\n    def f(self):\n        return self._x\n")
