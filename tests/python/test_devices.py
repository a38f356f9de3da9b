"""Tensors on devices the backend's queue cannot read are refused before any
memory is touched. No GPU exists here, so the tensors are DLPack capsules
built by hand that claim to live on a GPU (their memory is never read)."""

import ctypes

import numpy as np
import pytest

import mlaprefill
from conftest import DQK, V, lengths_to_cu, make_backend

K_DL_CPU, K_DL_CUDA, K_DL_VULKAN, K_DL_ROCM = 1, 2, 7, 10


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeDeviceTensor:
    """A float32 tensor that says it lives on `device_type`:`device_id`."""

    def __init__(self, shape, device_type, device_id=0, bits=32, code=2):
        self.shape = shape
        self._storage = np.zeros(shape, np.float32)  # never read by the library
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._managed = DLManagedTensor()
        t = self._managed.dl_tensor
        t.data = self._storage.ctypes.data
        t.device = DLDevice(device_type, device_id)
        t.ndim = len(shape)
        t.dtype = DLDataType(code, bits, 1)
        t.shape = self._shape
        self._device = (device_type, device_id)

    def __dlpack__(self, stream=None):
        return _new_capsule(ctypes.addressof(self._managed), b"dltensor", None)

    def __dlpack_device__(self):
        return self._device


@pytest.fixture
def backend():
    b = make_backend("REFERENCE")
    b.prepare(lengths_to_cu([2]))
    return b


def host(shape):
    return np.ones(shape, np.float32)


@pytest.mark.parametrize("device_type,name", [(K_DL_CUDA, "cuda:0"), (K_DL_ROCM, "rocm:0")])
def test_gpu_memory_on_a_host_queue_is_refused(backend, device_type, name):
    q = FakeDeviceTensor((2, 4, DQK), device_type)
    with pytest.raises(mlaprefill.InvalidArgument, match=f"q is on {name} but the backend runs on a host queue"):
        backend.run_new_tokens(q, host((2, 4, DQK)), host((2, 4, V)), out=host((2, 4, V)),
                               lse=host((4, 2)))


def test_memory_of_an_unknown_device_type_is_refused(backend):
    v = FakeDeviceTensor((2, 4, V), K_DL_VULKAN)
    with pytest.raises(ValueError, match="v is on DLPack device type 7, which this library cannot read"):
        backend.run_new_tokens(host((2, 4, DQK)), host((2, 4, DQK)), v, out=host((2, 4, V)), lse=host((4, 2)))


def test_element_types_outside_the_list_are_refused(backend):
    q = FakeDeviceTensor((2, 4, DQK), K_DL_CPU, bits=64, code=2)  # float64
    with pytest.raises(ValueError, match="64 bits"):
        backend.run_new_tokens(q, host((2, 4, DQK)), host((2, 4, V)), out=host((2, 4, V)), lse=host((4, 2)))


def test_a_host_tensor_built_by_hand_is_read_in_place(backend):
    # The same hand-built capsule on the host is an ordinary input.
    q = FakeDeviceTensor((2, 4, DQK), K_DL_CPU)
    q._storage[:] = 1.0
    v = np.arange(2 * 4 * V, dtype=np.float32).reshape(2, 4, V)
    out, _ = backend.run_new_tokens(q, host((2, 4, DQK)), v, out=np.zeros((2, 4, V), np.float32),
                                    lse=host((4, 2)))
    assert np.allclose(out[0], v[0]) and np.allclose(out[1], (v[0] + v[1]) / 2)
