"""The package installed into vLLM's environment carries the fast CPU
backend: KOKKOS is built, selected for vLLM's dtypes on this machine, and is
what the adapter runs. A build without Kokkos would leave every vLLM run on
the fp64 oracle (REFERENCE), which these tests refuse."""

import pytest

import mlaprefill
import mlaprefill.vllm as adapter
from conftest import new_backend


def test_the_build_carries_kokkos():
    row = mlaprefill.build_info()["backends"]["KOKKOS"]
    assert row["built"], f"the installed package was built without KOKKOS: {row['detail']}"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_kokkos_is_selected_not_the_oracle(dtype):
    selection = mlaprefill.Selector(apply=False).select(dtype)
    assert selection.name == "KOKKOS", selection.why


def test_the_adapter_runs_kokkos():
    backend = new_backend(adapter.MlaPrefillBackend)
    names = {library.name for pair in backend._backends.values() for library in pair}
    assert names == {"KOKKOS"}, names
