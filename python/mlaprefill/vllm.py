"""mlaprefill as a vLLM MLA prefill backend.

``MlaPrefillBackend`` is a subclass of vLLM's own ``MLAPrefillBackend`` when
vLLM is importable (and a stand-alone class of the same interface when it is
not). Its ``run_prefill_context_chunk`` has the form the installed vLLM
declares, read from vLLM's base class: ``(chunk, q, k, v, out=None)`` with
a ``ContextChunk`` (current vLLM) or ``(chunk_idx, q, k, v)`` (older vLLM,
whose metadata holds every chunk's ``cu_seq_lens`` as rows of one tensor).
The ``ContextChunk`` form also takes the keyword-only FP8 prefill state that
newer vLLM passes with each chunk (``layer_name``, ``calibration_amax``,
``static_descale``, ``calibration_armed``), and refuses static FP8 scales.

``register()`` binds it in vLLM's registry; the ``vllm.general_plugins``
entry point of the installed distribution calls it in every vLLM process.
Select it with vLLM's MLA prefill backend option set to ``CUSTOM`` (or the
member ``MLAPREFILL`` that ``register()`` adds). vLLM's CPU platform does not
read that option: it always takes its ``CPU`` member, which ``register()``
binds to ``CpuPrefillRoute``, a class that builds this backend when the
option names it and vLLM's own CPU backend otherwise. Where the MLA attention
backend vLLM's CPU platform picks on this host computes prefill itself (its
``forward_mha`` calls no prefill backend), ``register()`` warns that the
option has no effect there.

Which backend of this library runs inside is chosen by the library's own
selector (its YAML configuration, MLA_CONFIG, MLA_PREFILL_BACKEND), once,
when the adapter is constructed. The forward pass constructs nothing, reads
no configuration and copies nothing from the device: the step's sizes come
from vLLM's host-side metadata in ``prepare_metadata``.
"""

import importlib
import inspect
import itertools
import warnings

import torch

import mlaprefill
from . import _tensors

CLASS_PATH = "mlaprefill.vllm.MlaPrefillBackend"
CPU_ROUTE_PATH = "mlaprefill.vllm.CpuPrefillRoute"
MEMBER = "MLAPREFILL"  # the registry member register() adds for this backend
_VLLM_PREFILL = "vllm.v1.attention.backends.mla.prefill"
_VLLM_REGISTRY = _VLLM_PREFILL + ".registry"

try:
    from vllm.v1.attention.backends.mla.prefill.base import MLAPrefillBackend as _VllmBase
except ImportError:  # vLLM absent: the same interface without its base class
    _VllmBase = None


def context_chunk_interface(base):
    """Which run_prefill_context_chunk `base` (a vLLM MLAPrefillBackend class,
    or None) declares: "chunk" (a ContextChunk; current vLLM, and the form
    used without vLLM) or "chunk_idx" (a chunk number; older vLLM)."""
    if base is None:
        return "chunk"
    parameters = inspect.signature(base.run_prefill_context_chunk).parameters
    if "chunk" in parameters:
        return "chunk"
    if "chunk_idx" in parameters:
        return "chunk_idx"
    raise TypeError(f"{base.__module__}.{base.__qualname__}.run_prefill_context_chunk has neither a `chunk` nor a "
                    f"`chunk_idx` parameter: {list(parameters)}; this vLLM's interface is not one mlaprefill knows")


def _platform_spec(device_capability):
    """The library's platform for vLLM's DeviceCapability (major, minor): an
    NVIDIA capability maps to "nvidia:M.m"; AMD (whose gfx name vLLM's tuple
    does not carry) and None mean this machine's own platform."""
    if device_capability is None or torch.version.hip is not None:
        return None
    return f"nvidia:{device_capability.major}.{device_capability.minor}"


