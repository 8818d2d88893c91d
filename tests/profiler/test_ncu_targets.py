"""tools/ncu_targets.py's arguments on the CPU (running a kernel under Nsight Compute is the device's job)."""

from __future__ import annotations

import pathlib

import pytest

from tool_modules import load_tool

tool = load_tool("ncu_targets")


def test_defaults_and_a_peer():
    args = tool.parse_args([])
    assert args.shape == (8192, 28672) and args.m == 1 and args.peer is None and args.config == "auto"
    args = tool.parse_args(["--shape", "8192x8192", "--m", "16", "--peer", "ist_marlin[sym]", "--peers-dir", "."])
    assert args.shape == (8192, 8192) and args.peer == "ist_marlin[sym]" and args.peers_dir == pathlib.Path(".")


@pytest.mark.parametrize("argv, message", [
    (["--shape", "8192"], "argument --shape"),
    (["--m", "0"], "--m and --calls must be >= 1"),
    (["--calls", "0"], "--m and --calls must be >= 1"),
    (["--peer", "machete[zp]"], "--peer needs --peers-dir"),
    (["--peer", "machete[zp]", "--peers-dir", ".", "--config", "sm80"], "--layout and --config are ours only"),
])
def test_bad_arguments_name_the_argument(argv, message, capsys):
    with pytest.raises(SystemExit):
        tool.parse_args(argv)
    assert message in capsys.readouterr().err


def test_a_peers_dir_without_the_harness_is_named(tmp_path):
    with pytest.raises(SystemExit, match=f"--peers-dir {tmp_path} holds no peers_bench.py"):
        tool.peer_calls(64, 64, 1, "machete[zp]", tmp_path)
