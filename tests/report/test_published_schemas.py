"""The schema cache: fetched once outside the tree, reused, and offline a skip with its reason."""

from __future__ import annotations

import dataclasses

import published_schemas
import pytest
from published_schemas import JUNIT_10


def test_offline_a_missing_schema_skips_with_the_reason(tmp_path):
    offline = dataclasses.replace(JUNIT_10, download=("false",))  # a download that fails, as without network
    with pytest.raises(pytest.skip.Exception, match="junit-10.xsd is not cached and could not be downloaded"):
        offline.path(tmp_path)


def test_a_cached_schema_is_used_without_downloading(tmp_path):
    cached = tmp_path / JUNIT_10.file_name
    source = published_schemas.cache_dir() / JUNIT_10.file_name
    if not source.is_file():
        pytest.skip("the schema is not cached on this machine (python tests/published_schemas.py fetches it)")
    cached.write_bytes(source.read_bytes())
    offline = dataclasses.replace(JUNIT_10, download=("false",))
    assert offline.path(tmp_path) == cached


def test_the_cache_lives_outside_the_source_tree(monkeypatch, tmp_path):
    monkeypatch.delenv("PERFTOOL_TEST_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert published_schemas.cache_dir() == tmp_path / "perftool-tests"
    monkeypatch.setenv("PERFTOOL_TEST_CACHE", str(tmp_path / "elsewhere"))
    assert published_schemas.cache_dir() == tmp_path / "elsewhere"
