#!/usr/bin/env bash
# One set-up step for a fresh machine (Debian, Python 3.11): the virtual environment in .venv with
# raylab, the frameworks you choose (pyproject.toml's extras) and every pinned package, and the
# Fashion-MNIST data: what a user runs. The test tools and headless Chromium come with the test
# command, scripts/test.sh, which runs this first. Safe to run again: it only reinstalls when
# pyproject.toml, constraints.txt or the choice changed.
#
#   scripts/setup.sh [tf|torch|xla|jax|all|tpu ...]    # then: .venv/bin/python recipes/fashion.py
#
#   scripts/setup.sh             # all (the default): tf:*, torch:*, xla:* and jax:* trials, as CI runs them
#   scripts/setup.sh torch       # torch:* trials only (no TensorFlow, no torch-xla)
#   scripts/setup.sh tf          # tf:* trials only (TensorFlow and tf-keras, no torch)
#   scripts/setup.sh jax         # jax:* trials only (jax, jaxlib for CPU, flax, optax: 0.5 GB)
#   scripts/setup.sh tf torch    # several at once; xla is torch + torch-xla (xla:* trials)
#   scripts/setup.sh tpu         # on a TPU VM: tensorflow-tpu 2.20 + torch-xla[tpu], in place of tf/xla/all
#
# A choice only adds to .venv: going from all to torch keeps TensorFlow; rm -r .venv first for a
# smaller one.
set -euo pipefail
cd "$(dirname "$0")/.."

valid="tf, torch, xla, jax, all, tpu"
declare -A chosen=()
for choice in "${@:-all}"; do
    case "$choice" in
        tf | torch | xla | jax | all | tpu) chosen[$choice]=1 ;;
        *) echo "setup: unknown choice '$choice'; choose from $valid (default: all)" >&2; exit 2 ;;
    esac
done
if [ -n "${chosen[tpu]:-}" ] && [ -n "${chosen[tf]:-}${chosen[all]:-}" ]; then
    echo "setup: tpu replaces tensorflow with tensorflow-tpu, so it can't go with tf or all; choose from $valid" >&2
    exit 2
fi
# In a fixed order, so `torch tf` and `tf torch` are the same choice (and the same stamp).
extras=$(for e in tf torch xla jax all tpu; do [ -z "${chosen[$e]:-}" ] || echo "$e"; done | paste -sd, -)
has() { # has EXTRA...: does the choice install any of these?
    for e in "$@"; do [ -z "${chosen[$e]:-}" ] || return 0; done
    return 1
}

python=${PYTHON:-python3.11}
stamp=.venv/.raylab-setup
want="$extras $(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)"

missing() { # missing DIST: not yet in .venv
    ! compgen -G ".venv/lib/python3*/site-packages/$1-*.dist-info" >/dev/null
}
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    # Free space the install needs, measured from a fresh .venv (no pip cache kept): torch's step
    # peaks at 10.4 GB (4 GB of CUDA wheels held while they unpack to 6.7 GB), whatever is already
    # there; torch alone leaves 7.8 GB in .venv, all 10 GB. TensorFlow's step peaks at 2.6 GB; tf
    # alone leaves 3.2 GB. The rest (raylab, ray, mlflow, torch-xla) about 1.5 GB.
    need_gb=2
    if { has tf all && missing tensorflow; } || { has tpu && missing tensorflow_tpu; }; then need_gb=4; fi
    if has torch xla all tpu && missing torch; then need_gb=11; fi
    free_gb=$(df -Pk . | awk 'NR == 2 {print int($4 / 1048576)}')
    if [ "$free_gb" -lt "$need_gb" ]; then
        echo "setup: installing raylab[$extras] needs about $need_gb GB free, but $(df -P . | awk 'NR == 2 {print $6}') has $free_gb GB; free some space and run scripts/setup.sh again" >&2
        exit 1
    fi
fi
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $python"
    "$python" -m venv .venv
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: installing raylab[$extras] and its pinned dependencies (several minutes the first time)"
    .venv/bin/python -m pip install --quiet --no-cache-dir --upgrade pip
    # The PyPI torch 2.9.0 wheel for x86_64 is the CUDA build; torch-xla 2.9.0 needs exactly it.
    # The big wheels one command each: pip holds every downloaded wheel until its command ends, so
    # one command would need all of them and what they unpack to on disk at the same time.
    pip_install=(.venv/bin/python -m pip install --quiet --no-cache-dir -c constraints.txt)
    if has torch xla all tpu; then "${pip_install[@]}" torch; fi
    if has tf all; then "${pip_install[@]}" tensorflow; fi
    if has tpu; then "${pip_install[@]}" tensorflow-tpu; fi
    "${pip_install[@]}" -e ".[$extras]"
    .venv/bin/python -m pip check
    echo "$want" > "$stamp"
fi

if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt_cache_before=$(ls /var/cache/apt/archives/ 2>/dev/null | grep '\.deb$' | sort || true)
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
# apt keeps the packages it downloaded; the suite needs the disk more.
# Only the ones this script's installs brought are removed; what was in apt's cache before stays.
if [ -n "${apt_cache_before+set}" ]; then
    comm -13 <(echo "$apt_cache_before") <(ls /var/cache/apt/archives/ 2>/dev/null | grep '\.deb$' | sort) \
        | sed 's|^|/var/cache/apt/archives/|' | xargs -r rm -f
fi
echo "setup: ready (.venv with raylab[$extras], Fashion-MNIST)"
