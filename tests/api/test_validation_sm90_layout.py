"""CPU tests of the rules for sm90-layout weights: prepack(..., layout="sm90") (formerly mixgemm.sm90.prepack_sm90)
and gemm with an sm90 config or config="sm90" (formerly mixgemm.sm90.gemm_sm90).

prepack(layout="sm90") packs in PyTorch, so it runs on CPU tensors as they are. gemm reads the device's facts before
its config, so config rules are reached through ``ops.resolve_config`` with a fake GPU's facts filed for the CPU
device, and a hand-written registry (neither launches anything); a valid call with CPU tensors standing in for CUDA
ones (``cpu_as_cuda``, conftest.py) stops at the device check.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import mixgemm
from mixgemm import DecodeConfig, Sm80Config, Sm90Config, device, dispatch, formats, ops, paths, shape_rules
from mixgemm.packing import PackedWeight
from mixgemm.paths import GemmProblem, Gpu

F16 = torch.float16
FAKE_H100 = Gpu("FakeH100", 132, (9, 0))

# A build's registries, by hand (two sm90 kernels), so these tests do not depend on what this build compiled.
SM90_PERSISTENT = Sm90Config(128, 128, scheduler="persistent")
SM90_STREAMK = Sm90Config(16, 128, scheduler="streamk")
SM80_TILE = Sm80Config(16, 256, 64, 16, 64, 64, 3)
DECODE_8 = DecodeConfig(8, 4)
HAND_COMPILED = (SM80_TILE, DECODE_8, SM90_PERSISTENT, SM90_STREAMK)


def prepack_sm90(*args, **kwargs) -> PackedWeight:
    """What the old mixgemm.sm90.prepack_sm90 was: prepack forced onto the sm90 layout."""
    return mixgemm.prepack(*args, layout="sm90", **kwargs)


def _awq(K, N, G, dtype=F16):
    return formats.random_awq_weight(K, N, G, dtype=dtype)


def _sm90_weight(K=128, N=128, G=64) -> PackedWeight:
    ckpt = _awq(K, N, G)
    return prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])


@pytest.fixture
def hand_compiled(monkeypatch):
    """The hand build: its sm80 tile is compiled for the sm80 layout only; every config has zero points."""
    def compiled(path, key):
        if key.quant != "scale_offset":
            return ()
        return tuple(c for c in HAND_COMPILED if c.path == path.name and (c.path != "sm80" or key.layout == "sm80"))

    monkeypatch.setattr(paths.base, "_compiled_configs", compiled)


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """gemm's device facts for CPU tensors: an H100-like GPU (the test may file another), and an empty tuning cache."""
    monkeypatch.setitem(device._facts, torch.device("cpu"), FAKE_H100)
    monkeypatch.setenv("MIXGEMM_CACHE", str(tmp_path / "tuned.json"))
    ops.clear_plans()
    yield
    ops.clear_plans()


# ---------------------------------------------------------------------------------------------------
# prepack(..., layout="sm90")


@pytest.mark.parametrize(
    "K, N, G, match",
    [
        (256, 96, 128, r"N = scales\.shape\[1\] must be a positive multiple of 64 for the sm90 layout, got 96"),
        (40, 128, 8, r"K = qweight\.shape\[0\] must be a positive multiple of 16 for the sm90 layout, got 40"),
        (256, 128, 8, r"no kernel path runs a weight of K = 256, N = 128, group_size = 8 in the 'sm90' layout: "
                      r"sm80 path: .*; decode path: .*; sm90 path: .*; dequant path: group_size must be a multiple "
                      r"of 16 that divides K \(.*\), got 8$"),
    ],
)
def test_prepack_rejects_unsupported_sizes(K, N, G, match):
    ckpt = _awq(K, N, G)
    with pytest.raises(ValueError, match=rf"^prepack: {match}"):
        prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])


@pytest.mark.parametrize(
    "K, N, G, runs",
    [
        (96, 128, 32, ("dequant",)),  # K = 96: the sm90 path wanted K % 64 (refused before the restructuring)
        (256, 128, 32, ("sm80", "decode", "dequant")),  # groups of 32: not the sm90 path's whole k-tiles
        (256, 128, 128, ("sm80", "decode", "sm90", "dequant")),
        (80, 64, 16, ("dequant",)),
    ],
)
def test_prepack_accepts_what_some_path_runs(K, N, G, runs):
    # prepack refuses only a weight no path reading the layout runs (mixgemm.shape_rules).
    assert tuple(p for p in ("sm80", "decode", "sm90", "dequant")
                 if shape_rules.violation(p, "sm90", N, K, G) is None) == runs
    ckpt = _awq(K, N, G)
    w = prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    assert (w.layout, w.k, w.n, w.group_size) == ("sm90", K, N, G)


def test_per_channel_group_is_accepted():
    K, N = 192, 64  # G = K = 192, not a multiple of 128 but the whole of K
    ckpt = _awq(K, N, K)
    assert shape_rules.violation("sm90", "sm90", N, K, K) is None
    assert prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"]).group_size == K


