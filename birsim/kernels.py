"""Custom ops delegated to a kernel_sim (docs/spec/control-flow-sync.md §6.1, docs/spec/BIR-JSON.md "kernel_sim").

Resolution, per call: an explicit ``Simulator(kernel_sim=...)`` (a callable or an
executable path) always wins; else a kernel registered with :func:`kernel`; else the
``BIRSIM_KERNEL_SIM`` environment variable; else a ``kernel_sim`` on ``PATH``.

In-process kernels get read-only NumPy arrays of the inputs: private copies, so nothing a
kernel keeps can reach simulator memory after the call (keeping one past the call is still
an error: copy it). The external protocol writes ``<run_id>-<idx>-birsim.npy`` files and
a ``config.json`` into a private temporary directory, runs ``exe config.json`` there
(argv, no shell) and reads ``<run_id>-<idx>-simout.npy`` back. bf16/fp8 arrays travel as
raw ``uint16``/``uint8`` bits. The executable runs in its own session with
``BIRSIM_KERNEL_RUN`` set to a token unique to the call; when it exits (or times out, or
Ctrl-C interrupts) its process group and every process whose environment carries the
token are killed, so nothing it started outlives the call (Linux: /proc; a descendant that
clears its environment *and* leaves the session escapes), and its directory is removed.
An output file's .npy header must give the output's shape and the file hold exactly its
data: checked before the data is read.

Results must have the output's shape. A result of the output's own dtype is copied bit
for bit; any other numeric result is converted to fp32 and then cast to the output dtype
with the simulator's cast rules (round to nearest even, saturating, as TensorCopy casts).
Nothing reaches simulator memory unless every result of the call is valid.
"""

import itertools
import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, TypeVar, Union

import numpy as np

from . import _birsim
from .dtypes import numpy_dtype
from .errors import KernelSimError

__all__ = ["kernel", "kernels", "unregister", "call_external"]

_REGISTRY: Dict[str, Callable[..., Any]] = {}
_F = TypeVar("_F", bound=Callable[..., Any])
_DTYPE_NAMES = {v[0]: k for k, v in _birsim.dtypes.items()}
_OP_NAMES = {v[0]: k for k, v in _birsim.opcodes.items()}
_PACKED = {k for k, v in _birsim.dtypes.items() if v[2] == "P"}   # the packed x4 dtypes
_RUN_IDS = itertools.count()
_STDERR_TAIL = 1500          # bytes of a failed executable's stderr kept in the message


def kernel(name: str) -> Callable[[_F], _F]:
    """Register ``fn(*inputs, **attrs)`` as the kernel_sim for kernel ``name``.

    It returns an array or a tuple/list of arrays (one per output). Registering a name
    again replaces the earlier function."""
    if not isinstance(name, str) or not name:
        raise TypeError("kernel name must be a non-empty string")

    def deco(fn: _F) -> _F:
        if not callable(fn):
            raise TypeError(f"@birsim.kernel({name!r}) needs a callable")
        _REGISTRY[name] = fn
        return fn
    return deco


def kernels() -> List[str]:
    """Names of the registered kernels."""
    return sorted(_REGISTRY)


def unregister(name: str) -> None:
    """Remove a registered kernel (no error if absent)."""
    _REGISTRY.pop(name, None)


def _raw_dtype(np_dt):
    """The dtype an array travels as in .npy files (ml_dtypes types as raw bits)."""
    if np_dt.kind == "V" or np_dt.type.__module__.startswith("ml_dtypes"):
        return np.dtype(f"u{np_dt.itemsize}")
    return np_dt


def _is_ml(np_dt):
    return np_dt.type.__module__.startswith("ml_dtypes")


def _find_executable():
    env = os.environ.get("BIRSIM_KERNEL_SIM")
    if env:
        return env
    return shutil.which("kernel_sim")


