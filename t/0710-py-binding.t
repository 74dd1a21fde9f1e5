#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='python agg: tensors, arrays and buffers allreduced through libagg on 3 workers; errors raise AggError with errno'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/torch.sh"

test_have_prereq TORCH || skip_all "$PY cannot import torch and numpy (apt-get install python3-torch)"
test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"
test -e "$AGG_LIB" || skip_all "no $AGG_LIB (make)"
unset AGG_RUN TORCHELASTIC_RESTART_COUNT

cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w1  10.90.0.1   bw=10
w2  10.90.0.2   bw=10
w3  10.90.0.3   bw=10
EOF_HOSTS
W="w1 w2 w3"
N=20000
SEG=256

# Every worker makes the same calls; each builds every worker's input from
# (case, rank), so it checks its result against the float64 sum itself and
# prints a digest of the result bits for the test to compare across workers.
cat >bind.py <<'EOF_PY'
import array, errno, hashlib, sys
import numpy as np
import torch
import agg, agg.ddp

SEG = int(sys.argv[1])
a = agg.Agg(timeout=120)
W, R, N = a.world_size, a.rank, a.max_count
print("open node=%s rank=%d world=%d run=%d max_count=%d" % (a.node, R, W, a.run, N), flush=True)
TOL = {"float32": (0, 0), "float16": (2.0 ** -10, 2.0 ** -24), "bfloat16": (2.0 ** -7, 1e-38)}