def test_prepack_rejects_bad_arguments():
    ckpt = _awq(128, 64, 64)
    with pytest.raises(ValueError, match=r"^prepack: bits must be 4 or 8, got 3"):
        prepack_sm90(ckpt["qweight"], ckpt["scales"], bits=3)
    with pytest.raises(ValueError, match=r"^prepack: format must be 'awq', 'gptq' \(v1 zeros\) or 'gptq_v2'"):
        prepack_sm90(ckpt["qweight"], ckpt["scales"], format="exl2")
    with pytest.raises(ValueError, match=r"^prepack: group_size = 128 disagrees with K / scales\.shape\[0\] = 64"):
        prepack_sm90(ckpt["qweight"], ckpt["scales"], group_size=128)
    with pytest.raises(ValueError, match=r"^prepack: g_idx \(act-order\) is a GPTQ field"):
        prepack_sm90(ckpt["qweight"], ckpt["scales"], g_idx=torch.arange(128) // 64)
    with pytest.raises(ValueError, match=r"^prepack: qweight must have dtype int32"):
        prepack_sm90(ckpt["qweight"].float(), ckpt["scales"])
    with pytest.raises(ValueError, match=r"^prepack: qzeros is on meta but qweight is on cpu"):
        prepack_sm90(ckpt["qweight"], ckpt["scales"], torch.empty(2, 8, dtype=torch.int32, device="meta"))


@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_8_bit_weights_need_the_gptq_format(layout):
    ckpt = _awq(256, 64, 64)
    with pytest.raises(ValueError, match=r"^prepack: 8-bit weights come in the GPTQ layout; pass format='gptq'"):
        mixgemm.prepack(ckpt["qweight"], ckpt["scales"], None, bits=8, layout=layout)


# ---------------------------------------------------------------------------------------------------
# gemm with an sm90 config or config="sm90" (what gemm_sm90 was)


def test_layouts_never_cross(hand_compiled, fake_gpu, cpu_as_cuda):
    # A weight reaches only the kernels that read its layout: the decode path reads both, the sm90 GEMM its
    # own, the sm80 GEMM the sm90 layout only with the tiles a build compiles for it (none in this one).
    packed = _sm90_weight()
    with pytest.raises(ValueError, match=r"^gemm: config 16x256x64_w16x64x64_s3 is not compiled into this build for "
                                         r"fp16-int4-sm90-scale_offset weights; its sm80 configs for them: none$"):
        ops.resolve_config(2, packed, SM80_TILE)
    sm80_like = dataclasses.replace(packed, layout="sm80", packed=torch.zeros(2, 8, 32, 4, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"^gemm: config sm90_128x128x64_c1x1_coop_persistent \(sm90 path\) cannot "
                                         r"read a weight in the 'sm80' layout"):
        ops.resolve_config(2, sm80_like, SM90_PERSISTENT)
    assert ops.resolve_config(2, packed, DECODE_8) == DECODE_8
    assert mixgemm.gemm(torch.zeros(0, 128, dtype=F16), packed, config=DECODE_8).shape == (0, 128)
    # Past the config: a valid call stops at the device rule.
    device._facts.pop(torch.device("cpu"))
    with pytest.raises(RuntimeError, match=r"^gemm: no CUDA GPU"):
        mixgemm.gemm(torch.zeros(2, 128, dtype=F16), packed, config=SM90_PERSISTENT)
    with pytest.raises(RuntimeError, match=r"^gemm: no CUDA GPU"):
        mixgemm.gemm(torch.zeros(2, 128, dtype=F16), packed, config="sm90")


def test_the_sm90_path_takes_only_sm90_weights(hand_compiled, fake_gpu, cpu_as_cuda):
    packed = _sm90_weight()
    x = torch.zeros(2, 128, dtype=F16)
    sm80_like = PackedWeight(torch.zeros(2, 8, 32, 4, dtype=torch.int32), packed.scales, packed.offsets, 64, 4, F16,
                             128, 128)
    with pytest.raises(ValueError, match=r"^gemm: the sm90 path does not read weights in the 'sm80' layout$"):
        ops.resolve_config(2, sm80_like, "sm90")
    for config in (SM90_PERSISTENT, SM90_STREAMK):
        with pytest.raises(ValueError, match=rf"^gemm: config {config.name} \(sm90 path\) cannot read a weight in the "
                                             r"'sm80' layout; its kernels read sm90 weights"):
            ops.resolve_config(2, sm80_like, config)
    with pytest.raises(ValueError, match=r"^gemm: packed must be a PackedWeight from mixgemm\.prepack, got dict"):
        mixgemm.gemm(x, _awq(128, 128, 64), config=SM90_PERSISTENT)
    # The weight's tensors are checked as for any path (CPU tensors pass for device ones here).
    bad = PackedWeight(packed.packed[:1], packed.scales, packed.offsets, 64, 4, F16, 128, 128, layout="sm90")
    with pytest.raises(ValueError, match=r"^gemm: packed\.packed must have shape \(8, 8, 32, 1\) "
                                         r"\(\[K/16, N/16, 32, 1\] \(the sm90 layout\) for 4-bit weights\), "
                                         r"got \(1, 8, 32, 1\)"):
        mixgemm.gemm(x, bad, config=SM90_PERSISTENT)


@pytest.mark.parametrize("config", ["sm90", SM90_PERSISTENT])
def test_the_weight_is_checked_before_the_config(hand_compiled, fake_gpu, cpu_as_cuda, config):
    # Choosing an sm90 config reads the weight's dtype and width: a malformed field must be reported by the
    # weight check, naming the field, not by the config lookup.
    packed = _sm90_weight()
    x = torch.zeros(2, 128, dtype=F16)
    with pytest.raises(ValueError, match=r"^gemm: packed\.bits must be 4 or 8, got 3"):
        mixgemm.gemm(x, dataclasses.replace(packed, bits=3), config=config)
    with pytest.raises(ValueError, match=r"^gemm: packed\.act_dtype must be float16 or bfloat16"):
        mixgemm.gemm(x, dataclasses.replace(packed, act_dtype=torch.float32), config=config)
    with pytest.raises(ValueError, match=r"^gemm: packed\.bits must be 4 or 8, got 3"):
        ops.resolve_config(2, dataclasses.replace(packed, bits=3), config)


def test_config_sm90_picks_an_sm90_config_even_for_one_row(hand_compiled, fake_gpu):
    packed = _sm90_weight()
    for rows, want in [(1, SM90_STREAMK), (15, SM90_STREAMK), (100, SM90_PERSISTENT), (16, SM90_STREAMK)]:
        got = ops.resolve_config(rows, packed, "sm90")
        assert got == want, rows  # K = 128: too few k-tiles to split
    # What "auto" runs for a few rows is another path; "sm90" forces the sm90 GEMM.
    assert dispatch.path_order(GemmProblem(1, 128, 128, 64), "sm90", 132)[0] == "decode"
    assert ops.resolve_config(1, packed, "auto") == DECODE_8
    assert ops.resolve_config(1, packed, SM90_PERSISTENT) == SM90_PERSISTENT
    # A long K: the stream-K tile for one row is split (paths.sm90.split_for).
    deep = _sm90_weight(K=4096, G=128)
    got = ops.resolve_config(1, deep, "sm90")
    assert got == paths.sm90.split_for(SM90_STREAMK, 1, 128, 4096, FAKE_H100.sm_count) and got.split_k > 1
    # No compiled sm90 tile divides N = 64: a clear error rather than a launch.
    narrow = _sm90_weight(N=64)
    with pytest.raises(ValueError, match=r"^gemm: config='sm90': mixgemm: no kernel path runs M = 1, N = 64, K = 128, "
                                         r"group_size = 64 for fp16-int4-sm90-scale_offset \(sm90: "):
        ops.resolve_config(1, narrow, "sm90")
    with pytest.raises(ValueError, match=r"^gemm: config sm90_16x128x64_c1x1_coop_streamk cannot run M = 1, N = 64, "
                                         r"K = 128, group_size = 64: N must be a positive multiple of 128"):
        ops.resolve_config(1, narrow, SM90_STREAMK)


def test_the_sm90_path_runs_on_hopper_only(hand_compiled, fake_gpu, monkeypatch):
    # An sm90-layout weight on another GPU: the heuristic passes the sm90 path over, and an sm90 config named
    # explicitly is refused when its plan is made, before the extension is asked.
    monkeypatch.setitem(device._facts, torch.device("cpu"), Gpu("FakeA100", 108, (8, 0)))
    packed = _sm90_weight()
    for M in (1, 64, 100):
        assert ops.resolve_config(M, packed, "auto").path != "sm90"
    assert ops.resolve_config(4, packed, "decode") == DECODE_8  # the decode path reads the sm90 layout anywhere
    with pytest.raises(ValueError, match=r"^gemm: config='sm90': mixgemm: no kernel path runs M = 64, N = 128"):
        ops.resolve_config(64, packed, "sm90")
    assert ops.resolve_config(64, packed, SM90_PERSISTENT) == SM90_PERSISTENT  # compiled, and fits the problem
    with pytest.raises(RuntimeError, match=r"^gemm: the sm90 path's kernels run on compute capability 9\.0 "
                                           r"\(H100/H200\) only; this weight is on FakeA100"):
        ops._make_plan("gemm", ops._WeightState(packed), 64, SM90_PERSISTENT)


def test_no_fitting_sm90_config_is_not_called_uncompiled(hand_compiled, fake_gpu):
    # The old gemm_sm90 said "no compiled sm90 config fits N = 64": the reason must not claim nothing is compiled.
    narrow = _sm90_weight(N=64)
    assert paths.PATHS["sm90"].compiled(narrow.key)  # two sm90 configs are compiled for this key
    with pytest.raises(ValueError) as error:
        ops.resolve_config(1, narrow, "sm90")
    assert "no compiled config" not in str(error.value)
    for config in (SM90_PERSISTENT, SM90_STREAMK):  # the compiled ones are named
        assert config.kernel_name in str(error.value)
