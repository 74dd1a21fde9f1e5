#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='agg.ddp readiness when the bucket count changes: DDP'"'"'s first iteration has one bucket, then it rebuilds them; buckets in a different order on every rank, and real DistributedDataParallel, give exact means on every rank'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/torch.sh"

test_have_prereq TORCH || skip_all "$PY cannot import torch and numpy (apt-get install python3-torch)"
test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"
test -e "$AGG_LIB" || skip_all "no $AGG_LIB (make)"
unset AGG_RUN TORCHELASTIC_RESTART_COUNT AGG_TIMEOUT AGG_STREAMS

cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w1  10.90.0.1   bw=10
w2  10.90.0.2   bw=10
w3  10.90.0.3   bw=10
EOF_HOSTS
W="w1 w2 w3"
N=16384

# order.py RUN: the hook with readiness fed buckets as a DDP that rebuilds
# them would (1 bucket, then 3; later 2 and 3 again), in a different order
# on every rank.  Every bucket has 1000 values, so an allreduce paired with
# another rank's other bucket would succeed with a wrong sum; bucket i of
# rank r holds (r + 1) * (i + 1) * (it + 1), so every mean is exact.  A
# future not done within 30 s is reported (the hook's readiness then
# stalls), not waited for.
cat >order.py <<'EOF_PY'
import os, sys, time
import torch
import agg, agg.ddp

a = agg.Agg(run=int(sys.argv[1]), timeout=5)
W, R = a.world_size, a.rank


class Bucket:
    def __init__(self, i, n, t):
        self.i, self.n, self.t = i, n, t

    def index(self):
        return self.i

    def is_last(self):		# torch's: the bucket of the highest index
        return self.i == self.n - 1

    def buffer(self):
        return self.t


st = agg.ddp.AggState(a, readiness=True)
for it, n in enumerate((1, 3, 3, 3, 2, 3)):
    order = [(k + R + it) % n for k in range(n)]
    ts = {i: torch.full((1000,), float((R + 1) * (i + 1) * (it + 1))) for i in range(n)}
    try:
        futs = {i: agg.ddp.allreduce_hook(st, Bucket(i, n, ts[i])) for i in order}
        for _ in range(3000):
            if all(f.done() for f in futs.values()):
                break
            time.sleep(0.01)
        else:
            print("iteration %d order %s: buckets %s never done"
                  % (it, order, sorted(i for i, f in futs.items() if not f.done())), flush=True)
            os._exit(1)
        bad = []
        for i in range(n):
            res = futs[i].wait()
            mean = sum((r + 1) * (i + 1) * (it + 1) for r in range(W)) / W
            if not bool((res == mean).all()):
                bad.append((i, res[0].item(), mean))
    except Exception as e:
        print("iteration %d order %s: %s: %s" % (it, order, type(e).__name__,
                                                 str(e).splitlines()[0]), flush=True)
        os._exit(1)
    print("iteration %d buckets %d order %s %s" % (it, n, order, "BAD %s" % bad if bad else "ok"),
          flush=True)
st.close()
EOF_PY

# ddp.py RUN: real DistributedDataParallel (Gloo sets it up; MASTER_ADDR
# and the rest from the test), the agg hook with readiness.  Five
# parameters and a first bucket of the bucket cap: DDP's first iteration
# has one bucket, then it rebuilds them in the order the gradients came.
# The loss is sum_k (p_k * x_k).sum(), so p_k's gradient is x_k: small
# integers from (rank, step) which agg sums exactly; SGD at lr 0.5 over 3
# ranks.  Every rank computes the reference from every rank's inputs
# (float32, as DDP and SGD do) and compares bit for bit.
cat >ddp.py <<'EOF_PY'
import datetime, hashlib, os, sys
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
import agg, agg.ddp

SIZES = (3000, 1000, 4000, 2000, 5000)
STEPS = 6
LR = 0.5
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
R, W = dist.get_rank(), dist.get_world_size()


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.p = torch.nn.ParameterList(
            torch.nn.Parameter(torch.randint(-64, 64, (n,), generator=g).float()) for n in SIZES)

    def forward(self, xs):
        return sum((p * x).sum() for p, x in zip(self.p, xs))


