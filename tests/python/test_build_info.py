"""mlaprefill.build_info(): what the build carries, written at configuration,
agrees with what the library's table reports at run time."""

import mlaprefill

TABLE = {"REFERENCE", "KOKKOS", "CUDA_FLASH", "HOPPER_FLASH", "HIP_FLASH"}


def test_every_backend_of_the_table_is_accounted_for():
    info = mlaprefill.build_info()
    assert set(info["backends"]) == TABLE
    for name, row in info["backends"].items():
        assert isinstance(row["built"], bool) and row["detail"], (name, row)
    assert info["backends"]["REFERENCE"]["built"]
    assert info["version"] and info["compiler"] and isinstance(info["notes"], dict)


def test_what_was_built_is_what_the_library_has():
    info = mlaprefill.build_info()["backends"]
    for row in mlaprefill.backends()["backends"]:
        if row["name"] not in info:
            continue  # a registered plugin or override, not part of the build
        built = info[row["name"]]["built"]
        # Built means the code is there; whether it runs on this device is the selector's answer.
        assert row["available"] == built, (row, info[row["name"]])
        if not built:
            assert row["unavailable_reason"].startswith("built without"), row


def test_the_caller_gets_a_copy():
    info = mlaprefill.build_info()
    info["backends"]["REFERENCE"]["built"] = False
    assert mlaprefill.build_info()["backends"]["REFERENCE"]["built"]
