"""ascendctl.facts.parsers.versions: Ascend version.info files and pip list rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendctl.facts.parsers import ParseError
from ascendctl.facts.parsers.versions import package_version, parse_pip_versions, parse_version_info

SAMPLE = (Path(__file__).resolve().parent / "data/samples/ascend/envcheck_versions_hccn_ip_linkstat_8dev.txt").read_text()


def block(command: str) -> str:
    """Output of one command in the envcheck dump (each is followed by two blank lines)."""
    return SAMPLE.split(command + "\n", 1)[1].split("\n\n\n", 1)[0]


def test_driver_version_info() -> None:
    info = parse_version_info(block("cat /usr/local/Ascend/driver/version.info"))
    assert info["version"] == "23.0.7"
    assert info["innerversion"] == "V100R001C15SPC012B220"
    assert info["compatible_version_fw"] == "[7.0.0,7.1.99]"
    assert len(info) == 12
    assert package_version(info) == "23.0.7"


def test_firmware_version_info() -> None:
    info = parse_version_info(block("cat /usr/local/Ascend/firmware/version.info"))
    assert info["version"] == "7.1.0.11.220"
    assert info["package_version"] == "23.0.7"
    assert info["compatible_version_drv"] == "[23.0.rc3,23.0.rc3.],[23.0.0,23.0.0.]"


def test_toolkit_and_nnae_install_info() -> None:
    toolkit = parse_version_info(block("cat /usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info"))
    assert (toolkit["package_name"], toolkit["version"], toolkit["innerversion"]) == ("Ascend-cann-toolkit", "7.0.T10", "V100R001C13B222")
    assert toolkit["arch"] == "aarch64"
    nnae = parse_version_info(block("cat /usr/local/Ascend/nnae/latest/ascend_nnae_install.info"))
    assert (nnae["version"], nnae["arch"], nnae["path"]) == ("8.0.RC3", "x86_64", "/usr/local/Ascend/nnae/8.0.RC3")


def test_package_version_falls_back_to_package_version_key() -> None:
    assert package_version({"package_version": "23.0.7"}) == "23.0.7"
    assert package_version({"arch": "aarch64"}) is None


@pytest.mark.parametrize("text", ["", "\n", "cat: /usr/local/Ascend/driver/version.info: No such file or directory\n", "Version 23.0.7\n", "=23.0.7\n"])
def test_version_info_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="key=value"):
        parse_version_info(text)


def test_pip_rows_from_envcheck_dump() -> None:
    assert parse_pip_versions(block('pip list | grep "torch "')) == {"torch": "1.11.0"}
    assert parse_pip_versions(block("pip list | grep torch-npu")) == {"torch-npu": "2.1.0.post8.dev20241009"}
    assert parse_pip_versions(block('pip list | grep "mindspore "')) == {"mindspore": "2.3.0"}


def test_pip_list_with_header_freeze_lines_and_editable_location() -> None:
    text = (
        "Package            Version\n"
        "------------------ -----------\n"
        "torch              2.1.0\n"
        "torch_npu          2.1.0.post3 /opt/src/torch_npu\n"
        "Torch.Vision==0.16.0\n"
        "[notice] A new release of pip is available: 23.0 -> 24.0\n"
    )
    assert parse_pip_versions(text) == {"torch": "2.1.0", "torch-npu": "2.1.0.post3", "torch-vision": "0.16.0"}


@pytest.mark.parametrize("text", ["", "Package Version\n-------- -------\n", "bash: pip: command not found\n", "torch\n", "torch latest\n"])
def test_pip_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="pip list"):
        parse_pip_versions(text)
