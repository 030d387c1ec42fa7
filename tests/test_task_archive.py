"""Archived task repositories: unpacked once into the cache, safely, with the judge's runner as check.py."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from agent_engine.agent import check_runner
from agent_engine.agent.task_archive import unpacked_repo

pytestmark = pytest.mark.core


def _archive(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_an_archive_is_unpacked_once_with_the_runner_as_its_check(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path / "cache"))
    archive = _archive(tmp_path / "lib.tar.gz", {"lib/pkg.py": b"x = 1\n", "lib/tests/test_x.py": b""})
    repo = unpacked_repo(archive)
    assert (repo / "pkg.py").read_text() == "x = 1\n"
    assert (repo / "check.py").read_bytes() == Path(check_runner.__file__).read_bytes()
    (repo / "pkg.py").write_text("changed")  # the entry stands: a second call does not unpack again
    assert unpacked_repo(archive) == repo and (repo / "pkg.py").read_text() == "changed"
    assert [p.name for p in repo.parent.iterdir()] == [repo.name]  # no scratch folder left


@pytest.mark.parametrize("members", [{"../escape.py": b"x"}, {"/abs.py": b"x"}, {"a/x.py": b"", "b/y.py": b""}])
def test_an_archive_that_leaves_its_folder_or_holds_two_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   members: dict[str, bytes]) -> None:
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ValueError):
        unpacked_repo(_archive(tmp_path / "bad.tar.gz", members))
    assert not (tmp_path / "escape.py").exists()
