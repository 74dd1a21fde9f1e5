# SPDX-License-Identifier: GPL-2.0-only
# Python, PyTorch and the agg module in tests (after test-lib.sh; py_all
# needs vcluster.sh).
#
#   PY                          Debian's python3, where python3-torch installs
#                               (python3 on PATH may be another one)
#   TORCHRUN                    Debian's torchrun (python3-torch's, for $PY)
#   TORCH, SKLEARN, TORCHRUN    prerequisites: $PY imports torch and numpy,
#                               sklearn.datasets; $TORCHRUN runs
#   py_all OUT W... -- ARGS...  $PY ARGS on every host W at once, waiting for
#                               all: stdout OUT.W, stderr err.OUT.W, exit
#                               status rc.OUT.W
#   py_rcs OUT W...             those exit statuses on one line ("0 0 0 ")
#
# The module comes from the source tree (PYTHONPATH) and libagg from the
# build tree (AGG_LIB), as make check builds them.

PY=/usr/bin/python3
TORCHRUN=/usr/bin/torchrun
PYTHONPATH=$AGG_SRC/python${PYTHONPATH:+:$PYTHONPATH}
AGG_LIB=$AGG_BUILD/libagg.so.1
# no __pycache__ in the source tree
PYTHONDONTWRITEBYTECODE=1
export PY TORCHRUN PYTHONPATH AGG_LIB PYTHONDONTWRITEBYTECODE

test_lazy_prereq_TORCH='$PY -c "import torch, numpy"'
test_lazy_prereq_SKLEARN='$PY -c "import sklearn.datasets"'
test_lazy_prereq_TORCHRUN='test -x "$TORCHRUN" && "$TORCHRUN" --help'

py_all() {
	py_o=$1 && shift && py_ws= &&
	while [ $# -gt 0 ] && [ "$1" != -- ]; do py_ws="$py_ws $1"; shift; done &&
	shift && py_pids= &&
	for py_w in $py_ws; do
		{ vcluster_run "$py_w" "$PY" "$@" >"$py_o.$py_w" 2>"err.$py_o.$py_w"
		  echo $? >"rc.$py_o.$py_w"; } &
		py_pids="$py_pids $!"
	done &&
	for py_p in $py_pids; do wait "$py_p"; done
}

py_rcs() {
	py_o=$1 && shift &&
	for py_w; do printf '%s ' "$(cat "rc.$py_o.$py_w")"; done
}
