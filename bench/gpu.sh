#!/usr/bin/env bash
# The GPU acceptance run: every GPU cell of docs/hardware.md that torch and JAX can run, one real command line
# each, the most important first, each under its own `timeout`, within 9 minutes on an H100 or H200.
#
#   bash bench/gpu.sh OUTDIR            # on a machine with one NVIDIA GPU
#   DRY=1 bash bench/gpu.sh OUTDIR      # the same steps on this machine's CPU, tiny (the test suite runs this)
#
# Needs raylab's Python packages importable (ray, mlflow, torch, jax) and Fashion-MNIST on the data path
# ($RAYLAB_DATA_DIR); on a GPU host that cannot install packages, ../shared/gpu-kit's run.sh sets both. Each step
# logs to OUTDIR/STEP.log and writes OUTDIR/STEP.json (the invocation's --json summary); a step that fails or runs
# out of time is logged and the next still runs; OUTDIR/steps.tsv has one line per step (name, exit, seconds).
# STEPS="mlp cnn" runs some of them. TensorFlow and torch_xla are not run: neither can be carried to the GPU
# hosts lent here (docs/hardware.md says why).
set -u
out=${1:?usage: [DRY=1] bash bench/gpu.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$out" || exit 2  # each invocation's chart lands beside its log
export MLFLOW_TRACKING_URI="sqlite:///$out/mlflow.db" PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
all="facts mlp axis mlp_bf16 mlp_fp16 cnn cnn_bf16 cnn_fp16 compile best profile stream restart batch_max"
steps=${STEPS:-$all}

if [ -n "${DRY:-}" ]; then  # the CPU rehearsal: the same command lines, a few small steps of each
  dev=cpu; modes=default; tiny=(--quick --steps-per-epoch 3); cnn_epochs=(--quick --steps-per-epoch 2 --batch 64)
  # --compile best races inductor's first compile (20-60 s a model and precision here) in every step: on the CPU
  # only the steps about compiling compile; on a GPU each step runs the default, measured before its trials
  as_is=(--compile off)
  # --batch max's edge under a cap on the process's data segment (RLIMIT_DATA: a torch worker maps about 2.5 GB
  # before its first batch); on a GPU the edge is device memory
  cap=(--memory-cap-mb 3500)
  scale=4; restart_steps=2000
  devices=cpu  # the hardware axis needs a GPU: the rehearsal runs its CPU half
else
  dev=gpu; modes=default,reduce-overhead; tiny=(); cnn_epochs=(--epochs 1 --steps-per-epoch 0); as_is=(); cap=()
  scale=1; restart_steps=3000
  devices=cpu,gpu
fi

step() {  # step NAME SECONDS COMMAND...: run under timeout, log to OUTDIR/NAME.log, report the exit status
  local name=$1 limit=$2; shift 2
  echo "=== $name: $* ($(date -u +%H:%M:%S))"
  local t0=$SECONDS
  timeout --kill-after=15 "$((limit * scale))" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 15 "$out/$name.log"
  echo "=== $name: exit $rc after $((SECONDS - t0)) s"
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >>"$out/steps.tsv"
}

recipe() {  # recipe NAME SECONDS RECIPE ARGS...: one invocation on $dev, its summary in OUTDIR/NAME.json
  local name=$1 limit=$2 file=$3; shift 3
  step "$name" "$limit" "$py" "$root/recipes/$file" --device "$dev" --experiment "gpu-$name" --json "$out/$name.json" "$@"
}

for s in $steps; do
  case $s in
    facts)  # what the machine is: GPU, driver, CPU, the packages raylab runs with
      step facts 60 bash -c "(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || echo no GPU);
        nproc; $py -c 'import sys, torch, jax, ray, mlflow; print(sys.version.split()[0], \"torch\", torch.__version__,
        \"cuda\", torch.version.cuda, \"jax\", jax.__version__, jax.devices(), \"ray\", ray.__version__,
        \"mlflow\", mlflow.__version__)'; git -C $root rev-parse HEAD 2>/dev/null || echo \"commit: \$RAYLAB_GIT_COMMIT\"" ;;
    mlp)  # the fashion MLP, torch and JAX, twice each: the second repeat runs warm in its group's processes
      recipe mlp 150 fashion.py --trials torch:none,jax:none --repeats 2 --epochs 3 "${tiny[@]}" "${as_is[@]}" ;;
    axis)  # the hardware axis: each device's peak measured, then both devices in one invocation (utilization of each)
      step axis_peak 120 "$py" -m raylab peak --frameworks torch,jax --precision fp32 --seconds 2 --device cpu
      [ "$dev" = gpu ] && step axis_peak_gpu 120 "$py" -m raylab peak --frameworks torch,jax --precision fp32,bf16 \
        --seconds 2 --device gpu
      recipe axis 150 fashion.py --trials torch:none,jax:none --device "$devices" --epochs 2 "${tiny[@]}" \
        "${as_is[@]}" ;;
    mlp_bf16)
      recipe mlp_bf16 90 fashion.py --trials torch:none,jax:none --precision bf16 --epochs 2 "${tiny[@]}" "${as_is[@]}" ;;
    mlp_fp16)  # torch only: optax applies no loss scaling (jax's trials refuse fp16 at the door)
      recipe mlp_fp16 60 fashion.py --trials torch:none --precision fp16 --epochs 2 "${tiny[@]}" "${as_is[@]}" ;;
    cnn)  # the fashion CNN, one pass: jax's first epoch (it finished none in 100 s on an H200 on 2026-11-26)
      recipe cnn 180 fashion_cnn.py --trials torch:none,jax:none "${cnn_epochs[@]}" "${as_is[@]}" ;;
    cnn_bf16)
      recipe cnn_bf16 120 fashion_cnn.py --trials torch:none,jax:none --precision bf16 "${cnn_epochs[@]}" "${as_is[@]}" ;;
    cnn_fp16)
      recipe cnn_fp16 60 fashion_cnn.py --trials torch:none --precision fp16 "${cnn_epochs[@]}" "${as_is[@]}" ;;
    compile)  # --compile on in each mode the device has (reduce-overhead's CUDA graphs on a GPU only)
      recipe compile 150 fashion_cnn.py --trials torch:none,jax:none --compile on --compile-mode "$modes" \
        "${cnn_epochs[@]}" ;;
    best)  # --compile best measured on this device, not taken from a kept answer
      recipe best 120 fashion_cnn.py --trials torch:none --compile best --race-again "${cnn_epochs[@]}" ;;
    profile)  # one steady window profiled: CUDA activity in the summary on a GPU
      recipe profile 90 fashion.py --trials torch:none,jax:none --profile --epochs 1 "${tiny[@]}" "${as_is[@]}" ;;
    stream)  # Fashion-MNIST exported to Parquet, then streamed through Ray Data
      step stream_export 60 "$py" -m raylab data export "$root/recipes/fashion.py" "$out/fashion-parquet"
      recipe stream 120 fashion.py --trials torch:none,jax:none --data "$out/fashion-parquet" --epochs 1 \
        "${tiny[@]}" "${as_is[@]}" ;;
    restart)  # a worker SIGKILLed mid-trial, the group restarted from its checkpoint (restarts = 1)
      step restart 150 "$py" "$root/bench/restart.py" --trial torch:ddp --workers 1 --rounds 1 --epochs 3 \
        --steps "$restart_steps" --device "$dev" ;;
    batch_max)  # the largest batch that fits: on a GPU its edge is device memory, named as such
      recipe batch_max 150 fashion_cnn.py --trials torch:none --batch max --epochs 1 --steps-per-epoch 2 \
        "${as_is[@]}" "${cap[@]}" ;;
    *) echo "unknown step $s; known: $all" >&2; exit 2 ;;
  esac
done
