"""The analysis thread keeps analysing after an unexpected error (it used to stop for good, and
every later push stayed "analysis pending"): the next pushed version is still analysed. Real
SQLite, real artifact store, the real analysis child process; the injected failure is an
artifact store whose local-file lookup raises once."""

from __future__ import annotations

from pathlib import Path

from controller.analysis.runner import AnalysisRunner
from controller.artifacts.store import ArtifactStore
from controller.db import migrate
from controller.db.repository import Repository
from controller.db.session import make_engine
from controller.demo import sample_models
from tests.integration.controller.conftest import poll


class StoreFailingOnce(ArtifactStore):
    """The artifact store; once armed, its next local-file lookup raises an unexpected error."""

    armed = False
    failed = False

    def local_path(self, sha256: str) -> Path:
        if self.armed and not self.failed:
            self.failed = True
            raise RuntimeError("injected: the artifact store could not be read")
        return super().local_path(sha256)


def store_model(store: ArtifactStore, data: bytes) -> tuple[str, int]:
    pending = store.begin()
    pending.write(data)
    stored = pending.commit()
    return stored.sha256, stored.size


def test_the_next_version_is_analysed_after_the_thread_crashed(
    sqlite_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    repo = Repository(engine)
    store = StoreFailingOnce(tmp_path / "data")
    runner = AnalysisRunner(repo, store, timeout_s=60.0)
    try:
        assert runner.start() == 0
        versions = []
        for seed, version in ((1, "1.0.0"), (2, "2.0.0")):
            sha, size = store_model(store, sample_models.classifier(seed=seed))
            versions.append(
                repo.add_version("detector", version, sha, size, [], [], analysis_state="pending")
            )
        store.armed = True
        for record in versions:  # two pushes in a row
            runner.submit(record)

        def state(version: str) -> str:
            found = repo.find_version("detector", version)
            assert found is not None
            return found.analysis_state

        poll(lambda: state("2.0.0") == "done", 60, "the analysis of the second push")
        assert store.failed, "the injected failure happened first"
        # the version whose run crashed stays pending until the next start queues it again
        assert state("1.0.0") == "pending"
        runner.stop()
        runner = AnalysisRunner(repo, ArtifactStore(tmp_path / "data"), timeout_s=60.0)
        assert runner.start() == 1
        poll(lambda: state("1.0.0") == "done", 60, "the first push analysed after a restart")
    finally:
        runner.stop()
        engine.dispose()
