"""The test suite under another torch: a venv with that torch, the package installed into it, pytest.

CI runs the suite with the CPU build of torch 2.13 on disk. The package also accepts newer torch
releases, whose wheels on PyPI are multi-gigabyte CUDA builds (torch 2.15.0: ~2.8 GB with its CUDA
libraries). Download them once into a cache folder, then build venvs from it offline::

    PIP_CONFIG_FILE=/dev/null pip download torch==2.15.0 -d ~/wheels/torch215   # once, minutes to half an hour
    python tools/checks/torch_venv.py --torch 2.15.0 --wheels ~/wheels/torch215 --venv /tmp/venv215
    python tools/checks/torch_venv.py --torch 2.15.0 --wheels ~/wheels/torch215 --venv /tmp/venv215 --reuse -- tests/ops

The venv is built with ``PIP_CONFIG_FILE=/dev/null`` (this machine's pip config caps torch below
2.15), torch and its CUDA libraries from ``--wheels`` only, the package's other dependencies from
the registry as usual. Arguments after ``--`` go to pytest (default: the whole suite, quietly).
The exit code is pytest's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(command: list[str], env: dict[str, str]) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, env=env)


def build(torch_version: str, wheels: Path, target: Path, extras: str) -> Path:
    """A venv at ``target`` with torch ``torch_version`` from ``wheels`` and the package; its python."""
    venv.EnvBuilder(with_pip=True, clear=True).create(target)
    python = target / "bin" / "python"
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull)
    _run([str(python), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels), f"torch=={torch_version}"], env)
    # The package's other requirements, without its own range for torch (which may not admit the
    # torch under test yet: that is what the run is for); a constraint keeps pip from replacing
    # the installed torch with another build from the registry.
    constraints = target / "constraints.txt"
    constraints.write_text(f"torch=={torch_version}\n")
    _run([str(python), "-m", "pip", "install", "-q", "-c", str(constraints), *_requirements(extras)], env)
    _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(REPO)], env)
    return python


def _requirements(extras: str) -> list[str]:
    """pyproject.toml's dependencies and those of ``extras`` (comma-separated), torch left out."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = list(project.get("dependencies", []))
    for extra in filter(None, extras.split(",")):
        wanted += project.get("optional-dependencies", {}).get(extra, [])
    return [r for r in wanted if not r.replace(" ", "").startswith(("torch>", "torch<", "torch=", "torch!"))]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args = argv[argv.index("--") + 1:] if "--" in argv else ["-q", "tests"]
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", required=True, help="the torch version, e.g. 2.15.0")
    parser.add_argument("--wheels", required=True, type=Path, help="a folder holding that torch's wheels (pip download)")
    parser.add_argument("--venv", required=True, type=Path, help="where to build the venv (replaced)")
    parser.add_argument("--extras", default="test", help="the package's extras to install (default: test)")
    parser.add_argument("--reuse", action="store_true", help="run in an existing venv instead of building it")
    options = parser.parse_args(argv)
    if not options.wheels.is_dir():
        parser.error(f"--wheels {options.wheels}: no such folder; download the wheels first (see --help)")
    python = options.venv / "bin" / "python" if options.reuse else build(options.torch, options.wheels, options.venv, options.extras)
    version = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, check=True)
    print(f"torch {version.stdout.strip()} in {options.venv}", flush=True)
    return subprocess.run([str(python), "-m", "pytest", *pytest_args], cwd=REPO).returncode


if __name__ == "__main__":
    raise SystemExit(main())
