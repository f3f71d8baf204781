# torch's own DDP + batched_powerSGD_hook or powerSGD_hook on the MLP the
# trainer uses (784-512-256-10, Fashion-MNIST, 2 gloo ranks on the CPU), to
# see whether torch's batched hook with error feedback diverges as ours does
# (docs/powersgd.md). torch 2.15's batched hook hands a 2-D Q to
# _orthogonalize, which asserts; it is taught to take a 2-D matrix (the same
# minimal repair as tests/reference/powersgd_goldens.py).
#   python3 torch_batched_training.py batched|layer RANK ERROR_FEEDBACK STEPS
# LR=0.01 in the environment changes the learning rate (default 0.05).
import gzip, os, sys, numpy as np, torch, torch.distributed as dist
import torch.multiprocessing as mp
import torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook as ps
orig = ps._orthogonalize
def orth2d(m, eps=0):
    if m.dim() == 2: return orig(m.unsqueeze(0), eps)
    return orig(m, eps)
ps._orthogonalize = orth2d
D = "/usr/share/datasets/fashion-mnist"
def idx(name, off): return np.frombuffer(gzip.open(os.path.join(D, name)).read(), np.uint8, offset=off)
def run(rank, hook, rank_r, ef, steps):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29517")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0); torch.set_num_threads(1)
    x = torch.tensor(idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 784), dtype=torch.float32) / 255
    y = torch.tensor(idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64))
    xt = torch.tensor(idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784), dtype=torch.float32) / 255
    yt = torch.tensor(idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64))
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=True)
    st = ps.PowerSGDState(process_group=None, matrix_approximation_rank=rank_r, start_powerSGD_iter=10,
                          use_error_feedback=ef, warm_start=True, random_seed=0)
    inner = ps.batched_powerSGD_hook if hook == "batched" else ps.powerSGD_hook
    norms = {}
    def traced(state, bucket):
        gin = bucket.buffer().norm().item()
        fut = inner(state, bucket)
        def after(f):
            out = f.value()
            if bucket.is_last() and state.error_dict:
                e = sum(v.norm().item() ** 2 for v in state.error_dict.values()) ** 0.5
                norms["err"] = e
            norms["gin"] = gin  # the last bucket: local gradient in, average out
            norms["out"] = out.norm().item()
            return out
        return fut.then(after)
    ddp.register_comm_hook(st, traced)
    opt = torch.optim.SGD(ddp.parameters(), lr=float(os.environ.get('LR', '0.05')), momentum=0.9)
    g = torch.Generator().manual_seed(1)
    perm = torch.randperm(60000, generator=g)
    losses = []
    for s in range(steps):
        i = perm[(s * 128 + rank * 64) % 59904:][:64]
        loss = torch.nn.functional.cross_entropy(ddp(x[i]), y[i])
        opt.zero_grad(); loss.backward(); opt.step(); losses.append(loss.item())
        if rank == 0 and (s + 1) % 50 == 0: print(f"{hook} r{rank_r} ef{int(ef)} step {s+1} loss(mean 50) {np.mean(losses[-50:]):.4f} |grad(last bucket)| {norms.get('gin',0):.3f} |applied| {norms.get('out',0):.3f} |error(all buckets)| {norms.get('err',0):.3f}", flush=True)
    with torch.no_grad(): acc = (model(xt).argmax(1) == yt).float().mean().item()
    if rank == 0: print(f"RESULT {hook} rank={rank_r} ef={int(ef)} steps={steps} test_acc={acc*100:.2f}", flush=True)
    dist.destroy_process_group()
if __name__ == "__main__":
    hook, r, ef, steps = sys.argv[1], int(sys.argv[2]), bool(int(sys.argv[3])), int(sys.argv[4])
    mp.spawn(run, args=(hook, r, ef, steps), nprocs=2)
