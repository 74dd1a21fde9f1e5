# SPDX-License-Identifier: GPL-2.0-only
"""agg: allreduce through a loaded agg job, from Python (ctypes over libagg).

    import agg
    with agg.Agg(timeout=10) as a:          # this host's node of the only job
        a.allreduce(tensor)                 # in place: the sum over every worker
        req = a.allreduce_start(grad)       # asynchronous
        ...
        req.wait()

A job is planned and loaded with the tools first (agg-plan hosts | agg-load);
every worker of the job makes the same calls in the same order, as with any
collective.  Buffers: CPU torch tensors (contiguous; float32, float16,
bfloat16), numpy arrays (contiguous; float32, float16) and writable buffers
(bytearray, memoryview, array.array) of float32 or, with dtype=, float16 or
bfloat16 bits.  libagg's errors raise AggError, an OSError whose errno is
libagg's and whose strerror is agg_errmsg()'s line; a buffer this module
cannot hand to libagg raises TypeError (wrong kind or element type) or
ValueError (not contiguous, read-only, not on the CPU).  close() waits
for the calls other threads are making on the handle.

The library: $AGG_LIB (a path to libagg.so.1) when set, else the build tree
next to this package (python/agg/../../build/libagg.so.1, a source tree's),
else, for a package installed in PREFIX/lib/python3*/dist-packages,
PREFIX/lib/libagg.so.1, else libagg.so.1 from the system's library path.
"""
import contextlib
import ctypes
import errno as _errno
import math
import os
import sys
import threading
import weakref

__all__ = ["Agg", "AggError", "AggRequest", "FLOAT32", "FLOAT16", "BFLOAT16",
           "SUM", "MAX", "MIN", "library_path", "version"]

FLOAT32, FLOAT16, BFLOAT16 = 0, 1, 2		# enum agg_dtype
SUM, MAX, MIN = 0, 1, 2				# enum agg_reduce
_DTYPES = {"float32": FLOAT32, "float16": FLOAT16, "bfloat16": BFLOAT16}
_OPS = {"sum": SUM, "max": MAX, "min": MIN}
_ITEMSIZE = {FLOAT32: 4, FLOAT16: 2, BFLOAT16: 2}


class AggError(OSError):
    """A libagg call failed: errno is its -errno, strerror agg_errmsg()'s line."""

    def __init__(self, err, msg=None):
        if not msg:
            msg = os.strerror(err)
        super().__init__(err, msg)


class _Opts(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t),
                ("pin_dir", ctypes.c_char_p),
                ("job", ctypes.c_char_p),
                ("node", ctypes.c_char_p),
                ("flags", ctypes.c_uint),
                ("run", ctypes.c_uint),
                ("timeout", ctypes.c_double),
                ("streams", ctypes.c_uint)]
_OPEN_RUN = 0x1
_STREAMS_AUTO = 0xffffffff
MAX_STREAMS = 64


_lib = None
_lib_path = None
_lib_lock = threading.Lock()


