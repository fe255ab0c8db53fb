#!/usr/bin/env bash
# Wheels the GPU machine lacks, downloaded here (where PyPI is reachable) into an ignored folder of the checkout, to
# be carried there: the GPU machine has no network, Python 3.12 and its own torch, and no speechbrain.
# benchmarks/gpu_check.py installs from this folder, offline and without dependencies, only the distributions that
# are missing there (never torch, never a newer copy of something the machine has).
#
#   bash benchmarks/gpu_wheels.sh                      # -> gpu_wheels/ for CPython 3.12, manylinux x86_64
#   PYVER=3.11 DEST=/tmp/w bash benchmarks/gpu_wheels.sh   # another interpreter (how it is tested here)
#
# What the GPU machine's image lacks (its package list as read on 2026-11-17: it has torch 2.11, torchaudio 2.11,
# numpy, scipy, matplotlib, numba with numba-cuda, pytest, pyyaml, tabulate, psutil, nvidia-ml-py... and Python
# 3.12.3): speechbrain and what it needs beyond that image. Then small wheels of what sbprof and the check
# need, installed only if a machine lacks them. Versions: the known-good ones of constraints.txt and this project's
# environment. pip matches a manylinux_2_N tag exactly: several N are listed. Left
# out on purpose: numpy, scipy, torchaudio, matplotlib (50 MB and more, and in the image; the check names any that
# is missing), k2 and the source-built transducer backends.
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER="${PYVER:-3.12}"
DEST="${DEST:-gpu_wheels}"
ABI="cp${PYVER/./}"
mkdir -p "$DEST"

WHEELS=(
    # missing on the image
    speechbrain==1.1.2 HyperPyYAML==1.2.3 ruamel.yaml==0.18.17 ruamel.yaml.clib==0.2.15
    soundfile==0.14.0 cffi==2.1.1 pycparser==3.12
    warprnnt-numba==0.4.1   # a transducer backend on CUDA through the image's numba
    # in the image today; small, installed only where missing
    tabulate==0.10.0 psutil==7.2.2 nvidia-ml-py==13.615.71 PyYAML==6.0.4 tqdm==4.70.1 joblib==1.6.0
    sentencepiece==0.2.3 packaging==26.4 pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1
)

python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$DEST" \
    --python-version "$PYVER" --implementation cp --abi "$ABI" --abi abi3 --abi none \
    $(for n in 5 12 17 24 27 28 31 34 35; do echo --platform "manylinux_2_${n}_x86_64"; done) \
    --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64 \
    --platform any "${WHEELS[@]}"

du -ch "$DEST"/*.whl | tail -1
ls "$DEST" | wc -l
