"""The command line, end to end in subprocesses."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import onnx
import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FACTORY = textwrap.dedent(
    """
    import torch

    def build():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
        return model, (torch.randn(2, 4),), None, ({0: "batch"},)

    def conv():
        return torch.nn.Conv2d(3, 32, 3)  # weights big enough to go to the external file

    def attention():
        class Attention(torch.nn.Module):
            def forward(self, q):
                return torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        return Attention(), (torch.randn(1, 2, 4, 8),)

    def blocks():
        torch.manual_seed(0)
        block = lambda: torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        return torch.nn.Sequential(block(), block(), block()), (torch.randn(2, 4),)

    def broken():
        class Bad(torch.nn.Module):
            def forward(self, x):
                return x + 1 if x.sum() > 0 else x - 1
        return Bad(), (torch.randn(3),)
    """
)


def run(*args: str, cwd: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.run([sys.executable, "-m", "torch_onnx_fx", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "factory.py").write_text(FACTORY)
    return str(tmp_path)


def test_export_verify_inspect(workdir):
    result = run("export", "factory.py:build", "-o", "m.onnx", "--verify", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "saved m.onnx" in result.stdout and "[torch_onnx_fx] verify: ok" in result.stderr
    model = onnx.load(os.path.join(workdir, "m.onnx"))
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    inspected = run("inspect", "m.onnx", cwd=workdir)
    assert inspected.returncode == 0
    for text in ("input: FLOAT[batch, 4]", "Gemm: 1", "0.weight [3, 4]: 48 bytes", "opsets: ai.onnx=20"):
        assert text in inspected.stdout, text


def test_export_with_input_shapes_dynamic_axes_and_external_data(workdir):
    result = run(
        "export", "factory.py:conv", "--input-shape", "2,3,8,8", "--dynamic", "0:0:n", "-o", "c.onnx",
        "--external-data", "--opset", "18", "--quiet", cwd=workdir,
    )
    assert result.returncode == 0, result.stderr
    assert os.path.exists(os.path.join(workdir, "c.onnx.data"))
    inspected = run("inspect", "c.onnx", cwd=workdir)
    assert "external data: c.onnx.data" in inspected.stdout and "ai.onnx=18" in inspected.stdout


@pytest.mark.parametrize("fusion, fused", [("standard", True), ("none", False)])
def test_export_fusion(workdir, fusion, fused):
    result = run(
        "export", "factory.py:attention", "-o", "a.onnx", "--opset", "23", "--fusion", fusion, "--verify", "--quiet",
        cwd=workdir,
    )
    assert result.returncode == 0, result.stderr
    ops = {node.op_type for node in onnx.load(os.path.join(workdir, "a.onnx")).graph.node}
    assert ("Attention" in ops) == fused


def test_export_functions(workdir):
    result = run("export", "factory.py:blocks", "-o", "f.onnx", "--functions", "--verify", "--quiet", cwd=workdir)
    assert result.returncode == 0, result.stderr
    model = onnx.load(os.path.join(workdir, "f.onnx"))
    assert [f.name for f in model.functions] == ["Sequential"]
    assert [n.op_type for n in model.graph.node] == ["Sequential"] * 3


def test_verify_against_factory_and_saved_program(workdir):
    assert run("export", "factory.py:build", "-o", "m.onnx", "--quiet", cwd=workdir).returncode == 0
    result = run("verify", "m.onnx", "--factory", "factory.py:build", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "ok max abs diff" in result.stdout
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    torch.export.save(torch.export.export(model, (torch.randn(5, 4),)), os.path.join(workdir, "p.pt2"))
    assert run("verify", "m.onnx", "--exported-program", "p.pt2", cwd=workdir).returncode == 0
    other = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    torch.export.save(torch.export.export(other, (torch.randn(5, 4),)), os.path.join(workdir, "q.pt2"))
    mismatch = run("verify", "m.onnx", "--exported-program", "q.pt2", cwd=workdir)
    assert mismatch.returncode == 1 and "MISMATCH" in mismatch.stdout


def test_exit_codes_and_help(workdir):
    assert run("export", "factory.py:broken", "-o", "b.onnx", "--quiet", cwd=workdir).returncode == 3
    usage = run("export", "factory.py", "-o", "x.onnx", cwd=workdir)
    assert usage.returncode == 2 and "MODULE:FACTORY" in usage.stderr
    assert run("export", "factory.py:nothing", "-o", "x.onnx", cwd=workdir).returncode == 2
    missing = run("inspect", "missing.onnx", cwd=workdir)
    assert missing.returncode == 4 and "no such file" in missing.stderr
    for command in ("export", "inspect", "verify", "demo"):
        helped = run(command, "--help", cwd=workdir)
        assert helped.returncode == 0 and "usage:" in helped.stdout


def test_demo(workdir):
    result = run("demo", cwd=workdir)
    assert result.returncode == 0 and "demo: OK" in result.stdout


def test_the_documented_example_runs_as_written(tmp_path):
    # docs/cli.md's bash block, line for line (its verify step failed while the factory was unseeded).
    page = open(os.path.join(REPO, "docs", "cli.md"), encoding="utf-8").read()
    (block,) = re.findall(r"```bash\n(.*?)```", page, re.S)
    script = 'torch-onnx-fx() { "$PYTHON" -m torch_onnx_fx "$@"; }\nset -e\n' + block
    env = dict(os.environ, PYTHONPATH=REPO, PYTHON=sys.executable)
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok max abs diff" in result.stdout


def test_export_prints_progress_but_not_the_model_by_default(workdir):
    quiet_default = run("export", "factory.py:build", "-o", "m.onnx", cwd=workdir)
    assert quiet_default.returncode == 0 and "[torch_onnx_fx] capture: ok" in quiet_default.stderr
    assert "graph(" not in quiet_default.stdout + quiet_default.stderr
    verbose = run("export", "factory.py:build", "-o", "m.onnx", "--verbose", cwd=workdir)
    assert verbose.returncode == 0 and "graph(" in verbose.stdout


def test_a_bad_opset_is_a_usage_error(workdir):
    result = run("export", "factory.py:build", "-o", "m.onnx", "--opset", "12", cwd=workdir)
    assert result.returncode == 2 and "opset_version=12" in result.stderr


def test_argument_errors_come_before_torch_is_imported(workdir):
    # Every call imported torch (about 3 s) before argparse looked at the arguments.
    code = (
        "import sys\n"
        "from torch_onnx_fx.cli import main\n"
        "try:\n"
        "    main(['export', 'factory.py:build'])\n"
        "except SystemExit as exit:\n"
        "    print('exit', exit.code, 'torch' in sys.modules)\n"
    )
    env = dict(os.environ, PYTHONPATH=REPO)
    result = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=env, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "exit 2 False", result.stdout + result.stderr
    assert "-o/--output" in result.stderr