def _candidates():
    env = os.environ.get("AGG_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    found = []
    # a source tree: python/agg next to build/
    tree = os.path.normpath(os.path.join(here, "..", "..", "build", "libagg.so.1"))
    if os.path.exists(tree):
        found.append(tree)
    # make install: PREFIX/lib/python3*/dist-packages/agg next to PREFIX/lib,
    # which ld.so.cache may not list yet (no ldconfig since)
    if os.path.basename(os.path.dirname(here)) in ("dist-packages", "site-packages"):
        lib = os.path.normpath(os.path.join(here, "..", "..", "..", "libagg.so.1"))
        if os.path.exists(lib):
            found.append(lib)
    return found + ["libagg.so.1"]


def _load():
    global _lib, _lib_path
    with _lib_lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in _candidates():
            try:
                # CDLL releases the GIL around every call: a wait blocks
                # only the thread that waits
                lib = ctypes.CDLL(path)
                break
            except OSError as e:
                tried.append(str(e))
        else:
            raise ImportError("agg: cannot load libagg (set AGG_LIB to libagg.so.1): "
                              + "; ".join(tried))
        P, I, Z, D = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_double
        sig = {
            "agg_open": (I, [ctypes.POINTER(P), ctypes.POINTER(_Opts)]),
            "agg_close": (None, [P]),
            "agg_allreduce": (I, [P, P, Z, I, I, D]),
            "agg_allreduce_start": (I, [P, P, Z, I, I, D, ctypes.POINTER(P)]),
            "agg_test": (I, [P]),
            "agg_wait": (I, [P]),
            "agg_max_count": (Z, [P]),
            "agg_rank": (I, [P]),
            "agg_world_size": (I, [P]),
            "agg_node_name": (ctypes.c_char_p, [P]),
            "agg_run": (ctypes.c_uint, [P]),
            "agg_errmsg": (ctypes.c_char_p, []),
            "agg_version": (ctypes.c_char_p, []),
        }
        for name, (res, args) in sig.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        # newer than AGG_1.0: a library without it still loads
        if hasattr(lib, "agg_ready"):
            lib.agg_ready.restype = I
            lib.agg_ready.argtypes = [P, P, P, Z, D]
        _lib, _lib_path = lib, path
        return lib


def library_path():
    """The libagg this module loaded (loading it now if need be)."""
    _load()
    return _lib_path


def version():
    """libagg's version string."""
    return _load().agg_version().decode()


def _check(rc):
    """Raise AggError for a negative return; call in the thread that made
    the call, since agg_errmsg() is per thread."""
    if rc < 0:
        msg = _lib.agg_errmsg()
        raise AggError(-rc, msg.decode(errors="replace") if msg else None)
    return rc


def _op(op):
    if isinstance(op, int) and op in (SUM, MAX, MIN):
        return op
    try:
        return _OPS[op]
    except (KeyError, TypeError):
        raise ValueError("agg: op must be 'sum', 'max' or 'min', not %r" % (op,)) from None


def _seconds(value, name="timeout"):
    """A timeout in seconds as libagg takes it (None: 0, the default).
    NaN and infinity are refused here: libagg's range checks cannot see a
    NaN (every comparison with it is false)."""
    if value is None:
        return 0.0
    try:
        t = float(value)
    except (TypeError, ValueError):
        raise ValueError("agg: %s %r: a number of seconds" % (name, value)) from None
    if not math.isfinite(t):
        raise ValueError("agg: %s %r: a finite number of seconds" % (name, value))
    return t


def _integer(value, name, lo, hi, more=""):
    """value (an int, or a string of ASCII digits) within lo..hi."""
    s = str(value).strip()
    # isdigit() alone takes '²', which int() then refuses with its own words
    if not isinstance(value, bool) and s.isascii() and s.isdigit() and lo <= int(s) <= hi:
        return int(s)
    raise ValueError("agg: %s %r: %d to %d%s" % (name, value, lo, hi, more))


def _dtype_arg(dtype):
    if dtype is None or (isinstance(dtype, int) and dtype in _ITEMSIZE):
        return dtype
    try:
        return _DTYPES[str(dtype).replace("torch.", "")]
    except KeyError:
        raise TypeError("agg: dtype must be float32, float16 or bfloat16, not %r" % (dtype,)) from None


def _buffer(buf, dtype):
    """(address, count, dtype, keep): keep holds what must live while libagg
    may write the buffer."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(buf, torch.Tensor):
        kinds = {torch.float32: FLOAT32, torch.float16: FLOAT16, torch.bfloat16: BFLOAT16}
        if buf.dtype not in kinds:
            raise TypeError("agg: a tensor of %s: float32, float16 or bfloat16 only" % buf.dtype)
        if buf.device.type != "cpu":
            raise ValueError("agg: a tensor on %s: CPU tensors only" % buf.device)
        if buf.layout != torch.strided:
            raise TypeError("agg: a %s tensor: dense (strided) tensors only" % buf.layout)
        if not buf.is_contiguous():
            raise ValueError("agg: the tensor is not contiguous (.contiguous() copies it)")
        return buf.data_ptr(), buf.numel(), kinds[buf.dtype], buf
    np = sys.modules.get("numpy")
    if np is not None and isinstance(buf, np.ndarray):
        kinds = {np.dtype(np.float32): FLOAT32, np.dtype(np.float16): FLOAT16}
        if buf.dtype.newbyteorder("=") not in kinds or not buf.dtype.isnative:
            raise TypeError("agg: an array of %s: native float32 or float16 only" % buf.dtype)
        if not (buf.flags.c_contiguous or buf.flags.f_contiguous):
            raise ValueError("agg: the array is not contiguous (np.ascontiguousarray copies it)")
        if not buf.flags.writeable:
            raise ValueError("agg: the array is read-only")
        return buf.ctypes.data, buf.size, kinds[buf.dtype], buf
    try:
        mv = memoryview(buf)
    except TypeError:
        raise TypeError("agg: cannot allreduce a %s: a tensor, an array or a writable "
                        "buffer of float32" % type(buf).__name__) from None
    if mv.readonly:
        raise ValueError("agg: the buffer is read-only")
    if not mv.c_contiguous:
        raise ValueError("agg: the buffer is not contiguous")
    fmt = mv.format.lstrip("@=<")
    if dtype is None:
        dtype = {"f": FLOAT32, "e": FLOAT16}.get(fmt, FLOAT32 if fmt in ("B", "b", "c") else None)
        if dtype is None:
            raise TypeError("agg: a buffer of format %r: float32 ('f') or float16 ('e') "
                            "values, or bytes with dtype=" % mv.format)
    size = _ITEMSIZE[dtype]
    if mv.nbytes % size:
        raise ValueError("agg: %d bytes are not a whole number of %d-byte values"
                         % (mv.nbytes, size))
    # a ctypes view exports the buffer: a bytearray cannot be resized under us
    raw = (ctypes.c_char * mv.nbytes).from_buffer(mv.cast("B") if mv.ndim != 1 or mv.itemsize != 1 else mv)
    return ctypes.addressof(raw), mv.nbytes // size, dtype, (buf, mv, raw)


class AggRequest:
    """An allreduce started with Agg.allreduce_start: wait() for it."""

    def __init__(self, agg, req, keep, buf):
        self._agg = agg
        self._req = req
        self._keep = keep
        self._lock = threading.Lock()
        self._rc = None
        self.buffer = buf

    def done(self):
        """True when wait() would not block."""
        if not self._lock.acquire(blocking=False):
            return False		# another thread waits for it
        try:
            return self._rc is not None or _lib.agg_test(self._req) != 0
        finally:
            self._lock.release()

    def wait(self):
        """Wait for the allreduce to end; returns the buffer, or raises
        AggError.  A second wait() returns (or raises) the same again."""
        with self._lock:
            if self._rc is None:
                rc = _lib.agg_wait(self._req)
                msg = _lib.agg_errmsg() if rc < 0 else None
                self._finish(rc, msg.decode(errors="replace") if msg else None)
            if self._rc < 0:
                raise AggError(-self._rc, self._msg)
            return self.buffer

    def _finish(self, rc, msg):
        # under self._lock: libagg freed the request
        self._rc, self._msg = rc, msg
        self._req = None
        self._keep = None
        self._agg._forget(self)

    def __repr__(self):
        state = "running" if self._rc is None else "ok" if self._rc == 0 else "errno %d" % -self._rc
        return "<agg.AggRequest %s>" % state


class Agg:
    """An opened node of a loaded agg job (struct agg_opts as keywords):

    pin_dir  the pin directory (default $AGG_PIN_DIR, else /sys/fs/bpf/agg)
    job      the job (default: the only job loaded)
    node     the node's name (default: the node whose address is local)
    run      0..65535, or None: $AGG_RUN (else 0) + $TORCHELASTIC_RESTART_COUNT
    timeout  seconds without progress before a call fails (default 30; finite)
    streams  streams an allreduce sends over: 1..64 or "auto" (default:
             $AGG_STREAMS, else 1; man 1 agg-send, --streams)
    """

    def __init__(self, pin_dir=None, job=None, node=None, run=None, timeout=None,
                 streams=None):
        self._h = None
        lib = _load()
        if run is not None:
            run = _integer(run, "run", 0, 0xffff)
        what = "streams"
        if streams is None and os.environ.get("AGG_STREAMS"):
            streams, what = os.environ["AGG_STREAMS"], "AGG_STREAMS"
        if streams is None:
            nstreams = 1
        elif str(streams) == "auto":
            nstreams = _STREAMS_AUTO
        else:
            nstreams = _integer(streams, what, 1, MAX_STREAMS, ', or "auto"')
        enc = lambda s: None if s is None else os.fsencode(str(s))
        opts = _Opts(ctypes.sizeof(_Opts), enc(pin_dir), enc(job), enc(node),
                     0 if run is None else _OPEN_RUN, 0 if run is None else run,
                     _seconds(timeout), nstreams)
        h = ctypes.c_void_p()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._busy = 0			# calls inside libagg with the handle
        self._inflight = set()
        self._watchers = weakref.WeakSet()
        _check(lib.agg_open(ctypes.byref(h), ctypes.byref(opts)))
        self._h = h
        self._pid = os.getpid()
        self._node = lib.agg_node_name(h).decode()

    def _handle(self):
        h = self._h
        if h is None:
            raise AggError(_errno.EBADF, "agg: the handle is closed")
        if self._pid != os.getpid():
            # fork copies the handle but not its engine thread or the node
            raise AggError(_errno.EBADF, "agg: the handle was opened by process %d, not this "
                           "child: open the node in the process that allreduces" % self._pid)
        return h

    @contextlib.contextmanager
    def _using(self):
        """The handle for one libagg call: close() waits for the calls
        in progress, since agg_close frees what a blocked call uses."""
        with self._lock:
            h = self._handle()
            self._busy += 1
        try:
            yield h
        finally:
            with self._lock:
                self._busy -= 1
                if not self._busy:
                    self._idle.notify_all()

    def _watch(self, obj):
        """obj._handle_closing() runs when close() begins, before libagg
        closes (agg.ddp's waiter thread ends there)."""
        with self._lock:
            self._watchers.add(obj)

    def allreduce(self, buf, op="sum", timeout=None, dtype=None):
        """Sum (max, min) buf across every worker, in place; returns buf.
        timeout: seconds without progress (None: the handle's)."""
        addr, count, kind, keep = _buffer(buf, _dtype_arg(dtype))
        op, timeout = _op(op), _seconds(timeout)
        with self._using() as h:
            _check(_lib.agg_allreduce(h, addr, count, kind, op, timeout))
        return buf

    def allreduce_start(self, buf, op="sum", timeout=None, dtype=None):
        """Start an allreduce of buf in the handle's own thread, after those
        started before; returns an AggRequest.  Leave buf alone until its
        wait() returns."""
        addr, count, kind, keep = _buffer(buf, _dtype_arg(dtype))
        op, timeout = _op(op), _seconds(timeout)
        req = ctypes.c_void_p()
        with self._using() as h:
            _check(_lib.agg_allreduce_start(h, addr, count, kind, op, timeout,
                                            ctypes.byref(req)))
            r = AggRequest(self, req, keep, buf)
            # until waited for, the handle keeps the buffer alive; added
            # before close() can see the handle idle
            with self._lock:
                self._inflight.add(r)
        return r

    def ready(self, mine, timeout=None):
        """Readiness (AIACC-Training V-A): mine is a sequence of n truth
        values, one per gradient unit; returns the list of n bools, true
        where the unit is ready on every worker (a min-allreduce through
        the data plane: every worker calls it alike)."""
        if not hasattr(_lib, "agg_ready"):
            raise AggError(_errno.ENOSYS, "agg: this libagg has no agg_ready (AGG_1.1)")
        n = len(mine)
        vec = (ctypes.c_uint8 * max(n, 1))(*[1 if m else 0 for m in mine])
        timeout = _seconds(timeout)
        with self._using() as h:
            _check(_lib.agg_ready(h, ctypes.cast(vec, ctypes.c_void_p),
                                  ctypes.cast(vec, ctypes.c_void_p), n, timeout))
        return [bool(vec[i]) for i in range(n)]

    def _forget(self, r):
        with self._lock:
            self._inflight.discard(r)

    def close(self):
        """Wait for the allreduces in flight, then close.  A call another
        thread is making (allreduce, ready) ends first, with its result
        or its error (its timeout at most); calls after close() raise
        AggError(EBADF); requests not waited for yet raise
        AggError(ECANCELED) from wait() afterwards."""
        with self._lock:
            h, self._h = self._h, None
            if h is None:
                return
            if self._pid != os.getpid():
                return		# a forked child's copy: the parent's to close
            while self._busy:
                self._idle.wait()
            watchers = list(self._watchers)
        for w in watchers:
            w._handle_closing()
        with self._lock:
            pending = list(self._inflight)
        # agg_close must not race an agg_wait: take every request's lock
        # (a thread inside wait() finishes first), then close
        for r in pending:
            r._lock.acquire()
        try:
            _lib.agg_close(h)
            for r in pending:
                if r._rc is None:
                    r._finish(-_errno.ECANCELED,
                              "agg: the handle was closed before this request was waited for")
        finally:
            for r in pending:
                r._lock.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if getattr(self, "_h", None) is not None:
                self.close()
        except Exception:
            pass

    @property
    def closed(self):
        return self._h is None

    @property
    def rank(self):
        """This worker's index among the plan's workers."""
        with self._using() as h:
            return _lib.agg_rank(h)

    @property
    def world_size(self):
        """The number of the plan's workers."""
        with self._using() as h:
            return _lib.agg_world_size(h)

    @property
    def max_count(self):
        """The largest count of one allreduce: the plan's size in float32 values."""
        with self._using() as h:
            return _lib.agg_max_count(h)

    @property
    def node(self):
        """The node's name in the plan."""
        return self._node

    @property
    def run(self):
        """The run this handle uses."""
        with self._using() as h:
            return _lib.agg_run(h)

    def __repr__(self):
        if self._h is None:
            return "<agg.Agg closed>"
        return "<agg.Agg node=%s rank=%d/%d run=%d max_count=%d>" % (
            self.node, self.rank, self.world_size, self.run, self.max_count)
