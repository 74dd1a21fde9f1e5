# SPDX-License-Identifier: GPL-2.0-only
"""PyTorch DDP through agg: a communication hook that allreduces gradient
buckets in the XDP data plane instead of the process group.

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    import agg.ddp

    dist.init_process_group("gloo")         # DDP still needs a group (setup)
    model = DDP(net)
    state = agg.ddp.from_env()              # torchrun's environment
    model.register_comm_hook(state, agg.ddp.allreduce_hook)

Every rank runs on a worker of a loaded agg job (one rank a node); the
hook's allreduces are the job's iterations, so every rank must register it
(DDP calls hooks for the same buckets in the same order on every rank).
A restart under torchrun opens a newer run by itself ($AGG_RUN +
$TORCHELASTIC_RESTART_COUNT), so the job needs no reload.
"""
import atexit
import os
import queue
import threading
import weakref

import torch

import agg

__all__ = ["AggState", "allreduce_hook", "from_env"]


class AggState:
    """What allreduce_hook needs: an open agg.Agg, the divisor (the number
    of ranks: DDP wants the mean) and, unless sync, a waiter thread that
    completes the hook's futures in the order the buckets were started.

    sync=True waits inside the hook instead (the bucket's allreduce then no
    longer overlaps the rest of the backward pass).

    readiness=True launches each bucket once it is ready on every rank
    (AIACC-Training's readiness vector: a min-allreduce of one value per
    bucket at every hook call), in bucket order, so ranks whose backward
    passes produce the buckets in different orders still allreduce the
    same bucket together.  Buckets are numbered by bucket.index(), below
    READY_MAX; an iteration is over once the hook has had as many buckets
    as that iteration's is_last() bucket's index + 1 (the count changes:
    DDP's first iteration has one bucket, then it rebuilds them).
    The readiness allreduce queues behind the buckets in flight (one
    allreduce runs at a time), so it costs overlap."""

    READY_MAX = 64

    def __init__(self, handle, world_size=None, sync=False, readiness=False):
        self.agg = handle
        self.world_size = world_size or handle.world_size
        self.sync = sync
        self.readiness = readiness
        self._mine = [0] * self.READY_MAX	# buckets this rank has, this iteration
        self._held = {}			# index -> (buffer, future): not launched yet
        self._calls = 0			# hook calls this iteration
        self._nbuckets = 0		# buckets this iteration (from is_last()), 0: not known yet
        self.max_count = handle.max_count
        self.buckets = 0	# hook calls, and allreduces (chunks) started
        self.chunks = 0
        self._q = None
        self._thread = None
        self._lock = threading.Lock()
        # the handle's close() stops the waiter (a bare handle as the
        # hook's state, or a state whose handle is closed directly)
        handle._watch(self)

    def _waiter(self):
        while True:
            item = self._q.get()
            if item is None:
                return
            reqs, buf, fut = item
            try:
                for r in reqs:
                    r.wait()
                buf.div_(self.world_size)
            except BaseException as e:	# the future carries it to backward()
                for r in reqs:
                    try:
                        r.wait()	# the buffer is free only once all end
                    except agg.AggError:
                        pass
                fut.set_exception(e)
            else:
                fut.set_result(buf)

    def _submit(self, item):
        with self._lock:
            if self._thread is None:
                self._q = queue.Queue()
                self._thread = threading.Thread(target=self._waiter, name="agg-ddp-waiter",
                                                daemon=True)
                self._thread.start()
                _waiting(self)
        self._q.put(item)

    def _stop_waiter(self, timeout=None):
        """Stop the waiter thread after the buckets queued, and join it
        (for at most timeout seconds: None, until it ends)."""
        with self._lock:
            t, self._thread = self._thread, None
            with _waiters_lock:
                _waiters.discard(self)
        if t is not None:
            self._q.put(None)
            if t is not threading.current_thread():
                t.join(timeout)

    def _handle_closing(self):
        self._stop_waiter()

    def close(self):
        """Stop the waiter thread (after the buckets queued) and close the handle."""
        self._stop_waiter()
        self.agg.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # DDP pickles the state with the model in some paths; a handle cannot be
    def __getstate__(self):
        raise TypeError("agg.ddp.AggState holds an open agg handle: it cannot be pickled")


# The states with a waiter thread, joined before the interpreter exits: a
# daemon thread still inside torch's C++ (completing a future) when Python
# finalizes is killed there, and the process aborts ("terminate called
# without an active exception").  One atexit entry for all of them:
# an entry for each state would leave a slot behind at every close, since
# atexit.unregister frees no slot (atexit._ncallbacks() still counts it).
_waiters = weakref.WeakSet()
_waiters_lock = threading.Lock()
_at_exit = False


def _waiting(st):
    global _at_exit
    with _waiters_lock:
        _waiters.add(st)
        if not _at_exit:
            atexit.register(_stop_at_exit)
            _at_exit = True


def _stop_at_exit():
    with _waiters_lock:
        states = list(_waiters)
    for st in states:
        # bounded: with a peer gone, each queued bucket would wait out its
        # whole timeout
        st._stop_waiter(timeout=10)


def _state(state):
    if isinstance(state, AggState):
        return state
    if isinstance(state, agg.Agg):
        # a bare handle: one state per handle, kept on it
        st = getattr(state, "_ddp_state", None)
        if st is None:
            st = state._ddp_state = AggState(state)
        return st
    raise TypeError("agg.ddp.allreduce_hook: state must be an agg.Agg or an AggState, not %s"
                    % type(state).__name__)


