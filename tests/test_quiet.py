"""A quiet start (sr/core/quiet.py): TensorFlow's C++ INFO lines hidden by default in train.py
and every command of scripts/, its warnings and errors shown, TF_CPP_MIN_LOG_LEVEL=0 to see
everything again."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sr.config import PROJECT_ROOT
from sr.core.quiet import filtered_stderr, hidden, quiet_tensorflow

# lines TensorFlow 2.21 and LiteRT write to stderr on this project's commands
ONEDNN = (
    b"I0000 00:00:1795639061.059353    5776 port.cc:153] oneDNN custom operations are on. You "
    b"may see slightly different numerical results due to floating-point round-off errors.\n"
)
CUDA_STUB = (
    b"I0000 00:00:1795639061.059686    5776 cudart_stub.cc:31] Could not find cuda drivers on "
    b"your machine, GPU will not be used.\n"
)
NOTICE = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
NOTICE += b"\n"
XNNPACK = b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n"
WARNING = b"W0000 00:00:1795639264.492082   11928 op_kernel.cc:1858] OP_REQUIRES failed\n"
ERROR = b"E0000 00:00:1795639178.182972    8607 cuda_platform.cc:52] failed call to cuInit\n"
PYTHON = b"/x/keras/tf2onnx_lib.py:21: FutureWarning: In the future `np.object` ...\n"
ENTRY_POINTS = [PROJECT_ROOT / "train.py", *sorted((PROJECT_ROOT / "scripts").glob("*.py"))]


def test_info_lines_are_hidden_at_level_1_warnings_and_errors_are_not():
    lines = [ONEDNN, CUDA_STUB, NOTICE, XNNPACK, WARNING, ERROR, PYTHON]
    assert [hidden(line, 1) for line in lines] == [True] * 4 + [False] * 3
    assert [hidden(line, 2) for line in lines] == [True] * 5 + [False] * 2
    assert not any(hidden(line, 0) for line in lines)  # TF_CPP_MIN_LOG_LEVEL=0: everything


def test_the_filter_drops_the_hidden_lines_of_file_descriptor_2_in_order(capfd):
    """C++ writes to file descriptor 2 directly, not through sys.stderr: the filter sits on
    the descriptor, and gives it back afterwards."""
    with filtered_stderr(1):
        for line in (NOTICE, ONEDNN, WARNING, CUDA_STUB, ERROR, PYTHON * 2000):
            os.write(2, line)  # 2000 lines: more than a pipe holds unread
    os.write(2, ONEDNN)  # after the block: shown
    err = capfd.readouterr().err.encode()
    assert err == WARNING + ERROR + PYTHON * 2000 + ONEDNN


def test_the_level_is_set_unless_the_user_set_it(monkeypatch):
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    quiet_tensorflow()  # tensorflow is imported already here: it only sets the variable
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "1"
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    quiet_tensorflow()
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"


# What an entry point may import at module level, beside the standard library and
# sr.core.quiet: modules that import no TensorFlow (test_a_bad_command_line_of_a_script_is_refused_
# before_tensorflow_is_imported loads every script and proves it). train.py checks its command
# line with them and calls quiet_tensorflow() in its __main__ block before main(); each script
# calls it in main(), once its command line is parsed and checked.
TF_FREE = {
    "train.py": ("hydra", "omegaconf", "sr.config"),
    "upscale.py": ("sr.config", "sr.cli", "sr.core.errors", "sr.core.runfiles",
                   "sr.core.weightfiles"),
    "evaluate.py": ("sr.config", "sr.cli", "sr.core.errors"),
    "export.py": ("sr.config", "sr.cli", "sr.core.errors", "sr.core.runfiles",
                  "sr.core.weightfiles"),
    "make_tfrecords.py": ("hydra", "sr.config", "sr.core.errors", "sr.data.demo"),
    "bench_data.py": ("sr.bench.folders", "sr.bench.pipeline_runs", "sr.bench.sequence_runs",
                      "sr.config"),
    "data_service.py": (),  # loads sr/core/quiet.py and sr/data/service.py by path
}  # fmt: skip


def _calls_quiet(node) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and "quiet_tensorflow" in (getattr(node.value.func, a, None) for a in ("id", "attr"))
    )


def _imports(node) -> list[str]:
    """The modules that the statement ``node`` imports, at any depth (``__future__`` left out)."""
    names = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.ImportFrom) and sub.module != "__future__":
            names.append(sub.module)
        elif isinstance(sub, ast.Import):
            names.extend(alias.name for alias in sub.names)
    return names


def _quiet_first(body, later) -> bool:
    """Whether ``body`` calls quiet_tensorflow() before every statement for which ``later``
    holds (and calls it at all)."""
    quiet = [k for k, n in enumerate(body) if _calls_quiet(n)]
    return bool(quiet) and all(quiet[0] < k for k, n in enumerate(body) if later(n))


@pytest.mark.parametrize("path", ENTRY_POINTS, ids=lambda p: p.name)
def test_every_entry_point_is_quiet_before_it_imports_tensorflow(path):
    """train.py and each command import, at module level, only the standard library and the
    modules of :data:`TF_FREE`; they call quiet_tensorflow() (which imports TensorFlow) in
    their ``__main__`` block before ``main()`` (train.py) or in ``main()`` before it imports any
    other module or calls a function of the command that does."""
    assert path.name in TF_FREE, f"{path.name}: list its TF-free imports in TF_FREE"
    allowed_modules = ("sr.core.quiet", *TF_FREE[path.name])

    def allowed(module: str) -> bool:
        top = module.split(".")[0]
        return top in sys.stdlib_module_names or any(
            module == m or module.startswith(f"{m}.") for m in allowed_modules
        )

    body = ast.parse(path.read_text()).body
    functions = {n.name: n for n in body if isinstance(n, ast.FunctionDef)}
    for node in body:
        if not isinstance(node, ast.FunctionDef | ast.ClassDef):
            bad = [m for m in _imports(node) if not allowed(m)]
            assert not bad, f"{path.name} imports {bad} at module level: import it in main()"
    importing = {name for name, f in functions.items() if any(not allowed(m) for m in _imports(f))}

    def needs_tensorflow(node) -> bool:
        called = {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and
                  isinstance(n.func, ast.Name)}  # fmt: skip
        return any(not allowed(m) for m in _imports(node)) or bool(called & (importing - {"main"}))

    if path.name == "train.py":
        main_block = [
            n for n in body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)
        ]
        assert main_block and _quiet_first(
            main_block[0].body, lambda n: ast.unparse(n) == "main()"
        )
    else:
        assert "main" in functions, f"{path.name} has no main()"
        assert _quiet_first(functions["main"].body, needs_tensorflow), (
            f"{path.name}: main() must call quiet_tensorflow() before it imports TensorFlow"
        )


# One fresh interpreter loads every script and runs the refusals of each: argv lists by script;
# prints the exit codes and the TensorFlow modules imported, a line "=== k" on stderr before
# case k
NO_TF_CHECK = """
import importlib.util, json, sys
codes = []
for k, (name, argv) in enumerate(json.loads(sys.argv[1])):
    spec = importlib.util.spec_from_file_location("script_" + name, f"scripts/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    print(f"=== {k}", file=sys.stderr, flush=True)
    try:
        codes.append(module.main(argv))
    except SystemExit as e:
        codes.append(e.code)
    sys.stderr.flush()
print(json.dumps([codes, sorted(m for m in ("tensorflow", "keras") if m in sys.modules)]))
"""


def script_refusals(tmp: Path) -> list[tuple[str, list[str], int, str]]:
    """``(script, argv, exit code, a line of its stderr)`` of refusals that need no TensorFlow:
    argparse's (exit 2, its usage), flag values, and paths that do not exist."""
    image = tmp / "a.png"
    image.write_bytes(b"not read")  # an input that exists
    sequence_run = tmp / "seq_run"
    (sequence_run / ".hydra").mkdir(parents=True)
    (sequence_run / ".hydra" / "config.yaml").write_text("model: {}\ndata: {frames: 3}\n")
    run, missing, pth = str(tmp / "no_run"), str(tmp / "missing.png"), str(tmp / "w.pth")
    config = f"{run}/.hydra/config.yaml"
    no_run = f"error: {run} is not a run directory of train.py: {config} is missing"
    return [
        ("upscale", ["--help"], 0, ""),
        ("upscale", [run, str(image), "o.png", "--tile", "-1"], 2,
         "upscale.py: error: --tile must be a positive number of pixels or 0, got -1"),
        ("upscale", [run, str(image), "o.png", "--tiles", "8"], 2,
         "upscale.py: error: unrecognized arguments: --tiles 8"),
        ("upscale", [run, str(image), "o.png", "--backend", "jax"], 2,
         "upscale.py: error: argument --backend: invalid choice: 'jax'"),
        ("upscale", [run, str(image), "o.png"], 2, f"upscale.py: {no_run}"),
        ("upscale", [str(sequence_run), missing, "out/"], 2,
         f"upscale.py: error: input {missing} does not exist: a multi-frame run upscales "
         "sequences; give a folder of frames (one sequence) or a folder with one subfolder of "
         "frames per sequence"),
        ("upscale", [pth, missing, "o.png"], 2,
         f"upscale.py: error: input {missing} does not exist: give an image or a folder"),
        ("upscale", [pth, str(image), "o.png"], 2,
         f"upscale.py: error: {pth}: no such weight file; give the path of a .pth or "
         ".safetensors file"),
        ("upscale", [str(tmp), str(image), "o.png", "--backend", "onnx"], 2,
         f"upscale.py: error: {tmp} is not an export of scripts/export.py ({tmp}/export.json is "
         "missing): export a run first, python scripts/export.py <run> <folder> --format tflite"),
        ("evaluate", [run, str(tmp)], 2, f"evaluate.py: {no_run}"),
        ("evaluate", ["bicubic", str(tmp)], 2,
         "evaluate.py: error: bicubic needs --scale (2, 3, 4, ...)"),
        ("evaluate", ["bicubic", "--scale", "4"], 2,
         "evaluate.py: error: give folders of HR images or --real DIR (--save needs --real)"),
        ("evaluate", ["bicubic", str(tmp), "--scale", "4", "--seed", "1"], 2,
         "evaluate.py: error: --save-lr and --seed apply to --degradation NAME: add it"),
        ("evaluate", [pth, str(tmp), "--checkpoint", "last"], 2,
         f"evaluate.py: error: --checkpoint and --weights choose within a run folder; {pth} is "
         "a weight file (one set of weights): drop them"),
        ("export", [run, "out", "--format", "jpeg"], 2,
         "export.py: error: argument --format: invalid choice: 'jpeg'"),
        ("export", [run, "out", "--quantize", "int8"], 2,
         "export.py: error: --quantize int8 is for --format tflite (LiteRT's int8 kernels); "
         "--format savedmodel is written in float32"),
        ("export", [run, "out", "--format", "tflite", "--size", "8"], 2,
         "export.py: error: --size 8: a TFLite export needs an LR side of at least 16"),
        ("export", [run, "out", "--format", "safetensors", "--quantize", "int8"], 2,
         "export.py: error: --quantize is for --format tflite; a state dict is written in "
         "float32"),
        ("export", [run, "out"], 2, f"export.py: {no_run}"),
        ("make_tfrecords", ["data.pach=3"], 2, "Key 'pach' not in 'TFRecordConfig'"),
        ("data_service", ["--worker"], 2, "error: --worker needs --dispatcher HOST:P"),
        ("data_service", ["--dispatcher-port", "70000"], 2,
         "error: --dispatcher-port must be in 0..65535, got 70000"),
        ("bench_data", ["--repeats", "x"], 2,
         "error: argument --repeats: invalid int value: 'x'"),
    ]  # fmt: skip


def test_a_bad_command_line_of_a_script_is_refused_before_tensorflow_is_imported(tmp_path):
    """Each command of scripts/ parses and checks its command line (``sr.cli``) before it
    imports TensorFlow: its refusals (exit code 2, the message naming the value or path and the
    fix) and ``--help`` leave ``tensorflow`` and ``keras`` out of ``sys.modules`` of a fresh
    interpreter that loaded every script."""
    import json

    cases = script_refusals(tmp_path)
    argvs = [(name, argv) for name, argv, _, _ in cases]
    run = subprocess.run(
        [sys.executable, "-c", NO_TF_CHECK, json.dumps(argvs)],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    codes, imported = json.loads(run.stdout.splitlines()[-1])
    errs = run.stderr.split("=== ")[1:]
    assert len(errs) == len(cases), run.stderr[-3000:]
    for (name, argv, code, line), got, err in zip(cases, codes, errs):
        assert got == code, (name, argv, got, err)
        assert line in err, (name, argv, err)
    assert "usage: upscale.py" in run.stdout  # --help
    assert imported == [], f"{imported} imported by the check of a command line"


@pytest.mark.slow
def test_a_command_starts_with_its_own_first_line():
    """One real start, as a user sees it: no line of TensorFlow's before the command's own."""
    code = "from sr.core.quiet import quiet_tensorflow; quiet_tensorflow(); print('first line')"
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout == "first line\n"
    assert done.stderr == "", done.stderr
