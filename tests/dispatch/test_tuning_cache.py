"""The tuned-config cache (mixgemm.tuning_cache) and gemm(config="auto")'s use of it (ops.resolve_config through
mixgemm.dispatch), without a GPU."""

from __future__ import annotations

import json
import os
import pathlib

import pytest
import torch

import mixgemm
from mixgemm import device, dispatch, ops, packing, tuning_cache
from mixgemm.kernel_key import KernelKey
from mixgemm.paths import DecodeConfig, DequantConfig, GemmProblem, Gpu, Sm80Config, Sm90Config

from hand_registry import install

GPU = "NVIDIA H100 80GB HBM3"
FP16 = KernelKey()  # fp16 int4, sm80 layout, scale+offset
BF16 = KernelKey("bf16")
SM90_KEY = KernelKey(layout="sm90")
CONFIG_A = Sm80Config(16, 128, 64, 16, 32, 64, 4, 4, "serial")
CONFIG_B = Sm80Config(64, 128, 64, 64, 32, 64, 4)
SM90_A = Sm90Config(64, 128, 1, 1, "coop", "streamk")
SM90_B = Sm90Config(256, 128, 2, 1, "coop", "persistent")


# ---------------------------------------------------------------------------------------------------
# Where the file lives


def test_cache_path_env_override(monkeypatch, tmp_path):
    monkeypatch.setenv("MIXGEMM_CACHE", str(tmp_path / "elsewhere.json"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tuning_cache.cache_path() == tmp_path / "elsewhere.json"


def test_cache_path_xdg_and_default(monkeypatch, tmp_path):
    monkeypatch.delenv("MIXGEMM_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tuning_cache.cache_path() == tmp_path / "xdg" / "mixgemm" / "tuned.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert tuning_cache.cache_path() == tmp_path / "home" / ".cache" / "mixgemm" / "tuned.json"
    monkeypatch.setenv("MIXGEMM_CACHE", "")  # empty means unset
    assert tuning_cache.cache_path() == tmp_path / "home" / ".cache" / "mixgemm" / "tuned.json"


# ---------------------------------------------------------------------------------------------------
# Keys and M buckets


@pytest.mark.parametrize("M, bucket", [
    (1, "1"), (2, "2"), (3, "4"), (4, "4"), (5, "8"), (16, "16"), (17, "32"), (255, "256"), (256, "256"),
    (1000, "1024"), (4095, "4096"), (4096, "4096"), (4097, ">4096"), (100_000, ">4096"),
])
def test_m_buckets(M, bucket):
    assert tuning_cache.m_bucket(M) == bucket


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "16"])
def test_m_bucket_rejects(bad):
    with pytest.raises(ValueError, match="M must be a positive int"):
        tuning_cache.m_bucket(bad)


def test_cache_key():
    key = tuning_cache.cache_key(GPU, 16, 4096, 11008, 128, FP16)
    assert key == "NVIDIA H100 80GB HBM3|M16|N4096|K11008|G128|fp16-int4-sm80-scale_offset"
    # One key per bucket, whatever M inside it and however the kernel key was made.
    assert tuning_cache.cache_key(GPU, 9, 4096, 11008, 128, KernelKey.of(torch.float16)) == key
    assert tuning_cache.cache_key(GPU, 17, 4096, 11008, 128, FP16) != key
    assert tuning_cache.cache_key(GPU, 5000, 4096, 11008, 128, BF16).endswith(
        "|M>4096|N4096|K11008|G128|bf16-int4-sm80-scale_offset")
    assert tuning_cache.cache_key(GPU, 16, 4096, 11008, 64, FP16) != key
    assert tuning_cache.cache_key("NVIDIA A100", 16, 4096, 11008, 128, FP16) != key
    assert tuning_cache.cache_key(GPU, 16, 4096, 11008, 128, BF16) != key
    # The key must be a KernelKey: the dtype or its name alone no longer say which kernels ran.
    for bad in ("fp16", torch.float16, FP16.as_tuple(), None):
        with pytest.raises(ValueError, match=r"^tuning: key must be a KernelKey, got "):
            tuning_cache.cache_key(GPU, 16, 4096, 11008, 128, bad)


def test_cache_key_of_each_kernel_key_field():
    base = "NVIDIA H100 80GB HBM3|M16|N4096|K11008|G128|"
    keys = {KernelKey(): "fp16-int4-sm80-scale_offset", KernelKey(layout="sm90"): "fp16-int4-sm90-scale_offset",
            KernelKey(layout="sm90", quant="scale"): "fp16-int4-sm90-scale", KernelKey(weight_bits=8): "fp16-int8-sm80-"
            "scale_offset", KernelKey("bf16", 8, "sm90"): "bf16-int8-sm90-scale_offset"}
    for key, suffix in keys.items():
        assert tuning_cache.cache_key(GPU, 16, 4096, 11008, 128, key) == base + suffix == base + key.name
    with pytest.raises(ValueError, match=r"^KernelKey: layout must be one of \('sm80', 'sm90'\), got 'auto'"):
        KernelKey(layout="auto")


# ---------------------------------------------------------------------------------------------------
# Save, load, merge


def test_save_load_round_trip(tmp_path):
    path = tmp_path / "new" / "dir" / "tuned.json"
    assert tuning_cache.load_cache(path) == {}  # absent file: empty, no warning
    assert tuning_cache.save_choice(GPU, 16, 4096, 4096, 128, FP16, CONFIG_A, 7.5, path=path) == path
    entries = tuning_cache.load_cache(path)
    entry = entries[tuning_cache.cache_key(GPU, 16, 4096, 4096, 128, FP16)]
    assert entry["config"] == {"tile_m": 16, "tile_n": 128, "tile_k": 64, "warp_m": 16, "warp_n": 32, "warp_k": 64,
                               "stages": 4, "split_k": 4, "split_k_mode": "serial", "path": "sm80"}
    assert entry["config"] == CONFIG_A.as_dict()
    assert entry["time_us"] == 7.5 and entry["M"] == 16 and entry["saved"]
    assert json.loads(path.read_text())["version"] == 2
    assert tuning_cache.lookup(GPU, 16, 4096, 4096, 128, FP16, path=path) == CONFIG_A
    # No time is recorded as null.
    tuning_cache.save_choice(GPU, 32, 4096, 4096, 128, FP16, CONFIG_B, path=path)
    assert tuning_cache.load_cache(path)[tuning_cache.cache_key(GPU, 32, 4096, 4096, 128, FP16)]["time_us"] is None


def test_a_decode_path_choice_round_trips_and_an_entry_without_a_path_is_unusable(tmp_path):
    path = tmp_path / "tuned.json"
    decode = DecodeConfig(8, 4, split_k=3)
    tuning_cache.save_choice(GPU, 4, 4096, 4096, 128, FP16, decode, 5.0, path=path)
    key = tuning_cache.cache_key(GPU, 4, 4096, 4096, 128, FP16)
    assert tuning_cache.load_cache(path)[key]["config"] == {"path": "decode", "rows": 8, "warps": 4, "split_k": 3}
    assert tuning_cache.lookup(GPU, 4, 4096, 4096, 128, FP16, path=path) == decode
    # An entry whose config does not name its path (a version-1 habit: those meant sm80) is unusable, not an error.
    data = json.loads(path.read_text())
    data["entries"][key]["config"] = {k: v for k, v in CONFIG_A.as_dict().items() if k != "path"}
    path.write_text(json.dumps(data))
    assert tuning_cache.lookup(GPU, 4, 4096, 4096, 128, FP16, path=path) is None


def test_sm90_and_dequant_choices_round_trip_with_every_field(tmp_path):
    path = tmp_path / "tuned.json"
    tuning_cache.save_choice(GPU, 64, 4096, 4096, 128, SM90_KEY, SM90_B, 30.0, path=path)
    entry = tuning_cache.load_cache(path)[tuning_cache.cache_key(GPU, 64, 4096, 4096, 128, SM90_KEY)]
    assert entry["config"] == {"path": "sm90", "tile_m": 256, "tile_n": 128, "cluster_m": 2, "cluster_n": 1,
                               "schedule": "coop", "scheduler": "persistent", "split_k": 1, "split_k_mode": "none"}
    assert tuning_cache.lookup(GPU, 64, 4096, 4096, 128, SM90_KEY, path=path) == SM90_B
    split = SM90_A.with_split_k(2)
    tuning_cache.save_choice(GPU, 32, 4096, 4096, 128, SM90_KEY, split, 12.0, path=path)
    assert tuning_cache.lookup(GPU, 32, 4096, 4096, 128, SM90_KEY, path=path) == split
    scatter = SM90_A.with_split_k(4, "reduce_scatter")
    tuning_cache.save_choice(GPU, 32, 4096, 4096, 128, SM90_KEY, scatter, 11.0, path=path)
    assert tuning_cache.lookup(GPU, 32, 4096, 4096, 128, SM90_KEY, path=path) == scatter
    tuning_cache.save_choice(GPU, 2048, 4096, 4096, 128, SM90_KEY, DequantConfig(), 99.0, path=path)
    assert tuning_cache.lookup(GPU, 2048, 4096, 4096, 128, SM90_KEY, path=path) == DequantConfig()
    assert tuning_cache.load_cache(path)[tuning_cache.cache_key(GPU, 2048, 4096, 4096, 128, SM90_KEY)]["config"] == {
        "path": "dequant"}


def test_kernel_keys_keep_their_own_choices(tmp_path):
    path = tmp_path / "tuned.json"
    tuning_cache.save_choice(GPU, 64, 4096, 4096, 128, SM90_KEY, SM90_A, 20.0, path=path)
    # An sm90-layout entry is not an sm80-layout one: a weight in the sm80 layout finds nothing for this shape.
    assert tuning_cache.lookup(GPU, 64, 4096, 4096, 128, FP16, path=path) is None
    assert tuning_cache.lookup(GPU, 64, 4096, 4096, 128, SM90_KEY, path=path) == SM90_A
    # Nor is a scale-only weight's, another width's or another activation type's.
    for other in (KernelKey(layout="sm90", quant="scale"), KernelKey(weight_bits=8, layout="sm90"),
                  KernelKey("bf16", layout="sm90")):
        assert tuning_cache.lookup(GPU, 64, 4096, 4096, 128, other, path=path) is None
    # And the other way round; both stay, side by side, in one file.
    tuning_cache.save_choice(GPU, 64, 4096, 4096, 128, FP16, CONFIG_B, 25.0, path=path)
    assert tuning_cache.lookup(GPU, 64, 4096, 4096, 128, FP16, path=path) == CONFIG_B
    assert tuning_cache.lookup(GPU, 64, 4096, 4096, 128, SM90_KEY, path=path) == SM90_A
    assert set(tuning_cache.load_cache(path)) == {
        "NVIDIA H100 80GB HBM3|M64|N4096|K4096|G128|fp16-int4-sm80-scale_offset",
        "NVIDIA H100 80GB HBM3|M64|N4096|K4096|G128|fp16-int4-sm90-scale_offset"}
    # Replacing one key's winner leaves the other's alone.
    decode = DecodeConfig(16, 4, split_k=2)
    tuning_cache.save_choice(GPU, 64, 4096, 4096, 128, SM90_KEY, decode, 10.0, path=path)
    assert tuning_cache.lookup(GPU, 64, 4096, 4096, 128, SM90_KEY, path=path) == decode
    assert tuning_cache.lookup(GPU, 64, 4096, 4096, 128, FP16, path=path) == CONFIG_B
    with pytest.raises(ValueError, match="key must be a KernelKey"):
        tuning_cache.save_choice(GPU, 64, 4096, 4096, 128, "sm90", CONFIG_B, path=path)
    with pytest.raises(ValueError, match="key must be a KernelKey"):
        tuning_cache.lookup(GPU, 64, 4096, 4096, 128, torch.float16, path=path)


def test_entries_whose_fields_contradict_each_other_are_unusable(tmp_path):
    path = tmp_path / "tuned.json"
    key = tuning_cache.cache_key(GPU, 16, 4096, 4096, 128, SM90_KEY)
    # A hand-edited entry whose fields contradict each other is unusable, not an error.
    for bad in (dict(SM90_A.as_dict(), schedule=""), dict(SM90_B.as_dict(), split_k=2),
                dict(CONFIG_A.as_dict(), split_k_mode="streamk", split_k=0), dict(CONFIG_A.as_dict(), path="gemv"),
                dict(CONFIG_A.as_dict(), cluster_m=1)):
        path.write_text(json.dumps({"version": 2, "entries": {key: {"config": bad}}}))
        assert tuning_cache.lookup(GPU, 16, 4096, 4096, 128, SM90_KEY, path=path) is None, bad


@pytest.mark.parametrize("version", [1, 3, None, "2"])
def test_a_file_of_another_version_is_ignored_with_a_warning(tmp_path, version):
    # Version 1 keyed entries by dtype and layout, with one config class for every path: its entries cannot be
    # read as version 2's, so the whole file is set aside (never an error) and the next tune rewrites it.
    path = tmp_path / "tuned.json"
    key = tuning_cache.cache_key(GPU, 16, 4096, 4096, 128, FP16)
    data = {"entries": {key: {"config": CONFIG_A.as_dict(), "time_us": 3.0, "M": 16},
                        "NVIDIA H100 80GB HBM3|M16|N4096|K4096|G128|fp16": {"config": CONFIG_B.as_dict()}}}
    if version is not None:
        data["version"] = version
    path.write_text(json.dumps(data))
    message = (rf"tuning cache {path} was written by another version of mixgemm \(file version {version!r}, this one "
               rf"reads 2\); its entries are ignored")
    with pytest.warns(UserWarning, match=message):
        assert tuning_cache.load_cache(path) == {}
    with pytest.warns(UserWarning, match="written by another version of mixgemm"):
        assert tuning_cache.lookup(GPU, 16, 4096, 4096, 128, FP16, path=path) is None
    # The next save starts afresh, as version 2, without the old entries.
    with pytest.warns(UserWarning, match="written by another version of mixgemm"):
        tuning_cache.save_choice(GPU, 32, 4096, 4096, 128, FP16, CONFIG_B, path=path)
    rewritten = json.loads(path.read_text())
    assert rewritten["version"] == 2
    assert list(rewritten["entries"]) == [tuning_cache.cache_key(GPU, 32, 4096, 4096, 128, FP16)]
    assert tuning_cache.lookup(GPU, 32, 4096, 4096, 128, FP16, path=path) == CONFIG_B
    assert tuning_cache.lookup(GPU, 16, 4096, 4096, 128, FP16, path=path) is None


def test_merge_of_two_choices(tmp_path):
    path = tmp_path / "tuned.json"
    tuning_cache.save_choice(GPU, 1, 4096, 4096, 128, FP16, CONFIG_A, 5.0, path=path)
    tuning_cache.save_choice(GPU, 128, 4096, 4096, 128, FP16, CONFIG_B, 20.0, path=path)
    assert len(tuning_cache.load_cache(path)) == 2
    assert tuning_cache.lookup(GPU, 1, 4096, 4096, 128, FP16, path=path) == CONFIG_A
    assert tuning_cache.lookup(GPU, 100, 4096, 4096, 128, FP16, path=path) == CONFIG_B
    # The same key again replaces its entry and leaves the other alone.
    tuning_cache.save_choice(GPU, 1, 4096, 4096, 128, FP16, CONFIG_B, 4.0, path=path)
    entries = tuning_cache.load_cache(path)
    assert len(entries) == 2
    assert tuning_cache.lookup(GPU, 1, 4096, 4096, 128, FP16, path=path) == CONFIG_B


def test_save_merges_what_another_process_wrote(tmp_path):
    path = tmp_path / "tuned.json"
    tuning_cache.save_choice(GPU, 1, 4096, 4096, 128, FP16, CONFIG_A, path=path)
    assert tuning_cache.lookup(GPU, 1, 4096, 4096, 128, FP16, path=path) == CONFIG_A  # now memoised
    # Another tuner adds an entry behind our back; our next save must keep it, and lookups must see it.
    data = json.loads(path.read_text())
    other = tuning_cache.cache_key("other", 1, 64, 64, 64, FP16)
    data["entries"][other] = {"config": CONFIG_B.as_dict()}
    path.write_text(json.dumps(data))
    assert tuning_cache.lookup("other", 1, 64, 64, 64, FP16, path=path) == CONFIG_B
    tuning_cache.save_choice(GPU, 8, 4096, 4096, 128, FP16, CONFIG_B, path=path)
    assert set(tuning_cache.load_cache(path)) == {
        tuning_cache.cache_key(GPU, 1, 4096, 4096, 128, FP16), tuning_cache.cache_key(GPU, 8, 4096, 4096, 128, FP16),
        other,
    }


def test_save_replaces_atomically(tmp_path, monkeypatch):
    path = tmp_path / "tuned.json"
    tuning_cache.save_choice(GPU, 1, 4096, 4096, 128, FP16, CONFIG_A, path=path)
    before = path.read_text()

    calls = []
    real_replace = os.replace

    def spy(src, dst):
        # The new content is complete in a temporary file of the same directory before the swap.
        calls.append((pathlib.Path(src), pathlib.Path(dst)))
        assert pathlib.Path(src).parent == path.parent and pathlib.Path(src) != path
        assert len(json.loads(pathlib.Path(src).read_text())["entries"]) == 2
        real_replace(src, dst)

    monkeypatch.setattr(tuning_cache.os, "replace", spy)
    tuning_cache.save_choice(GPU, 2, 4096, 4096, 128, FP16, CONFIG_B, path=path)
    assert calls and calls[0][1] == path
    assert len(tuning_cache.load_cache(path)) == 2

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(tuning_cache.os, "replace", crash)
    after_two = path.read_text()
    with pytest.raises(OSError, match="disk full"):
        tuning_cache.save_choice(GPU, 4, 4096, 4096, 128, FP16, CONFIG_B, path=path)
    assert path.read_text() == after_two != before  # untouched by the failed save
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tuned.json"]  # no temporary file left behind


@pytest.mark.parametrize("text", ["{not json", "", "[]", '{"version": 2}', '{"entries": [1, 2]}'])
def test_corrupt_file_is_empty_with_a_warning(tmp_path, text):
    path = tmp_path / "tuned.json"
    path.write_text(text)
    with pytest.warns(UserWarning, match="corrupt"):
        assert tuning_cache.load_cache(path) == {}
    with pytest.warns(UserWarning, match="corrupt"):
        assert tuning_cache.lookup(GPU, 1, 4096, 4096, 128, FP16, path=path) is None
    # The next save starts afresh and repairs the file.
    with pytest.warns(UserWarning, match="corrupt"):
        tuning_cache.save_choice(GPU, 1, 4096, 4096, 128, FP16, CONFIG_A, path=path)
    assert tuning_cache.lookup(GPU, 1, 4096, 4096, 128, FP16, path=path) == CONFIG_A


def test_lookup_misses_and_bad_entries(tmp_path):
    path = tmp_path / "tuned.json"
    assert tuning_cache.lookup(GPU, 1, 4096, 4096, 128, FP16, path=path) is None  # no file
    tuning_cache.save_choice(GPU, 1, 4096, 4096, 128, FP16, CONFIG_A, path=path)
    assert tuning_cache.lookup(GPU, 2, 4096, 4096, 128, FP16, path=path) is None  # other bucket
    assert tuning_cache.lookup(GPU, 1, 4096, 4096, 128, BF16, path=path) is None  # other kernel key
    data = json.loads(path.read_text())
    data["entries"][tuning_cache.cache_key(GPU, 8, 64, 64, 64, FP16)] = {"config": {"path": "sm80", "tile_m": 16}}
    data["entries"][tuning_cache.cache_key(GPU, 16, 64, 64, 64, FP16)] = "nonsense"
    data["entries"][tuning_cache.cache_key(GPU, 32, 64, 64, 64, FP16)] = {"config": "16x128x64_w16x32x64_s4"}
    path.write_text(json.dumps(data))
    assert tuning_cache.lookup(GPU, 8, 64, 64, 64, FP16, path=path) is None  # incomplete
    assert tuning_cache.lookup(GPU, 16, 64, 64, 64, FP16, path=path) is None
    assert tuning_cache.lookup(GPU, 32, 64, 64, 64, FP16, path=path) is None  # a name, not fields
    with pytest.raises(ValueError, match="GemmConfig"):
        tuning_cache.save_choice(GPU, 1, 64, 64, 64, FP16, "16x128x64_w16x32x64_s4", path=path)


def test_lookup_parses_the_file_once(tmp_path, monkeypatch):
    path = tmp_path / "tuned.json"
    tuning_cache.save_choice(GPU, 1, 4096, 4096, 128, FP16, CONFIG_A, path=path)
    reads = []
    real_load = tuning_cache.load_cache
    monkeypatch.setattr(tuning_cache, "load_cache", lambda p=None: reads.append(p) or real_load(p))
    for _ in range(5):
        assert tuning_cache.lookup(GPU, 1, 4096, 4096, 128, FP16, path=path) == CONFIG_A
    assert len(reads) <= 1
    tuning_cache.save_choice(GPU, 1, 4096, 4096, 128, FP16, CONFIG_B, path=path)  # a new file: re-read once
    reads.clear()
    for _ in range(5):
        assert tuning_cache.lookup(GPU, 1, 4096, 4096, 128, FP16, path=path) == CONFIG_B
    assert len(reads) == 1


def test_lookup_uses_cache_path_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("MIXGEMM_CACHE", str(tmp_path / "env.json"))
    tuning_cache.save_choice(GPU, 32, 4096, 4096, 128, BF16, CONFIG_B)
    assert (tmp_path / "env.json").is_file()
    assert tuning_cache.lookup(GPU, 32, 4096, 4096, 128, KernelKey.of(torch.bfloat16)) == CONFIG_B


def test_a_save_drops_gemms_plans(tmp_path, monkeypatch):
    # gemm's plans hold configs resolved from the file as it was: a save must drop them (ops registers the hook).
    assert ops.clear_plans in tuning_cache.on_save
    monkeypatch.setitem(ops._plans, ("a plan",), object())
    tuning_cache.save_choice(GPU, 1, 4096, 4096, 128, FP16, CONFIG_A, path=tmp_path / "tuned.json")
    assert ("a plan",) not in ops._plans


# ---------------------------------------------------------------------------------------------------
# resolve_config: "auto" consults the cache, then the heuristic


H100 = Gpu(GPU, 132, (9, 0))


@pytest.fixture
def fake_device(monkeypatch, tmp_path):
    """A CPU-resident PackedWeight whose device reads as an H100 (mixgemm.device's facts); the cache lives in
    tmp_path."""
    monkeypatch.setitem(device._facts, torch.device("cpu"), H100)
    monkeypatch.setenv("MIXGEMM_CACHE", str(tmp_path / "tuned.json"))
    return _weight_in("sm80")


def _weight_in(layout, N=4096, K=4096, G=128, scale_only=False):
    return packing.PackedWeight(torch.zeros(1, dtype=torch.int32), torch.zeros(K // G, N, dtype=torch.float16),
                                torch.zeros(K // G, N, dtype=torch.float16), G, 4, torch.float16, N, K, layout=layout,
                                scale_only=scale_only)


def _heuristic(M, packed):
    key = packed.key
    return dispatch.heuristic(dispatch.compiled(key), GemmProblem(M, packed.n, packed.k, packed.group_size), key, H100)


def test_resolve_config_prefers_the_tuned_choice(fake_device):
    packed = fake_device
    compiled = mixgemm.compiled_configs(torch.float16)
    tuned = compiled[-1].with_split_k(2, "parallel")
    assert ops.resolve_config(16, packed, "auto") == _heuristic(16, packed)  # empty cache
    tuning_cache.save_choice(GPU, 16, packed.n, packed.k, packed.group_size, packed.key, tuned)
    assert tuned != _heuristic(16, packed)
    for M in (9, 12, 16):  # the whole bucket
        assert ops.resolve_config(M, packed, "auto") == tuned
    assert ops.resolve_config(17, packed, "auto") == _heuristic(17, packed)  # other bucket
    # An explicit config or path name still wins over the cache.
    assert ops.resolve_config(16, packed, compiled[0]) == compiled[0]
    assert ops.resolve_config(16, packed, "sm80") == _heuristic(16, packed)


def test_resolve_config_ignores_stale_entries(fake_device):
    packed = fake_device
    not_compiled = Sm80Config(48, 96, 64, 16, 32, 64, 7)
    too_split = mixgemm.compiled_configs(torch.float16)[0].with_split_k(packed.k // 64 + 1, "serial")
    tuning_cache.save_choice(GPU, 1, packed.n, packed.k, packed.group_size, packed.key, not_compiled)
    tuning_cache.save_choice(GPU, 2, packed.n, packed.k, packed.group_size, packed.key, too_split)
    assert ops.resolve_config(1, packed, "auto") == _heuristic(1, packed)
    assert ops.resolve_config(2, packed, "auto") == _heuristic(2, packed)
    # Another GPU's choices are not ours, nor another kernel key's.
    other = mixgemm.compiled_configs(torch.float16)[-1]
    tuning_cache.save_choice("NVIDIA A100-SXM4-80GB", 4, packed.n, packed.k, packed.group_size, packed.key, other)
    tuning_cache.save_choice(GPU, 4, packed.n, packed.k, packed.group_size, KernelKey(weight_bits=8), other)
    assert ops.resolve_config(4, packed, "auto") == _heuristic(4, packed)


# A build's registries, by hand: the sm80 path's minimal tiles, two decode kernels and three sm90 kernels.
SM80_16 = Sm80Config(16, 256, 64, 16, 64, 64, 3)
HAND_COMPILED = (SM80_16, CONFIG_B, Sm80Config(128, 256, 64, 128, 32, 64, 4), DecodeConfig(8, 4),
                 DecodeConfig(16, 4), SM90_A, Sm90Config(16, 128, 1, 1, "coop", "streamk"), SM90_B)


@pytest.fixture
def hand_compiled(monkeypatch):
    install(monkeypatch, HAND_COMPILED)
    return list(HAND_COMPILED)


def test_resolve_config_of_an_sm90_weight(fake_device, hand_compiled):
    w = _weight_in("sm90")
    # The heuristic on the configs that read the sm90 layout: decode up to 8 rows, then (no sm80 tile is
    # compiled for the layout in this hand build) the sm90 GEMM.
    assert ops.resolve_config(12, w, "auto") == _heuristic(12, w)
    assert ops.resolve_config(8, w, "auto").path == "decode"
    assert ops.resolve_config(12, w, "auto").path == "sm90"
    # 32 tiles of 64 x 128 fill a quarter of the 132 SMs: split 4 (paths.sm90.split_for).
    assert ops.resolve_config(64, w, "auto") == SM90_A.with_split_k(4, "serial")
    # An sm80-layout weight of the same shape never gets an sm90 config.
    assert ops.resolve_config(64, _weight_in("sm80"), "auto").path == "sm80"
    assert ops.resolve_config(12, _weight_in("sm80"), "auto").path == "sm80"


def test_resolve_config_runs_the_sm80_tiles_of_the_sm90_layout(fake_device, monkeypatch):
    # A build with the 16-row sm80 tile compiled for sm90-layout weights: 9..16 rows take it with the sm80
    # rule's split; up to 32 rows the sm80 path still (a weight under 64 Mi elements: dispatch's small-weight rule),
    # the sm90 GEMM from 33 (its 32 column tiles give each SM 15.5 k-tiles: not few).
    install(monkeypatch, HAND_COMPILED, sm90_layout_tiles=[SM80_16])
    w = _weight_in("sm90")
    assert ops.resolve_config(8, w, "auto").path == "decode"
    for M in (9, 16):
        config = ops.resolve_config(M, w, "auto")
        assert config.kernel_name == SM80_16.kernel_name and config == mixgemm.paths.sm80.heuristic(
            [SM80_16], M, 4096, 4096, 132, "sm90"), M
    assert ops.resolve_config(17, w, "auto").path == "sm80" and ops.resolve_config(32, w, "auto").path == "sm80"
    assert ops.resolve_config(33, w, "auto").path == "sm90"
    # The sm80 layout's weight of the same shape is unchanged: its own tiles by M bucket.
    assert ops.resolve_config(64, _weight_in("sm80"), "auto").kernel_name == CONFIG_B.kernel_name


def test_resolve_config_reads_its_kernel_keys_cache_entry(fake_device, hand_compiled):
    sm90_w, sm80_w = _weight_in("sm90"), _weight_in("sm80")
    tuning_cache.save_choice(GPU, 64, 4096, 4096, 128, sm90_w.key, SM90_B)
    tuning_cache.save_choice(GPU, 64, 4096, 4096, 128, sm80_w.key, CONFIG_B.with_split_k(2, "parallel"))
    assert ops.resolve_config(64, sm90_w, "auto") == SM90_B
    assert ops.resolve_config(64, sm80_w, "auto") == CONFIG_B.with_split_k(2, "parallel")
    # An sm90 config under the sm80 key (a hand edit, another build) cannot read that weight: stale, the
    # heuristic takes over; likewise an sm80 config the build does not compile for the sm90 layout.
    tuning_cache.save_choice(GPU, 128, 4096, 4096, 128, sm80_w.key, SM90_A)
    tuning_cache.save_choice(GPU, 128, 4096, 4096, 128, sm90_w.key, CONFIG_B)
    assert ops.resolve_config(128, sm80_w, "auto") == _heuristic(128, sm80_w)
    assert ops.resolve_config(128, sm90_w, "auto") == _heuristic(128, sm90_w)
    assert _heuristic(128, sm80_w).path == "sm80" and _heuristic(128, sm90_w).path == "sm90"
    # A tuned sm90 tile that does not divide N is stale too; no compiled sm90 tile divides 4160, nor is an sm80
    # tile compiled for the layout: the dequant path runs it.
    narrow = _weight_in("sm90", N=4160)
    tuning_cache.save_choice(GPU, 256, 4160, 4096, 128, narrow.key, SM90_A)
    assert ops.resolve_config(256, narrow, "auto") == DequantConfig()


def test_resolve_config_without_any_path_for_the_shape(fake_device, monkeypatch):
    # A build that had no dequant path: no path runs N = 4160 on the sm90 layout above the decode rows.
    install(monkeypatch, HAND_COMPILED, dequant=False)
    narrow = _weight_in("sm90", N=4160)
    with pytest.raises(RuntimeError, match="^mixgemm: no kernel path runs M = 256, N = 4160, K = 4096, group_size = "
                                           "128 for fp16-int4-sm90-scale_offset"):
        ops.resolve_config(256, narrow, "auto")
    assert ops.resolve_config(4, narrow, "auto").path == "decode"


def test_resolve_config_takes_the_dequant_path_from_its_threshold(fake_device, hand_compiled):
    sm90_w, sm80_w = _weight_in("sm90"), _weight_in("sm80")
    assert ops.resolve_config(1023, sm80_w, "auto").path == "sm80"
    assert ops.resolve_config(1024, sm80_w, "auto") == DequantConfig()
    assert ops.resolve_config(8191, sm90_w, "auto").path == "sm90"
    assert ops.resolve_config(8192, sm90_w, "auto") == DequantConfig()
    # Group size 8: the expansion reads one scale row per 16-deep slab and the kernel paths need 32 or 64, so no
    # path runs it (prepack refuses such a weight) and a tuned entry naming the dequant path is not taken.
    g8 = _weight_in("sm80", G=8)
    tuning_cache.save_choice(GPU, 4096, 4096, 4096, 8, g8.key, DequantConfig())
    with pytest.raises(RuntimeError, match="no kernel path runs M = 4096, N = 4096, K = 4096, group_size = 8 .*"
                                           "dequant: "
                                           "group_size must be a multiple of 16"):
        ops.resolve_config(4096, g8, "auto")


def test_a_tuned_dequant_choice_is_taken(fake_device, hand_compiled):
    tuning_cache.save_choice(GPU, 2048, 4096, 4096, 128, fake_device.key, DequantConfig())
    assert ops.resolve_config(2048, fake_device, "auto") == DequantConfig()
    tuning_cache.save_choice(GPU, 64, 4096, 4096, 128, fake_device.key, DequantConfig())
    assert ops.resolve_config(64, fake_device, "auto") == DequantConfig()  # tuned below its threshold too


def test_a_scale_only_weight_takes_its_own_entry_then_the_scale_offset_one(fake_device, hand_compiled):
    # tune times weights with zero points: their winners serve symmetric sm90-layout weights (quant "scale"), which
    # run the same scale+offset kernels with zero offsets; an entry under the weight's own key comes first.
    symmetric = _weight_in("sm90", scale_only=True)
    assert symmetric.key == KernelKey(layout="sm90", quant="scale")
    assert ops.resolve_config(64, symmetric, "auto") == _heuristic(64, symmetric)
    tuning_cache.save_choice(GPU, 64, 4096, 4096, 128, SM90_KEY, SM90_B)
    assert ops.resolve_config(64, symmetric, "auto") == SM90_B
    own = SM90_A.with_split_k(2)
    tuning_cache.save_choice(GPU, 64, 4096, 4096, 128, symmetric.key, own)
    assert ops.resolve_config(64, symmetric, "auto") == own
    # Not the other way round: a scale+offset weight never reads the scale-only entry.
    tuning_cache.save_choice(GPU, 32, 4096, 4096, 128, symmetric.key, SM90_B)
    assert ops.resolve_config(32, _weight_in("sm90"), "auto") == _heuristic(32, _weight_in("sm90"))
