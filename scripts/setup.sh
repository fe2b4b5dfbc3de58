#!/usr/bin/env bash
# One set-up step for a fresh machine (Debian, Python 3.11): the virtual environment in
# .venv with every pinned package, and the Fashion-MNIST data. Safe to run again: it only
# reinstalls when pyproject.toml or constraints.txt changed.
#
#   scripts/setup.sh          # then: .venv/bin/python recipes/fashion.py
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3.11}
stamp=.venv/.raylab-setup
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)

if [ ! -x .venv/bin/python ]; then
    # Measured: a fresh install peaks at 10.4 GB on disk and leaves 10 GB in .venv (no pip cache kept).
    need_gb=11
    free_gb=$(df -Pk . | awk 'NR == 2 {print int($4 / 1048576)}')
    if [ "$free_gb" -lt "$need_gb" ]; then
        echo "setup: the install needs about $need_gb GB free, but $(df -P . | awk 'NR == 2 {print $6}') has $free_gb GB; free some space and run scripts/setup.sh again" >&2
        exit 1
    fi
    echo "setup: creating .venv with $python"
    "$python" -m venv .venv
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: installing raylab and its pinned dependencies (10 GB, several minutes the first time)"
    .venv/bin/python -m pip install --quiet --no-cache-dir --upgrade pip
    # The PyPI torch 2.9.0 wheel for x86_64 is the CUDA build; torch-xla 2.9.0 needs exactly it.
    # In three steps: pip holds every downloaded wheel until its command ends, so one command
    # would need the 4 GB of wheels and the 11 GB they unpack to on disk at the same time.
    pip_install=(.venv/bin/python -m pip install --quiet --no-cache-dir -c constraints.txt)
    "${pip_install[@]}" torch
    "${pip_install[@]}" tensorflow
    "${pip_install[@]}" -e ".[test]"
    .venv/bin/python -m pip check
    echo "$want" > "$stamp"
fi

have_data() {
    .venv/bin/python -c "from raylab.data import find_idx_files, FASHION_FILES; find_idx_files('fashion-mnist', FASHION_FILES)" 2>/dev/null
}
if ! have_data; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        echo "setup: installing Debian's dataset-fashion-mnist"
        apt-get install -y -q dataset-fashion-mnist >/dev/null 2>&1 \
            || { apt-get update -q >/dev/null && apt-get install -y -q dataset-fashion-mnist >/dev/null; }
    fi
    if ! have_data; then
        cat >&2 <<'TEXT'
setup: Fashion-MNIST not found and apt-get is not available (or not root).
Put these four files (from https://github.com/zalandoresearch/fashion-mnist, gzipped or plain)
  train-images-idx3-ubyte.gz  train-labels-idx1-ubyte.gz
  t10k-images-idx3-ubyte.gz   t10k-labels-idx1-ubyte.gz
in $RAYLAB_DATA_DIR/fashion-mnist, ~/.keras/datasets/fashion-mnist or /usr/share/datasets/fashion-mnist,
or run as root on Debian: apt-get install dataset-fashion-mnist
TEXT
        exit 1
    fi
fi
echo "setup: ready (.venv, Fashion-MNIST)"
