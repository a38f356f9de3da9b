"""mlaprefill as a vLLM MLA prefill backend.

``MlaPrefillBackend`` is a subclass of vLLM's own ``MLAPrefillBackend`` when
vLLM is importable (and a stand-alone class of the same interface when it is
not). Its ``run_prefill_context_chunk`` has the form the installed vLLM
declares, read from vLLM's base class: ``(chunk, q, k, v, out=None)`` with
a ``ContextChunk`` (current vLLM) or ``(chunk_idx, q, k, v)`` (older vLLM,
whose metadata holds every chunk's ``cu_seq_lens`` as rows of one tensor).

``register()`` binds it in vLLM's registry; the ``vllm.general_plugins``
entry point of the installed distribution calls it in every vLLM process.
Select it with vLLM's MLA prefill backend option set to ``CUSTOM`` (or the
member ``MLAPREFILL`` that ``register()`` adds). vLLM's CPU platform does not
read that option: it always takes its ``CPU`` member, which ``register()``
binds to ``CpuPrefillRoute``, a class that builds this backend when the
option names it and vLLM's own CPU backend otherwise.

Which backend of this library runs inside is chosen by the library's own
selector (its YAML configuration, MLA_CONFIG, MLA_PREFILL_BACKEND), once,
when the adapter is constructed. The forward pass constructs nothing, reads
no configuration and copies nothing from the device: the step's sizes come
from vLLM's host-side metadata in ``prepare_metadata``.
"""

import importlib
import inspect
import itertools

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
        serve the dtype and MLA dimensions on the device; else why not."""
        dtype = getattr(selector_config, "dtype", torch.bfloat16)
        if not cls.supports_dtype(dtype):
            return [f"dtype {dtype} not supported"]
        dims = _dims_of(selector_config)
        if dims is None:
            return ["MLA dimensions unknown: the model config gives no qk_nope_head_dim, qk_rope_head_dim and "
                    "v_head_dim"]
        return cls._selection_reasons(dtype, dims, device_capability)

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

    def _add_backends(self, dtype):
        name = _tensors.dtype_name(dtype)
        if name not in self._backends:
            dims = (self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim)
            selector = _shared_selector()
            selection = selector.select(name, dims)
            # On the worker's own GPU: vLLM runs local rank r on cuda:r.
            device = torch.cuda.current_device() if torch.cuda.is_available() else 0
            self._backends[name] = tuple(
                selector.create(selection, self.num_heads, scale=self.scale, kv_lora_rank=self.kv_lora_rank,
                                device=device)
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
            self._add_backends(q_data_type)
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


class _ContextChunks:
    """run_prefill_context_chunk(chunk=ContextChunk, q=q[chunk.token_slice], k, v, out)."""

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

    def run_prefill_context_chunk(self, chunk, q, k, v, out=None):
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


def register():
    """Binds MlaPrefillBackend in vLLM's registry: to the CUSTOM member, to a
    member of its own name (MLAPREFILL) where this vLLM adds members, and
    vLLM's CPU member to CpuPrefillRoute unless something else overrides it.
    Returns CLASS_PATH. Raises ImportError when vLLM, or its MLA prefill
    registry, cannot be imported."""
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
    return CLASS_PATH