def _launch(st, buf, fut):
    """Start buf's allreduces (max_count values each) for the waiter."""
    flat = buf.view(-1)
    reqs = []
    try:
        for lo in range(0, flat.numel(), st.max_count):
            reqs.append(st.agg.allreduce_start(flat[lo:lo + st.max_count]))
            st.chunks += 1
    except BaseException:
        for r in reqs:
            try:
                r.wait()
            except agg.AggError:
                pass
        raise
    st._submit((reqs, buf, fut))


def _ready_hook(st, bucket):
    """The hook with readiness: hold the bucket, agree with every rank which
    buckets all of them hold, launch those in bucket order."""
    i = bucket.index()
    if i >= st.READY_MAX:
        raise agg.AggError(22, "agg.ddp: bucket %d: readiness takes at most %d buckets "
                           "(a larger bucket_cap_mb makes fewer)" % (i, st.READY_MAX))
    fut = torch.futures.Future()
    st.buckets += 1
    st._calls += 1
    if bucket.is_last():
        st._nbuckets = i + 1
    st._mine[i] = 1
    st._held[i] = (bucket.buffer(), fut)
    try:
        everywhere = st.agg.ready(st._mine)
        for j in sorted(st._held):
            if everywhere[j]:
                buf, f = st._held.pop(j)
                _launch(st, buf, f)
        if st._nbuckets and st._calls >= st._nbuckets and st._held:
            raise agg.AggError(71, "agg.ddp: buckets %s were never ready on every rank"
                               % sorted(st._held))
    except BaseException as e:
        # the iteration is lost: the next one starts afresh
        for _, f in st._held.values():
            f.set_exception(e)
        st._held.clear()
        _next_iteration(st)
        raise
    if st._nbuckets and st._calls >= st._nbuckets:
        _next_iteration(st)
    return fut.then(_value)


def _next_iteration(st):
    # the bucket count too: the next iteration's may differ (DDP rebuilds
    # its buckets after the first), and a stale count would end it early
    # on some ranks, which then pair their readiness allreduces with
    # other ranks' buckets
    st._mine = [0] * st.READY_MAX
    st._calls = 0
    st._nbuckets = 0


def allreduce_hook(state, bucket):
    """DDP communication hook: the mean of the bucket's gradients over every
    rank through agg.  A bucket larger than the plan's size goes as several
    allreduces of at most max_count values each."""
    st = _state(state)
    if st.readiness and not st.sync:
        return _ready_hook(st, bucket)
    buf = bucket.buffer()
    flat = buf.view(-1)
    n = flat.numel()
    step = st.max_count
    if step <= 0:
        raise agg.AggError(22, "agg.ddp: the plan's size is 0 values")
    fut = torch.futures.Future()
    st.buckets += 1
    if st.sync:
        for lo in range(0, n, step):
            st.agg.allreduce(flat[lo:lo + step])
            st.chunks += 1
        buf.div_(st.world_size)
        fut.set_result(buf)
        return fut
    _launch(st, buf, fut)
    # DDP's reducer reads the future's value in C++, where set_exception's
    # error is only a value ("Unable to cast ... to Tensor"): a callback
    # that raises it marks the future it returns as failed, so backward()
    # raises the AggError's text
    return fut.then(_value)


def _value(fut):
    return fut.wait()


def from_env(sync=False, **kw):
    """An AggState for a rank started by torchrun (or with its variables):
    opens this host's node (keywords as agg.Agg's; AGG_JOB, AGG_NODE and
    AGG_TIMEOUT fill job, node and timeout when not given; AGG_STREAMS the
    streams (agg.Agg reads it); pin_dir and the
    run come from AGG_PIN_DIR, AGG_RUN and TORCHELASTIC_RESTART_COUNT in
    libagg) and checks that the job has WORLD_SIZE workers.

    A node is one host's worker: torchrun's ranks on one host
    (LOCAL_WORLD_SIZE, --nproc_per_node) would all open the same node, so
    more than one raises AggError(EINVAL) unless node is given."""
    lws = os.environ.get("LOCAL_WORLD_SIZE")
    if kw.get("node") is None and lws and lws.isdigit() and int(lws) > 1:
        raise agg.AggError(22, "agg.ddp: %s ranks on this host (LOCAL_WORLD_SIZE), one agg "
                           "worker a host: run one rank a host (torchrun --nproc_per_node 1) "
                           "or give each rank its node" % lws)
    for key, var in (("job", "AGG_JOB"), ("node", "AGG_NODE"), ("timeout", "AGG_TIMEOUT")):
        if kw.get(key) is None and os.environ.get(var):
            kw[key] = agg._seconds(os.environ[var], var) if key == "timeout" else os.environ[var]
    handle = agg.Agg(**kw)
    ws = os.environ.get("WORLD_SIZE")
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        ws = torch.distributed.get_world_size()
    if ws is not None and int(ws) != handle.world_size:
        n = handle.world_size
        handle.close()
        raise agg.AggError(22, "agg.ddp: the job has %d workers, the training %s ranks: "
                           "plan one worker for each rank" % (n, ws))
    return AggState(handle, sync=sync)
