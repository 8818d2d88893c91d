"""The tuned-config cache (mixgemm.tuning) and gemm(config="auto")'s use of it, without a GPU."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib

import pytest
import torch

import mixgemm
from mixgemm import config as config_module
from mixgemm import ops, packing, tuning
from mixgemm.config import GemmConfig
from hand_registry import fake_compiled

GPU = "NVIDIA H100 80GB HBM3"
CONFIG_A = GemmConfig(16, 128, 64, 16, 32, 64, 4, 4, "serial")
CONFIG_B = GemmConfig(64, 128, 64, 32, 64, 64, 4)
SM90_A = GemmConfig.sm90(64, 128, 64, 1, 1, "coop", "streamk")
SM90_B = GemmConfig.sm90(256, 128, 64, 2, 1, "coop", "persistent")


# ---------------------------------------------------------------------------------------------------
# Where the file lives


def test_cache_path_env_override(monkeypatch, tmp_path):
    monkeypatch.setenv("MIXGEMM_CACHE", str(tmp_path / "elsewhere.json"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tuning.cache_path() == tmp_path / "elsewhere.json"


def test_cache_path_xdg_and_default(monkeypatch, tmp_path):
    monkeypatch.delenv("MIXGEMM_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tuning.cache_path() == tmp_path / "xdg" / "mixgemm" / "tuned.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert tuning.cache_path() == tmp_path / "home" / ".cache" / "mixgemm" / "tuned.json"
    monkeypatch.setenv("MIXGEMM_CACHE", "")  # empty means unset
    assert tuning.cache_path() == tmp_path / "home" / ".cache" / "mixgemm" / "tuned.json"


# ---------------------------------------------------------------------------------------------------
# Keys and M buckets


@pytest.mark.parametrize("M, bucket", [
    (1, "1"), (2, "2"), (3, "4"), (4, "4"), (5, "8"), (16, "16"), (17, "32"), (255, "256"), (256, "256"),
    (1000, "1024"), (4095, "4096"), (4096, "4096"), (4097, ">4096"), (100_000, ">4096"),
])
def test_m_buckets(M, bucket):
    assert tuning.m_bucket(M) == bucket


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "16"])
def test_m_bucket_rejects(bad):
    with pytest.raises(ValueError, match="M must be a positive int"):
        tuning.m_bucket(bad)


def test_cache_key():
    key = tuning.cache_key(GPU, 16, 4096, 11008, 128, torch.float16)
    assert key == "NVIDIA H100 80GB HBM3|M16|N4096|K11008|G128|fp16"
    # One key per bucket, whatever M inside it and however the dtype is spelled.
    assert tuning.cache_key(GPU, 9, 4096, 11008, 128, "fp16") == key
    assert tuning.cache_key(GPU, 17, 4096, 11008, 128, torch.float16) != key
    assert tuning.cache_key(GPU, 5000, 4096, 11008, 128, "bf16").endswith("|M>4096|N4096|K11008|G128|bf16")
    assert tuning.cache_key(GPU, 16, 4096, 11008, 64, "fp16") != key
    assert tuning.cache_key("NVIDIA A100", 16, 4096, 11008, 128, "fp16") != key
    assert tuning.cache_key(GPU, 16, 4096, 11008, 128, torch.bfloat16) != key
    with pytest.raises(ValueError, match="dtype"):
        tuning.cache_key(GPU, 16, 4096, 11008, 128, torch.float32)


def test_cache_key_of_each_layout():
    sm80 = "NVIDIA H100 80GB HBM3|M16|N4096|K11008|G128|fp16"
    # sm80 keys are what they were before layouts existed, so old cache files keep their meaning.
    assert tuning.cache_key(GPU, 16, 4096, 11008, 128, "fp16", "sm80") == sm80
    assert tuning.cache_key(GPU, 16, 4096, 11008, 128, "fp16", layout="sm80") == sm80
    assert tuning.cache_key(GPU, 16, 4096, 11008, 128, "fp16", "sm90") == sm80 + "|sm90"
    assert tuning.cache_key(GPU, 5000, 4096, 11008, 128, "bf16", "sm90").endswith("|M>4096|N4096|K11008|G128|bf16|sm90")
    for layout in ("sm91", "auto", "", None):
        with pytest.raises(ValueError, match=rf"^tuning: layout must be 'sm80' or 'sm90', got {layout!r}"):
            tuning.cache_key(GPU, 16, 4096, 11008, 128, "fp16", layout)


# ---------------------------------------------------------------------------------------------------
# Save, load, merge


def test_save_load_round_trip(tmp_path):
    path = tmp_path / "new" / "dir" / "tuned.json"
    assert tuning.load_cache(path) == {}  # absent file: empty, no warning
    assert tuning.save_choice(GPU, 16, 4096, 4096, 128, torch.float16, CONFIG_A, 7.5, path=path) == path
    entries = tuning.load_cache(path)
    entry = entries[tuning.cache_key(GPU, 16, 4096, 4096, 128, "fp16")]
    assert entry["config"] == {"tile_m": 16, "tile_n": 128, "tile_k": 64, "warp_m": 16, "warp_n": 32,
                               "warp_k": 64, "stages": 4, "split_k": 4, "split_k_mode": "serial", "path": "sm80",
                               "cluster_m": 1, "cluster_n": 1, "schedule": "", "scheduler": ""}
    assert entry["time_us"] == 7.5 and entry["M"] == 16 and entry["saved"]
    assert json.loads(path.read_text())["version"] == 1
    assert tuning.lookup(GPU, 16, 4096, 4096, 128, "fp16", path=path) == CONFIG_A


def test_a_decode_path_choice_round_trips_and_old_entries_mean_sm80(tmp_path):
    path = tmp_path / "tuned.json"
    decode = GemmConfig.gemv(8, 4, split_k=3)
    tuning.save_choice(GPU, 4, 4096, 4096, 128, "fp16", decode, 5.0, path=path)
    assert tuning.lookup(GPU, 4, 4096, 4096, 128, "fp16", path=path) == decode
    # A cache written before paths existed has no "path" field: those winners are sm80 configs.
    data = json.loads(path.read_text())
    key = tuning.cache_key(GPU, 4, 4096, 4096, 128, "fp16")
    data["entries"][key]["config"] = {k: v for k, v in dataclasses.asdict(CONFIG_A).items() if k != "path"}
    path.write_text(json.dumps(data))
    assert tuning.lookup(GPU, 4, 4096, 4096, 128, "fp16", path=path) == CONFIG_A


def test_sm90_choice_round_trips_with_every_field(tmp_path):
    path = tmp_path / "tuned.json"
    tuning.save_choice(GPU, 64, 4096, 4096, 128, "fp16", SM90_B, 30.0, path=path, layout="sm90")
    entry = tuning.load_cache(path)[tuning.cache_key(GPU, 64, 4096, 4096, 128, "fp16", "sm90")]
    assert entry["config"] == {"tile_m": 256, "tile_n": 128, "tile_k": 64, "warp_m": 256, "warp_n": 64,
                               "warp_k": 64, "stages": 0, "split_k": 1, "split_k_mode": "none", "path": "sm90",
                               "cluster_m": 2, "cluster_n": 1, "schedule": "coop", "scheduler": "persistent"}
    assert tuning.lookup(GPU, 64, 4096, 4096, 128, "fp16", path=path, layout="sm90") == SM90_B


def test_layouts_keep_their_own_choices(tmp_path):
    path = tmp_path / "tuned.json"
    tuning.save_choice(GPU, 64, 4096, 4096, 128, "fp16", SM90_A, 20.0, path=path, layout="sm90")
    # An sm90 entry is not an sm80 one: a weight in the sm80 layout finds nothing for this shape.
    assert tuning.lookup(GPU, 64, 4096, 4096, 128, "fp16", path=path) is None
    assert tuning.lookup(GPU, 64, 4096, 4096, 128, "fp16", path=path, layout="sm80") is None
    assert tuning.lookup(GPU, 64, 4096, 4096, 128, "fp16", path=path, layout="sm90") == SM90_A
    # And the other way round; both stay, side by side, in one file.
    tuning.save_choice(GPU, 64, 4096, 4096, 128, "fp16", CONFIG_B, 25.0, path=path)
    assert tuning.lookup(GPU, 64, 4096, 4096, 128, "fp16", path=path) == CONFIG_B
    assert tuning.lookup(GPU, 64, 4096, 4096, 128, "fp16", path=path, layout="sm90") == SM90_A
    assert set(tuning.load_cache(path)) == {"NVIDIA H100 80GB HBM3|M64|N4096|K4096|G128|fp16",
                                            "NVIDIA H100 80GB HBM3|M64|N4096|K4096|G128|fp16|sm90"}
    # Replacing one layout's winner leaves the other's alone.
    decode = GemmConfig.gemv(16, 4, split_k=2)
    tuning.save_choice(GPU, 64, 4096, 4096, 128, "fp16", decode, 10.0, path=path, layout="sm90")
    assert tuning.lookup(GPU, 64, 4096, 4096, 128, "fp16", path=path, layout="sm90") == decode
    assert tuning.lookup(GPU, 64, 4096, 4096, 128, "fp16", path=path, layout="sm80") == CONFIG_B
    with pytest.raises(ValueError, match="layout must be 'sm80' or 'sm90'"):
        tuning.save_choice(GPU, 64, 4096, 4096, 128, "fp16", CONFIG_B, path=path, layout="auto")
    with pytest.raises(ValueError, match="layout must be 'sm80' or 'sm90'"):
        tuning.lookup(GPU, 64, 4096, 4096, 128, "fp16", path=path, layout="SM90")


def test_entries_written_before_sm90_configs_still_load(tmp_path):
    # A cache from before clusters and schedules existed: its configs lack those four fields.
    path = tmp_path / "tuned.json"
    key = tuning.cache_key(GPU, 16, 4096, 4096, 128, "fp16")
    old = {k: v for k, v in dataclasses.asdict(CONFIG_A).items()
           if k not in ("cluster_m", "cluster_n", "schedule", "scheduler")}
    assert len(old) == 10
    path.write_text(json.dumps({"version": 1, "entries": {key: {"config": old, "time_us": 3.0, "M": 16}}}))
    assert tuning.lookup(GPU, 16, 4096, 4096, 128, "fp16", path=path) == CONFIG_A
    # A hand-edited entry whose fields contradict each other is unusable, not an error.
    bad = dict(dataclasses.asdict(SM90_A), schedule="")
    path.write_text(json.dumps({"version": 1, "entries": {key + "|sm90": {"config": bad}}}))
    assert tuning.lookup(GPU, 16, 4096, 4096, 128, "fp16", path=path, layout="sm90") is None


def test_merge_of_two_choices(tmp_path):
    path = tmp_path / "tuned.json"
    tuning.save_choice(GPU, 1, 4096, 4096, 128, "fp16", CONFIG_A, 5.0, path=path)
    tuning.save_choice(GPU, 128, 4096, 4096, 128, "fp16", CONFIG_B, 20.0, path=path)
    assert len(tuning.load_cache(path)) == 2
    assert tuning.lookup(GPU, 1, 4096, 4096, 128, "fp16", path=path) == CONFIG_A
    assert tuning.lookup(GPU, 100, 4096, 4096, 128, "fp16", path=path) == CONFIG_B
    # The same key again replaces its entry and leaves the other alone.
    tuning.save_choice(GPU, 1, 4096, 4096, 128, "fp16", CONFIG_B, 4.0, path=path)
    entries = tuning.load_cache(path)
    assert len(entries) == 2
    assert tuning.lookup(GPU, 1, 4096, 4096, 128, "fp16", path=path) == CONFIG_B


def test_save_merges_what_another_process_wrote(tmp_path):
    path = tmp_path / "tuned.json"
    tuning.save_choice(GPU, 1, 4096, 4096, 128, "fp16", CONFIG_A, path=path)
    assert tuning.lookup(GPU, 1, 4096, 4096, 128, "fp16", path=path) == CONFIG_A  # now memoised
    # Another tuner adds an entry behind our back; our next save must keep it, and lookups must see it.
    data = json.loads(path.read_text())
    data["entries"]["other|M1|N64|K64|G64|fp16"] = {"config": tuning._config_to_json(CONFIG_B)}
    path.write_text(json.dumps(data))
    assert tuning.lookup("other", 1, 64, 64, 64, "fp16", path=path) == CONFIG_B
    tuning.save_choice(GPU, 8, 4096, 4096, 128, "fp16", CONFIG_B, path=path)
    assert set(tuning.load_cache(path)) == {
        tuning.cache_key(GPU, 1, 4096, 4096, 128, "fp16"), tuning.cache_key(GPU, 8, 4096, 4096, 128, "fp16"),
        "other|M1|N64|K64|G64|fp16",
    }


def test_save_replaces_atomically(tmp_path, monkeypatch):
    path = tmp_path / "tuned.json"
    tuning.save_choice(GPU, 1, 4096, 4096, 128, "fp16", CONFIG_A, path=path)
    before = path.read_text()

    calls = []
    real_replace = os.replace

    def spy(src, dst):
        # The new content is complete in a temporary file of the same directory before the swap.
        calls.append((pathlib.Path(src), pathlib.Path(dst)))
        assert pathlib.Path(src).parent == path.parent and pathlib.Path(src) != path
        assert len(json.loads(pathlib.Path(src).read_text())["entries"]) == 2
        real_replace(src, dst)

    monkeypatch.setattr(tuning.os, "replace", spy)
    tuning.save_choice(GPU, 2, 4096, 4096, 128, "fp16", CONFIG_B, path=path)
    assert calls and calls[0][1] == path
    assert len(tuning.load_cache(path)) == 2

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(tuning.os, "replace", crash)
    after_two = path.read_text()
    with pytest.raises(OSError, match="disk full"):
        tuning.save_choice(GPU, 4, 4096, 4096, 128, "fp16", CONFIG_B, path=path)
    assert path.read_text() == after_two != before  # untouched by the failed save
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tuned.json"]  # no temporary file left behind


@pytest.mark.parametrize("text", ["{not json", "", "[]", '{"version": 1}', '{"entries": [1, 2]}'])
def test_corrupt_file_is_empty_with_a_warning(tmp_path, text):
    path = tmp_path / "tuned.json"
    path.write_text(text)
    with pytest.warns(UserWarning, match="corrupt"):
        assert tuning.load_cache(path) == {}
    with pytest.warns(UserWarning, match="corrupt"):
        assert tuning.lookup(GPU, 1, 4096, 4096, 128, "fp16", path=path) is None
    # The next save starts afresh and repairs the file.
    with pytest.warns(UserWarning, match="corrupt"):
        tuning.save_choice(GPU, 1, 4096, 4096, 128, "fp16", CONFIG_A, path=path)
    assert tuning.lookup(GPU, 1, 4096, 4096, 128, "fp16", path=path) == CONFIG_A


def test_lookup_misses_and_bad_entries(tmp_path):
    path = tmp_path / "tuned.json"
    assert tuning.lookup(GPU, 1, 4096, 4096, 128, "fp16", path=path) is None  # no file
    tuning.save_choice(GPU, 1, 4096, 4096, 128, "fp16", CONFIG_A, path=path)
    assert tuning.lookup(GPU, 2, 4096, 4096, 128, "fp16", path=path) is None  # other bucket
    assert tuning.lookup(GPU, 1, 4096, 4096, 128, "bf16", path=path) is None  # other dtype
    data = json.loads(path.read_text())
    data["entries"][tuning.cache_key(GPU, 8, 64, 64, 64, "fp16")] = {"config": {"tile_m": 16}}  # incomplete
    data["entries"][tuning.cache_key(GPU, 16, 64, 64, 64, "fp16")] = "nonsense"
    path.write_text(json.dumps(data))
    assert tuning.lookup(GPU, 8, 64, 64, 64, "fp16", path=path) is None
    assert tuning.lookup(GPU, 16, 64, 64, 64, "fp16", path=path) is None
    with pytest.raises(ValueError, match="GemmConfig"):
        tuning.save_choice(GPU, 1, 64, 64, 64, "fp16", "16x128", path=path)


def test_lookup_parses_the_file_once(tmp_path, monkeypatch):
    path = tmp_path / "tuned.json"
    tuning.save_choice(GPU, 1, 4096, 4096, 128, "fp16", CONFIG_A, path=path)
    reads = []
    real_load = tuning.load_cache
    monkeypatch.setattr(tuning, "load_cache", lambda p=None: reads.append(p) or real_load(p))
    for _ in range(5):
        assert tuning.lookup(GPU, 1, 4096, 4096, 128, "fp16", path=path) == CONFIG_A
    assert len(reads) <= 1
    tuning.save_choice(GPU, 1, 4096, 4096, 128, "fp16", CONFIG_B, path=path)  # a new file: re-read once
    reads.clear()
    for _ in range(5):
        assert tuning.lookup(GPU, 1, 4096, 4096, 128, "fp16", path=path) == CONFIG_B
    assert len(reads) == 1


def test_lookup_uses_cache_path_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("MIXGEMM_CACHE", str(tmp_path / "env.json"))
    tuning.save_choice(GPU, 32, 4096, 4096, 128, "bf16", CONFIG_B)
    assert (tmp_path / "env.json").is_file()
    assert tuning.lookup(GPU, 32, 4096, 4096, 128, torch.bfloat16) == CONFIG_B


# ---------------------------------------------------------------------------------------------------
# resolve_config: "auto" consults the cache, then the heuristic


@pytest.fixture
def fake_device(monkeypatch, tmp_path):
    """A CPU-resident PackedWeight and a fake GPU identity; the cache lives in tmp_path."""

    class Properties:
        multi_processor_count = 132

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: GPU)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: Properties())
    monkeypatch.setenv("MIXGEMM_CACHE", str(tmp_path / "tuned.json"))
    K, N, G = 4096, 4096, 128
    packed = packing.PackedWeight(torch.zeros(1, dtype=torch.int32), torch.zeros(K // G, N, dtype=torch.float16),
                              torch.zeros(K // G, N, dtype=torch.float16), G, 4, torch.float16, N, K)
    return packed


def _heuristic(M, packed):
    return tuning.heuristic_config(mixgemm.compiled_configs(packed.act_dtype, path=None), M, packed.n, packed.k, 132)


def test_resolve_config_prefers_the_tuned_choice(fake_device):
    packed = fake_device
    compiled = mixgemm.compiled_configs(torch.float16)
    tuned = compiled[-1].with_split_k(2, "parallel")
    assert ops.resolve_config(16, packed, "auto") == _heuristic(16, packed)  # empty cache
    tuning.save_choice(GPU, 16, packed.n, packed.k, packed.group_size, packed.act_dtype, tuned)
    assert tuned != _heuristic(16, packed)
    for M in (9, 12, 16):  # the whole bucket
        assert ops.resolve_config(M, packed, "auto") == tuned
    assert ops.resolve_config(17, packed, "auto") == _heuristic(17, packed)  # other bucket
    # An explicit config still wins over the cache.
    assert ops.resolve_config(16, packed, compiled[0]) == compiled[0]


def test_resolve_config_ignores_stale_entries(fake_device, monkeypatch):
    packed = fake_device
    not_compiled = GemmConfig(48, 96, 64, 16, 32, 64, 7)
    too_split = mixgemm.compiled_configs(torch.float16)[0].with_split_k(packed.k // 64 + 1, "serial")
    tuning.save_choice(GPU, 1, packed.n, packed.k, packed.group_size, "fp16", not_compiled)
    tuning.save_choice(GPU, 2, packed.n, packed.k, packed.group_size, "fp16", too_split)
    assert ops.resolve_config(1, packed, "auto") == _heuristic(1, packed)
    assert ops.resolve_config(2, packed, "auto") == _heuristic(2, packed)
    # Another GPU's choices are not ours.
    other = mixgemm.compiled_configs(torch.float16)[-1]
    tuning.save_choice("NVIDIA A100-SXM4-80GB", 4, packed.n, packed.k, packed.group_size, "fp16", other)
    assert ops.resolve_config(4, packed, "auto") == _heuristic(4, packed)


# A build's registries, by hand: the sm80 path's minimal tiles, two decode kernels and three sm90 kernels.
HAND_COMPILED = (GemmConfig(16, 256, 64, 16, 64, 64, 3), GemmConfig(64, 128, 64, 32, 64, 64, 4),
                 GemmConfig(128, 256, 64, 64, 64, 64, 3), GemmConfig.gemv(8, 4), GemmConfig.gemv(16, 4),
                 SM90_A, GemmConfig.sm90(16, 128, 64, 1, 1, "coop", "streamk"), SM90_B)


@pytest.fixture
def hand_compiled(monkeypatch):
    monkeypatch.setattr(config_module, "_compiled", fake_compiled(HAND_COMPILED))
    return [c for c in HAND_COMPILED]


def _weight_in(layout, fake_device):
    K, N, G = fake_device.k, fake_device.n, fake_device.group_size
    return packing.PackedWeight(fake_device.packed, fake_device.scales, fake_device.offsets, G, 4, torch.float16, N, K,
                                layout=layout)


def test_resolve_config_of_an_sm90_weight(fake_device, hand_compiled):
    w = _weight_in("sm90", fake_device)
    reads_sm90 = mixgemm.compiled_configs(torch.float16, path=None, layout="sm90")
    # The heuristic on the configs that read the sm90 layout: decode up to 8 rows, then (no sm80 tile is
    # compiled for the layout in this hand build) the sm90 GEMM.
    assert ops.resolve_config(12, w, "auto") == tuning.heuristic_config(reads_sm90, 12, 4096, 4096, 132, "sm90")
    assert ops.resolve_config(8, w, "auto").path == "gemv"
    assert ops.resolve_config(12, w, "auto").path == "sm90"
    # 32 tiles of 64 x 128 fill a quarter of the 132 SMs: split 4 (tuning.sm90_split).
    assert ops.resolve_config(64, w, "auto") == SM90_A.with_split_k(4, "serial")
    # An sm80-layout weight of the same shape never gets an sm90 config.
    assert ops.resolve_config(64, _weight_in("sm80", fake_device), "auto").path == "sm80"
    assert ops.resolve_config(12, _weight_in("sm80", fake_device), "auto").path == "sm80"


def test_resolve_config_runs_the_sm80_tiles_of_the_sm90_layout(fake_device, monkeypatch):
    # A build with the 16-row sm80 tile compiled for sm90-layout weights: 9..16 rows take it with the sm80
    # rule's split; the sm90 GEMM above.
    sm80_16 = HAND_COMPILED[0]
    monkeypatch.setattr(config_module, "_compiled", fake_compiled(HAND_COMPILED, sm90_layout_tiles=(sm80_16.tile,)))
    w = _weight_in("sm90", fake_device)
    assert ops.resolve_config(8, w, "auto").path == "gemv"
    for M in (9, 16):
        config = ops.resolve_config(M, w, "auto")
        assert config.tile == sm80_16.tile and config == tuning.heuristic_config(
            [sm80_16], M, 4096, 4096, 132), M
    assert ops.resolve_config(17, w, "auto").path == "sm90"
    # The sm80 layout's weight of the same shape is unchanged: its own tiles by M bucket.
    assert ops.resolve_config(64, _weight_in("sm80", fake_device), "auto").tile == HAND_COMPILED[1].tile


def test_resolve_config_reads_its_layouts_cache_entry(fake_device, hand_compiled):
    sm90_w, sm80_w = _weight_in("sm90", fake_device), _weight_in("sm80", fake_device)
    args = (4096, 4096, 128, torch.float16)
    tuning.save_choice(GPU, 64, *args, SM90_B, layout="sm90")
    tuning.save_choice(GPU, 64, *args, CONFIG_B.with_split_k(2, "parallel"))
    assert ops.resolve_config(64, sm90_w, "auto") == SM90_B
    assert ops.resolve_config(64, sm80_w, "auto") == CONFIG_B.with_split_k(2, "parallel")
    # An sm90 config under the sm80 key (a hand edit, another build) cannot read that weight: stale, the
    # heuristic takes over; likewise an sm80 config under the sm90 key.
    tuning.save_choice(GPU, 128, *args, SM90_A)
    tuning.save_choice(GPU, 128, *args, CONFIG_B, layout="sm90")
    assert ops.resolve_config(128, sm80_w, "auto") == tuning.heuristic_config(
        mixgemm.compiled_configs(torch.float16, path=None, layout="sm80"), 128, 4096, 4096, 132)
    assert ops.resolve_config(128, sm90_w, "auto") == tuning.heuristic_config(
        mixgemm.compiled_configs(torch.float16, path=None, layout="sm90"), 128, 4096, 4096, 132, "sm90")
    # A tuned sm90 tile that does not divide N is stale too.
    narrow = packing.PackedWeight(sm90_w.packed, torch.zeros(32, 4160, dtype=torch.float16),
                                  torch.zeros(32, 4160, dtype=torch.float16), 128, 4, torch.float16, 4160, 4096,
                                  layout="sm90")
    tuning.save_choice(GPU, 256, 4160, 4096, 128, "fp16", SM90_A, layout="sm90")
    with pytest.raises(RuntimeError, match="no compiled sm90 config tiles N = 4160"):
        ops.resolve_config(256, narrow, "auto")  # and no other compiled sm90 tile divides 4160 either


def test_resolve_config_takes_the_dequant_path_from_its_threshold(fake_device, hand_compiled, monkeypatch):
    monkeypatch.setattr(config_module, "_compiled", fake_compiled(HAND_COMPILED + (GemmConfig.dequant(),)))
    sm90_w, sm80_w = _weight_in("sm90", fake_device), _weight_in("sm80", fake_device)
    assert ops.resolve_config(1023, sm80_w, "auto").path == "sm80"
    assert ops.resolve_config(1024, sm80_w, "auto") == GemmConfig.dequant()
    assert ops.resolve_config(8191, sm90_w, "auto").path == "sm90"
    assert ops.resolve_config(8192, sm90_w, "auto") == GemmConfig.dequant()
    # Group size 8: the expansion reads one scale row per 16-deep slab, so auto never picks it (a tuned
    # entry naming it included); an explicit request is refused when gemm plans the call.
    g8 = packing.PackedWeight(fake_device.packed, torch.zeros(512, 4096, dtype=torch.float16),
                              torch.zeros(512, 4096, dtype=torch.float16), 8, 4, torch.float16, 4096, 4096)
    tuning.save_choice(GPU, 4096, 4096, 4096, 8, "fp16", GemmConfig.dequant())
    assert ops.resolve_config(4096, g8, "auto").path == "sm80"


def test_a_tuned_dequant_choice_round_trips(fake_device, tmp_path):
    cache = tmp_path / "dequant.json"
    tuning.save_choice(GPU, 2048, 4096, 4096, 128, "fp16", GemmConfig.dequant(), 99.0, path=cache, layout="sm90")
    assert tuning.lookup(GPU, 2048, 4096, 4096, 128, "fp16", path=cache, layout="sm90") == GemmConfig.dequant()
    tuning.save_choice(GPU, 2048, fake_device.n, fake_device.k, 128, "fp16", GemmConfig.dequant())
    assert ops.resolve_config(2048, fake_device, "auto") == GemmConfig.dequant()
