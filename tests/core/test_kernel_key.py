"""The kernel key (mixgemm.KernelKey): its rules, of(), kernel_keys(), as_tuple() and name; the C++ side takes
as_tuple() (cpp/bindings/paths.h, key_of) for every valid key and refuses a bad tuple; PackedWeight.key."""

from __future__ import annotations

import dataclasses
import itertools
import re

import pytest
import torch

import mixgemm
import mixgemm._C as _C
from mixgemm.kernel_key import KernelKey
from mixgemm.packing import PackedWeight

ALL_KEYS = [KernelKey(act, bits, layout, quant)
            for act, bits, layout, quant in itertools.product(("fp16", "bf16"), (4, 8), ("sm80", "sm90"),
                                                              ("scale", "scale_offset"))]


def test_defaults_and_fields():
    key = KernelKey()
    assert (key.act, key.weight_bits, key.layout, key.quant, key.act_scale) == (
        "fp16", 4, "sm80", "scale_offset", "none")
    assert mixgemm.KernelKey is KernelKey
    assert [f.name for f in dataclasses.fields(KernelKey)] == ["act", "weight_bits", "layout", "quant", "act_scale"]


@pytest.mark.parametrize("field, bad, allowed", [
    ("act", "fp32", "('fp16', 'bf16')"), ("act", "FP16", "('fp16', 'bf16')"),
    ("act", torch.float16, "('fp16', 'bf16')"),
    ("weight_bits", 3, "(4, 8)"), ("weight_bits", "4", "(4, 8)"),
    ("layout", "sm100", "('sm80', 'sm90')"), ("layout", "auto", "('sm80', 'sm90')"),
    ("quant", "offset", "('scale', 'scale_offset')"), ("quant", "zero_point", "('scale', 'scale_offset')"),
    ("act_scale", "per_token", "('none',)"), ("act_scale", None, "('none',)"),
])
def test_every_field_is_checked(field, bad, allowed):
    with pytest.raises(ValueError, match=rf"^KernelKey: {field} must be one of {re.escape(allowed)}, got "
                                         rf"{re.escape(repr(bad))}$"):
        KernelKey(**{field: bad})


def test_bools_are_not_bits():
    with pytest.raises(ValueError, match=r"weight_bits must be one of \(4, 8\), got True"):
        KernelKey(weight_bits=True)


def test_float_bits_are_not_bits():
    with pytest.raises(ValueError, match=r"weight_bits must be one of \(4, 8\), got 4.0"):
        KernelKey(weight_bits=4.0)


def test_of():
    assert KernelKey.of(torch.float16) == KernelKey()
    assert KernelKey.of(torch.bfloat16, 8, "sm90", "scale") == KernelKey("bf16", 8, "sm90", "scale")
    assert KernelKey.of(torch.bfloat16).dtype is torch.bfloat16 and KernelKey().dtype is torch.float16
    for dtype in (torch.float32, torch.int8, "fp16"):
        with pytest.raises(ValueError,
                           match=rf"^KernelKey: dtype must be float16 or bfloat16, got {re.escape(str(dtype))}"):
            KernelKey.of(dtype)
    with pytest.raises(ValueError, match="weight_bits must be one of"):
        KernelKey.of(torch.float16, 2)


def test_kernel_keys():
    # A scale-only weight (signed codes, zero offsets) runs its own kernels first, then the scale+offset ones.
    scale = KernelKey("bf16", 8, "sm90", "scale")
    assert scale.kernel_keys() == (scale, KernelKey("bf16", 8, "sm90", "scale_offset"))
    for key in ALL_KEYS:
        keys = key.kernel_keys()
        assert keys[0] == key
        assert all(k.quant == "scale_offset" for k in keys[1:])
        assert len(keys) == (2 if key.quant == "scale" else 1)
        assert {(k.act, k.weight_bits, k.layout) for k in keys} == {(key.act, key.weight_bits, key.layout)}
    assert scale.with_quant("scale_offset") == scale.kernel_keys()[1]


def test_as_tuple_and_name():
    assert KernelKey().as_tuple() == ("fp16", 4, "sm80", "scale_offset", "none")
    assert KernelKey("bf16", 8, "sm90", "scale").as_tuple() == ("bf16", 8, "sm90", "scale", "none")
    assert KernelKey().name == "fp16-int4-sm80-scale_offset"
    assert KernelKey("bf16", 8, "sm90", "scale").name == "bf16-int8-sm90-scale"
    for key in ALL_KEYS:
        assert KernelKey(*key.as_tuple()) == key
    assert len({key.name for key in ALL_KEYS}) == len({key.as_tuple() for key in ALL_KEYS}) == len(ALL_KEYS) == 16


def test_frozen_and_hashable():
    key = KernelKey()
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.layout = "sm90"
    assert len({KernelKey(), KernelKey("fp16", 4, "sm80", "scale_offset", "none"), KernelKey(layout="sm90")}) == 2


