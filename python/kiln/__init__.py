"""Kiln from Python: load and run Kiln models with NumPy arrays.

    import kiln, numpy as np
    model = kiln.load("Model.kiln")                 # a package, artifact, archive or directory
    print(model.inputs)                             # [TensorInfo(name='x', dtype=float32, shape=('batch', 64))]
    outputs = model.run({"x": np.zeros((1, 64), np.float32)})

The runtime is the bundled ``libKilnC.so`` (the C API of ``include/kiln.h``), called through
ctypes; ``compile``, ``optimize``, ``convert`` and ``inspect`` run the bundled ``kiln`` command
line and return its JSON as dicts. Inputs that are C-contiguous NumPy arrays of a supported dtype
are passed without a copy; outputs are arrays over the runtime's own result buffers (no copy),
freed when the last of a run's arrays is. A model may be run from many
threads at once (the GIL is released during runs).
"""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import threading
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["KilnError", "Model", "TensorInfo", "load", "host_architecture", "version",
           "compile", "optimize", "convert", "inspect", "cli"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_LIB_DIR = os.environ.get("KILN_LIBRARY_DIR", os.path.join(_HERE, "_lib"))
ABI_VERSION = 1


class KilnError(Exception):
    """An error from the Kiln runtime or command line; ``status`` is the C API's code (or the
    command's exit status) and the message is the runtime's."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def _load_library() -> ctypes.CDLL:
    path = os.path.join(_LIB_DIR, "libKilnC.so")
    if not os.path.exists(path):
        raise ImportError(f"kiln: the runtime library is missing ({path})")
    lib = ctypes.CDLL(path)
    c = ctypes
    p = c.c_void_p
    sigs = {
        "kiln_abi_version": (c.c_uint32, []),
        "kiln_version": (c.c_char_p, []),
        "kiln_host_architecture": (c.c_char_p, []),
        "kiln_last_error": (c.c_char_p, []),
        "kiln_dtype_size": (c.c_size_t, [c.c_int]),
        "kiln_options_create": (p, []),
        "kiln_options_free": (None, [p]),
        "kiln_options_set_model": (c.c_int, [p, c.c_char_p]),
        "kiln_options_set_threads": (c.c_int, [p, c.c_int]),
        "kiln_options_set_key_file": (c.c_int, [p, c.c_char_p]),
        "kiln_options_set_cache_dir": (c.c_int, [p, c.c_char_p]),
        "kiln_options_set_max_arch": (c.c_int, [p, c.c_char_p]),
        "kiln_options_set_verify": (c.c_int, [p, c.c_int]),
        "kiln_options_set_frequent_reshapes": (c.c_int, [p, c.c_int]),
        "kiln_model_load": (c.c_int, [c.c_char_p, p, c.POINTER(p)]),
        "kiln_model_free": (None, [p]),
        "kiln_model_copy_error": (c.c_size_t, [p, c.c_char_p, c.c_size_t]),
        "kiln_model_function_count": (c.c_size_t, [p]),
        "kiln_model_function_name": (c.c_char_p, [p, c.c_size_t]),
        "kiln_model_architecture": (c.c_char_p, [p]),
        "kiln_model_explanation": (c.c_char_p, [p]),
        "kiln_model_io_count": (c.c_int, [p, c.c_char_p, c.c_int, c.POINTER(c.c_size_t)]),
        "kiln_model_io_describe": (c.c_int, [p, c.c_char_p, c.c_int, c.c_size_t, c.POINTER(c.c_char_p),
                                             c.POINTER(c.c_int), c.POINTER(c.c_size_t)]),
        "kiln_model_io_dimension": (c.c_int, [p, c.c_char_p, c.c_int, c.c_size_t, c.c_size_t,
                                              c.POINTER(c.c_int64), c.POINTER(c.c_char_p)]),
        "kiln_tensor_create": (c.c_int, [c.c_int, c.c_size_t, c.POINTER(c.c_int64), p, c.c_size_t, c.POINTER(p)]),
        "kiln_tensor_wrap": (c.c_int, [c.c_int, c.c_size_t, c.POINTER(c.c_int64), p, c.c_size_t, c.POINTER(p)]),
        "kiln_tensor_free": (None, [p]),
        "kiln_tensor_dtype": (c.c_int, [p]),
        "kiln_tensor_rank": (c.c_size_t, [p]),
        "kiln_tensor_shape": (c.POINTER(c.c_int64), [p]),
        "kiln_tensor_data": (p, [p]),
        "kiln_tensor_bytes": (c.c_size_t, [p]),
        "kiln_model_run": (c.c_int, [p, c.c_char_p, c.c_size_t, c.POINTER(c.c_char_p), c.POINTER(p), c.POINTER(p)]),
        "kiln_model_run_arrays": (c.c_int, [p, c.c_char_p, c.c_size_t, c.POINTER(c.c_char_p), c.POINTER(c.c_int32), c.POINTER(c.c_size_t),
                                  c.POINTER(c.c_int64), c.POINTER(c.c_void_p), c.POINTER(c.c_size_t), c.POINTER(p)]),
        "kiln_outputs_take": (c.c_int, [p, c.POINTER(p), c.c_size_t]),
        "kiln_outputs_describe": (c.c_int, [p, c.POINTER(c.c_int32), c.POINTER(c.c_size_t), c.POINTER(c.c_int64), c.c_size_t,
                                  c.POINTER(c.c_void_p), c.POINTER(c.c_size_t)]),
        "kiln_outputs_count": (c.c_size_t, [p]),
        "kiln_outputs_name": (c.c_char_p, [p, c.c_size_t]),
        "kiln_outputs_tensor": (p, [p, c.c_size_t]),
        "kiln_outputs_free": (None, [p]),
        "kiln_state_create": (c.c_int, [p, c.c_char_p, c.c_char_p, c.POINTER(p)]),
        "kiln_state_free": (None, [p]),
        "kiln_state_reset": (c.c_int, [p]),
        "kiln_state_copied_bytes": (c.c_uint64, [p]),
        "kiln_state_appended_bytes": (c.c_uint64, [p]),
        "kiln_model_run_state": (c.c_int, [p, c.c_size_t, c.POINTER(c.c_char_p), c.POINTER(c.c_int32), c.POINTER(c.c_size_t),
                                 c.POINTER(c.c_int64), c.POINTER(c.c_void_p), c.POINTER(c.c_size_t), c.POINTER(p)]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    if lib.kiln_abi_version() != ABI_VERSION:
        raise ImportError(f"kiln: libKilnC has C ABI {lib.kiln_abi_version()}, this package needs {ABI_VERSION}")
    return lib


_lib = _load_library()

_DTYPES: List[Tuple[int, Any]] = [
    (1, np.float32), (2, np.float16), (4, np.float64), (5, np.int64), (6, np.int32), (7, np.int16),
    (8, np.int8), (9, np.uint8), (10, np.bool_), (11, np.uint16), (12, np.uint32), (13, np.uint64),
]
_CODE_OF = {np.dtype(t): code for code, t in _DTYPES}
_DTYPE_OF = {code: np.dtype(t) for code, t in _DTYPES}
_DTYPE_NAMES = {3: "bfloat16"}


def _check(status: int, model: Optional[ctypes.c_void_p] = None) -> None:
    if status == 0:
        return
    message = _lib.kiln_last_error().decode("utf-8", "replace")
    raise KilnError(message, status)


def _bytes(s: Optional[Union[str, os.PathLike]]) -> Optional[bytes]:
    return None if s is None else os.fsencode(s)


def version() -> str:
    """The runtime's version string."""
    return _lib.kiln_version().decode()


def host_architecture() -> Optional[str]:
    """This host's best architecture (for example ``"x86_64_v3"``), or ``None`` when Kiln has no
    kernels for the CPU."""
    s = _lib.kiln_host_architecture()
    return s.decode() if s else None


class TensorInfo(NamedTuple):
    """An input or output: its name, NumPy dtype (``None`` for bfloat16, which NumPy lacks) and
    shape, where a dimension bound at run time is its symbol (``"batch"``) or ``None``."""
    name: str
    dtype: Optional[np.dtype]
    shape: Tuple[Union[int, str, None], ...]


class Model:
    """A loaded model. Use :func:`load` to make one; :meth:`close` (or ``with``) frees it."""

    def __init__(self, handle: ctypes.c_void_p, path: str) -> None:
        self._handle = handle
        self.path = path
        count = _lib.kiln_model_function_count(handle)
        self.functions: List[str] = [_lib.kiln_model_function_name(handle, i).decode() for i in range(count)]
        arch = _lib.kiln_model_architecture(handle)
        self.architecture: Optional[str] = arch.decode() if arch else None
        self.explanation: str = _lib.kiln_model_explanation(handle).decode()
        self._signatures: Dict[Optional[str], Tuple[List[TensorInfo], List[TensorInfo]]] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def close(self) -> None:
        """Frees the model; later calls raise :class:`KilnError`."""
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _lib.kiln_model_free(handle)

    def _live(self) -> ctypes.c_void_p:
        if not self._handle:
            raise KilnError("the model is closed")
        return self._handle

    def _signature(self, function: Optional[str]) -> Tuple[List[TensorInfo], List[TensorInfo]]:
        with self._lock:
            if function in self._signatures:
                return self._signatures[function]
        handle, fn = self._live(), _bytes(function)
        result = []
        for io in (0, 1):
            count = ctypes.c_size_t()
            _check(_lib.kiln_model_io_count(handle, fn, io, ctypes.byref(count)))
            infos = []
            for i in range(count.value):
                name, dtype, rank = ctypes.c_char_p(), ctypes.c_int(), ctypes.c_size_t()
                _check(_lib.kiln_model_io_describe(handle, fn, io, i, ctypes.byref(name), ctypes.byref(dtype), ctypes.byref(rank)))
                shape: List[Union[int, str, None]] = []
                for d in range(rank.value):
                    size, symbol = ctypes.c_int64(), ctypes.c_char_p()
                    _check(_lib.kiln_model_io_dimension(handle, fn, io, i, d, ctypes.byref(size), ctypes.byref(symbol)))
                    shape.append(size.value if size.value >= 0 else (symbol.value.decode() or None))
                infos.append(TensorInfo(name.value.decode(), _DTYPE_OF.get(dtype.value), tuple(shape)))
            result.append(infos)
        with self._lock:
            self._signatures[function] = (result[0], result[1])
        return result[0], result[1]

    @property
    def inputs(self) -> List[TensorInfo]:
        """The first function's inputs (see :meth:`signature` for another function)."""
        return self._signature(None)[0]

    @property
    def outputs(self) -> List[TensorInfo]:
        """The first function's outputs."""
        return self._signature(None)[1]

    def signature(self, function: Optional[str] = None) -> Tuple[List[TensorInfo], List[TensorInfo]]:
        """A function's inputs and outputs."""
        return self._signature(function)

    def run(self, inputs: Mapping[str, np.ndarray], function: Optional[str] = None,
            state: Optional["State"] = None) -> Dict[str, np.ndarray]:
        """Runs a function (default: the first) on arrays by input name; returns arrays by output
        name, in the function's output order. With ``state`` (from :meth:`make_state`), the state
        supplies its inputs and takes its outputs, which are then neither given nor returned.
        Raises :class:`KilnError` for a missing, unknown or mistyped input, naming it."""
        handle = self._live()
        # The arrays stay referenced until the run returns: the runtime borrows their memory.
        args, keep = _arrays(inputs)
        out = ctypes.c_void_p()
        if state is not None:
            if state._model is not self:
                raise KilnError("the state was made by another model", 1)
            _check(_lib.kiln_model_run_state(state._live(), *args, ctypes.byref(out)), handle)
            return _outputs(out, [])
        _check(_lib.kiln_model_run_arrays(handle, _bytes(function), *args, ctypes.byref(out)))
        return _outputs(out, [o.name for o in self._signature(function)[1]])

    def make_state(self, function: Optional[str] = None, rule: Optional[str] = None) -> "State":
        """A fresh state for stateful runs of a function (default: the first): the state pairs the
        function declares (``kiln convert --state``), or those ``rule`` names
        (``"past_key_values.*=present.*"``). A decoder's key/value cache kept in a state is
        appended to in place, never copied whole per run."""
        out = ctypes.c_void_p()
        handle = self._live()
        _check(_lib.kiln_state_create(handle, _bytes(function), _bytes(rule), ctypes.byref(out)), handle)
        return State(self, out, function)

    def __repr__(self) -> str:
        return f"kiln.Model({self.path!r}, functions={self.functions}, architecture={self.architecture!r})"


class State:
    """State kept between runs of one function (see :meth:`Model.make_state`); one run at a time."""

    def __init__(self, model: Model, handle: ctypes.c_void_p, function: Optional[str]) -> None:
        self._model, self._handle, self.function = model, handle, function

    def _live(self) -> ctypes.c_void_p:
        if not self._handle:
            raise KilnError("the state is closed")
        return self._handle

    def reset(self) -> None:
        """Empties the state: the next run starts from zero-length values."""
        _check(_lib.kiln_state_reset(self._live()))

    @property
    def copied_bytes(self) -> int:
        """Bytes of state moved (a buffer grown) or written whole (an unplanned run) so far."""
        return int(_lib.kiln_state_copied_bytes(self._live()))

    @property
    def appended_bytes(self) -> int:
        """Bytes appended in place by planned runs so far."""
        return int(_lib.kiln_state_appended_bytes(self._live()))

    def close(self) -> None:
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _lib.kiln_state_free(handle)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _arrays(inputs: Mapping[str, np.ndarray]) -> Tuple[Tuple[Any, ...], List[np.ndarray]]:
    """The C API's parallel arrays for inputs (count, names, dtypes, ranks, shapes, data, sizes),
    and the arrays whose memory they borrow."""
    n = len(inputs)
    names, dtypes = (ctypes.c_char_p * max(n, 1))(), (ctypes.c_int32 * max(n, 1))()
    ranks, data, sizes = (ctypes.c_size_t * max(n, 1))(), (ctypes.c_void_p * max(n, 1))(), (ctypes.c_size_t * max(n, 1))()
    dims: List[int] = []
    keep = []
    for i, (name, value) in enumerate(inputs.items()):
        array = _contiguous(name, value)
        keep.append(array)
        names[i] = _name_bytes(name)
        dtypes[i] = _CODE_OF[array.dtype]
        ranks[i] = array.ndim
        dims.extend(array.shape)
        data[i] = array.__array_interface__["data"][0] if array.nbytes else None
        sizes[i] = array.nbytes
    shapes = (ctypes.c_int64 * max(len(dims), 1))(*dims)
    return (n, names, dtypes, ranks, shapes, data, sizes), keep


def _contiguous(name: str, value: Any) -> np.ndarray:
    """An input as a C-contiguous array in native byte order of a dtype Kiln runs."""
    array = value if type(value) is np.ndarray else np.asarray(value)
    dtype = array.dtype
    if dtype.byteorder not in "=|":
        dtype = dtype.newbyteorder("=")
    if dtype not in _CODE_OF:
        raise KilnError(f"input '{name}': dtype {array.dtype} is not one Kiln runs "
                        f"({', '.join(str(np.dtype(t)) for _, t in _DTYPES)})", 1)
    if not array.flags.c_contiguous or dtype is not array.dtype:
        array = np.ascontiguousarray(array, dtype=dtype)
    return array


_NAME_BYTES: Dict[str, bytes] = {}


def _name_bytes(name: str) -> bytes:
    """A name as the C API takes it, encoded once per distinct name."""
    b = _NAME_BYTES.get(name)
    if b is None:
        b = _bytes(name)
        if len(_NAME_BYTES) < 4096:
            _NAME_BYTES[name] = b
    return b


class _Tensor:
    """One output tensor the runtime handed over, freed when the last array over it is gone (each
    output on its own: a kept row of logits does not keep a decoder's cache alive)."""

    __slots__ = ("handle",)

    def __init__(self, handle: Optional[int]) -> None:
        self.handle = handle

    def __del__(self) -> None:
        if self.handle:
            _lib.kiln_tensor_free(self.handle)
            self.handle = None


class _View:
    """One output's memory as NumPy sees it; holds its tensor alive."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, owner: _Tensor, address: int, shape: Tuple[int, ...], dtype: np.dtype) -> None:
        self.owner = owner
        self.__array_interface__ = {"version": 3, "shape": shape, "typestr": dtype.str, "data": (address, False)}


def _outputs(out: ctypes.c_void_p, names: List[str]) -> Dict[str, np.ndarray]:
    """The run's outputs as arrays over the runtime's own buffers (no copy), described in one
    call and each taken from the outputs handle (freed here): every buffer is freed when the last
    array over it is."""
    try:
        count = _lib.kiln_outputs_count(out)
        if count != len(names):
            names = [_lib.kiln_outputs_name(out, i).decode() for i in range(count)]
        size = max(count, 1)
        dtypes, ranks = (ctypes.c_int32 * size)(), (ctypes.c_size_t * size)()
        data, sizes = (ctypes.c_void_p * size)(), (ctypes.c_size_t * size)()
        shapes = (ctypes.c_int64 * (32 * size))()
        tensors = (ctypes.c_void_p * size)()
        _check(_lib.kiln_outputs_describe(out, dtypes, ranks, shapes, 32 * size, data, sizes))
        _check(_lib.kiln_outputs_take(out, tensors, size))
    finally:
        _lib.kiln_outputs_free(out)
    # From here every tensor has an owner that frees it, whatever happens next.
    owners = [_Tensor(tensors[i]) for i in range(count)]
    result: Dict[str, np.ndarray] = {}
    at = 0
    for i in range(count):
        rank = ranks[i]
        shape = tuple(shapes[at:at + rank])
        at += rank
        dtype = _DTYPE_OF.get(dtypes[i])
        if dtype is None:
            raise KilnError(f"output '{names[i]}' is {_DTYPE_NAMES.get(dtypes[i], dtypes[i])}, which NumPy cannot hold", 1)
        if sizes[i]:
            result[names[i]] = np.asarray(_View(owners[i], data[i], shape, dtype))
        else:
            result[names[i]] = np.empty(shape, dtype=dtype)
    return result


def load(path: Union[str, os.PathLike], model: Optional[str] = None, threads: Optional[int] = None,
         key: Optional[Union[str, os.PathLike]] = None, cache_dir: Optional[Union[str, os.PathLike]] = None,
         max_arch: Optional[str] = None, verify: bool = True, frequent_reshapes: bool = False) -> Model:
    """Loads a package (``Name.kiln``), compiled artifact, archive or directory of them, as
    ``Model.load`` does: the best artifact for this host, else the package specialized.

    ``model`` picks one model of a directory; ``threads`` per run (default: all cores); ``key``
    is the key file of encrypted artifacts; ``cache_dir`` the specialization cache; ``max_arch``
    caps the arch; ``verify=False`` skips weight checksums; ``frequent_reshapes=True`` says
    that input sizes change on most runs (a language model's growing cache): plans derived for
    new sizes are then not cached. Either way a new size is planned from the previous one."""
    options = _lib.kiln_options_create()
    try:
        if model is not None:
            _check(_lib.kiln_options_set_model(options, _bytes(model)))
        if threads is not None:
            _check(_lib.kiln_options_set_threads(options, int(threads)))
        if key is not None:
            _check(_lib.kiln_options_set_key_file(options, _bytes(key)))
        if cache_dir is not None:
            _check(_lib.kiln_options_set_cache_dir(options, _bytes(cache_dir)))
        if max_arch is not None:
            _check(_lib.kiln_options_set_max_arch(options, _bytes(max_arch)))
        _check(_lib.kiln_options_set_verify(options, 1 if verify else 0))
        _check(_lib.kiln_options_set_frequent_reshapes(options, 1 if frequent_reshapes else 0))
        handle = ctypes.c_void_p()
        _check(_lib.kiln_model_load(_bytes(path), options, ctypes.byref(handle)))
        return Model(handle, os.fspath(path))
    finally:
        _lib.kiln_options_free(options)


def cli(*args: Union[str, os.PathLike]) -> str:
    """Runs the bundled ``kiln`` command line; returns its standard output. Raises
    :class:`KilnError` with its error message when it fails."""
    exe = os.path.join(_LIB_DIR, "kiln")
    if not os.access(exe, os.X_OK):
        # Some installers drop the executable bit of files in a wheel.
        try:
            os.chmod(exe, 0o755)
        except OSError as e:
            raise KilnError(f"{exe}: the bundled command line is not executable ({e})") from None
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = _LIB_DIR + (os.pathsep + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    r = subprocess.run([exe, *map(os.fspath, args)], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        message = r.stderr.strip().splitlines()[0] if r.stderr.strip() else f"kiln exited with {r.returncode}"
        raise KilnError(message[len("error: "):] if message.startswith("error: ") else message, r.returncode)
    return r.stdout


def _json(*args: Union[str, os.PathLike]) -> Any:
    return json.loads(cli(*args))


def inspect(path: Union[str, os.PathLike], model: Optional[str] = None, key: Optional[Union[str, os.PathLike]] = None) -> Dict[str, Any]:
    """``kiln inspect PATH --json`` as a dict: metadata, sizes, precisions, ops, signatures, and
    for artifacts their header and kernels."""
    args: List[Union[str, os.PathLike]] = ["inspect", path, "--json"]
    if model:
        args += ["--model", model]
    if key:
        args += ["--key", key]
    return _json(*args)


def compile(package: Union[str, os.PathLike], output: Union[str, os.PathLike], arch: Union[str, Sequence[str]] = "host",
            config: Optional[Union[str, os.PathLike]] = None, encrypt: Optional[Union[str, os.PathLike]] = None,
            version: Optional[str] = None) -> Dict[str, Any]:
    """``kiln compile`` into ``output``; returns its ``assets.json`` as a dict. ``arch`` is
    ``"host"``, ``"all"`` or arch names."""
    archs = arch if isinstance(arch, str) else ",".join(arch)
    args: List[Union[str, os.PathLike]] = ["compile", package, "--arch", archs, "-o", output, "--json"]
    if config:
        args += ["--config", config]
    if encrypt:
        args += ["--encrypt", encrypt]
    if version:
        args += ["--version", version]
    return _json(*args)


def optimize(package: Union[str, os.PathLike], output: Union[str, os.PathLike], config: Union[str, os.PathLike]) -> Dict[str, Any]:
    """``kiln optimize`` with a compression config; returns its JSON report."""
    return _json("optimize", package, "--config", config, "-o", output, "--json")


def convert(onnx: Union[str, os.PathLike], output: Union[str, os.PathLike], state: Optional[str] = None) -> Dict[str, Any]:
    """``kiln convert`` of an ONNX file into a package; returns the package's ``inspect`` dict.
    ``state`` declares state pairs (``"past_key_values.*=present.*"``, see :meth:`Model.make_state`)."""
    cli("convert", onnx, "-o", output, *(("--state", state) if state else ()))
    return inspect(output)
