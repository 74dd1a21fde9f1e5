#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='python agg: close() from another thread waits for a blocked allreduce or ready; closing a handle stops the DDP waiter thread and leaves no atexit entry; bad timeouts, streams and runs raise one-line errors naming the argument or variable'
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
EOF_HOSTS

# close.py KINDS RUN: w1 alone (w2 never sends, so every call blocks
# until its 2 s timeout); a thread for each of KINDS (allreduce or ready)
# makes that call, and the main thread closes the handle once all are
# inside libagg.  agg_close cancels the calls queued and frees what every
# blocked call waits on, so close() must wait for them: each call ends
# with its own timeout, then close() returns.  MALLOC_PERTURB_ makes a
# read of freed memory show.
cat >close.py <<'EOF_PY'
import errno, inspect, sys, threading, time
import numpy as np
import agg

kinds, run = sys.argv[1].split(","), int(sys.argv[2])
a = agg.Agg(run=run, timeout=2)
calls = {"allreduce": lambda: a.allreduce(np.ones(1000, np.float32)),
         "ready": lambda: a.ready([1] * 5)}
out = {}


def caller(i, kind):
    try:
        calls[kind]()
        out[i] = "ok"
    except agg.AggError as e:
        out[i] = errno.errorcode.get(e.errno, e.errno)


def blocked(t, kind):
    """t's innermost Python frame is on a line of Agg.<kind> that calls
    into libagg"""
    src, first = inspect.getsourcelines(getattr(agg.Agg, kind))
    lines = {first + i + d for i, l in enumerate(src) if "_lib.agg_" in l for d in (0, 1)}
    f = sys._current_frames().get(t.ident)
    return f is not None and f.f_code.co_name == kind and f.f_lineno in lines


ts = [threading.Thread(target=caller, args=(i, k)) for i, k in enumerate(kinds)]
for t in ts:
    t.start()
for _ in range(20000):		# bounded: 20 s
    if all(blocked(t, k) for t, k in zip(ts, kinds)):
        break
    time.sleep(0.001)
else:
    print("never blocked")
a.close()
print("close returned, calls ended %d/%d" % (len(out), len(kinds)), flush=True)
for t in ts:
    t.join()
for i, k in enumerate(kinds):
    print("call %d %s %s" % (i, k, out[i]), flush=True)
print("closed %s" % a, flush=True)
EOF_PY

# waiter.py: 50 cycles each of a bare handle as the hook's state closed by
# a.close(), an AggState whose handle is closed directly, and an AggState
# closed; an empty bucket (no allreduce, no peer) starts the waiter thread
cat >waiter.py <<'EOF_PY'
import atexit, threading
import torch
import agg, agg.ddp


class Bucket:
    def buffer(self):
        return torch.zeros(0)


def cycle(how):
    a = agg.Agg()
    st = a if how == "bare" else agg.ddp.AggState(a)
    agg.ddp.allreduce_hook(st, Bucket()).wait()
    assert any(t.name == "agg-ddp-waiter" for t in threading.enumerate())
    (st if how == "state" else a).close()


# the first waiter registers agg.ddp's one atexit entry, for the process
exits = atexit._ncallbacks()
cycle("bare")
print("first atexit=%+d" % (atexit._ncallbacks() - exits))
threads, exits = len(threading.enumerate()), atexit._ncallbacks()
for how in ("bare", "handle", "state"):
    for _ in range(50):
        cycle(how)
    print("%s threads=%+d atexit=%+d" % (how, len(threading.enumerate()) - threads,
                                         atexit._ncallbacks() - exits), flush=True)
EOF_PY

# args.py: arguments agg refuses before libagg, each a ValueError naming
# the argument (or variable) and its value
cat >args.py <<'EOF_PY'
import os
import numpy as np
import agg

a = agg.Agg()
cases = [("timeout=nan", lambda: agg.Agg(timeout=float("nan"))),
         ("timeout=inf", lambda: agg.Agg(timeout=float("inf"))),
         ("timeout=-inf", lambda: agg.Agg(timeout="-inf")),
         ("timeout=abc", lambda: agg.Agg(timeout="abc")),
         ("allreduce-timeout=nan", lambda: a.allreduce(np.ones(4, np.float32), timeout=float("nan"))),
         ("start-timeout=inf", lambda: a.allreduce_start(np.ones(4, np.float32), timeout=float("inf"))),
         ("ready-timeout=nan", lambda: a.ready([1], timeout=float("nan"))),
         ("streams=sup2", lambda: agg.Agg(streams="\u00b2")),
         ("streams=0", lambda: agg.Agg(streams=0)),
         ("run=abc", lambda: agg.Agg(run="abc"))]
