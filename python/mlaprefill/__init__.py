"""MLA prefill attention for Python: backend selection from the library's
YAML configuration, and the prefill operations on NumPy arrays and PyTorch
tensors, read and written in place through DLPack (no copies).

    import mlaprefill, torch
    sel = mlaprefill.Selector()
    backend = sel.create(sel.select("bfloat16"), num_heads=16, scale=192 ** -0.5)
    backend.prepare(cu_seqlens_q=[0, 5, 12])
    out, lse = backend.run_new_tokens(q, k, v)   # q [12, 16, 192], k, v as in vLLM

Tensor layouts (the library's contract): q, k [N, H, P+R], v [N, H, V],
out [Nq, H, V], lse [H, Nq] float32 (natural log). Strides are honoured.
"""

from . import _core
from ._errors import (
    ConfigError,
    DeviceError,
    Error,
    InternalError,
    InvalidArgument,
    IoError,
    NotFound,
    NotSupported,
    PluginError,
    SelectionError,
)
from ._errors import CLASSES as _ERROR_CLASSES
from . import _tensors

_core._set_error_classes(_ERROR_CLASSES)

DEEPSEEK_DIMS = (128, 64, 128)
"""(qk_nope_head_dim, qk_rope_head_dim, v_head_dim) of DeepSeek-V2/V3/R1."""

from ._core import (  # noqa: E402  (after the error classes are set)
    clear_override,
    configure,
    expand_plugin_path,
    is_overridden,
    load_plugin,
    loaded_plugins,
    named_factories,
    plugin_dir,
    register_mla_prefill_backend,
)


def plan_context_chunks(context_lens, workspace_tokens, block_size):
    """How a step's cached context is processed in chunks of at most
    `workspace_tokens` gathered tokens (vLLM's plan; see the C++
    plan_context_chunks): a list of chunks, each a dict with `starts` and
    `cu_seqlens_k` per sequence, `max_seqlen_k` and `chunk_size`."""
    return _core.plan_context_chunks(_tensors.int_list(context_lens, "context_lens"), workspace_tokens, block_size)


def build_info():
    """What this build of the package carries, as a dict: `version`,
    `compiler`, `build_type`, `backends` (per backend of the library's table:
    `built`, and `detail`: what it was built with, or why it was left out)
    and `notes` (the KOKKOS projection's GEMM, the torch operators, where the
    CUDA libraries are looked for). The build printed the same when it was
    configured. Whether a built backend runs here is backends()' answer."""
    from . import _build_info

    return {
        "version": _build_info.VERSION,
        "compiler": _build_info.COMPILER,
        "build_type": _build_info.BUILD_TYPE,
        "backends": {name: dict(row) for name, row in _build_info.BACKENDS.items()},
        "notes": dict(_build_info.NOTES),
    }


def platform(spec=None):
    """The device selection runs against, as a dict (vendor, arch, capability,
    ...): MLA_PLATFORM when set, else the first GPU, else the host; or the
    platform `spec` describes ("nvidia:9.0", "amd:gfx942", "host")."""
    return _core.platform(spec)


def backends(config=None, dtype="bfloat16", dims=DEEPSEEK_DIMS, backend=None, platform=None):
    """What ``mla-prefill backends --json`` prints, as a dict: the platform,
    the request, the configuration's sources, every backend with available /
    valid / reasons / priority, and the selection (or why there is none).

    Like the command, this applies the configuration (log level, plugins,
    overrides) to the process. `config` is a YAML file (default: MLA_CONFIG or
    the built-in defaults); `backend` an explicit choice on top of it."""
    return _core.backends_report(config, backend, _tensors.dtype_name(dtype), tuple(dims), platform)


class Selection:
    """The selector's choice: `.name`, `.why`, `.walk` (every candidate
    considered), `.platform`, and the request it answered (`.dtype`, `.dims`)."""

    def __init__(self, native, dtype, dims):
        self._native = native
        self.dtype = dtype
        self.dims = dims

    name = property(lambda self: self._native.name)
    why = property(lambda self: self._native.why)
    walk = property(lambda self: self._native.walk)
    platform = property(lambda self: self._native.platform)
    queue_kinds = property(lambda self: self._native.queue_kinds)

    def __repr__(self):
        return f"Selection({self.name!r}, why={self.why!r})"


