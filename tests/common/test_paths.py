"""What a path names, asked without a traceback: the user's paths give one-line errors, the ones perftool looks
for name nothing when the system cannot look them up."""

from __future__ import annotations

import pytest

from perftool.common.errors import PerftoolError
from perftool.common.paths import kind_of, names_file


def test_a_user_s_path_is_a_file_a_directory_or_nothing(tmp_path):
    (tmp_path / "config.yaml").write_text("a: 1\n")
    assert kind_of(tmp_path / "config.yaml", "project config") == "file"
    assert kind_of(tmp_path, "rule directory") == "directory"
    assert kind_of(tmp_path / "missing.yaml", "project config") is None
    assert kind_of(tmp_path / "config.yaml" / "below", "project config") is None  # a part of it is a file


@pytest.mark.parametrize(("name", "reason"), [("x" * 300, "File name too long"), ("a\x00b", "embedded null byte")])
def test_a_name_the_system_cannot_look_up_is_one_line_naming_the_file_and_why(tmp_path, name, reason):
    with pytest.raises(PerftoolError, match=f"cannot read project config: {reason}"):
        kind_of(tmp_path / name, "project config")
    assert names_file(tmp_path / name) is False  # where perftool only looks for a file, there is none


def test_only_a_regular_file_is_a_file_found(tmp_path):
    (tmp_path / "capture.json").write_text("[]")
    assert names_file(tmp_path / "capture.json") and not names_file(tmp_path) and not names_file(tmp_path / "gone")