# ===================================================================================================
# The C++ side
# ===================================================================================================


def cpp_key_name(key: KernelKey) -> str:
    """How the core names a key in its messages (core/kernel_key.h, KernelKey::name): as KernelKey.name does."""
    return key.name


@pytest.mark.parametrize("key", ALL_KEYS, ids=lambda k: k.name)
def test_the_core_takes_every_keys_tuple(key):
    for path in _C.paths():
        names = _C.compiled_configs(path, key.as_tuple())
        assert isinstance(names, list) and all(isinstance(n, str) for n in names)
    # The key crosses field by field: the core names it back in its messages.
    with pytest.raises(ValueError, match=re.escape(f"config 16x16x64_w16x16x64_s9 is not compiled into this build for "
                                                   f"{cpp_key_name(key)}")):
        _C.prepare("sm80", "16x16x64_w16x16x64_s9", key.as_tuple(), 16, 4096, 4096, 128)


def test_the_cores_registries_are_keyed_by_every_field():
    # The sm90 path reads only the sm90 layout, and this build's sm80 and decode kernels are scale+offset only:
    # a key's layout and quant select rows, so the fields are not ignored on the way.
    for path in ("sm80", "decode", "sm90"):
        assert _C.compiled_configs(path, KernelKey(quant="scale").as_tuple()) == []
    assert _C.compiled_configs("sm90", KernelKey().as_tuple()) == []
    assert _C.compiled_configs("sm80", KernelKey().as_tuple()) != _C.compiled_configs(
        "sm80", KernelKey(layout="sm90").as_tuple())
    # The minimal set compiles its sm90 stream-K twin for fp16 int4 only: the act and bits select rows too.
    if _C.sm90_available():
        fp16 = _C.compiled_configs("sm90", KernelKey(layout="sm90").as_tuple())
        for other in (KernelKey("bf16", layout="sm90"), KernelKey(weight_bits=8, layout="sm90")):
            assert set(_C.compiled_configs("sm90", other.as_tuple())) <= set(fp16)


@pytest.mark.parametrize("key, message", [
    (("fp32", 4, "sm80", "scale_offset", "none"), "kernel key: activation type must be 'fp16' or 'bf16', got 'fp32'"),
    (("fp16", 3, "sm80", "scale_offset", "none"), "kernel key: weight bits must be 4 or 8"),
    (("fp16", 4, "sm100", "scale_offset", "none"), "kernel key: layout must be 'sm80' or 'sm90', got 'sm100'"),
    (("fp16", 4, "sm80", "offset", "none"), "kernel key: quant must be 'scale' or 'scale_offset', got 'offset'"),
    (("fp16", 4, "sm80", "scale_offset", "per_token"), "kernel key: act_scale must be 'none', got 'per_token'"),
])
def test_the_core_refuses_a_bad_tuple(key, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        _C.compiled_configs("sm80", key)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        _C.prepare("sm80", "16x128x64_w16x32x64_s4", key, 16, 4096, 4096, 128)


@pytest.mark.parametrize("key", [("fp16", 4, "sm80", "scale_offset"), ("fp16", "4", "sm80", "scale_offset", "none"),
                                 ["fp16", 4, "sm80"], "fp16-int4-sm80-scale_offset"])
def test_the_core_refuses_a_tuple_of_another_shape(key):
    # pybind11 checks the tuple's arity and types before the core sees it.
    with pytest.raises(TypeError, match="incompatible function arguments"):
        _C.compiled_configs("sm80", key)


def test_unknown_path():
    with pytest.raises(ValueError, match="^unknown kernel path 'gemv'$"):
        _C.compiled_configs("gemv", KernelKey().as_tuple())
    with pytest.raises(ValueError, match="^unknown kernel path 'dequant'$"):
        _C.prepare("dequant", "dequant_cublas", KernelKey().as_tuple(), 16, 4096, 4096, 128)


# ===================================================================================================
# PackedWeight.key
# ===================================================================================================


def packed_weight(layout, scale_only, dtype=torch.float16, bits=4):
    zeros = torch.zeros(1, 64, dtype=dtype)
    return PackedWeight(torch.zeros(1, dtype=torch.int32), zeros, zeros, 64, bits, dtype, 64, 64, layout=layout,
                        scale_only=scale_only)


def test_packed_weight_key():
    assert packed_weight("sm80", False).key == KernelKey()
    assert packed_weight("sm90", False, torch.bfloat16, 8).key == KernelKey("bf16", 8, "sm90", "scale_offset")
    # Scale-only only for symmetric weights in the sm90 layout (signed codes); the sm80 layout's unsigned codes
    # always carry an offset.
    assert packed_weight("sm90", True).key == KernelKey(layout="sm90", quant="scale")
    assert packed_weight("sm80", True).key == KernelKey()