class Selector:
    """Chooses backends as the C++ mla::Selector does. The configuration is
    the built-in defaults < `config` (a YAML file; default MLA_CONFIG) < the
    environment < `backend`; unless `apply` is False it is applied to the
    process first (log level, plugins, overrides), as the command does."""

    def __init__(self, config=None, backend=None, apply=True):
        self._native = _core.Selector(config, backend, apply)

    @property
    def config_sources(self):
        return self._native.config_sources

    def select(self, dtype="bfloat16", dims=DEEPSEEK_DIMS, platform=None, backend=None):
        """The backend for `dtype` (a name or a torch dtype) and `dims` on
        `platform` (default: this machine's); `backend` names one explicitly
        (validated, no fallback). Raises SelectionError with every reason."""
        name = _tensors.dtype_name(dtype)
        dims = tuple(dims)
        return Selection(self._native.select(name, dims, platform, backend), name, dims)

    def report(self, dtype="bfloat16", dims=DEEPSEEK_DIMS, platform=None):
        """Every backend with its availability, reasons and priority."""
        return self._native.report(_tensors.dtype_name(dtype), tuple(dims), platform)

    def create(self, selection, num_heads, scale=None, kv_lora_rank=512, dims=None, dtype=None, device=0,
               out_dtype=None):
        """A backend of `selection` for `num_heads` heads, on the queue the
        backend runs on (GPU `device` for GPU backends). `scale`, when given,
        is the softmax scale the run methods use when a call passes none, as
        vLLM's backends take it in their constructor; the library itself
        takes a scale with every call. `dims` and `dtype` default to what the
        selection was asked for, and must be that (select again for others).
        `out_dtype` is the output's element type: required ("bfloat16" or
        "float16") for float8_e4m3 q, k and v, the input dtype otherwise."""
        dims = tuple(dims) if dims is not None else selection.dims
        dtype = _tensors.dtype_name(dtype) if dtype is not None else selection.dtype
        out_dtype = None if out_dtype is None else _tensors.dtype_name(out_dtype)
        native = self._native.create(selection._native, num_heads, kv_lora_rank, dims, dtype, device, out_dtype)
        return Backend(native, None if scale is None else float(scale))


