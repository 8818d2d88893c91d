#!/usr/bin/env bash
# Installs NVIDIA's CUDA 13.0 compiler wheels into a virtual environment and prints the exports that make
# CMake find them. Used by .ci/run only where the machine has no CUDA toolkit of its own.
# Usage: source <(bash tools/install_nvcc_wheels.sh VENV)   (or bash it, then export what it prints)
set -euo pipefail
venv=${1:?usage: install_nvcc_wheels.sh VENV}
"$venv/bin/python" -m pip install -q --no-deps \
  nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 \
  nvidia-cuda-cccl==13.0.85 nvidia-cuda-runtime==13.0.96 >&2
root=$("$venv/bin/python" -c "import pathlib, nvidia; print(pathlib.Path(list(nvidia.__path__)[0]) / 'cu13')")
# The wheels put libraries in lib/; CMake's CUDA toolkit search also expects lib64/.
[ -e "$root/lib64" ] || ln -s lib "$root/lib64"
echo "export PATH=\"$root/bin:\$PATH\" CUDACXX=\"$root/bin/nvcc\" CUDAToolkit_ROOT=\"$root\""
