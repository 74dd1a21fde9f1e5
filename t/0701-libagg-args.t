#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='libagg: NULL and bad arguments fail with -EINVAL and a message, never a crash or a hang; a non-finite timeout is refused everywhere; another host'"'"'s node is -ENOENT'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"

command -v cc >/dev/null || skip_all "no cc"
test -f "$AGG_BUILD/libagg.so" || skip_all "no $AGG_BUILD/libagg.so (make all builds it)"

# args CASE [NODE]: one call of the API with bad arguments; prints
# "CASE rc=N" (the return, negative errno) and the message on stderr.
cat >args.c <<'EOF_C'
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <agg/agg.h>

static int open_node(struct agg **a, const char *node, double timeout)
{
	struct agg_opts o = { .sz = sizeof(o), .node = node, .timeout = timeout,
			      .flags = AGG_OPEN_RUN, .run = 7 };

	return agg_open(a, &o);
}

int main(int argc, char **argv)
{
	const char *c = argv[1], *node = argc > 2 ? argv[2] : NULL;
	struct agg_opts o = { .sz = sizeof(o) };
	struct agg_tuning *t;
	struct agg_setting s;
	struct agg_req *req;
	struct agg *a = NULL;
	float buf[4] = { 1, 2, 3, 4 };
	uint8_t mine[2] = { 1, 1 }, all[2];
	int rc = 1;

	if (!strcmp(c, "open-null"))
		rc = agg_open(NULL, NULL);
	else if (!strcmp(c, "open-nan") || !strcmp(c, "open-inf") || !strcmp(c, "open-ninf")) {
		o.timeout = !strcmp(c, "open-nan") ? NAN : !strcmp(c, "open-inf") ? INFINITY : -INFINITY;
		o.node = node;
		rc = agg_open(&a, &o);
	} else if (!strcmp(c, "start-null"))
		rc = agg_allreduce_start(NULL, buf, 4, AGG_FLOAT32, AGG_REDUCE_SUM, 0, NULL);
	else if (!strcmp(c, "start-no-handle"))
		rc = agg_allreduce_start(NULL, buf, 4, AGG_FLOAT32, AGG_REDUCE_SUM, 0, &req);
	else if (!strcmp(c, "allreduce-null"))
		rc = agg_allreduce(NULL, buf, 4, AGG_FLOAT32, AGG_REDUCE_SUM, 0);
	else if (!strcmp(c, "test-null"))
		rc = agg_test(NULL);
	else if (!strcmp(c, "wait-null"))
		rc = agg_wait(NULL);
	else if (!strcmp(c, "ready-null"))
		rc = agg_ready(NULL, mine, all, 2, 0);
	else if (!strcmp(c, "getters-null"))
		rc = agg_max_count(NULL) == 0 && agg_rank(NULL) == -EINVAL &&
		     agg_world_size(NULL) == -EINVAL && !agg_node_name(NULL) &&
		     agg_run(NULL) == 0 ? 0 : 1;
	else if (!strcmp(c, "close-null")) {
		agg_close(NULL);
		agg_tuning_close(NULL);
		rc = agg_tuning_done(NULL);
	} else if (!strcmp(c, "tuning-null"))
		rc = agg_tuning_open(NULL, NULL, &t);
	else if (!strcmp(c, "tuning-next-null"))
		rc = agg_tuning_next(NULL, &s);
	else if (!strcmp(c, "tuning-report-null"))
		rc = agg_tuning_report(NULL, 1);
	else if (!strncmp(c, "handle-", 7)) {
		/* the node's own: with a handle, the bad arguments of each call */
		if ((rc = open_node(&a, node, 0)))
			goto out;
		if (!strcmp(c, "handle-nan"))
			rc = agg_allreduce(a, buf, 4, AGG_FLOAT32, AGG_REDUCE_SUM, NAN);
		else if (!strcmp(c, "handle-inf"))
			rc = agg_allreduce(a, buf, 4, AGG_FLOAT32, AGG_REDUCE_SUM, INFINITY);
		else if (!strcmp(c, "handle-ninf"))
			rc = agg_allreduce(a, buf, 4, AGG_FLOAT32, AGG_REDUCE_SUM, -INFINITY);
		else if (!strcmp(c, "handle-ready-nan"))
			rc = agg_ready(a, mine, all, 2, NAN);
		else if (!strcmp(c, "handle-start-null"))
			rc = agg_allreduce_start(a, buf, 4, AGG_FLOAT32, AGG_REDUCE_SUM, 0, NULL);
		else if (!strcmp(c, "handle-tuning-null"))
			rc = agg_tuning_open(a, NULL, NULL);
		else if (!strcmp(c, "handle-dtype"))
			rc = agg_allreduce(a, buf, 4, (enum agg_dtype)7, AGG_REDUCE_SUM, 0);
		else if (!strcmp(c, "handle-op"))
			rc = agg_allreduce(a, buf, 4, AGG_FLOAT32, (enum agg_reduce)9, 0);
		else if (!strcmp(c, "handle-nobuf"))
			rc = agg_allreduce(a, NULL, 4, AGG_FLOAT32, AGG_REDUCE_SUM, 0);
		else if (!strcmp(c, "handle-getters"))
			rc = agg_max_count(a) > 0 && agg_world_size(a) == 2 &&
			     !strcmp(agg_node_name(a), node) && agg_run(a) == 7 ? 0 : 1;
	}
out:
	printf("%s rc=%d\n", c, rc);
	if (rc)
		fprintf(stderr, "args: %s\n", agg_errmsg());
	agg_close(a);
	return 0;
}
EOF_C