def inputs(case, n, dtype):
    """float64 copies of every rank's input, as the dtype holds them"""
    xs = []
    for k in range(W):
        rng = np.random.default_rng([case, k])
        mag = 10.0 ** rng.uniform(-3, 2, -(-n // SEG))
        x = rng.standard_normal(n) * np.repeat(mag, SEG)[:n]
        xs.append(torch.from_numpy(x.astype(np.float32)).to(dtype).to(torch.float64).numpy())
    return xs


def check(name, res, xs, dtype, op="sum"):
    """res against the float64 reduction: within 1e-6 of the segment's
    largest input magnitude (the data plane's bound), plus one unit in
    the last place of dtype for the rounding back to it"""
    ref = {"sum": np.sum, "max": np.max, "min": np.min}[op](xs, axis=0)
    res = np.asarray(res, np.float64)
    n = len(ref)
    if n == 0:
        return 0, 0.0
    seg_big = np.maximum.reduceat(np.max(np.abs(xs), axis=0), np.arange(0, n, SEG))
    big = np.maximum(np.repeat(seg_big, SEG)[:n], 1e-300)
    rel, ab = TOL[str(dtype).replace("torch.", "")]
    err = np.abs(res - ref)
    bad = int(np.sum(~(err <= 1e-6 * big + rel * np.abs(ref) + ab)))
    worst = float(np.max(err / big))
    return bad, worst


def digest(t):
    if isinstance(t, torch.Tensor):
        t = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
        t = t.numpy()
    return hashlib.sha256(memoryview(t).cast("B")).hexdigest()[:16]


def report(name, res, xs, dtype, op="sum", raw=None):
    out = res if raw is None else raw
    if isinstance(res, torch.Tensor):
        res = res.to(torch.float64).numpy()
    bad, worst = check(name, res, xs, dtype, op)
    print("case %s n=%d %s worst=%.3g digest=%s"
          % (name, len(xs[0]), "ok" if bad == 0 else "BAD(%d)" % bad, worst, digest(out)), flush=True)


def tensor(case, n, dtype):
    xs = inputs(case, n, dtype)
    return torch.from_numpy(xs[R]).to(dtype), xs


for case, name, n, dt in ((1, "f32-full", N, torch.float32), (2, "f16-odd", N - 3, torch.float16),
                          (3, "bf16", N // 2 + 1, torch.bfloat16), (4, "f32-one", 1, torch.float32)):
    t, xs = tensor(case, n, dt)
    assert a.allreduce(t) is t
    report(name, t, xs, dt)

xs = inputs(5, 1000, torch.float32)
x = xs[R].astype(np.float32)
a.allreduce(x)
report("np-f32", x, xs, torch.float32)
xs = inputs(6, 777, torch.float16)
x = xs[R].astype(np.float16)
a.allreduce(x)
report("np-f16", x, xs, torch.float16)
xs = inputs(7, 513, torch.float32)
b = bytearray(xs[R].astype(np.float32).tobytes())
a.allreduce(b)
report("bytearray", np.frombuffer(b, np.float32), xs, torch.float32)
xs = inputs(8, 300, torch.float32)
arr = array.array("f", xs[R].astype(np.float32))
a.allreduce(memoryview(arr))
report("array", np.frombuffer(arr, np.float32), xs, torch.float32)
xs = inputs(9, 64, torch.float16)
b = bytearray(xs[R].astype(np.float16).tobytes())
a.allreduce(b, dtype="float16")
report("bytes-f16", np.frombuffer(b, np.float16), xs, torch.float16)

for case, op in ((10, "max"), (11, "min")):
    xs = inputs(case, 3000, torch.float32)
    x = xs[R].astype(np.float32)
    a.allreduce(x, op=op)
    report("np-" + op, x, xs, torch.float32, op)

# three in flight, waited for newest first
ins = [tensor(20, N, torch.float32), tensor(21, N // 3, torch.float16), tensor(22, 77, torch.bfloat16)]
reqs = [a.allreduce_start(t) for t, _ in ins]
for r, (t, xs) in reversed(list(zip(reqs, ins))):
    assert r.wait() is t and r.done()
for (t, xs), name in zip(ins, ("async-f32", "async-f16", "async-bf16")):
    report(name, t, xs, t.dtype)

# count 0: nothing to send, nothing written
z = torch.zeros(0)
a.allreduce(z)
a.allreduce(bytearray())
a.allreduce_start(np.zeros(0, np.float32)).wait()
print("count0 ok", flush=True)

# more than the plan takes: EINVAL from libagg, the buffer untouched
big = torch.full((N + 1,), 7.0)
for start in (False, True):
    try:
        (a.allreduce_start(big).wait() if start else a.allreduce(big))
        print("toobig no error", flush=True)
    except agg.AggError as e:
        print("toobig errno=%s start=%d untouched=%d msg=%s"
              % (errno.errorcode[e.errno], start, bool((big == 7).all()), e.strerror), flush=True)

# buffers the binding refuses, before libagg
for what, bad in (("float64", torch.ones(4, dtype=torch.float64)), ("strided", torch.ones(4, 4).t()),
                  ("bytes", b"\0" * 8), ("int", 3), ("np-f64", np.ones(3)), ("odd-bytes", bytearray(6))):
    try:
        a.allreduce(bad)
        print("refused %s no" % what, flush=True)
    except (TypeError, ValueError) as e:
        print("refused %s %s" % (what, type(e).__name__), flush=True)

# still in step after the refusals: the iterations agree
t, xs = tensor(30, 100, torch.float32)
a.allreduce(t)
report("after", t, xs, torch.float32)


# the DDP hook on a bucket of 2 x max_count + 5 values: 3 chunks, the mean
class Bucket:
    def __init__(self, t):
        self.t = t

    def buffer(self):
        return self.t


for sync in (False, True):
    st = agg.ddp.AggState(a, sync=sync)
    t, xs = tensor(40 + sync, 2 * N + 5, torch.float32)
    fut = agg.ddp.allreduce_hook(st, Bucket(t))
    res = fut.wait()
    assert res is t
    res = (res * W).to(torch.float64).numpy()		# the mean back to the sum
    # each allreduce (chunk) has segments of its own
    bad = sum(check("", res[lo:lo + N], [x[lo:lo + N] for x in xs], torch.float32)[0]
              for lo in range(0, len(res), N))
    print("case hook-%s chunks=%d n=%d %s digest=%s" % ("sync" if sync else "async", st.chunks,
          len(res), "ok" if bad == 0 else "BAD(%d)" % bad, digest(t)), flush=True)
    if not sync:
        st._stop_waiter()		# the waiter: done; the handle stays open
# a bare handle as the hook's state: a bucket within max_count, one allreduce
t, xs = tensor(42, 1000, torch.float32)
res = agg.ddp.allreduce_hook(a, Bucket(t)).wait()
bad, worst = check("", (res * W).to(torch.float64).numpy(), xs, torch.float32)
print("case hook-handle chunks=%d n=1000 %s digest=%s"
      % (a._ddp_state.chunks, "ok" if bad == 0 else "BAD(%d)" % bad, digest(t)), flush=True)
a.close()
print("closed", a, flush=True)
EOF_PY

test_expect_success 'setup: 3 workers under ps0, a plan of 20000 values, segment 256' '
	agg-plan -s ps --size $((4 * N)) --segment $SEG hosts.txt >plan.txt &&
	dp_setup hosts.txt plan.txt
'

test_expect_success 'every worker opens its node: rank, world size, max_count from the plan' '
	py_all bind $W -- bind.py $SEG &&
	for w in $W; do cat err.bind.$w; done &&
	test "$(py_rcs bind $W)" = "0 0 0 " &&
	grep "^open node=w1 rank=0 world=3 run=0 max_count=$N\$" bind.w1 &&
	grep "^open node=w2 rank=1 world=3 run=0 max_count=$N\$" bind.w2 &&
	grep "^open node=w3 rank=2 world=3 run=0 max_count=$N\$" bind.w3
'

test_expect_success 'float32, float16 and bfloat16 tensors, numpy arrays, buffers, max and min: within the bound of the float64 result, bit-identical everywhere' '
	for w in $W; do
		! grep "^case .* BAD" bind.$w || return 1
	done &&
	grep "^case " bind.w1 >cases &&
	test "$(wc -l <cases)" = 18 &&
	for c in f32-full f16-odd bf16 f32-one np-f32 np-f16 bytearray array bytes-f16 np-max np-min after; do
		grep -q "^case $c n=[0-9]* ok " cases || return 1
	done &&
	for w in w2 w3; do
		sed "s/ worst=[^ ]*//" cases >a &&
		grep "^case " bind.$w | sed "s/ worst=[^ ]*//" >b &&
		test_cmp a b || return 1
	done
'

test_expect_success 'started asynchronously, three in flight, waited for in reverse order' '
	for c in async-f32 async-f16 async-bf16; do
		grep "^case $c n=[0-9]* ok " bind.w1 || return 1
	done
'

test_expect_success 'count 0 works; a count above max_count raises AggError EINVAL naming the limit, buffer untouched' '
	for w in $W; do
		grep "^count0 ok\$" bind.$w &&
		test "$(grep -c "^toobig errno=EINVAL start=[01] untouched=1 msg=$((N + 1)) values: the plan of job 1 takes at most $N " bind.$w)" = 2 ||
		return 1
	done
'

test_expect_success 'wrong kinds of buffer raise TypeError or ValueError before libagg; the workers stay in step' '
	grep "^refused float64 TypeError\$" bind.w2 &&
	grep "^refused strided ValueError\$" bind.w2 &&
	grep "^refused bytes ValueError\$" bind.w2 &&
	grep "^refused int TypeError\$" bind.w2 &&
	grep "^refused np-f64 TypeError\$" bind.w2 &&
	grep "^refused odd-bytes ValueError\$" bind.w2 &&
	grep "^case after n=100 ok " bind.w3
'

test_expect_success 'the DDP hook splits a bucket above max_count into 3 allreduces and returns the mean, async and sync; a bare handle as its state' '
	for w in $W; do
		grep "^case hook-async chunks=3 n=$((2 * N + 5)) ok " bind.$w &&
		grep "^case hook-sync chunks=3 n=$((2 * N + 5)) ok " bind.$w &&
		grep "^case hook-handle chunks=1 n=1000 ok " bind.$w || return 1
	done &&
	grep "^closed <agg.Agg closed>\$" bind.w1
'

# err.py KIND: one failing call; prints "errno NAME: message" for AggError
cat >err.py <<'EOF_PY'
import errno, os, sys, time
import numpy as np
import agg
kind = sys.argv[1]
try:
    if kind == "node":
        agg.Agg(node="nosuch")
    elif kind == "job":
        agg.Agg(job=99)
    elif kind == "pindir":
        agg.Agg(pin_dir="/sys/fs/bpf/agg-none-%d" % os.getpid())
    elif kind == "ps":
        agg.Agg(node="ps0", run=int(sys.argv[2]))
    elif kind == "run":
        agg.Agg(timeout=1)
    elif kind == "twice":
        a = agg.Agg(run=int(sys.argv[2]))
        agg.Agg(run=int(sys.argv[2]))
    elif kind == "alone":
        a = agg.Agg(timeout=1)
        t0 = time.monotonic()
        try:
            a.allreduce(np.ones(1000, np.float32))
        finally:
            print("after %.1f s" % (time.monotonic() - t0))
    elif kind == "closed":
        a = agg.Agg()
        a.close()
        a.allreduce(np.ones(10, np.float32))
    print("no error")
except agg.AggError as e:
    assert isinstance(e, OSError)
    print("errno %s: %s" % (errno.errorcode.get(e.errno, e.errno), e.strerror))
EOF_PY

err_on() {	# err_on W KIND [ARG]: err.py on W, its one line in err.KIND
	vcluster_run $1 "$PY" err.py $2 $3 >err.$2 2>&1
	cat err.$2
}

test_expect_success 'open errors: ENOENT for no such node, job or pin directory; EINVAL for a parameter server' '
	err_on w1 node && grep "^errno ENOENT: .*nosuch" err.node &&
	err_on w1 job && grep "^errno ENOENT: .*99" err.job &&
	err_on w1 pindir && grep "^errno ENOENT: " err.pindir &&
	err_on ps0 ps 5 && grep "^errno EINVAL: node ps0 is a parameter server" err.ps
'

test_expect_success 'a run used already is refused at open (AGG_RUN default 0); an older run than the node saw is ESTALE' '
	err_on w1 run && grep "^errno EALREADY: run 0 has sent iterations on node w1 already" err.run &&
	AGG_RUN=7 err_on w2 alone >/dev/null &&
	AGG_RUN=6 err_on w2 run && grep "^errno ESTALE: run 6 is over on node w2: it has seen run 7" err.run
'

test_expect_success 'a second open of the node in the process: EADDRINUSE' '
	err_on w3 twice 8 && grep "^errno EADDRINUSE: " err.twice
'

test_expect_success 'a worker alone: ETIMEDOUT after its 1 s timeout, naming what is missing' '
	AGG_RUN=9 err_on w3 alone &&
	grep "^errno ETIMEDOUT: iteration 0: 1 of 1 exponent segments not aggregated after 1 s without progress .*held up by w1" err.alone &&
	sed -n "s/^after \([0-9.]*\) s\$/\1/p" err.alone >secs &&
	awk "{ exit !(\$1 >= 0.9 && \$1 < 10) }" secs
'

test_expect_success 'a closed handle: EBADF' '
	AGG_RUN=10 err_on w1 closed && grep "^errno EBADF: " err.closed
'

# ready.py (a newer run than every one above): readiness.  agg.ready of
# each rank's pattern is the AND of them; then the DDP hook with
# readiness, fed 3 buckets in a different order on every rank (as backward passes of different ranks may produce
# them): each bucket's mean is right, because it is allreduced only once
# every rank has it, in bucket order (is_last() as torch's: the bucket
# of the highest index, which comes first on some ranks).
cat >ready.py <<'EOF_PY'
import numpy as np
import torch
import agg, agg.ddp

a = agg.Agg(timeout=120)
W, R = a.world_size, a.rank
mine = [(i + R) % 3 != 0 for i in range(10)]
want = [all((i + r) % 3 != 0 for r in range(W)) for i in range(10)]
print("ready %s" % ("ok" if a.ready(mine) == want else "BAD %s" % a.ready(mine)), flush=True)


class Bucket:
    def __init__(self, i, t, last):
        self.i, self.t, self.last = i, t, last

    def index(self):
        return self.i

    def buffer(self):
        return self.t

    def is_last(self):
        return self.last


st = agg.ddp.AggState(a, readiness=True)
for it in range(2):
    order = [(k + R + it) % 3 for k in range(3)]
    ts = {i: torch.full((1000 + i,), float((R + 1) * (i + 1))) for i in range(3)}
    futs = {}
    for i in order:
        futs[i] = agg.ddp.allreduce_hook(st, Bucket(i, ts[i], i == 2))
    bad = 0
    for i in range(3):
        res = futs[i].wait()
        mean = sum((r + 1) * (i + 1) for r in range(W)) / W
        bad += int(res.numel() != 1000 + i or (res - mean).abs().max().item() > 1e-5 * mean)
    print("iteration %d order %s %s" % (it, order, "ok" if bad == 0 else "BAD(%d)" % bad), flush=True)
st.close()
EOF_PY

test_expect_success 'readiness: agg.ready is the AND over the workers; the DDP hook with readiness, buckets in a different order on every rank, right means' '
	AGG_RUN=11 py_all ready $W -- ready.py &&
	for w in $W; do
		cat ready.$w err.ready.$w &&
		grep -qx "ready ok" ready.$w &&
		test "$(grep -c "^iteration [01] order .* ok\$" ready.$w)" = 2 || return 1
	done &&
	test "$(py_rcs ready $W)" = "0 0 0 " &&
	grep -q "order \[1, 2, 0\]" ready.w2
'

test_done