class Backend:
    """One prefill backend (vLLM's MLAPrefillBackend): prepare a step's
    metadata, then run the new tokens, the context chunks and the merge.

    Outputs go into `out` / `lse` when given (written in place, no copy) and
    are otherwise allocated like the inputs: PyTorch tensors on q's device, or
    NumPy arrays. A backend may be shared between threads; calls take turns."""

    def __init__(self, native, scale=None):
        self._native = native
        self.scale = scale  # the softmax scale of calls that pass none

    name = property(lambda self: self._native.name)
    num_heads = property(lambda self: self._native.num_heads)
    dtype = property(lambda self: self._native.dtype)  # of q, k and v
    out_dtype = property(lambda self: self._native.out_dtype)  # of the output (without output_scale)
    dims = property(lambda self: self._native.dims)
    kv_lora_rank = property(lambda self: self._native.kv_lora_rank)
    kernel_info = property(lambda self: self._native.kernel_info)
    queue = property(lambda self: self._native.queue)

    def __repr__(self):
        return f"Backend({self.name!r}, dtype={self.dtype!r}, num_heads={self.num_heads}, queue={self.queue!r})"

    def supports_quant_output(self, key="fp8_e4m3_static_per_tensor"):
        return self._native.supports_quant_output(key)

    def prepare(self, cu_seqlens_q, cu_seqlens_k=None, chunks=(), max_seqlen_q=None, max_seqlen_k=None,
                causal=True, stream=None):
        """Checks and stores a step's metadata: cu_seqlens of the new tokens
        ([B+1], from 0, non-decreasing), of their keys (default: the same),
        and of each context chunk's keys. Lists, NumPy or PyTorch integers.
        A GPU backend uploads them on `stream` (an int handle, as
        torch.cuda.current_stream().cuda_stream gives it; None: the backend's
        own queue): prepared on the stream the runs use, a step reuses the
        last step's device buffer instead of freeing it (a device-wide sync)."""
        self._native.prepare(
            _tensors.int_list(cu_seqlens_q, "cu_seqlens_q"),
            None if cu_seqlens_k is None else _tensors.int_list(cu_seqlens_k, "cu_seqlens_k"),
            [_tensors.int_list(c, f"chunks[{i}]") for i, c in enumerate(chunks)],
            max_seqlen_q,
            max_seqlen_k,
            causal,
            stream,
        )

    def _scale(self, scale):
        scale = self.scale if scale is None else scale
        if scale is None:
            raise InvalidArgument("no softmax scale: pass scale= here or to Selector.create")
        return float(scale)

    def _outputs(self, q, out, lse, want_lse, out_dtype):
        num_q, heads = _tensors.require_tensor(q, "q").shape[:2]
        if out is None:
            out = _tensors.empty(q, (num_q, heads, self.dims[2]), out_dtype)
        if lse is None and want_lse:
            lse = _tensors.empty(q, (heads, num_q), "float32")
        return out, lse

    def run_new_tokens(self, q, k, v, return_lse=True, out=None, lse=None, output_scale=None, scale=None,
                       q_descale=None, k_descale=None, v_descale=None, topk_mask=None, window=0, sinks=None):
        """Causal varlen attention of the new tokens, softmax of `scale` * q.k
        (default: the backend's scale). Returns out, or (out, lse) with
        return_lse. With `output_scale` (a float, or a one-element float32
        tensor, 0-d or 1-d, read when the kernel runs) the output is fp8 e4m3.
        float8_e4m3 q, k and v (torch.float8_e4m3fn, or uint8 bytes) take
        descales: each a float, or a float32 tensor of one value (0-d or 1-d)
        or one per head, read when the call runs; None is 1.
        docs/contract.md §12: `topk_mask` (vLLM's bit-packed mask, an int32
        tensor [batch, rows, words] whose bits index each sequence's whole
        key range), `window` (a left window of that many keys; 0 none) and
        `sinks` (float32 [heads] sink logits) limit what each query sees;
        backends that take none refuse them (NotSupported)."""
        if lse is not None and not return_lse:
            raise InvalidArgument("lse was given but return_lse is False")
        softmax_scale = self._scale(scale)
        out_dtype = "float8_e4m3" if output_scale is not None else self.out_dtype
        out, lse = self._outputs(q, out, lse, return_lse, out_dtype)
        a = _tensors.arg
        self._native.run_new_tokens(a(q), a(k), a(v), softmax_scale, return_lse, a(out), None if lse is None else a(lse),
                                    a(_tensors.one_element(output_scale)),
                                    descales=_tensors.descales(q_descale, k_descale, v_descale),
                                    stream=_tensors.stream_of(q, out), topk_mask=_mask_arg(topk_mask),
                                    window=window, sinks=_mask_arg(sinks))
        return (out, lse) if return_lse else out

    def run_context_chunk(self, index, q, k, v, out=None, lse=None, scale=None, q_descale=None, k_descale=None,
                          v_descale=None, topk_mask=None, window=0, sinks=None):
        """Non-causal attention of every query against context chunk `index`
        (`scale`, the descales and the mask as for run_new_tokens). Returns
        (out, lse)."""
        softmax_scale = self._scale(scale)
        out, lse = self._outputs(q, out, lse, True, self.out_dtype)
        a = _tensors.arg
        self._native.run_context_chunk(index, a(q), a(k), a(v), softmax_scale, a(out), a(lse),
                                       descales=_tensors.descales(q_descale, k_descale, v_descale),
                                       stream=_tensors.stream_of(q, out), topk_mask=_mask_arg(topk_mask),
                                       window=window, sinks=_mask_arg(sinks))
        return out, lse

    def merge_attn_states(self, prefix_output, prefix_lse, suffix_output, suffix_lse, output=None,
                          output_lse=None, return_lse=False, prefill_tokens_with_context=None, output_scale=None,
                          sinks=None):
        """vLLM's merge_attn_states: joins two partial attentions by their LSE.
        The arguments are in the library's order (vLLM's op takes `output`
        first): pass them by name when porting a vLLM call. Returns output,
        or (output, output_lse) when return_lse or output_lse. `sinks`
        (float32 [heads]) are applied once to the merged result (§12)."""
        if output is None:
            n, heads, v_dim = _tensors.require_tensor(prefix_output, "prefix_output").shape
            dtype = "float8_e4m3" if output_scale is not None else _tensors.dtype_name(prefix_output.dtype)
            output = _tensors.empty(prefix_output, (n, heads, v_dim), dtype)
        if output_lse is None and return_lse:
            output_lse = _tensors.empty(prefix_output, tuple(prefix_lse.shape), "float32")
        a = _tensors.arg
        self._native.merge_attn_states(a(prefix_output), a(prefix_lse), a(suffix_output), a(suffix_lse), a(output),
                                       None if output_lse is None else a(output_lse), prefill_tokens_with_context,
                                       a(_tensors.one_element(output_scale)), _tensors.stream_of(prefix_output, output),
                                       sinks=_mask_arg(sinks))
        return (output, output_lse) if output_lse is not None else output

    def workspace_size(self, cu_seqlens_q, cu_seqlens_k=None, chunks=()):
        """Bytes of workspace run_prefill_step needs for this metadata."""
        return self._native.workspace_size(
            _tensors.int_list(cu_seqlens_q, "cu_seqlens_q"),
            None if cu_seqlens_k is None else _tensors.int_list(cu_seqlens_k, "cu_seqlens_k"),
            [_tensors.int_list(c, f"chunks[{i}]") for i, c in enumerate(chunks)],
        )


