#!/usr/bin/env bash
# The GPU paths, one after another, on a machine with one NVIDIA GPU: every figure in
# bench/results.md's "GPU" section comes from this script.
#
#   bash bench/gpu.sh OUTDIR        # logs, JSON summaries, charts and the MLflow store land in OUTDIR
#
# Needs raylab's Python packages importable (ray, mlflow, torch with CUDA) and the Fashion-MNIST
# files on the data path ($RAYLAB_DATA_DIR). Each step is a recipe's real command line; one that
# fails is logged and the next still runs. Set STEPS to run some of them, e.g. STEPS="fashion conv".
set -u
out=${1:?usage: bash bench/gpu.sh OUTDIR}
mkdir -p "$out"
export MLFLOW_TRACKING_URI="sqlite:///$(cd "$out" && pwd)/mlflow.db" PYTHONUNBUFFERED=1
steps=${STEPS:-"facts fashion fashion_cpu cnn conv resunet bench_cpu"}

step() {  # step NAME COMMAND...: run, log to OUTDIR/NAME.log, report the exit status
    local name=$1; shift
    echo "=== $name: $* ($(date -u +%H:%M:%S))"
    local t0=$SECONDS
    "$@" >"$out/$name.log" 2>&1
    local rc=$?
    tail -n 25 "$out/$name.log"
    echo "=== $name: exit $rc after $((SECONDS - t0)) s"
}

for s in $steps; do
  case $s in
    facts)  # what the machine is: GPU, driver, CPU, Python packages
      step facts bash -c 'nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc;
        python -c "import torch, ray, mlflow; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda,
        torch.cuda.get_device_name(0)); print(\"ray\", ray.__version__, \"mlflow\", mlflow.__version__)";
        python -c "import torch_xla" 2>&1 | tail -n 1; python -c "import tensorflow" 2>&1 | tail -n 1' ;;
    fashion)  # the MLP, 10 epochs: torch without and with DDP (nccl, one rank: the GPU count bounds the world)
      step fashion python recipes/fashion.py --trials torch:none,torch:ddp --workers 1 --device gpu \
        --experiment gpu-fashion --json "$out/fashion.json" ;;
    fashion_cpu)  # the same trials on this machine's CPUs, 3 epochs, for the cross-hardware comparison
      step fashion_cpu python recipes/fashion.py --trials torch:none,torch:ddp --workers 1,2 --device cpu \
        --epochs 3 --threads 1 --experiment gpu-fashion-cpu --json "$out/fashion_cpu.json" ;;
    cnn)  # the 5-layer CNN: one pass (the issue's 0.88 target), then the seed's 5 x 100 schedule
      step cnn_pass python recipes/fashion_cnn.py --trials torch:none --device gpu --epochs 1 --steps-per-epoch 0 \
        --experiment gpu-cnn-pass --json "$out/cnn_pass.json"
      step cnn python recipes/fashion_cnn.py --trials torch:none --device gpu --experiment gpu-cnn \
        --json "$out/cnn.json" ;;
    conv)  # the convolution micro-benchmark at batch 128
      step conv python recipes/conv_bench.py --trials torch:none --device gpu --repeats 3 --iterations 50 \
        --experiment gpu-conv --json "$out/conv.json" ;;
    resunet)  # the ResNet-UNet training step, fp32 then bf16 autocast
      step resunet python recipes/resunet.py --trials torch:none --device gpu --repeats 3 --iterations 50 \
        --experiment gpu-resunet --json "$out/resunet.json"
      step resunet_bf16 python recipes/resunet.py --trials torch:none --device gpu --repeats 3 --iterations 50 \
        --precision bf16 --experiment gpu-resunet-bf16 --json "$out/resunet_bf16.json" ;;
    bench_cpu)  # both step benchmarks on this machine's CPUs (8 threads), for the GPU/CPU ratios
      step conv_cpu python recipes/conv_bench.py --trials torch:none --device cpu --threads 8 --repeats 3 \
        --iterations 5 --experiment cpu-conv --json "$out/conv_cpu.json"
      step resunet_cpu python recipes/resunet.py --trials torch:none --device cpu --threads 8 --repeats 3 \
        --iterations 10 --experiment cpu-resunet --json "$out/resunet_cpu.json" ;;
    *) echo "unknown step $s; known: facts fashion fashion_cpu cnn conv resunet bench_cpu" >&2; exit 2 ;;
  esac
done
