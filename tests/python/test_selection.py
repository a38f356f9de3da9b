"""Selection, the report, the registry and plugins from Python."""

import json
import os
import subprocess

import pytest

import mlaprefill


def command_report(*args, env=None):
    command = os.environ.get("MLA_PREFILL_COMMAND")
    if not command:
        pytest.skip("MLA_PREFILL_COMMAND is not set (run through ctest)")
    result = subprocess.run([command, "backends", "--json", *args], capture_output=True, text=True, env=env,
                            check=False)
    return result.returncode, json.loads(result.stdout) if result.stdout else None


def test_backends_is_the_commands_report():
    code, expected = command_report()
    assert code == 0
    assert mlaprefill.backends() == expected


def test_backends_report_for_other_requests_and_a_simulated_platform(monkeypatch):
    monkeypatch.setenv("MLA_PLATFORM", "nvidia:9.0")
    code, expected = command_report("--dtype", "fp16", "--dims", "128,64,128", env=dict(os.environ))
    assert code == 0
    report = mlaprefill.backends(dtype="float16")
    assert report == expected
    assert report["platform"]["simulated"] and report["platform"]["capability"] == "9.0"


def test_an_explicit_choice_that_cannot_run_is_reported_with_its_reasons():
    code, expected = command_report("--backend", "CUDA_FLASH")
    report = mlaprefill.backends(backend="CUDA_FLASH")
    assert code != 0  # the command fails after printing; the function reports
    assert report["selection"]["backend"] is None
    # The same words, but the choice came from an API argument instead of a flag.
    assert report["selection"]["error"] == expected["selection"]["error"].replace("--backend", "API")
    with pytest.raises(mlaprefill.SelectionError, match="CUDA_FLASH") as caught:
        mlaprefill.Selector(backend="CUDA_FLASH").select("bfloat16")
    assert isinstance(caught.value, ValueError) and caught.value.category == "selection"


def test_select_and_create_name_the_backend():
    selector = mlaprefill.Selector()
    selection = selector.select("bf16")
    assert selection.name in ("KOKKOS", "REFERENCE") and selection.why
    assert [c["name"] for c in selection.walk]
    backend = selector.create(selection, num_heads=2, scale=0.125)
    assert backend.name == selection.name and backend.dtype == "bfloat16" and backend.dims == (128, 64, 128)
    assert backend.num_heads == 2 and backend.scale == 0.125
    import torch

    assert selector.select(torch.float16).dtype == "float16"


def test_unknown_names_raise_lookup_errors():
    with pytest.raises(mlaprefill.NotFound, match="Valid options are"):
        mlaprefill.Selector(apply=False).select("bf16", backend="NOPE")
    with pytest.raises(LookupError, match="known"):
        mlaprefill.register_mla_prefill_backend("KOKKOS", "NO_SUCH_FACTORY")
    with pytest.raises(ValueError, match="dtype"):
        mlaprefill.Selector(apply=False).select("int8")


def test_overrides_bind_a_member_to_a_named_factory():
    assert not mlaprefill.is_overridden("KOKKOS")
    mlaprefill.register_mla_prefill_backend("KOKKOS", "REFERENCE")
    try:
        assert mlaprefill.is_overridden("KOKKOS")
        selector = mlaprefill.Selector(apply=False)
        backend = selector.create(selector.select("float32", backend="KOKKOS"), num_heads=1, scale=1.0)
        assert backend.name == "REFERENCE"
    finally:
        mlaprefill.clear_override("KOKKOS")
    assert not mlaprefill.is_overridden("KOKKOS")


def test_configuration_errors_name_the_file_and_line(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("backend: auto\nlogging:\n  level: info\nno_such_key: 1\n")
    with pytest.raises(mlaprefill.ConfigError, match="bad.yaml:4") as caught:
        mlaprefill.Selector(config=str(config))
    assert isinstance(caught.value, ValueError)
    with pytest.raises(mlaprefill.Error):
        mlaprefill.backends(config=str(tmp_path / "missing.yaml"))


def test_a_config_file_chooses_the_backend(tmp_path):
    config = tmp_path / "choice.yaml"
    config.write_text("backend: REFERENCE\n")
    selector = mlaprefill.Selector(config=str(config))
    assert str(config) in " ".join(selector.config_sources)
    assert selector.select("float32").name == "REFERENCE"


def test_plugins_load_from_python():
    with pytest.raises(mlaprefill.PluginError, match="does-not-exist.so") as caught:
        mlaprefill.load_plugin("/nonexistent/does-not-exist.so")
    assert isinstance(caught.value, ImportError)
    plugin = os.environ.get("MLA_EXAMPLE_PLUGIN")
    if not plugin:
        pytest.skip("MLA_EXAMPLE_PLUGIN is not set (run through ctest)")
    mlaprefill.load_plugin(plugin)
    assert os.path.realpath(plugin) in [os.path.realpath(p) for p in mlaprefill.loaded_plugins()]
    assert mlaprefill.is_overridden("CUSTOM")
    selector = mlaprefill.Selector(apply=False)
    backend = selector.create(selector.select("float32", backend="CUSTOM"), num_heads=2, scale=0.1)
    assert backend.name


def test_platform_parses_specs():
    assert mlaprefill.platform()["vendor"] in ("host", "nvidia", "amd")
    amd = mlaprefill.platform("amd:gfx942")
    assert amd["vendor"] == "amd" and amd["capability"] == "9.4" and amd["simulated"]
    with pytest.raises(mlaprefill.ConfigError, match="nvidia"):
        mlaprefill.platform("quantum:1.0")


def test_the_context_planner_from_python():
    chunks = mlaprefill.plan_context_chunks([40, 0, 70, 5], workspace_tokens=100, block_size=16)
    assert [c["cu_seqlens_k"] for c in chunks] == [[0, 32, 32, 64, 69], [0, 8, 8, 40, 40], [0, 0, 0, 6, 6]]
    assert chunks[1]["starts"] == [32, 0, 32, 5] and chunks[0]["chunk_size"] == 32
    with pytest.raises(mlaprefill.InvalidArgument, match="cannot hold one block"):
        mlaprefill.plan_context_chunks([4], workspace_tokens=8, block_size=16)


def test_errors_raised_in_python_carry_their_category():
    """The package's own Python code raises these classes too: their category
    must be theirs, as for errors coming from the C++ library."""
    assert mlaprefill.InvalidArgument("x").category == "invalid_argument"
    assert mlaprefill.NotSupported("x").category == "not_supported"
    backend = mlaprefill.Selector().create(mlaprefill.Selector().select("float32", backend="REFERENCE"), 2)
    with pytest.raises(mlaprefill.InvalidArgument) as caught:
        backend.run_new_tokens(None, None, None)  # no scale anywhere: raised by the Python layer
    assert caught.value.category == "invalid_argument"
