package kubetorch

// trainScript runs the user's command on every GPU worker under Ray
// Train's torch backend (which sets MASTER_ADDR, MASTER_PORT, RANK,
// WORLD_SIZE and LOCAL_RANK, as torchrun does): one Ray Train worker per
// GPU, nodes x GPUs per node of them.
//
// Two things make a user's own torch.distributed.init_process_group work
// inside it. Ray Train's process group already holds MASTER_PORT on rank
// 0 (its TCPStore listens there), so rank 0 picks a free port and sends
// it to the others over that group, and the command's ranks meet there.
// And Ray Train's backend for GPU workers is NCCL, which needs CUDA:
// where the GPUs Ray was told about have no CUDA (a node that declares
// GPUs it cannot drive), the backend is gloo, so training runs instead of
// failing in NCCL's setup. The command runs in the bundle's directory:
// Ray Train would otherwise move each worker into its run's storage
// directory first (RAY_CHDIR_TO_TRIAL_DIR=0 keeps the working_dir).
const trainScript = `import os, socket, subprocess, sys
import ray
from ray.train import ScalingConfig
from ray.train.torch import TorchConfig, TorchTrainer
nodes, per_node, command = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
os.environ.setdefault("RAY_CHDIR_TO_TRIAL_DIR", "0")
@ray.remote(num_gpus=1)
def cuda_available():
    import torch
    return torch.cuda.is_available()
backend = "nccl" if ray.get(cuda_available.remote()) else "gloo"
print(f"kubetorch: {nodes * per_node} workers, torch.distributed backend {backend}", flush=True)
def run(_):
    import ray.train, torch.distributed as dist
    ctx = ray.train.get_context()
    port = [0]
    if ctx.get_world_rank() == 0:
        with socket.socket() as s:
            s.bind(("", 0))
            port[0] = s.getsockname()[1]
    dist.broadcast_object_list(port, src=0)
    env = dict(os.environ, MASTER_PORT=str(port[0]), RANK=str(ctx.get_world_rank()), WORLD_SIZE=str(ctx.get_world_size()), LOCAL_RANK=str(ctx.get_local_rank()), LOCAL_WORLD_SIZE=str(ctx.get_local_world_size()), NODE_RANK=str(ctx.get_node_rank()))
    subprocess.run(command, shell=True, check=True, env=env)
TorchTrainer(run, torch_config=TorchConfig(backend=backend), scaling_config=ScalingConfig(num_workers=nodes * per_node, use_gpu=True, resources_per_worker={"GPU": 1})).fit()
`
