#!/usr/bin/env bash
# Build the gpumagic image and start JupyterLab in it, with the current directory mounted as /workspace.
#   bash docker/run.sh            (from the repository root; open the printed http://127.0.0.1:8888/lab?token=... URL)
set -euo pipefail

image=${GPUMAGIC_IMAGE:-gpumagic:latest}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

docker build -t "$image" -f "$root/docker/Dockerfile" "$root"

# --gpus all                    every GPU of the host, through the NVIDIA container toolkit
# --ipc=host                    the host's shared memory: PyTorch DataLoader workers and NCCL need more than 64 MB
# --ulimit memlock=-1           unlimited pinned (page-locked) memory for fast host<->device copies
# --ulimit stack=67108864       a 64 MB stack, as NVIDIA recommends for its PyTorch containers
# -p 8888:8888                  JupyterLab's port
# -v "$PWD":/workspace          your notebooks and data, and gpumagic-profiles/ (nsys reports) written back here
# -w /workspace                 start there
# nsys runs inside this container, next to the CUDA process: a host nsys wrapping `docker run` sees no CUDA data.
exec docker run --rm -it \
  --gpus all \
  --ipc=host \
  --ulimit memlock=-1 \
  --ulimit stack=67108864 \
  -p 8888:8888 \
  -v "$PWD":/workspace \
  -w /workspace \
  "$image" "$@"
