"""The one redaction policy: secret names, credentials in values, free text, JSON documents."""

from __future__ import annotations

import pytest

from ascendctl.redact import REDACTED, is_secret_name, redact_document, redact_env, redact_text, redact_value


@pytest.mark.parametrize("name", ["HCCL_DB_PASSWD", "HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "OBS_SK",
                                  "GITHUB_TOKEN", "db_password", "MY_SECRET", "HCCL_AUTH_TOKEN", "AZURE_STORAGE_SAS"])
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["TOKENIZERS_PARALLELISM", "PWD", "OLDPWD", "MASTER_PORT", "HCCL_IF_IP", "KEYBOARD",
                                  "NCCL_IB_HCA", "signature", "PASSAGE_LEN"])
def test_not_secret_names(name: str) -> None:
    assert not is_secret_name(name)


def test_credentials_inside_values_are_hidden_whatever_the_name() -> None:
    assert redact_value("https://oauth2:glpat-abcdefghijklmnopqrstu@gitlab.example/x.git") == \
        f"https://oauth2:{REDACTED}@gitlab.example/x.git"
    assert redact_value("s3://b/k?X-Amz-Signature=abcd1234&X-Amz-Date=1") == f"s3://b/k?X-Amz-Signature={REDACTED}&X-Amz-Date=1"
    assert redact_value("hf_" + "a" * 30) == REDACTED
    assert redact_value("plain value /opt/venv") == "plain value /opt/venv"


def test_env_text_and_documents() -> None:
    env = redact_env({"HCCL_DB_PASSWD": "hunter2", "DATA_URL": "https://u:pw@host/d", "HCCL_IF_IP": "10.0.0.1"})
    assert env == {"HCCL_DB_PASSWD": REDACTED, "DATA_URL": f"https://u:{REDACTED}@host/d", "HCCL_IF_IP": "10.0.0.1"}
    line = "python train.py --db-password hunter2 HF_TOKEN=abc MASTER_PORT=29500"
    assert "hunter2" not in redact_text(line) and "abc" not in redact_text(line) and "MASTER_PORT=29500" in redact_text(line)
    doc = redact_document({"nodes": [{"env": {"HCCL_DB_PASSWD": "hunter2"}, "stdout": "token=x HF_TOKEN=y"}],
                           "signature": "python.exception"})
    assert "hunter2" not in str(doc) and "HF_TOKEN=y" not in str(doc) and doc["signature"] == "python.exception"
