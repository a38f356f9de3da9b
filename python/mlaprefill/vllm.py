"""mlaprefill as a vLLM MLA prefill backend.

``MlaPrefillBackend`` has the interface of vLLM's ``MLAPrefillBackend`` (class
methods for selection, then ``prepare_metadata`` and the two run methods), and
``register()`` binds it to vLLM's CUSTOM slot:

    import mlaprefill.vllm
    mlaprefill.vllm.register()   # before vLLM builds its attention layers

which backend of this library runs inside is chosen by the library's own
selector (its YAML configuration, MLA_CONFIG, MLA_PREFILL_BACKEND).
"""

import torch

import mlaprefill
from . import _tensors

CLASS_PATH = "mlaprefill.vllm.MlaPrefillBackend"
_VLLM_REGISTRY = "vllm.v1.attention.backends.mla.prefill.registry"


def _platform_spec(device_capability):
    """The library's platform for vLLM's DeviceCapability (major, minor): an
    NVIDIA capability maps to "nvidia:M.m"; AMD (whose gfx name vLLM's tuple
    does not carry) and None mean this machine's own platform."""
    if device_capability is None or torch.version.hip is not None:
        return None
    return f"nvidia:{device_capability.major}.{device_capability.minor}"


def _dims_of(selector_config):
    dims = tuple(getattr(selector_config, name, None) for name in ("qk_nope_head_dim", "qk_rope_head_dim",
                                                                    "v_head_dim"))
    return dims if None not in dims else mlaprefill.DEEPSEEK_DIMS


def _is_fp8_static_per_tensor(quant_key):
    """vLLM's kFp8StaticTensorSym: an fp8 dtype, a static scale, one scale per
    tensor. Strings name the library's own key."""
    if isinstance(quant_key, str):
        return quant_key == "fp8_e4m3_static_per_tensor"
    dtype = getattr(quant_key, "dtype", None)
    scale = getattr(quant_key, "scale", None)
    fp8 = "float8_e4m3" in str(dtype)
    static = bool(getattr(scale, "static", False))
    group_shape = getattr(scale, "group_shape", None)
    per_tensor = group_shape is not None and tuple(group_shape) == (-1, -1)
    return fp8 and static and per_tensor


class MlaPrefillBackend:
    """vLLM's MLAPrefillBackend, served by this library's selected backend."""

    supported_dtypes = [torch.float16, torch.bfloat16, torch.float32]
    requires_r1_mla_dimensions = False

    @staticmethod
    def get_name():
        return "MLAPREFILL"

    @classmethod
    def supports_compute_capability(cls, device_capability):
        return not cls._selection_reasons(torch.bfloat16, mlaprefill.DEEPSEEK_DIMS, device_capability)

    @classmethod
    def supports_dtype(cls, dtype):
        return dtype in cls.supported_dtypes

    @classmethod
    def is_available(cls):
        return True  # the C++ module imported

    @classmethod
    def validate_configuration(cls, device_capability, selector_config):
        """vLLM's reasons list: empty when some backend of this library can
        serve the dtype and dims on the device; else the selector's reasons."""
        dtype = getattr(selector_config, "dtype", torch.bfloat16)
        if not cls.supports_dtype(dtype):
            return [f"dtype {dtype} not supported"]
        return cls._selection_reasons(dtype, _dims_of(selector_config), device_capability)

    @classmethod
    def supports_quant_output(cls, quant_key):
        if not _is_fp8_static_per_tensor(quant_key):
            return False
        try:
            selection = mlaprefill.Selector().select(torch.bfloat16, mlaprefill.DEEPSEEK_DIMS)
        except mlaprefill.Error:
            return False
        return selection._native.fp8_output

    @classmethod
    def _selection_reasons(cls, dtype, dims, device_capability):
        try:
            mlaprefill.Selector().select(dtype, dims, platform=_platform_spec(device_capability))
        except mlaprefill.SelectionError as error:
            return [str(error)]
        return []

    def __init__(self, num_heads, scale, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
                 vllm_config=None, device=None, layer_names=None):
        self.num_heads = num_heads
        self.scale = scale
        self.kv_lora_rank = kv_lora_rank
        self.qk_nope_head_dim = qk_nope_head_dim
        self.qk_rope_head_dim = qk_rope_head_dim
        self.v_head_dim = v_head_dim
        self.vllm_config = vllm_config
        self.device = device
        self.layer_names = layer_names
        self._selector = mlaprefill.Selector()
        self._backends = {}  # one library backend per element type seen
        self._step = None
        self._prepared = set()

    def prepare_metadata(self, prefill_metadata):
        """Reads vLLM's prefill metadata: query_start_loc [B+1] and, with
        chunked context, chunked_context.cu_seq_lens [chunks, B+1]. Tensors on
        a GPU are copied to the host here (one synchronisation per step)."""
        self._prefill_metadata = prefill_metadata
        cu_q = _tensors.int_list(prefill_metadata.query_start_loc, "query_start_loc")
        chunks = []
        context = getattr(prefill_metadata, "chunked_context", None)
        if context is not None:
            rows = context.cu_seq_lens
            for i in range(len(rows)):
                chunks.append(_tensors.int_list(rows[i], f"chunked_context.cu_seq_lens[{i}]"))
        self._step = (cu_q, chunks)
        self._prepared = set()

    def _backend_for(self, q):
        if self._step is None:
            raise mlaprefill.InvalidArgument("prepare_metadata must be called before the run methods")
        dtype = _tensors.dtype_name(q.dtype)
        backend = self._backends.get(dtype)
        if backend is None:
            dims = (self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim)
            selection = self._selector.select(dtype, dims)
            backend = self._selector.create(selection, self.num_heads, kv_lora_rank=self.kv_lora_rank)
            self._backends[dtype] = backend
        if dtype not in self._prepared:
            cu_q, chunks = self._step
            backend.prepare(cu_q, chunks=chunks)
            self._prepared.add(dtype)
        return backend

    def run_prefill_new_tokens(self, q, k, v, return_softmax_lse, out=None, output_scale=None):
        backend = self._backend_for(q)
        return backend.run_new_tokens(q, k, v, return_lse=return_softmax_lse, out=out, output_scale=output_scale,
                                      scale=self.scale)

    def run_prefill_context_chunk(self, chunk_idx, q, k, v):
        return self._backend_for(q).run_context_chunk(chunk_idx, q, k, v, scale=self.scale)


def register():
    """Binds MlaPrefillBackend to vLLM's MLAPrefillBackendEnum.CUSTOM (select it
    with vLLM's MLA prefill backend option set to CUSTOM). Raises ImportError
    when vLLM, or its MLA prefill registry, cannot be imported."""
    try:
        import importlib

        registry = importlib.import_module(_VLLM_REGISTRY)
    except ImportError as error:
        raise ImportError(
            f"mlaprefill.vllm.register() needs vLLM with its MLA prefill backend registry ({_VLLM_REGISTRY}); "
            f"it could not be imported: {error}"
        ) from error
    registry.register_mla_prefill_backend(registry.MLAPrefillBackendEnum.CUSTOM, CLASS_PATH)
    return CLASS_PATH
