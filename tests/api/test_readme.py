"""The README, checked as a newcomer reads it, on the CPU: every file it names exists, every shell command it gives
parses (the extras it installs, the CUTLASS folder the build looks in, the profiler's arguments), and its Python
blocks run in order, with the kernels replaced by their pure-PyTorch references and "cuda" read as "cpu" (the
only two changes made to the text)."""

from __future__ import annotations

import pathlib
import re
import shlex
import sys
import tomllib

import pytest
import torch

import mixgemm
from mixgemm import ops, packing

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", README, flags=re.S)
PYTHON_BLOCKS = [code for lang, code in BLOCKS if lang == "python"]
SHELL_LINES = [line for lang, code in BLOCKS if lang == "bash" for line in code.strip().splitlines()]
CHECKPOINT_TESTS = ROOT / "tests" / "checkpoint"


def test_the_readme_has_the_blocks_this_test_reads():
    assert len(PYTHON_BLOCKS) == 3 and len(SHELL_LINES) == 3


@pytest.mark.parametrize("path", sorted(set(re.findall(r"`((?:docs|tools|examples|cpp|python|tests)/[\w./-]+"
                                                       r"|BENCHMARKS\.md)`", README))))
def test_every_named_file_exists(path):
    # A path written with braces names several folders: each must exist.
    stem, _, rest = path.partition("{")
    names = [stem + part + rest.partition("}")[2] for part in rest.partition("}")[0].split(",")] if rest else [path]
    for name in names:
        assert (ROOT / name.rstrip("/")).exists(), name


def test_the_setup_command_installs_what_the_build_and_the_tests_read():
    setup = SHELL_LINES[0]
    first, _, second = setup.partition(" && ")
    # The CUTLASS headers go where third_party/cutlass.cmake looks for them.
    args = shlex.split(first)
    target = args[args.index("--target") + 1]
    assert target == "third_party/cutlass" and "--no-deps" in args
    assert "${CMAKE_CURRENT_LIST_DIR}/cutlass" in (ROOT / "third_party" / "cutlass.cmake").read_text()
    assert "/third_party/cutlass/" in (ROOT / ".gitignore").read_text().splitlines()
    pinned = next(a for a in args if a.startswith("nvidia-cutlass=="))
    version = re.search(r'MIXGEMM_CUTLASS_VERSION "([\d.]+)"', (ROOT / "third_party" / "cutlass.cmake").read_text())[1]
    assert pinned == f"nvidia-cutlass=={version}.0"  # the wheel's version is CUTLASS's and a build number
    # The extras it installs exist and hold what the test command needs.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = re.fullmatch(r'python -m pip install "\.\[(\w+)\]"', second.strip())[1]
    assert any(req.startswith("pytest") for req in project["optional-dependencies"][extra])
    assert any(req.startswith("matplotlib") for req in project["optional-dependencies"][extra])
    assert "safetensors" in project["dependencies"]
    for extra in re.findall(r'pip install "\.\[(\w+)\]"', README):
        assert extra in project["optional-dependencies"], extra


def test_the_run_command_parses():
    from mixgemm.bench import cli

    args = shlex.split(SHELL_LINES[1])
    assert args[:3] == ["python", "-m", "mixgemm"]
    parsed = cli.parse_args(args[3:])
    assert parsed.command == "bench" and parsed.shapes == list(cli.QUICK_SHAPES)


def test_the_test_command_is_pytest():
    assert shlex.split(SHELL_LINES[2]) == ["python", "-m", "pytest", "-q"]


def test_the_test_command_enters_every_test_folder(pytestconfig):
    """pytest silently skips folders whose names match its norecursedirs (build, dist, venv, dot-folders, ...):
    no folder under tests/ may match one, or the README's command would never run its tests."""
    import fnmatch

    patterns = pytestconfig.getini("norecursedirs")
    test_files = [f.relative_to(ROOT) for f in (ROOT / "tests").rglob("test_*.py")]
    assert test_files and pytestconfig.getini("testpaths") == ["tests"]
    skipped = sorted({str(f.parent) for f in test_files
                      if any(fnmatch.fnmatch(part, p) for part in f.parent.parts[1:] for p in patterns)})
    assert not skipped, f"pytest's norecursedirs {patterns} skip {skipped}"


@pytest.fixture
def cpu_references(monkeypatch):
    """The kernels' pure-PyTorch references in their place (tests/checkpoint/cpu_references.py), for the names
    the README calls them by."""
    sys.path.insert(0, str(CHECKPOINT_TESTS))
    try:
        from cpu_references import cpu_gemm, cpu_prepack
    finally:
        sys.path.remove(str(CHECKPOINT_TESTS))

    def gemm(x, packed, bias=None, config="auto"):
        mixgemm.paths.from_name(config) if isinstance(config, str) else None  # a bad name is still an error
        return cpu_gemm(x, packed, bias, config)

    for module in (ops, mixgemm):
        monkeypatch.setattr(module, "gemm", gemm)
    for module in (packing, mixgemm):
        monkeypatch.setattr(module, "prepack", cpu_prepack)
    real_compile = torch.compile
    # torch.compile on the CPU would need a C++ toolchain for inductor; the eager backend still traces the
    # layer with fullgraph=True through the mixgemm::gemm custom op, which is what the README claims.
    monkeypatch.setattr(torch, "compile", lambda model, **kw: real_compile(model, **{**kw, "backend": "eager"}))
    monkeypatch.setattr(ops, "gemm", gemm)


def cpu(code: str) -> str:
    return code.replace('"cuda"', '"cpu"')


def test_the_python_blocks_run(cpu_references, tmp_path, monkeypatch):
    namespace: dict = {}
    exec(cpu(PYTHON_BLOCKS[0]), namespace)
    y = namespace["y"]
    x, ckpt, G = namespace["x"], namespace["ckpt"], namespace["G"]
    reference = x.double() @ mixgemm.formats.dequantize(mixgemm.formats.unpack_awq(ckpt["qweight"]), ckpt["scales"],
                                                        mixgemm.formats.unpack_awq(ckpt["qzeros"]), group_size=G)
    assert y.shape == (16, 4096) and ((y.double() - reference).norm() / reference.norm()) < 1e-2
    exec(cpu(PYTHON_BLOCKS[1]), namespace)
    assert torch.allclose(namespace["y"].float(), y.float(), rtol=1e-2, atol=1e-2)

    pytest.importorskip("transformers")
    sys.path.insert(0, str(CHECKPOINT_TESTS))
    try:
        from checkpoint_helpers import random_llama, tiny_llama_config, write_llama_checkpoint
    finally:
        sys.path.remove(str(CHECKPOINT_TESTS))
    reference_model = random_llama(tiny_llama_config(), seed=0)
    write_llama_checkpoint(tmp_path, reference_model, "awq")
    import functools

    import mixgemm.checkpoint as checkpoint

    monkeypatch.setattr(checkpoint, "load_model", functools.partial(checkpoint.load_model, device="cpu"))
    namespace["folder"] = str(tmp_path)
    exec(cpu(PYTHON_BLOCKS[2]), namespace)
    model, report = namespace["model"], namespace["report"]
    assert len(report.replaced) == 14 and not report.missing
    assert isinstance(model.model.layers[0].mlp.down_proj, mixgemm.nn.QuantLinear)
    tokens = torch.tensor([[1, 2, 3]])
    assert torch.isfinite(model(tokens).logits).all()