class _Host:
    """The callable the C core invokes for each CustomOp/BIRKernel.

    Called as ``host(name, config_json, insn, opcode, ins, outs)`` with ``ins`` a list of
    ``(memoryview, dtype code, shape)`` and ``outs`` a list of ``(dtype code, shape)``;
    returns one ``(cast, array)`` per output (see csrc/py/objects.c ``host_call``).

    It holds its Simulator weakly: a paused Simulator keeps its host, and a strong
    reference back would be a cycle keeping a dropped paused Simulator (and its memory)
    alive until the cyclic GC runs."""

    def __init__(self, sim):
        self._sim_ref = weakref.ref(sim)
        self.calls = 0

    @property
    def sim(self):
        return self._sim_ref()

    def close(self):
        pass

    def __call__(self, name, config_json, insn, opcode, ins, outs, core=0):
        self.calls += 1
        inputs, refs, views, in_meta = _input_arrays(ins)
        out_meta = [{"shape": list(shape), "dtype": _DTYPE_NAMES[dt]} for dt, shape in outs]
        config = {"kernel_name": name, "opcode": _OP_NAMES[opcode], "instruction": insn,
                  "core": core,
                  "attrs": json.loads(config_json) if config_json not in ("{}", "") else {},
                  "inputs": in_meta, "outputs": out_meta}
        results = self._dispatch(name, inputs, config)
        staged = _check_results(name, results, out_meta, inputs)
        del inputs, results
        # Inputs are private copies (a kept array never reads freed simulator memory),
        # but keeping one is still refused: the contract is that inputs live for the call.
        for k, ref in enumerate(refs):
            if ref() is not None:
                raise KernelSimError(
                    f"kernel '{name}' kept a reference to its input {k} (or a view of it) "
                    f"after returning; inputs are valid only during the call, so copy what "
                    f"you keep (np.array(x))")
        return staged

    def _dispatch(self, name, inputs, config):
        ks = self.sim.kernel_sim
        if ks is not None and callable(ks):
            return ks(name, inputs, config)
        if ks is not None:
            return call_external(ks, name, inputs, config, self.sim.kernel_timeout)
        fn = _REGISTRY.get(name)
        if fn is not None:
            return fn(*inputs, **config["attrs"])
        exe = _find_executable()
        if exe:
            return call_external(exe, name, inputs, config, self.sim.kernel_timeout)
        raise KernelSimError(
            f"no kernel_sim for kernel '{name}': tried Simulator(kernel_sim=...) (not "
            f"given), the @birsim.kernel registry (registered: {kernels() or 'none'}), "
            f"the BIRSIM_KERNEL_SIM environment variable (not set) and a kernel_sim "
            f"executable on PATH (none found)")


def _input_arrays(ins):
    """Read-only arrays holding copies of the input memoryviews (the views over
    simulator memory are released by the binding after the call, and no array points
    into that memory), weak references to the flat arrays (every view a kernel derives
    keeps its flat array alive), and metadata."""
    arrays, refs, views, meta = [], [], [], []
    for mv, dt, shape in ins:
        dname = _DTYPE_NAMES[dt]
        flat = np.frombuffer(bytes(mv), dtype=numpy_dtype(dname))     # read-only copy
        refs.append(weakref.ref(flat))
        arrays.append(flat.reshape(shape))
        meta.append({"shape": list(shape), "dtype": dname})
    return arrays, refs, views, meta


def _check_results(name, results, out_meta, inputs):
    """Validate a kernel's results against the outputs; return the (cast, array) list
    for the C hook. Raises KernelSimError before anything is written."""
    n = len(out_meta)
    if n == 0 and results is None:
        results = []
    elif isinstance(results, np.ndarray) or not isinstance(results, (list, tuple)):
        results = [results]
    if len(results) != n:
        raise KernelSimError(f"kernel '{name}' returned {len(results)} output"
                             f"{'' if len(results) == 1 else 's'}, expected {n}")
    staged = []
    for k, (res, meta) in enumerate(zip(results, out_meta)):
        dname = meta["dtype"]
        dtype = numpy_dtype(dname)
        try:
            arr = np.asarray(res)
        except Exception as e:  # noqa: BLE001 -- anything NumPy refuses
            raise KernelSimError(f"kernel '{name}' output {k} is not an array: {e}") from None
        if list(arr.shape) != list(meta["shape"]):
            raise KernelSimError(f"kernel '{name}' output {k} has shape {list(arr.shape)}, "
                                 f"expected {list(meta['shape'])}")
        if arr.dtype == dtype and dname != "float32r":   # float32r: round like a cast
            if any(np.may_share_memory(arr, x) for x in inputs):
                arr = np.array(arr, copy=True)       # never hand back a view of an input
            staged.append((0, np.ascontiguousarray(arr)))
            continue
        if dname in _PACKED or not (arr.dtype.kind in "biuf" or _is_ml(arr.dtype)):
            raise KernelSimError(f"kernel '{name}' output {k}: cannot cast {arr.dtype} "
                                 f"to {dname}")
        staged.append((1, np.ascontiguousarray(arr, dtype=np.float32)))
    return staged


def make_host(sim):
    return _Host(sim)


