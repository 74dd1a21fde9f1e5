# SPDX-License-Identifier: GPL-2.0-only
# The allreduce baseline: Gloo's ring allreduce (torch.distributed, the
# gloo backend) of SIZE bytes of float32 among WORLD ranks, one per
# namespace.  Rank 0 prints one line per timed iteration: seconds, and
# the CPU seconds the whole machine was busy meanwhile (/proc/stat is
# shared by the namespaces, so that counts every rank).
#   python3 gloo.py RANK WORLD MASTER_ADDR SIZE ITERS
import os
import sys
import time

import torch
import torch.distributed as dist

rank, world, master, size, iters = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                                    int(sys.argv[4]), int(sys.argv[5]))
os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="tcp://%s:29511" % master,
                        rank=rank, world_size=world)
x = torch.rand(size // 4)
dist.all_reduce(x)  # warm-up: connections
hz = os.sysconf("SC_CLK_TCK")


def busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / hz


for _ in range(iters):
    dist.barrier()
    c0, t0 = busy(), time.perf_counter()
    dist.all_reduce(x)
    t1, c1 = time.perf_counter(), busy()
    if rank == 0:
        print("%.6f %.3f" % (t1 - t0, c1 - c0), flush=True)
dist.destroy_process_group()