def inputs(r, step):
    g = torch.Generator().manual_seed(1000 * step + r)
    return [torch.randint(-8, 9, (n,), generator=g).float() for n in SIZES]


cap = 5000 * 4			# bytes: the bucket cap, and the first bucket
dist._DEFAULT_FIRST_BUCKET_BYTES = cap
model = M()
ref = [p.detach().clone() for p in model.p]
ddp = DDP(model, bucket_cap_mb=cap / (1024 * 1024))
st = agg.ddp.AggState(agg.Agg(run=int(sys.argv[1]), timeout=10), readiness=True)
seen = []


def hook(state, bucket):
    seen.append((bucket.index(), bucket.is_last()))
    return agg.ddp.allreduce_hook(state, bucket)


ddp.register_comm_hook(st, hook)
opt = torch.optim.SGD(ddp.parameters(), lr=LR)
for step in range(STEPS):
    seen.clear()
    opt.zero_grad()
    ddp(inputs(R, step)).backward()
    opt.step()
    print("step %d buckets %d" % (step, len(seen)), flush=True)
    for k in range(len(SIZES)):
        # the hook's mean (an exact sum, one rounding in the division)
        # and SGD's step, in float32 as they are
        ref[k] -= LR * (sum(inputs(r, step)[k] for r in range(W)) / W)
bad = sum(int(not torch.equal(p.detach(), q)) for p, q in zip(model.p, ref))
print("reference %s" % ("ok" if bad == 0 else "BAD(%d)" % bad), flush=True)
print("digest %s" % hashlib.sha256(b"".join(p.detach().numpy().tobytes()
                                            for p in model.p)).hexdigest(), flush=True)
st.close()
dist.destroy_process_group()
EOF_PY

test_expect_success 'setup: 3 workers under ps0, a plan of 16384 values (the model as one bucket)' '
	agg-plan -s ps --size $((4 * N)) hosts.txt >plan.txt &&
	dp_setup hosts.txt plan.txt
'

test_expect_success 'readiness, 1 bucket then 3, 2 and 3 again, in a different order on every rank: every iteration ends, every mean exact' '
	py_all order $W -- order.py 30 &&
	for w in $W; do
		cat order.$w err.order.$w &&
		test "$(grep -c "^iteration [0-5] buckets [123] order .* ok\$" order.$w)" = 6 || return 1
	done &&
	test "$(py_rcs order $W)" = "0 0 0 " &&
	grep -x "iteration 1 buckets 3 order \[2, 0, 1\] ok" order.w2
'

ddp_all() {	# ddp_all OUT RUN: ddp.py as rank i on w(i+1), each for at most 120 s
	d_pids= && d_r=0 &&
	for d_w in $W; do
		{ vcluster_run $d_w timeout -k 10 120 env RANK=$d_r WORLD_SIZE=3 \
			MASTER_ADDR=10.90.0.1 MASTER_PORT=29612 GLOO_SOCKET_IFNAME=eth0 \
			"$PY" ddp.py $2 >$1.$d_w 2>err.$1.$d_w
		  echo $? >rc.$1.$d_w; } &
		d_pids="$d_pids $!" && d_r=$((d_r + 1))
	done &&
	for d_p in $d_pids; do wait $d_p; done
}

test_expect_success 'DistributedDataParallel rebuilds its buckets (1, then several), readiness on: the weights of the reference, bit for bit, the same on every rank' '
	ddp_all ddp 31 &&
	for w in $W; do
		cat ddp.$w err.ddp.$w &&
		grep -x "step 0 buckets 1" ddp.$w &&
		test "$(grep -c "^step [1-5] buckets [3-5]\$" ddp.$w)" = 5 &&
		grep -x "reference ok" ddp.$w || return 1
	done &&
	test "$(py_rcs ddp $W)" = "0 0 0 " &&
	for w in $W; do sed -n "s/^digest //p" ddp.$w; done | sort -u >digests &&
	test "$(wc -l <digests)" = 1
'

test_done