def _resolve_exe(exe):
    """An absolute path for ``exe`` (the child runs in another directory)."""
    exe = os.fspath(exe)
    if not isinstance(exe, str):
        exe = os.fsdecode(exe)
    if os.sep in exe or (os.altsep and os.altsep in exe):
        return os.path.abspath(exe)
    return shutil.which(exe) or exe


def _child_env():
    """The environment for an external kernel_sim: BIRSIM_KERNEL_MODULE paths made
    absolute, since the child runs in its private directory."""
    env = dict(os.environ)
    mods = env.get("BIRSIM_KERNEL_MODULE")
    if mods:
        env["BIRSIM_KERNEL_MODULE"] = ",".join(
            os.path.abspath(m) if (m.endswith(".py") or os.sep in m) else m
            for m in mods.split(",") if m)
    return env


# Seconds an external kernel_sim may run per call unless Simulator(kernel_timeout=...)
# says otherwise (None: no limit). README, "Choices".
DEFAULT_TIMEOUT = 300.0


#: The environment variable marking an external kernel_sim and every process it starts
#: (a value unique to the call): what ``_kill`` finds and kills after the call.
RUN_ENV = "BIRSIM_KERNEL_RUN"


def _wait_exited(proc, timeout):
    """Wait until the child exits, without reaping it: until reaped its pid (its process
    group's id) cannot be reused, so the group can still be killed safely. False on
    timeout."""
    if not hasattr(os, "waitid"):                 # pragma: no cover -- not POSIX
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.0005
    while True:
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:                 # already reaped
            return True
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            delay = min(delay, left)
        time.sleep(delay)
        delay = min(2 * delay, 0.05)


def _marked(token):
    """Pids of the live processes whose environment holds ``RUN_ENV=token`` (Linux:
    /proc; elsewhere none are found)."""
    needle = f"{RUN_ENV}={token}".encode() + b"\0"
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    found = []
    me = os.getpid()
    for n in names:
        if not n.isdigit() or int(n) == me:
            continue
        try:
            with open(f"/proc/{n}/environ", "rb") as f:
                env = f.read()
        except OSError:                 # gone, another user's, a kernel thread
            continue
        if (b"\0" + env).find(b"\0" + needle) >= 0:
            found.append(int(n))
    return found