def run_prefill_step(backend, q, k, v, cu_seqlens_q, cu_seqlens_k=None, context=(), out=None, lse=None,
                     return_lse=True, workspace=None, causal=True, scale=None, q_descale=None, k_descale=None,
                     v_descale=None, topk_mask=None, window=0, sinks=None):
    """One whole prefill step, as vLLM's forward_mha: causal attention of the
    new tokens, then each context chunk, merged, with softmax `scale`
    (default: the backend's). `context` is a sequence of
    (cu_seqlens_k, k, v) per chunk. Returns out, or (out, lse) with
    return_lse. The workspace (allocated like q unless given: a byte tensor
    of backend.workspace_size(...) bytes, 64-byte aligned) and the outputs
    are the caller's memory, so the library allocates nothing. float8_e4m3
    inputs take descales as Backend.run_new_tokens does, k's and v's the same
    for the new tokens and every chunk. `topk_mask` and `window` apply to
    every call; `sinks` once, to the result (§12)."""
    chunk_cu = [_tensors.int_list(c[0], f"context[{i}] cu_seqlens_k") for i, c in enumerate(context)]
    cu_q = _tensors.int_list(cu_seqlens_q, "cu_seqlens_q")
    cu_k = None if cu_seqlens_k is None else _tensors.int_list(cu_seqlens_k, "cu_seqlens_k")
    if lse is not None and not return_lse:
        raise InvalidArgument("lse was given but return_lse is False")
    softmax_scale = backend._scale(scale)
    out, lse = backend._outputs(q, out, lse, return_lse, backend.out_dtype)
    if workspace is None and chunk_cu:
        workspace = _tensors.aligned_bytes(q, backend._native.workspace_size(cu_q, cu_k, chunk_cu))
    a = _tensors.arg
    backend._native.run_prefill_step(
        a(q), a(k), a(v), cu_q, cu_k, chunk_cu, [a(c[1]) for c in context], [a(c[2]) for c in context],
        softmax_scale, a(out),
        None if lse is None else a(lse), None if workspace is None else a(workspace), causal,
        descales=_tensors.descales(q_descale, k_descale, v_descale), stream=_tensors.stream_of(q, out),
        topk_mask=_mask_arg(topk_mask), window=window, sinks=_mask_arg(sinks))
    return (out, lse) if return_lse else out


def _mask_arg(tensor):
    """A mask or sink tensor for the C++ module (None stays None)."""
    return None if tensor is None else _tensors.arg(tensor)


def plan_mla_prefill(backend, cu_seqlens_q, context_lens, block_table, block_size, workspace_tokens, packed=False):
    """Plans one MLA prefill step for `backend` (see the C++ plan_mla_prefill):
    the new tokens per sequence (`cu_seqlens_q`), the tokens already cached
    (`context_lens`) in blocks of `block_size` tokens listed by `block_table`
    [B, max_blocks], gathered at most `workspace_tokens` at a time (vLLM's
    chunks, or with `packed` chunks filled to that many tokens, several
    sequences to a chunk). Heads, dims, dtype and kv_lora_rank are the
    backend's. The plan's `workspace_bytes` is what run_mla_prefill's
    `workspace` must hold; `chunks` lists the context chunks."""
    if _tensors.is_torch(block_table):
        block_table = block_table.cpu().numpy()
    import numpy as np

    table = np.asarray(block_table)
    if table.ndim != 2 or (table.size and table.dtype.kind not in "iu"):
        raise InvalidArgument(f"block_table must be a 2-d integer array [B, max_blocks], got shape {table.shape}")
    return backend._native.plan_mla_prefill(
        _tensors.int_list(cu_seqlens_q, "cu_seqlens_q"), _tensors.int_list(context_lens, "context_lens"),
        [int(x) for x in table.reshape(-1).tolist()], int(table.shape[1]), int(block_size), int(workspace_tokens),
        bool(packed))


