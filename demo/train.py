# SPDX-License-Identifier: GPL-2.0-only
"""Data-parallel training (PyTorch DDP) of an MLP on sklearn's digits, the
gradients summed by agg's XDP data plane (--backend agg: agg.ddp's comm
hook) or by Gloo's ring allreduce (--backend gloo), one rank a host.

    python3 demo/train.py --backend agg|gloo [options]

Ranks come from torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) or --rank, --world-size, --master.  torch.distributed starts
with Gloo for both backends (DDP needs a process group for its setup
broadcasts); with agg the hook replaces the gradient allreduce, and the
agg job must have one worker per rank (agg-plan hosts | agg-load, with a
size of at least --print-size bytes: DDP's first step sends the whole
model as one bucket).  Every rank starts from the same seed and sees the
same data order, so all end with the same weights: the last line's digest
(sha256 of every parameter's bytes) says so.

Every rank prints, one line per epoch, the loss over the whole training
set and the accuracy on the held-out set, then the final accuracy, the
mean wall time of a training step and the digest.

--checkpoint FILE: rank 0 replaces FILE after every epoch; a start that
finds FILE resumes from it.  A restarted agg job needs a newer run
(AGG_RUN, or torchrun's TORCHELASTIC_RESTART_COUNT), not a reload.
--die-at-step N [--die-rank R] [--die-restart K]: rank R (default 0) exits
at once (os._exit(1)) at global step N, in the middle of its step, if
torchrun's restart count (TORCHELASTIC_RESTART_COUNT, else 0) is K (default
0): a crash for tests, once, that torchrun's restart then gets past.
"""
import argparse
import datetime
import hashlib
import os
import sys
import time

T_START = time.perf_counter()

def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=("agg", "gloo"), default="agg")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch", type=int, default=32, help="examples per rank and step (32)")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hidden", default="128,128,64", help="hidden layer widths (128,128,64)")
    p.add_argument("--bucket-cap-mb", type=float, default=0.02,
                   help="DDP's bucket size, first bucket included (0.02: 3 buckets)")
    p.add_argument("--checkpoint", metavar="FILE")
    p.add_argument("--die-at-step", type=int, metavar="N")
    p.add_argument("--die-rank", type=int, default=0, metavar="R")
    p.add_argument("--die-restart", type=int, default=0, metavar="K",
                   help="die only in torchrun's K-th restart (TORCHELASTIC_RESTART_COUNT; 0)")
    p.add_argument("--agg-timeout", type=float, default=None,
                   help="seconds an agg allreduce may make no progress (libagg: 30)")
    p.add_argument("--sync", action="store_true",
                   help="agg: wait for each bucket inside the hook (no overlap)")
    p.add_argument("--rank", type=int, default=int(os.environ.get("RANK", 0)))
    p.add_argument("--world-size", type=int, default=int(os.environ.get("WORLD_SIZE", 1)))
    p.add_argument("--master", default="%s:%s" % (os.environ.get("MASTER_ADDR", "127.0.0.1"),
                                                  os.environ.get("MASTER_PORT", "29512")),
                   help="ADDR:PORT of rank 0's rendezvous (MASTER_ADDR:MASTER_PORT)")
    p.add_argument("--print-size", action="store_true",
                   help="print the bytes of DDP's largest bucket (the agg plan's --size) and exit")
    return p.parse_args()


def build(args, torch):
    torch.manual_seed(args.seed)
    widths = [64] + [int(w) for w in args.hidden.split(",") if w] + [10]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i < len(widths) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def data(args, torch):
    import numpy as np
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    perm = np.random.default_rng(args.seed).permutation(len(y))
    x = torch.from_numpy((x[perm] / 16.0).astype(np.float32))
    y = torch.from_numpy(y[perm].astype(np.int64))
    n_test = len(y) // 6
    return x[n_test:], y[n_test:], x[:n_test], y[:n_test]