for name, f in cases:
    try:
        f()
        print("%s accepted" % name)
    except ValueError as e:
        print("%s ValueError: %s" % (name, e))
    except Exception as e:
        print("%s %s: %s" % (name, type(e).__name__, e))
os.environ["AGG_STREAMS"] = "\u00b2"
try:
    agg.Agg()
    print("AGG_STREAMS accepted")
except ValueError as e:
    print("AGG_STREAMS ValueError: %s" % e)
a.close()
print("closed")
EOF_PY

test_expect_success 'setup: 2 workers under ps0' '
	agg-plan -s ps --size 40000 hosts.txt >plan.txt &&
	dp_setup hosts.txt plan.txt
'

for k in allreduce:20 ready:21 allreduce,ready,allreduce:22; do
	kinds=${k%:*} run=${k#*:}
	test_expect_success "close() while other threads' calls block (a peer never sends: $kinds): each call ends with its ETIMEDOUT, none cancelled, then close returns" '
		vcluster_run w1 env MALLOC_PERTURB_=165 "$PY" close.py '$kinds' '$run' \
			>close.'$run' 2>err.close.'$run'
		rc=$? &&
		cat close.'$run' err.close.'$run' &&
		test $rc = 0 &&
		! grep "never blocked" close.'$run' &&
		n=$(echo '$kinds' | tr , "\n" | wc -l) &&
		grep -x "close returned, calls ended $n/$n" close.'$run' &&
		test "$(grep -c "^call [0-9] [a-z]* ETIMEDOUT\$" close.'$run')" = $n &&
		grep -x "closed <agg.Agg closed>" close.'$run'
	'
done

test_expect_success 'closing a handle stops its DDP waiter thread: 50 cycles each way leave no thread and no atexit entry (agg.ddp has one, for the process)' '
	vcluster_run w2 "$PY" waiter.py >waiter 2>err.waiter &&
	cat waiter err.waiter &&
	grep -x "first atexit=+1" waiter &&
	grep -x "bare threads=+0 atexit=+0" waiter &&
	grep -x "handle threads=+0 atexit=+0" waiter &&
	grep -x "state threads=+0 atexit=+0" waiter
'

test_expect_success 'non-finite or non-numeric timeouts, bad streams and runs: ValueError naming the argument and value, before libagg' '
	vcluster_run w2 "$PY" args.py >args 2>err.args &&
	cat args err.args &&
	grep -x "timeout=nan ValueError: agg: timeout nan: a finite number of seconds" args &&
	grep -x "timeout=inf ValueError: agg: timeout inf: a finite number of seconds" args &&
	grep -x "timeout=-inf ValueError: agg: timeout '"'"'-inf'"'"': a finite number of seconds" args &&
	grep -x "timeout=abc ValueError: agg: timeout '"'"'abc'"'"': a number of seconds" args &&
	grep -x "allreduce-timeout=nan ValueError: agg: timeout nan: a finite number of seconds" args &&
	grep -x "start-timeout=inf ValueError: agg: timeout inf: a finite number of seconds" args &&
	grep -x "ready-timeout=nan ValueError: agg: timeout nan: a finite number of seconds" args &&
	grep -x "streams=sup2 ValueError: agg: streams '"'"'²'"'"': 1 to 64, or \"auto\"" args &&
	grep -x "streams=0 ValueError: agg: streams 0: 1 to 64, or \"auto\"" args &&
	grep -x "run=abc ValueError: agg: run '"'"'abc'"'"': 0 to 65535" args &&
	grep -x "AGG_STREAMS ValueError: agg: AGG_STREAMS '"'"'²'"'"': 1 to 64, or \"auto\"" args &&
	grep -x closed args
'

# demo/train.py's one-line error: the hook's state from the environment
# (agg.ddp.from_env), a single rank of Gloo on w1
for v in abc nan inf; do
	test_expect_success SKLEARN "AGG_TIMEOUT=$v through agg.ddp.from_env: one line naming AGG_TIMEOUT and $v, exit 1" '
		test_expect_code 1 vcluster_run w1 env RANK=0 WORLD_SIZE=1 MASTER_ADDR=10.90.0.1 \
			MASTER_PORT=29611 AGG_TIMEOUT='$v' "$PY" "$AGG_SRC/demo/train.py" --backend agg \
			--epochs 1 >train.'$v' 2>err.train.'$v' &&
		cat err.train.'$v' &&
		test "$(wc -l <err.train.'$v')" = 1 &&
		grep "^train.py: rank 0: ValueError: agg: AGG_TIMEOUT '"'"$v"'"': a .*number of seconds\$" err.train.'$v'
	'
done

test_done