def _kill(proc, token=None):
    """Kill the child, its process group (it runs in its own session) and every process
    still marked with the call's ``token`` (descendants that left the group with
    setsid(), orphans), then reap the child. A descendant that cleared its environment
    and left the session is not found (README, "Choices")."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)      # the child is not reaped yet: its pgid
    except OSError:
        pass
    try:
        proc.kill()
    except OSError:
        pass
    try:
        for _ in range(100 if token is not None else 0):   # a descendant may fork meanwhile
            pids = _marked(token)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.001)
    finally:
        while True:
            try:
                proc.wait()
                break
            except KeyboardInterrupt:    # reap even if Ctrl-C is pressed again
                continue


class _NotRegular(Exception):
    pass


def _open_output(p, workdir):
    """Open an output file for reading only if it is a regular file (no FIFO, device or
    symbolic link) directly inside the private work directory; never blocks."""
    if os.path.dirname(os.path.realpath(p)) != os.path.realpath(workdir):
        raise _NotRegular("outside the directory")
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _NotRegular("a FIFO" if stat.S_ISFIFO(mode) else "not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _check_npy(fo, base, shape, name, k):
    """Check an output .npy file's header against the output's ``shape`` and the file's
    size against the header, before anything is read past the header (a huge or sparse
    file is never read whole); leaves ``fo`` at its start. Raises KernelSimError."""
    fmt = np.lib.format
    where = f"kernel_sim output {base}"
    try:
        version = fmt.read_magic(fo)
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        got, _, dtype = read(fo)
    except Exception as e:  # noqa: BLE001 -- any malformed header
        raise KernelSimError(f"{where} for kernel '{name}' is malformed: {e}") from None
    if dtype.hasobject:
        raise KernelSimError(f"{where} for kernel '{name}' is malformed: an object array "
                             f"(it would need pickle)")
    if list(got) != list(shape):
        raise KernelSimError(f"kernel '{name}' output {k} has shape {list(got)}, expected "
                             f"{list(shape)} ({where})")
    want = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    have = os.fstat(fo.fileno()).st_size - fo.tell()
    if have != want:
        raise KernelSimError(f"{where} for kernel '{name}' is malformed: {have} bytes of "
                             f"data after its header, {want} expected for {dtype} "
                             f"{list(shape)}")
    fo.seek(0)


def call_external(exe: Union[str, bytes, "os.PathLike[str]"], name: str,
                  inputs: Sequence[np.ndarray], config: Mapping[str, Any],
                  timeout: Optional[float] = None) -> List[np.ndarray]:
    """Run an external kernel_sim executable on ``inputs`` by the .npy protocol and
    return its outputs (arrays viewed back as the declared dtypes)."""
    run_id = next(_RUN_IDS)
    path = _resolve_exe(exe)
    workdir = os.path.abspath(tempfile.mkdtemp(prefix="birsim-kernel-"))
    try:
        cfg = dict(config)
        cfg["inputs"] = []
        for idx, (arr, meta) in enumerate(zip(inputs, config["inputs"])):
            p = os.path.join(workdir, f"{run_id}-{idx}-birsim.npy")
            np.save(p, np.ascontiguousarray(arr).view(_raw_dtype(arr.dtype)))
            cfg["inputs"].append(dict(meta, path=p))
        cfg["outputs"] = [dict(meta, path=os.path.join(workdir, f"{run_id}-{idx}-simout.npy"))
                          for idx, meta in enumerate(config["outputs"])]
        cfg_path = os.path.join(workdir, "config.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        # stdout/stderr go to files, not pipes: a grandchild that keeps a pipe open
        # cannot hang us. The child runs in its own session, marked with a token in its
        # environment: when it exits (or times out) its process group and every process
        # carrying the token are killed, so nothing it started outlives the call.
        env = _child_env()
        token = f"{os.getpid()}-{run_id}-{secrets.token_hex(8)}"
        env[RUN_ENV] = token
        err_path = os.path.join(workdir, "stderr.txt")
        with open(os.path.join(workdir, "stdout.txt"), "wb") as fout, \
                open(err_path, "wb") as ferr:
            try:
                proc = subprocess.Popen([path, cfg_path], cwd=workdir, stdin=subprocess.DEVNULL,
                                        stdout=fout, stderr=ferr, env=env,
                                        start_new_session=True)
            except FileNotFoundError:
                raise KernelSimError(f"kernel_sim executable not found: {path} (for kernel "
                                     f"'{name}')") from None
            except PermissionError:
                raise KernelSimError(f"kernel_sim {path} is not executable (for kernel "
                                     f"'{name}')") from None
            except OSError as e:
                raise KernelSimError(f"cannot run kernel_sim {path} for kernel '{name}': "
                                     f"{e}") from None
            try:
                exited = _wait_exited(proc, timeout)
            finally:
                _kill(proc, token)
            if not exited:
                raise KernelSimError(f"kernel_sim {path} timed out after {timeout} s on "
                                     f"kernel '{name}'")
            status = proc.returncode
        if status != 0:
            with open(err_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - _STDERR_TAIL))
                tail = f.read().decode(errors="replace").strip()
            what = (f"was killed by signal {-status}" if status < 0
                    else f"exited with status {status}")
            raise KernelSimError(f"kernel_sim {path} {what} on kernel '{name}'; stderr "
                                 f"tail:\n{tail}")
        results = []
        for k, meta in enumerate(cfg["outputs"]):
            dtype = numpy_dtype(meta["dtype"])
            try:
                with _open_output(meta["path"], workdir) as fo:
                    _check_npy(fo, os.path.basename(meta["path"]), meta["shape"], name, k)
                    arr = np.load(fo, allow_pickle=False)
            except KernelSimError:
                raise
            except FileNotFoundError:
                raise KernelSimError(f"kernel_sim {path} wrote no output "
                                     f"{os.path.basename(meta['path'])} for kernel "
                                     f"'{name}'") from None
            except _NotRegular as e:
                raise KernelSimError(f"kernel_sim output {os.path.basename(meta['path'])} "
                                     f"for kernel '{name}' is {e}, not a regular file in "
                                     f"its private directory") from None
            except Exception as e:  # noqa: BLE001 -- malformed file
                raise KernelSimError(f"kernel_sim output {os.path.basename(meta['path'])} "
                                     f"for kernel '{name}' is malformed: {e}") from None
            if not isinstance(arr, np.ndarray):
                if hasattr(arr, "close"):
                    arr.close()
                raise KernelSimError(f"kernel_sim output {os.path.basename(meta['path'])} "
                                     f"for kernel '{name}' is malformed: not a .npy array")
            raw = _raw_dtype(dtype)
            if raw != dtype and arr.dtype == raw:
                arr = arr.view(dtype)
            results.append(arr)
        return results
    finally:
        for _ in range(5):          # a late writer (one the kill could not find) may race
            shutil.rmtree(workdir, ignore_errors=True)
            if not os.path.lexists(workdir):
                break