def run_mla_prefill(backend, plan, q, kv_c, k_pe, cache, kv_b_proj, cache_scale=None, out=None, lse=None,
                    return_lse=True, workspace=None, scale=None):
    """Runs a planned MLA prefill step (see the C++ run_mla_prefill): gathers
    each sequence's cached latents from `cache` [num_blocks, block_size, L+R]
    as `plan` lists them, up-projects them and the new tokens' `kv_c` [Nq, L]
    / `k_pe` [Nq, R] through `kv_b_proj` [H*(P+V), L], and attends `q`
    [Nq, H, P+R] to context and new tokens. An fp8 cache is uint8 bytes with
    `cache_scale`. `scale` is the softmax scale (default: the backend's).
    Returns out [Nq, H, V], or (out, lse) with return_lse.
    `workspace`, a byte tensor of at least plan.workspace_bytes bytes, 64-byte
    aligned, spares the library every allocation; without it the step
    allocates its own. GPU tensors run on the backend's GPU kernels on
    PyTorch's current stream."""
    if lse is not None and not return_lse:
        raise InvalidArgument("lse was given but return_lse is False")
    softmax_scale = backend._scale(scale)
    out, lse = backend._outputs(q, out, lse, return_lse, backend.dtype)
    a = _tensors.arg
    backend._native.run_mla_prefill(
        plan, a(q), a(kv_c), a(k_pe), a(cache), 1.0 if cache_scale is None else float(cache_scale), a(kv_b_proj),
        softmax_scale, a(out), None if lse is None else a(lse), None if workspace is None else a(workspace),
        _tensors.stream_of(q, out))
    return (out, lse) if return_lse else out


_merge_backends = {}


def merge_attn_states(prefix_output, prefix_lse, suffix_output, suffix_lse, output=None, output_lse=None,
                      return_lse=False, prefill_tokens_with_context=None, output_scale=None, backend=None):
    """vLLM's merge_attn_states as a function (the library's argument order:
    the output after the four inputs): on `backend`, or on the backend the
    default Selector picks for prefix_output's dtype, V and device (kept for
    later calls)."""
    if backend is None:
        dtype = _tensors.dtype_name(_tensors.require_tensor(prefix_output, "prefix_output").dtype)
        heads, v_dim = prefix_output.shape[1], prefix_output.shape[2]
        gpu = _tensors.is_torch(prefix_output) and prefix_output.device.type == "cuda"
        device = (prefix_output.device.index or 0) if gpu else 0
        key = (dtype, heads, v_dim, gpu, device)
        if key not in _merge_backends:
            selector = Selector()
            dims = (DEEPSEEK_DIMS[0], DEEPSEEK_DIMS[1], v_dim)
            # Host tensors on a GPU machine get a host backend: select for the host.
            selection = selector.select(dtype, dims, platform=None if gpu else "host")
            _merge_backends[key] = selector.create(selection, heads, 1.0, device=device)
        backend = _merge_backends[key]
    return backend.merge_attn_states(prefix_output, prefix_lse, suffix_output, suffix_lse, output, output_lse,
                                     return_lse, prefill_tokens_with_context, output_scale)


def _load_torch_ops():
    """Registers torch.ops.mlaprefill when this build has them and torch is importable."""
    import os

    if _tensors.torch is None:
        return False
    path = os.path.join(os.path.dirname(__file__), "_torch_ops.so")
    if not os.path.exists(path):
        return False
    try:
        _tensors.torch.ops.load_library(path)
    except OSError as error:  # built against another torch: the rest of the package still works
        import warnings

        warnings.warn(f"mlaprefill: torch.ops.mlaprefill not loaded ({error}); was the package built against "
                      f"torch {_tensors.torch.__version__}?", RuntimeWarning, stacklevel=2)
        return False
    return True


HAS_TORCH_OPS = _load_torch_ops()
