"""A quiet start (sr/core/quiet.py): TensorFlow's C++ INFO lines hidden by default in train.py
and every command of scripts/, its warnings and errors shown, TF_CPP_MIN_LOG_LEVEL=0 to see
everything again."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

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


# What an entry point may import before it calls quiet_tensorflow(), beside the standard library:
# train.py checks its command line first, with modules that import no TensorFlow
# (tests/test_train_refusals.py proves it), and calls it in its __main__ block before main()
TF_FREE = {"train.py": ("hydra", "omegaconf", "sr.config")}


def _calls_quiet(node) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and "quiet_tensorflow" in (getattr(node.value.func, a, None) for a in ("id", "attr"))
    )


def _quiet_in_main_block(node) -> bool:
    """``if __name__ == "__main__":`` whose quiet_tensorflow() call comes before ``main()``."""
    if not (isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)):
        return False
    quiet = [k for k, n in enumerate(node.body) if _calls_quiet(n)]
    mains = [k for k, n in enumerate(node.body) if ast.unparse(n) == "main()"]
    return bool(quiet) and all(quiet[0] < k for k in mains)


@pytest.mark.parametrize("path", ENTRY_POINTS, ids=lambda p: p.name)
def test_every_entry_point_is_quiet_before_it_imports_tensorflow(path):
    """train.py and each command call quiet_tensorflow() before importing anything but the
    standard library and the modules of :data:`TF_FREE` (every other module of sr but
    sr.core.quiet imports TensorFlow)."""
    body = ast.parse(path.read_text()).body
    allowed_modules = ("sr.core.quiet", *TF_FREE.get(path.name, ()))
    calls = [
        k
        for k, node in enumerate(body)
        if _calls_quiet(node) or (path.name in TF_FREE and _quiet_in_main_block(node))
    ]
    assert calls, f"{path.name} does not call quiet_tensorflow()"

    def allowed(module: str) -> bool:
        top = module.split(".")[0]
        return top in sys.stdlib_module_names or any(
            module == m or module.startswith(f"{m}.") for m in allowed_modules
        )

    for node in body[: calls[0]]:
        if isinstance(node, ast.ImportFrom):
            assert node.module == "__future__" or allowed(node.module), (path.name, node.module)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                assert allowed(alias.name), (path.name, alias.name)


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
