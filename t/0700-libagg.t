#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='libagg: the installed header, .so and agg.pc build a program that allreduces in-process; runs and restarts through the library'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"

command -v make >/dev/null && command -v pkg-config >/dev/null ||
	skip_all "no make or pkg-config"

test_expect_success 'install: header, versioned .so, agg.pc, man 3' '
	make -s -C "$AGG_SRC" install DESTDIR="$PWD/root" PREFIX=/opt/agg >out 2>&1 &&
	test -f root/opt/agg/include/agg/agg.h &&
	test -f root/opt/agg/lib/libagg.so.1.0.0 &&
	test "$(readlink root/opt/agg/lib/libagg.so.1)" = libagg.so.1.0.0 &&
	test "$(readlink root/opt/agg/lib/libagg.so)" = libagg.so.1 &&
	test -f root/opt/agg/lib/pkgconfig/agg.pc &&
	test -f root/opt/agg/share/man/man3/libagg.3 &&
	objdump -p root/opt/agg/lib/libagg.so.1.0.0 | grep -q "SONAME *libagg.so.1$"
'

test_expect_success 'install: the Python module, which finds the installed library' '
	py=$(ls -d root/opt/agg/lib/python3*/dist-packages/agg) &&
	test -f $py/__init__.py && test -f $py/ddp.py &&
	env -u AGG_LIB PYTHONPATH=${py%/agg} /usr/bin/python3 -c "import agg; print(agg.library_path(), agg.version())" >pyout &&
	cat pyout &&
	grep "^$PWD/root/opt/agg/lib/libagg.so.1 " pyout
'

test_expect_success 'the .so exports the API only, versioned AGG_1.0 (tuning: AGG_1.1)' '
	nm -D --defined-only root/opt/agg/lib/libagg.so.1 | awk "\$2 == \"T\" { print \$3 }" |
		sort >exported &&
	sed -n "s/^\([a-z_]*\)(.*/\1/p; s/^[a-z].* \**\(agg_[a-z_]*\)(.*/\1/p" \
		root/opt/agg/include/agg/agg.h | sort -u >declared &&
	sed "s/@@AGG_1\.[01]$//" exported >names &&
	test_cmp declared names &&
	! grep -v "@@AGG_1\.[01]$" exported &&
	grep "@@AGG_1\.1$" exported >v11 &&
	test "$(sed "s/@@.*//" v11 | tr "\n" " ")" = "agg_ready agg_tuning_close agg_tuning_done agg_tuning_next agg_tuning_open agg_tuning_report "
'

# pkg-config of the installed tree, as a user's build would use it
pc() {
	PKG_CONFIG_SYSROOT_DIR=$PWD/root PKG_CONFIG_LIBDIR=$PWD/root/opt/agg/lib/pkgconfig \
		pkg-config "$@"
}

test_expect_success 'a program builds against it through pkg-config' '
	pc --modversion agg >v && test "$(cat v)" = "$(sed -n "s/^VERSION *:= *//p" "$AGG_SRC/Makefile")" &&
	cc -Wall -Werror -o allreduce "$AGG_SRC/demo/allreduce.c" $(pc --cflags --libs agg) &&
	LD_LIBRARY_PATH=$PWD/root/opt/agg/lib ldd ./allreduce | grep -q "libagg.so.1 => $PWD/root/opt/agg/lib/"
'

test_expect_success 'without a loaded job it says so and fails' '
	AGG_PIN_DIR=/sys/fs/bpf/aggt-none-$$ LD_LIBRARY_PATH=$PWD/root/opt/agg/lib \
		./allreduce >out 2>err && return 1
	cat err &&
	grep "^allreduce: " err && test $(wc -l <err) = 1
'

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"

cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w1  10.90.0.1   bw=10
w2  10.90.0.2   bw=10
w3  10.90.0.3   bw=10
EOF_HOSTS
N=20000
unset AGG_RUN TORCHELASTIC_RESTART_COUNT

test_expect_success 'setup: 3 workers, a plan of 20000 values loaded' '
	agg-plan --size $((4 * N)) --segment 256 --slots 8 hosts.txt >plan.txt &&
	dp_setup hosts.txt plan.txt
'