def digest(model):
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        h.update(name.encode())
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    args = parse_args()
    import numpy as np
    import torch
    torch.set_num_threads(1)	# one rank a core at most: ranks share the machine
    torch.use_deterministic_algorithms(True)
    model = build(args, torch)
    if args.print_size:
        # DDP's first step has one bucket of every parameter
        print(sum(p.numel() for p in model.parameters()) * 4)
        return 0

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    rank, world = args.rank, args.world_size
    restart_count = int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or 0)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    dist.init_process_group("gloo", init_method="tcp://" + args.master, rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    start, history = 0, []
    if args.checkpoint and os.path.exists(args.checkpoint):
        ck = torch.load(args.checkpoint)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        start, history = ck["epoch"], ck["history"]
        print("resumed from %s at epoch %d" % (args.checkpoint, start), flush=True)

    # DDP's documented knob for its first bucket (1 MiB: the whole model)
    dist._DEFAULT_FIRST_BUCKET_BYTES = int(args.bucket_cap_mb * 1024 * 1024)
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    state = None
    if args.backend == "agg":
        import agg.ddp
        state = agg.ddp.from_env(sync=args.sync,
                                 **({"timeout": args.agg_timeout} if args.agg_timeout else {}))
        ddp.register_comm_hook(state, agg.ddp.allreduce_hook)
        print("agg: node %s rank %d of %d, run %d, max_count %d, libagg %s"
              % (state.agg.node, state.agg.rank, state.agg.world_size, state.agg.run,
                 state.max_count, agg.version()), flush=True)

    xtr, ytr, xte, yte = data(args, torch)
    per_step = args.batch * world
    steps = len(ytr) // per_step
    lossf = torch.nn.CrossEntropyLoss()
    print("train: backend %s rank %d of %d, %d parameters, %d examples, %d steps an epoch"
          % (args.backend, rank, world, sum(p.numel() for p in model.parameters()), len(ytr),
             steps), flush=True)
    for h in history:
        print(h, flush=True)
    step_time, nsteps = 0.0, 0
    t_train = time.perf_counter()
    for epoch in range(start, args.epochs):
        order = torch.from_numpy(np.random.default_rng([args.seed, epoch]).permutation(len(ytr)))
        ddp.train()
        for s in range(steps):
            gstep = epoch * steps + s + 1
            t0 = time.perf_counter()
            idx = order[s * per_step + rank * args.batch:s * per_step + (rank + 1) * args.batch]
            opt.zero_grad(set_to_none=True)
            loss = lossf(ddp(xtr[idx]), ytr[idx])
            if (args.die_at_step == gstep and args.die_rank == rank
                    and args.die_restart == restart_count):
                print("dying at step %d" % gstep, flush=True)
                os._exit(1)
            loss.backward()
            opt.step()
            step_time += time.perf_counter() - t0
            nsteps += 1
        model.eval()
        with torch.no_grad():
            tl = lossf(model(xtr), ytr).item()
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        line = "epoch %d loss %.9f accuracy %.4f" % (epoch + 1, tl, acc)
        history.append(line)
        print(line, flush=True)
        if args.checkpoint and rank == 0:
            tmp = args.checkpoint + ".tmp"
            torch.save({"epoch": epoch + 1, "model": model.state_dict(),
                        "opt": opt.state_dict(), "history": history}, tmp)
            os.replace(tmp, args.checkpoint)
    model.eval()
    with torch.no_grad():
        acc = (model(xte).argmax(1) == yte).float().mean().item()
    print("accuracy %.4f" % acc)
    if nsteps:
        print("step_ms %.3f" % (1000 * step_time / nsteps))
    print("setup_s %.2f train_s %.2f" % (t_train - T_START, time.perf_counter() - t_train))
    if state is not None:
        print("agg: %d buckets in %d allreduces" % (state.buckets, state.chunks))
        state.close()
    print("digest %s" % digest(model), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:	# one line, as the tools do
        msg = (str(e).strip().splitlines() or [""])[0]	# not torch's traceback of the hook
        print("train.py: rank %s: %s: %s" % (os.environ.get("RANK", "?"), type(e).__name__, msg),
              file=sys.stderr, flush=True)
        os._exit(1)