def _dims_of(selector_config):
    """(qk_nope, qk_rope, v) head dims of vLLM's selector config: its
    mla_dimensions (MLADimensions), else the same names on the config itself
    (older vLLM); None when unknown (vLLM writes 0 for what the model's
    config lacks)."""
    source = getattr(selector_config, "mla_dimensions", None) or selector_config
    dims = tuple(getattr(source, name, None) for name in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
    return None if None in dims or 0 in dims else tuple(int(d) for d in dims)


def _quant_key_name(quant_key):
    """The library's name of vLLM's QuantKey when it is one the library has
    (kFp8StaticTensorSym: fp8 e4m3, static scale, one per tensor); else None.
    A string is taken as the library's own name."""
    if isinstance(quant_key, str):
        return quant_key
    dtype = getattr(quant_key, "dtype", None)
    scale = getattr(quant_key, "scale", None)
    group_shape = getattr(scale, "group_shape", None)
    # float8_e4m3fn only: float8_e4m3fnuz (vLLM's fp8 on MI300) has another
    # exponent bias and NaN encoding, and the library writes OCP e4m3fn.
    # (Compared by name: a torch without float8 types has no attribute to compare with.)
    if (str(dtype) == "torch.float8_e4m3fn" and bool(getattr(scale, "static", False)) and group_shape is not None
            and tuple(group_shape) == (-1, -1)):
        return "fp8_e4m3_static_per_tensor"
    return None


# The KV cache formats (vLLM's cache_dtype names) whose context vLLM's MLA
# layer hands a prefill backend in the model's dtype: the unquantized ones as
# they are, and per-tensor fp8, which vLLM dequantizes while it gathers the
# context for a backend that takes no FP8 queries, as this one.
SERVED_CACHE_DTYPES = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")


def _config_reasons(selector_config):
    """Why the adapter refuses what newer vLLM's selector config states
    besides dtype and dims (a field this vLLM lacks is not judged): the KV
    cache format and the head count. Decode context parallelism
    (dcp_world_size > 1) is no reason: vLLM gathers every rank's share of a
    chunk's context before the call, the chunk's lengths are the whole
    context's, and the library checks k against them."""
    reasons = []
    cache_dtype = getattr(selector_config, "cache_dtype", None)
    if cache_dtype is not None and str(cache_dtype) not in SERVED_CACHE_DTYPES:
        reasons.append(f"KV cache dtype {cache_dtype!r} not supported: mlaprefill takes the context in the model's "
                       f"dtype, which vLLM hands over for the caches {', '.join(SERVED_CACHE_DTYPES)}")
    num_heads = getattr(selector_config, "num_heads", None)
    if num_heads is not None and int(num_heads) < 1:
        reasons.append(f"num_heads {num_heads}: the library's backends need at least one head")
    return reasons


def _refuse_static_descale(static_descale, layer_name):
    """Static FP8 scales ask the backend to quantize q, k and v to FP8 with
    them: running in the model's dtype instead would quietly ignore the
    calibration they came from. An empty tensor is a layer without them."""
    if static_descale is None:
        return
    numel = getattr(static_descale, "numel", None)
    if (numel() if callable(numel) else len(static_descale)) == 0:
        return
    shape = tuple(getattr(static_descale, "shape", ()))
    raise mlaprefill.NotSupported(
        f"static_descale {shape} given for layer {layer_name!r}: vLLM asks for FP8 prefill attention with static "
        f"scales; this adapter takes FP8 inputs only as vLLM casts them, without scales (descales of 1)")


_selector = None


def _shared_selector():
    """The one Selector behind the class-level checks vLLM makes while it
    selects: built (and the YAML configuration read) on first use only."""
    global _selector
    if _selector is None:
        _selector = mlaprefill.Selector()
    return _selector


def _cumulate(lengths):
    return list(itertools.accumulate((int(n) for n in lengths), initial=0))


class _Adapter:
    """What MlaPrefillBackend adds to vLLM's base class, whichever interface."""

    supported_dtypes = [torch.float16, torch.bfloat16, torch.float32]

    @staticmethod
    def get_name():
        return MEMBER

    @classmethod
    def supports_compute_capability(cls, device_capability):
        return not cls._selection_reasons(torch.bfloat16, mlaprefill.DEEPSEEK_DIMS, device_capability)

    @classmethod
    def supports_dtype(cls, dtype):
        return dtype in cls.supported_dtypes

    @classmethod
    def supports_mla_dimensions(cls, mla_dimensions):
        dims = _dims_of(mla_dimensions)
        return dims is not None and not cls._selection_reasons(torch.bfloat16, dims, None)

    @classmethod
    def is_available(cls):
        return True  # the C++ module imported

    @classmethod
    def validate_configuration(cls, device_capability, selector_config):
        """vLLM's reasons list: empty when some backend of this library can
        serve the dtype and MLA dimensions on the device, and the adapter the
        KV cache format and head count where the config states them; else
        why not."""
        dtype = getattr(selector_config, "dtype", torch.bfloat16)
        if not cls.supports_dtype(dtype):
            return [f"dtype {dtype} not supported"]
        dims = _dims_of(selector_config)
        if dims is None:
            return ["MLA dimensions unknown: the model config gives no qk_nope_head_dim, qk_rope_head_dim and "
                    "v_head_dim"]
        return _config_reasons(selector_config) + cls._selection_reasons(dtype, dims, device_capability)

    @classmethod
    def _selection_reasons(cls, dtype, dims, device_capability):
        try:
            _shared_selector().select(dtype, dims, platform=_platform_spec(device_capability))
        except mlaprefill.SelectionError as error:
            return [str(error)]
        return []

    def __init__(self, num_heads, scale, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
                 vllm_config=None):
        self.num_heads = num_heads
        self.scale = scale
        self.kv_lora_rank = kv_lora_rank
        self.qk_nope_head_dim = qk_nope_head_dim
        self.qk_rope_head_dim = qk_rope_head_dim
        self.v_head_dim = v_head_dim
        self.vllm_config = vllm_config
        # Two library backends per dtype: one prepared once per step for the
        # new tokens, one prepared per call for a context chunk's own
        # requests (or a PCP chunk), so neither undoes the other's metadata.
        self._backends = {}
        self._step = None
        model_config = getattr(vllm_config, "model_config", None)
        self._add_backends(getattr(model_config, "dtype", None) or torch.get_default_dtype())

    def clone(self):
        # vLLM's builder clones the layer's backend; the clone selects and
        # creates its own library backends (prepared metadata is per object).
        return self.__class__(num_heads=self.num_heads, scale=self.scale, kv_lora_rank=self.kv_lora_rank,
                              qk_nope_head_dim=self.qk_nope_head_dim, qk_rope_head_dim=self.qk_rope_head_dim,
                              v_head_dim=self.v_head_dim, vllm_config=self.vllm_config)

    def _add_backends(self, dtype, output_dtype=None):
        """The pair of library backends for q's `dtype`. vLLM's FP8 prefill
        casts q, k and v to e4m3 without scales and wants the output in
        `output_dtype` (the model's dtype unless vLLM names it): a float8
        q_data_type gets backends for e4m3 inputs writing that dtype."""
        name = _tensors.dtype_name(dtype)
        if name not in self._backends:
            dims = (self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim)
            selector = _shared_selector()
            selection = selector.select(name, dims)
            out_dtype = None
            if name == "float8_e4m3":
                model_config = getattr(self.vllm_config, "model_config", None)
                model_dtype = getattr(model_config, "dtype", None) or torch.get_default_dtype()
                out_dtype = _tensors.dtype_name(output_dtype if output_dtype is not None else model_dtype)
            # On the worker's own GPU: vLLM runs local rank r on cuda:r.
            device = torch.cuda.current_device() if torch.cuda.is_available() else 0
            self._backends[name] = tuple(
                selector.create(selection, self.num_heads, scale=self.scale, kv_lora_rank=self.kv_lora_rank,
                                device=device, out_dtype=out_dtype)
                for _ in range(2))
        return self._backends[name]

    def _pair(self, q):
        if self._step is None:
            raise mlaprefill.InvalidArgument("prepare_metadata must be called before the run methods")
        pair = self._backends.get(_tensors.dtype_name(q.dtype))
        if pair is None:
            raise mlaprefill.InvalidArgument(
                f"q is {q.dtype}, but this step was prepared for {sorted(self._backends)} (vLLM's q_data_type)")
        return pair

    def supports_out(self):
        return True

    def supports_quant_output(self, quant_key):
        name = _quant_key_name(quant_key)
        if name is None:
            return False
        return all(new.supports_quant_output(name) for new, _ in self._backends.values())

    def prepare_metadata(self, prefill_metadata):
        """Reads a step's sizes from vLLM's host-side metadata (the query
        lengths, each chunk's context lengths) and prepares the new tokens."""
        self._prefill_metadata = prefill_metadata
        q_data_type = getattr(prefill_metadata, "q_data_type", None)
        if q_data_type is not None:
            self._add_backends(q_data_type, getattr(prefill_metadata, "output_dtype", None))
        query_lens = getattr(prefill_metadata, "query_lens_cpu", None)
        if query_lens is not None:
            query_lens = query_lens.tolist()
            cu_q = _cumulate(query_lens)
        else:  # older vLLM, without host query lengths
            cu_q = _tensors.int_list(prefill_metadata.query_start_loc, "query_start_loc")
            query_lens = [b - a for a, b in zip(cu_q, cu_q[1:])]
        # On the stream the runs will use, so that the next step reuses the
        # device buffer of this one (no free, no device-wide sync).
        stream = _tensors.current_stream()
        for new, _ in self._backends.values():
            new.prepare(cu_q, stream=stream)
        self._prepare_chunks(getattr(prefill_metadata, "chunked_context", None), cu_q, query_lens)

    def run_prefill_new_tokens(self, q, k, v, return_softmax_lse, out=None, output_scale=None):
        new, _ = self._pair(q)
        return new.run_new_tokens(q, k, v, return_lse=return_softmax_lse, out=out, output_scale=output_scale)

    def run_prefill_new_tokens_pcp_chunk(self, q, k, v, cu_seqlens_q, cu_seqlens_k, return_softmax_lse=True,
                                         out=None):
        """Prefill context parallelism: this rank's slice of the new tokens
        (`q`, per sequence the last cu_seqlens_q tokens of its keys) against
        the keys up to its end (`k`, `v`, cu_seqlens_k), causal, aligned at
        the bottom right. The cu_seqlens are host lists or host tensors.
        Returns out, or (out, lse) to merge with the other ranks'. vLLM
        releases without this hook never call it."""
        _, chunk = self._pair(q)
        chunk.prepare(_tensors.int_list(cu_seqlens_q, "cu_seqlens_q"),
                      cu_seqlens_k=_tensors.int_list(cu_seqlens_k, "cu_seqlens_k"), stream=_tensors.stream_of(q))
        return chunk.run_new_tokens(q, k, v, return_lse=return_softmax_lse, out=out)

    def run_masked_mha(self, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None,
                       dense_mask=None, key_starts=None, causal=True, return_softmax_lse=False, sinks=None,
                       window=0, out=None):
        """vLLM's sparse-attention "masked MHA" call (sparse_mla_attention's
        _run_masked_mha, which hands these to FlashAttention-4's mask_mod):
        varlen attention of q against k, v with `dense_mask`, the int32
        [B, rows, words] bit-packed top-k rows vLLM builds. With
        `key_starts` ([B] host or device integers: the context before the new
        tokens, or a context chunk's starts) the bits are read at key_starts[b]
        + key, as offset_dense_mask_mod reads a global mask; the reserved last
        word is never read. `causal`: the new tokens' call; otherwise a context
        chunk's (no window then: its queries' positions are unknown).
        `sinks` ([H] float32) and `window` are docs/contract.md §12's, for
        models that have them (vLLM's masked path passes none). Returns out,
        or (out, lse) with return_softmax_lse."""
        _, backend = self._pair(q)
        cu_q = _tensors.int_list(cu_seqlens_q, "cu_seqlens_q")
        cu_k = _tensors.int_list(cu_seqlens_k, "cu_seqlens_k")
        batch = len(cu_q) - 1
        starts = [0] * batch if key_starts is None else _tensors.int_list(key_starts, "key_starts")
        if len(starts) != batch:
            raise mlaprefill.InvalidArgument(f"key_starts has {len(starts)} entries for {batch} sequences")
        if not causal and window:
            raise mlaprefill.InvalidArgument("a context chunk's masked call takes no window: its queries' "
                                             "positions are unknown to one chunk call")
        # The keys before this call's, as a leading context chunk of those
        # lengths: the library's positions (§12) are then vLLM's.
        before = _cumulate(starts)
        mask = {"topk_mask": dense_mask, "window": window, "sinks": sinks}
        stream = _tensors.stream_of(q)
        if causal:
            backend.prepare(cu_q, cu_seqlens_k=cu_k, chunks=[before], stream=stream)
            result = backend.run_new_tokens(q, k, v, return_lse=return_softmax_lse, out=out, **mask)
        else:
            backend.prepare(cu_q, cu_seqlens_k=[0] * len(cu_q), chunks=[before, cu_k], stream=stream)
            result = backend.run_context_chunk(1, q, k, v, out=out, **mask)
            if not return_softmax_lse:
                result = result[0]
        return result


class _ContextChunks:
    """run_prefill_context_chunk(chunk=ContextChunk, q=q[chunk.token_slice], k, v, out), and the FP8 prefill
    state newer vLLM passes by keyword."""

    def _prepare_chunks(self, chunked_context, cu_q, query_lens):
        """Keeps per chunk (by its index) the cu_seqlens of its own requests'
        new tokens and of its context tokens, from host lists and vLLM's host
        seq_lens (chunk.query_start_loc and chunk.cu_seq_lens live on the
        device); each chunk's call prepares with them."""
        chunks = {}
        for chunk in getattr(chunked_context, "chunks", None) or ():
            requests = chunk.request_slice
            chunks[chunk.index] = (_cumulate(query_lens[requests]), _cumulate(chunk.seq_lens.tolist()))
        self._step = chunks

    def run_prefill_context_chunk(self, chunk, q, k, v, out=None, *, layer_name="", calibration_amax=None,
                                  static_descale=None, calibration_armed=False):
        """The chunk's attention; `out` [tokens, heads, v] when given. Of
        the FP8 prefill state, static scales are refused before anything is
        written; a calibration buffer (`calibration_amax`, armed or not) is
        left as it is, as vLLM's own backends leave it when they do not
        quantize."""
        _refuse_static_descale(static_descale, layer_name)
        _, backend = self._pair(q)
        try:
            cu_q, cu_k = self._step[chunk.index]
        except KeyError:
            raise mlaprefill.InvalidArgument(
                f"context chunk {chunk.index} is not one of this step's ({sorted(self._step)})") from None
        backend.prepare(cu_q, chunks=[cu_k], stream=_tensors.stream_of(q))
        return backend.run_context_chunk(0, q, k, v, out=out)


class _ChunkIndices:
    """run_prefill_context_chunk(chunk_idx, q, k, v): older vLLM, with every
    chunk's cu_seq_lens as the rows of chunked_context.cu_seq_lens [chunks,
    B+1] and q the whole prefill's."""

    def _prepare_chunks(self, chunked_context, cu_q, query_lens):
        """Prepares the chunk backends once for the step: every chunk spans
        the whole batch here."""
        rows = []
        if chunked_context is not None:
            rows = getattr(chunked_context, "cu_seq_lens_cpu", None)
            if rows is None:  # that vLLM keeps them on the device only: one copy per step
                rows = chunked_context.cu_seq_lens
                rows = rows.cpu() if hasattr(rows, "cpu") else rows
            rows = [_tensors.int_list(rows[i], f"chunked_context.cu_seq_lens[{i}]") for i in range(len(rows))]
        stream = _tensors.current_stream()
        for _, chunk in self._backends.values():
            chunk.prepare(cu_q, chunks=rows, stream=stream)
        self._step = rows

    def run_prefill_context_chunk(self, chunk_idx, q, k, v):
        _, backend = self._pair(q)
        return backend.run_context_chunk(chunk_idx, q, k, v)


def backend_class(base):
    """The adapter class over vLLM's MLAPrefillBackend class `base` (None:
    no vLLM), with the context-chunk method `base` declares."""
    interface = context_chunk_interface(base)
    mixin = _ContextChunks if interface == "chunk" else _ChunkIndices
    bases = (mixin, _Adapter) + ((base,) if base is not None else ())
    cls = type("MlaPrefillBackend", bases, {
        "__module__": __name__,
        "__doc__": "vLLM's MLAPrefillBackend, served by this library's selected backend.",
        "context_chunk_interface": interface,
    })
    return cls


MlaPrefillBackend = backend_class(_VllmBase)


def _selected(vllm_config):
    """Whether vLLM's MLA prefill backend option names this backend."""
    option = getattr(getattr(vllm_config, "attention_config", None), "mla_prefill_backend", None)
    return getattr(option, "name", option) in ("CUSTOM", MEMBER)


def _cpu_route():
    try:
        cpu_sdpa = importlib.import_module(_VLLM_PREFILL + ".cpu_sdpa")
    except ImportError:
        return None

    class CpuPrefillRoute(cpu_sdpa.CPUSDPAMLAPrefillBackend):
        """What vLLM's CPU platform builds as its MLA prefill backend once
        register() has bound its CPU member here: MlaPrefillBackend when the
        configuration selects it (vLLM's CPU selection ignores the option),
        vLLM's own CPU backend otherwise."""

        @staticmethod
        def get_name():
            # What vLLM logs as its choice: the backend the option makes
            # (vLLM selects while building the model, with its config current).
            from vllm.config import get_current_vllm_config

            try:
                config = get_current_vllm_config()
            except AssertionError:  # no current config: outside a model build
                config = None
            return MEMBER if _selected(config) else cpu_sdpa.CPUSDPAMLAPrefillBackend.get_name()

        def __new__(cls, *args, **kwargs):
            vllm_config = kwargs.get("vllm_config", args[6] if len(args) > 6 else None)
            chosen = MlaPrefillBackend if _selected(vllm_config) else cpu_sdpa.CPUSDPAMLAPrefillBackend
            return chosen(*args, **kwargs)

    CpuPrefillRoute.__module__ = __name__
    CpuPrefillRoute.__qualname__ = "CpuPrefillRoute"
    return CpuPrefillRoute


CpuPrefillRoute = _cpu_route() if _VllmBase is not None else None

_PREFILL_CALLS = frozenset(("run_prefill_new_tokens", "run_prefill_context_chunk"))


def _code_names(code):
    """The global and attribute names `code` and the functions nested in it use."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if inspect.iscode(constant):
            names |= _code_names(constant)
    return names


def _is_method(attribute):
    return inspect.isfunction(attribute) or isinstance(attribute, (staticmethod, classmethod))


def calls_prefill_backend(impl_cls, method="forward_mha"):
    """Whether `method` of vLLM's MLA attention implementation class
    `impl_cls` calls an MLA prefill backend's run methods, in its own code or
    in the code of the class's methods it names (read, not run); None when
    `method` has no code to read."""
    pending, seen = [method], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        function = getattr(impl_cls, name, None)
        code = getattr(inspect.unwrap(function), "__code__", None) if function is not None else None
        if code is None:
            if name == method:
                return None
            continue
        names = _code_names(code)
        if names & _PREFILL_CALLS:
            return True
        pending.extend(n for n in names if _is_method(inspect.getattr_static(impl_cls, n, None)))
    return False


def _cpu_attention_skips_prefill_backend():
    """The name of the MLA attention backend vLLM's CPU platform picks on this
    host when its forward_mha calls no prefill backend; None on another
    platform, when it does, or when this vLLM cannot be asked."""
    try:
        from vllm.platforms import current_platform

        if not current_platform.is_cpu():
            return None
        from vllm.v1.attention.selector import AttentionSelectorConfig

        # The platform's default for a DeepSeek-style MLA layer (latent 512 +
        # rope 64) in bf16; an explicit attention backend is the user's.
        config = AttentionSelectorConfig(head_size=576, dtype=torch.bfloat16, kv_cache_dtype="auto", block_size=None,
                                         use_mla=True)
        path = current_platform.get_attn_backend_cls(None, attn_selector_config=config)
        module, _, name = str(path).rpartition(".")
        backend = getattr(importlib.import_module(module), name)
        reached = calls_prefill_backend(backend.get_impl_cls())
    except Exception:  # a diagnostic: whatever this vLLM's structure, registering goes on
        return None
    return backend.get_name() if reached is False else None


def _warn_when_cpu_prefill_skips_the_backend():
    name = _cpu_attention_skips_prefill_backend()
    if name is not None:
        warnings.warn(
            f"mlaprefill: vLLM's MLA attention backend on this CPU, {name}, computes prefill itself without calling an "
            f"MLA prefill backend, so selecting mlaprefill (mla_prefill_backend CUSTOM or {MEMBER}) changes nothing "
            f"here; vLLM's attention backend CPU_MLA (--attention-backend CPU_MLA) calls it", RuntimeWarning,
            stacklevel=3)


def register():
    """Binds MlaPrefillBackend in vLLM's registry: to the CUSTOM member, to a
    member of its own name (MLAPREFILL) where this vLLM adds members, and
    vLLM's CPU member to CpuPrefillRoute unless something else overrides it.
    Warns (RuntimeWarning) when vLLM's CPU platform picks, on this host, an
    MLA attention backend that never calls a prefill backend. Returns
    CLASS_PATH. Raises ImportError when vLLM, or its MLA prefill registry,
    cannot be imported."""
    try:
        registry = importlib.import_module(_VLLM_REGISTRY)
    except ImportError as error:
        raise ImportError(
            f"mlaprefill.vllm.register() needs vLLM with its MLA prefill backend registry ({_VLLM_REGISTRY}); "
            f"it could not be imported: {error}"
        ) from error
    members = registry.MLAPrefillBackendEnum
    registry.register_mla_prefill_backend(members.CUSTOM, CLASS_PATH)
    if MEMBER not in getattr(members, "__members__", {}):
        try:
            registry.register_mla_prefill_backend(MEMBER, CLASS_PATH)
        except (TypeError, ValueError, AttributeError):
            pass  # this vLLM adds no members; CUSTOM serves
    cpu = getattr(members, "CPU", None)
    if CpuPrefillRoute is not None and cpu is not None and not cpu.is_overridden():
        registry.register_mla_prefill_backend(cpu, CPU_ROUTE_PATH)
    _warn_when_cpu_prefill_skips_the_backend()
    return CLASS_PATH