test_expect_success 'a client of build/ libagg builds' '
	cc -Wall -Werror -o args args.c -I"$AGG_SRC/lib/api" -L"$AGG_BUILD" -lagg -lm
'

LD_LIBRARY_PATH=$AGG_BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
EINVAL=-22
ENOENT=-2

# expect CASE RC [NODE]: the call returns RC (and says why when it fails),
# within the watchdog: a crash or a hang fails the test
expect() {
	e_c=$1 e_rc=$2 && shift 2 &&
	timeout 60 ./args "$e_c" "$@" >out.$e_c 2>err.$e_c
	e_st=$?
	cat out.$e_c err.$e_c &&
	test $e_st = 0 && test "$(cat out.$e_c)" = "$e_c rc=$e_rc" &&
	if test "$e_rc" != 0; then test -s err.$e_c && ! grep -qx "args: " err.$e_c; fi
}

test_expect_success 'NULL where a call returns something: -EINVAL and a message, no crash' '
	expect open-null $EINVAL &&
	expect start-null $EINVAL &&
	expect start-no-handle $EINVAL &&
	expect allreduce-null $EINVAL &&
	expect test-null $EINVAL &&
	expect wait-null $EINVAL &&
	expect ready-null $EINVAL &&
	expect tuning-null $EINVAL &&
	expect tuning-next-null $EINVAL &&
	expect tuning-report-null $EINVAL
'

test_expect_success 'NULL handles: the getters say nothing (0, -EINVAL, NULL), closing is a no-op' '
	expect getters-null 0 &&
	expect close-null 0
'

test_expect_success 'a non-finite timeout at agg_open is -EINVAL, before anything is opened' '
	for c in open-nan open-inf open-ninf; do
		AGG_PIN_DIR=/sys/fs/bpf/aggt-none-$$ expect $c $EINVAL &&
		grep -q "timeout" err.$c || return 1
	done
'

test_expect_success 'the tools refuse a non-finite time too (exit 2, the option named)' '
	for v in nan NaN inf -inf 1e999; do
		for t in agg-send agg-recv agg-check; do
			test_expect_code 2 $t --timeout $v </dev/null 2>err &&
			grep -q "timeout" err || return 1
		done &&
		test_expect_code 2 agg-stat --watch $v 2>err &&
		grep -q "watch" err || return 1
	done
'

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"

cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w1  10.90.0.1   bw=10
w2  10.90.0.2   bw=10
EOF_HOSTS
unset AGG_RUN TORCHELASTIC_RESTART_COUNT

test_expect_success 'setup: 2 workers, a plan loaded' '
	agg-plan --token 1 --size 4096 --segment 256 hosts.txt >plan.txt &&
	dp_setup hosts.txt plan.txt
'

test_expect_success 'the node of this host opens (the cases below fail for their argument only)' '
	vcluster_run w1 env LD_LIBRARY_PATH=$LD_LIBRARY_PATH ./args handle-getters w1 >out 2>err &&
	cat out err && test "$(cat out)" = "handle-getters rc=0"
'

test_expect_success 'a NaN timeout at agg_open is -EINVAL (it made every wait spin and agg_close hang)' '
	for c in open-nan open-inf; do
		vcluster_run w1 env LD_LIBRARY_PATH=$LD_LIBRARY_PATH \
			timeout 60 ./args $c w1 >out.$c 2>err.$c
		test $? = 0 && cat out.$c err.$c &&
		test "$(cat out.$c)" = "$c rc=$EINVAL" || return 1
	done
'

test_expect_success 'with a handle: non-finite timeouts, NULL out, bad dtype, op, buffer: -EINVAL' '
	for c in handle-nan handle-inf handle-ninf handle-ready-nan handle-start-null \
		 handle-tuning-null handle-dtype handle-op handle-nobuf; do
		vcluster_run w1 env LD_LIBRARY_PATH=$LD_LIBRARY_PATH \
			timeout 60 ./args $c w1 >out.$c 2>err.$c
		test $? = 0 && cat out.$c err.$c &&
		test "$(cat out.$c)" = "$c rc=$EINVAL" && test -s err.$c || return 1
	done
'

test_expect_success 'another host'"'"'s node: -ENOENT, as man 3 libagg says, naming the node' '
	vcluster_run w1 env LD_LIBRARY_PATH=$LD_LIBRARY_PATH ./args handle-getters w2 >out 2>err
	cat out err &&
	test "$(cat out)" = "handle-getters rc=$ENOENT" &&
	grep -q "node w2: no interface with address 10.90.0.2 here" err
'

test_expect_success 'unload' '
	dp_unload
'

test_done
