"""The published schemas that perftool's SARIF and JUnit outputs are validated against.

Neither schema is committed here: each is taken, at a pinned version and checked by its SHA-256, from a package
that ships it, through that registry's ordinary client, once, into a cache outside the tree
(``$PERFTOOL_TEST_CACHE``, else ``$XDG_CACHE_HOME/perftool-tests`` or ``~/.cache/perftool-tests``), and reused.

- SARIF 2.1.0 (JSON Schema draft 4, the 2.1.0-rtm.5 schema): from the npm package @microsoft/jest-sarif.
- JUnit XML (the Jenkins xUnit plugin's junit-10.xsd, which pytest's own tests validate against): from pytest's
  source distribution on PyPI.

Without network access the two tests that need a schema are skipped with the reason; everything else runs.
``python tests/published_schemas.py`` fetches both into the cache and fails loudly when it cannot: ``.ci/run``
does that first, so CI always validates.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class PublishedSchema:
    """Where one schema file is published and what it must hash to."""

    file_name: str
    sha256: str
    member: str  # the file's path inside the downloaded archive
    download: tuple[str, ...]  # a command run in the download folder; it leaves one archive there

    def path(self, cache_dir: Path) -> Path:
        """The schema file, downloaded into cache_dir unless it is there already; pytest.skip when it cannot be."""
        target = cache_dir / self.file_name
        if target.is_file() and _sha256(target.read_bytes()) == self.sha256:
            return target
        try:
            data = self._fetch(cache_dir)
        except (OSError, ValueError, subprocess.SubprocessError, tarfile.TarError, KeyError) as error:
            pytest.skip(
                f"{self.file_name} is not cached and could not be downloaded ({error}); CI validates against it"
            )
        if _sha256(data) != self.sha256:
            raise AssertionError(f"{self.file_name}: the downloaded schema is not the pinned one")
        target.write_bytes(data)
        return target

    def _fetch(self, cache_dir: Path) -> bytes:
        download_dir = cache_dir / f"{self.file_name}.download"
        download_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(self.download, cwd=download_dir, check=True, capture_output=True, timeout=300)
        (archive,) = sorted(download_dir.glob("*.t*gz"))
        with tarfile.open(archive) as bundle:
            extracted = bundle.extractfile(self.member)
            if extracted is None:
                raise KeyError(self.member)
            return extracted.read()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


SARIF_2_1_0 = PublishedSchema(
    file_name="sarif-2.1.0-rtm.5.json",
    sha256="2d99159ae54a3eea97f81781cff48780548657c35949f4b7f25e99a2ba4de4f8",
    member="package/lib/schemas/sarif-2.1.0-rtm.5.json",
    download=("npm", "pack", "--silent", "@microsoft/jest-sarif@1.0.0-beta.0"),
)

JUNIT_10 = PublishedSchema(
    file_name="junit-10.xsd",
    sha256="a1a816f58d1bf95ebabf371994df0b9246dee66ea9572fbec4f9296f1b2c0ff6",
    member="pytest-9.2.0/testing/example_scripts/junit-10.xsd",
    download=(sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:", "pytest==9.2.0"),
)


def cache_dir() -> Path:
    """The folder, outside the source tree, where fetched schemas are kept between runs."""
    if os.environ.get("PERFTOOL_TEST_CACHE"):
        return Path(os.environ["PERFTOOL_TEST_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "perftool-tests"


def main() -> None:
    """Fetch every schema into the cache (CI runs this before the tests); fail when one cannot be had."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    for schema in (SARIF_2_1_0, JUNIT_10):
        target = folder / schema.file_name
        if not (target.is_file() and _sha256(target.read_bytes()) == schema.sha256):
            data = schema._fetch(folder)
            if _sha256(data) != schema.sha256:
                raise SystemExit(f"{schema.file_name}: the downloaded schema is not the pinned one")
            target.write_bytes(data)
        print(f"{target}: ok")


if __name__ == "__main__":
    main()