# on_all OUT RESTARTS ARGS...: the example on every worker at once, as
# torchrun's RESTARTS-th restart would start it; OUT.W and rc.OUT.W
on_all() {
	o=$1 && r=$2 && shift 2 && pids= &&
	for w in w1 w2 w3; do
		{ vcluster_run $w env LD_LIBRARY_PATH=$PWD/root/opt/agg/lib \
			TORCHELASTIC_RESTART_COUNT=$r ./allreduce "$@" \
			>$o.$w 2>err.$o.$w; echo $? >rc.$o.$w; } &
		pids="$pids $!"
	done &&
	for p in $pids; do wait $p; done
}

test_expect_success 'every worker: float32 of the whole size, float16 and bfloat16 halves in flight together, 3 rounds, exact' '
	on_all full 0 $N 3 &&
	for w in w1 w2 w3; do
		cat full.$w err.full.$w &&
		test "$(cat rc.full.$w)" = 0 &&
		test "$(grep -c "^float32: $N values, 0 wrong" full.$w)" = 3 &&
		test "$(grep -c "^float16+bfloat16: $N values, 0 wrong" full.$w)" = 3 || return 1
	done &&
	grep "rank 0 of 3, run 0" full.w1 && grep "rank 2 of 3, run 0" full.w3
'

test_expect_success 'short and odd counts through the same plan' '
	on_all short 1 777 2 &&
	for w in w1 w2 w3; do
		cat short.$w err.short.$w &&
		test "$(cat rc.short.$w)" = 0 &&
		test "$(grep -c "^float32: 777 values, 0 wrong" short.$w)" = 2 || return 1
	done &&
	grep "run 1," short.w2
'

test_expect_success 'more than the plan takes: -EINVAL, one line naming the limit' '
	TORCHELASTIC_RESTART_COUNT=2 vcluster_run w1 env LD_LIBRARY_PATH=$PWD/root/opt/agg/lib \
		./allreduce $((N + 1)) >big 2>err.big && return 1
	cat err.big &&
	grep "$((N + 1)) values: the plan of job [0-9]* takes at most $N" err.big
'

test_expect_success 'a run used already is refused at open; the restarted job (a newer run) goes on without agg-load' '
	TORCHELASTIC_RESTART_COUNT=1 vcluster_run w1 env LD_LIBRARY_PATH=$PWD/root/opt/agg/lib \
		./allreduce 100 >again 2>err.again && return 1
	cat err.again &&
	grep "run 1 has sent iterations on node w1 already" err.again &&
	on_all restart 3 5000 1 &&
	for w in w1 w2 w3; do
		test "$(cat rc.restart.$w)" = 0 &&
		grep "^float32: 5000 values, 0 wrong" restart.$w || return 1
	done
'

test_expect_success 'an older run is refused: the node has seen a newer one' '
	AGG_RUN=1 vcluster_run w2 env LD_LIBRARY_PATH=$PWD/root/opt/agg/lib \
		./allreduce 100 >old 2>err.old && return 1
	cat err.old &&
	grep "run 1 is over on node w2: it has seen run 3" err.old
'

test_expect_success 'the node is the process'"'"'s: a second open is refused while one holds it' '
	# not vcluster_run: $! must be agg-recv itself (nsenter execs it), for
	# the cleanup to end it
	{ nsenter --net=/var/run/netns/$(vcluster_ns w3) -- \
		agg-recv --run 4 --iter 0 --timeout 60 >/dev/null 2>err.recv & } &&
	recv=$! &&
	test_when_finished "kill $recv 2>/dev/null || :" &&
	k=0 && until vcluster_run w3 ss -Hlun | grep -q "10.90.0.3:$(( $(dp_plan_field port) + 1 ))"; do
		k=$((k + 1)) && test $k -lt 300 && kill -0 $recv || return 1; sleep 0.1
	done &&
	AGG_RUN=4 vcluster_run w3 env LD_LIBRARY_PATH=$PWD/root/opt/agg/lib \
		./allreduce 100 >busy 2>err.busy && return 1
	cat err.busy &&
	grep "an agg-recv, or another process that opened the node, uses it" err.busy
'

test_expect_success 'that agg-recv ended with its test: the node is free again' '
	k=0 && while vcluster_run w3 ss -Hlun | grep -q "10.90.0.3:$(( $(dp_plan_field port) + 1 ))"; do
		k=$((k + 1)) && test $k -lt 300 || return 1; sleep 0.1
	done
'

test_expect_success 'the calls are counted in agg-stat like agg-send'"'"'s' '
	# 3 rounds of 3 calls, 2 rounds of 3, 1 round of 3; the refused open none
	test "$(dp_stat w1 iterations)" = 18
'

test_done
