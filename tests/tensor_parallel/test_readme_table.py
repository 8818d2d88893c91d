"""The README's "Tensor parallel" table of real models is what the shape rules say today
(mixgemm.tensor_parallel.real_models), so it cannot go stale; and the rules behind its cells, spelled out."""

from __future__ import annotations

import pathlib

from mixgemm.tensor_parallel import real_models

README = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()


def readme_table() -> str:
    lines = README.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| model (hidden, intermediate"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return "\n".join(lines[start:end])


def test_readme_table_is_the_computed_one():
    assert readme_table() == real_models.markdown_table(), (
        "README.md's tensor-parallel table is stale; paste mixgemm.tensor_parallel.real_models.markdown_table()")


def test_the_table_names_every_model_and_tp_size():
    table = readme_table()
    for model in real_models.MODELS:
        assert f"| {model.name} (" in table
    assert "| TP 2 | TP 4 | TP 8 |" in table


def test_cells_follow_from_the_shapes():
    models = {m.name: m for m in real_models.MODELS}
    # Llama-3-8B at TP 8: every shard a multiple of 64 rows and columns, whole groups of 128.
    assert real_models.support(models["Llama-3-8B"], 8) == "yes"
    # Qwen2.5-7B: 28 query heads do not split over 8 ranks.
    assert real_models.support(models["Qwen2.5-7B"], 8).startswith("no: 28 heads")
    # Qwen2.5-72B at TP 4: 29568 / 4 = 7392 = 115.5 * 64: gate/up padded, down_proj in groups of 32 and padded.
    cell = real_models.support(models["Qwen2.5-72B"], 4)
    assert "gate_proj N 7392 padded to 7424" in cell and "down_proj in groups of 32" in cell
