"""Tensors in and out: names of element types, new outputs in the inputs'
library (PyTorch's allocator for PyTorch inputs, NumPy's for NumPy inputs),
and what the C++ module is handed for each argument."""

import numpy as np

from ._errors import InvalidArgument

try:  # PyTorch is optional: NumPy arrays work without it.
    import torch
except ImportError:  # pragma: no cover - exercised only where torch is absent
    torch = None

_NUMPY_DTYPES = {"float32": np.float32, "float16": np.float16, "float8_e4m3": np.uint8}


def _torch_dtypes():
    table = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    # Newer PyTorch has an fp8 type; older ones carry fp8 bytes as uint8.
    table["float8_e4m3"] = getattr(torch, "float8_e4m3fn", torch.uint8)
    return table


def is_torch(tensor):
    return torch is not None and isinstance(tensor, torch.Tensor)


def dtype_name(dtype):
    """The library's name of `dtype`: a string ("bf16", "bfloat16", ...), a
    torch.dtype or a NumPy dtype."""
    if isinstance(dtype, str):
        return dtype
    if torch is not None and isinstance(dtype, torch.dtype):
        for name, value in _torch_dtypes().items():
            if dtype == value:
                return name
        if dtype == torch.uint8:
            return "float8_e4m3"
        raise TypeError(f"unsupported torch dtype {dtype}; use float32, float16 or bfloat16")
    try:
        numpy_dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be a name, a torch.dtype or a NumPy dtype, got {dtype!r}") from None
    for name, value in _NUMPY_DTYPES.items():
        if numpy_dtype == value:
            return name
    raise TypeError(f"unsupported NumPy dtype {numpy_dtype}; use float32 or float16")


def require_tensor(tensor, what):
    """`tensor` itself, or InvalidArgument (the C++ module's words) when it is
    not a DLPack tensor and its shape cannot be read for the outputs."""
    if not hasattr(tensor, "__dlpack__") or not hasattr(tensor, "shape"):
        raise InvalidArgument(
            f"{what} must be a tensor that supports DLPack (a NumPy array or a PyTorch tensor), "
            f"got {type(tensor).__name__}"
        )
    return tensor


def empty(like, shape, dtype):
    """A new tensor of `shape` and library dtype name `dtype`, from the same
    library and on the same device as `like`."""
    if is_torch(like):
        return torch.empty(shape, dtype=_torch_dtypes()[dtype], device=like.device)
    if dtype not in _NUMPY_DTYPES:
        raise TypeError(f"NumPy has no {dtype}; pass PyTorch tensors for {dtype}")
    if not isinstance(like, np.ndarray):
        raise TypeError(
            f"cannot allocate an output like a {type(like).__name__}; pass out= (and lse=) explicitly"
        )
    return np.empty(shape, dtype=_NUMPY_DTYPES[dtype])


def aligned_bytes(like, nbytes, alignment=64):
    """A byte tensor of at least `nbytes` whose first byte is `alignment`-aligned."""
    raw = empty(like, (nbytes + alignment,), "float8_e4m3")
    if is_torch(raw):
        raw = raw.view(torch.uint8)
        address = raw.data_ptr()
    else:
        address = raw.__array_interface__["data"][0]
    offset = (-address) % alignment
    return raw[offset : offset + nbytes]


def arg(tensor):
    """What the C++ module is handed for a tensor argument: PyTorch tensors
    without autograd (detach() shares the memory) and fp8 as its bytes."""
    if is_torch(tensor):
        tensor = tensor.detach()
        if tensor.dtype == getattr(torch, "float8_e4m3fn", None):
            tensor = tensor.view(torch.uint8)
    return tensor


def stream_of(*tensors):
    """The PyTorch stream a GPU tensor's work belongs on (its current stream,
    as an int handle), or None for host tensors. On CUDA the default stream's
    handle 0 becomes 1: DLPack refuses 0 there and names the legacy default
    stream 1, which is also CUDA's own handle for it (cudaStreamLegacy)."""
    for tensor in tensors:
        if is_torch(tensor) and tensor.device.type == "cuda":
            return _dlpack_stream(torch.cuda.current_stream(tensor.device).cuda_stream)
    return None


def current_stream():
    """PyTorch's current CUDA stream of the current device as stream_of gives
    it, or None without CUDA: where an engine's next kernels go."""
    if torch is None or not torch.cuda.is_available():
        return None
    return _dlpack_stream(torch.cuda.current_stream().cuda_stream)


def _dlpack_stream(handle):
    """A CUDA stream handle as DLPack takes it: 0 (the legacy default stream)
    becomes 1; ROCm keeps 0."""
    return 1 if handle == 0 and getattr(torch.version, "hip", None) is None else handle


def one_element(scale):
    """A 0-d scale tensor (vLLM's static per-tensor scale is one) as 1-d:
    DLPack views of rank 0 are refused. Floats and other tensors pass as
    they are."""
    if scale is not None and not isinstance(scale, (int, float)) and getattr(scale, "ndim", None) == 0:
        return scale.reshape(1)
    return scale


def descales(q, k, v):
    """The (q, k, v) descales as the C++ module takes them: None when none
    is given, else each a float, a tensor (0-d made 1-d, as one_element
    does) or None for 1."""
    if q is None and k is None and v is None:
        return None
    return tuple(arg(one_element(d)) if d is not None and not isinstance(d, (int, float)) else d for d in (q, k, v))


def int_list(values, what):
    """cu_seqlens as a list of Python ints, from a list, a NumPy array or a
    PyTorch tensor (copied to the host); floats and other types are refused."""
    if values is None:
        raise ValueError(f"{what} is required, got None")
    if is_torch(values):
        if values.is_floating_point() or values.is_complex() or values.dtype == torch.bool:
            raise ValueError(f"{what} must hold integers, got a torch tensor of {values.dtype}")
        if values.dim() != 1:
            raise ValueError(f"{what} must be 1-d, got shape {tuple(values.shape)}")
        return [int(x) for x in values.cpu().tolist()]
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{what} must be 1-d, got shape {array.shape}")
    if array.size and array.dtype.kind not in "iu":
        raise ValueError(f"{what} must hold integers, got {array.dtype}")
    return [int(x) for x in array.tolist()]
