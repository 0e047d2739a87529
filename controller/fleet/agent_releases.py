"""Agent releases: pushed (streamed into the artifact store, metadata read from the file,
manifest signed with the fleet key), listed, and turned into the order a device's desired
document carries (:class:`shared.agent_releases.AgentReleaseOrder`).

A release is one version for one architecture and the JetPack lines it runs on (an aarch64
build links to one line's system Python, so a fleet on JetPack 5 and 6 gets two artifacts of
one version); pushing the same version, architecture and lines again with the same bytes
answers the stored release, with other bytes :class:`Conflict`. The order a
device gets names the artifact at ``/api/v1/artifacts/<sha256>`` (HTTP Range, the device's
own token) and carries the release's manifest, signed again when less than half its validity
is left, so a document built today never carries an expired manifest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, cast

from controller.artifacts.store import ArtifactStore, PendingArtifact
from controller.db.agent_store import AgentReleaseStore
from controller.errors import Conflict, NotFound
from controller.fleet.agent_packages import read_release
from controller.fleet.desired import artifact_url
from controller.records import AgentReleaseRecord, AgentReport
from controller.trust.signing import FleetSigner
from shared.agent_releases import AgentReleaseArtifact, AgentReleaseOrder
from shared.manifests import SignedManifest


class AgentReleases:
    """Push, list and order agent releases."""

    def __init__(
        self,
        store: AgentReleaseStore,
        artifacts: ArtifactStore,
        public_url: str,
        signer: FleetSigner | None = None,
    ) -> None:
        self.store = store
        self._artifacts = artifacts
        self._public_url = public_url
        self._signer = signer

    def begin_upload(self) -> PendingArtifact:
        """A temporary file in the artifact store to stream the upload into."""
        return self._artifacts.begin()

    def finish_upload(
        self, pending: PendingArtifact, pushed_by: str
    ) -> tuple[AgentReleaseRecord, bool]:
        """Read, check, store and sign a streamed release; (release, True when new).

        Nothing is left behind unless a new release is stored.
        """
        committed = False
        try:
            sha = pending.finish()
            meta = read_release(pending.path)
            existing = self.store.find(meta.version, meta.arch, meta.jetpack)
            if existing is not None:
                if existing.sha256 == sha:
                    return existing, False
                raise Conflict(
                    f"agent release {meta.version} ({_built_for(meta.arch, meta.jetpack)}) "
                    "already exists with different "
                    f"bytes (sha256 {existing.sha256[:12]}…, upload {sha[:12]}…): push it "
                    "under a new version"
                )
            stored = pending.commit()
            committed = True
            record = self.store.add_release(
                version=meta.version,
                arch=meta.arch,
                format=meta.format,
                sha256=stored.sha256,
                size=stored.size,
                python=meta.python,
                jetpack=meta.jetpack,
                details=meta.details,
                pushed_by=pushed_by,
            )
            self._manifest(record)
            return self.store.find(record.version, record.arch, record.jetpack) or record, True
        finally:
            if not committed:
                pending.abort()

    def url_of(self, release: AgentReleaseRecord) -> str:
        """Where devices download the release's bytes."""
        return artifact_url(self._public_url, release.sha256)

    def releases(self) -> list[AgentReleaseRecord]:
        """Every release, oldest push first."""
        return self.store.releases()

    def require(self, version: str) -> list[AgentReleaseRecord]:
        """The releases of ``version`` (one per architecture); :class:`NotFound` when none."""
        found = self.store.releases(version)
        if not found:
            raise NotFound(
                f"no agent release {version}: push it first (`jetfleet agent releases push`)"
            )
        return found

    def reports(self, device_ids: Sequence[str]) -> dict[str, AgentReport]:
        """What each device last reported of its agent."""
        return self.store.reports(device_ids)

    def set_orders(
        self,
        device_ids: Sequence[str],
        release_ids: Mapping[str, int],
        allow_downgrade: bool,
        confirm_within_s: int | None = None,
    ) -> None:
        """Order each device the release in ``release_ids`` (withdraw the order of the others);
        their documents change at their next publication."""
        self.store.set_orders(device_ids, release_ids, allow_downgrade, confirm_within_s)

    def orders_for(self, device_ids: Sequence[str]) -> dict[str, AgentReleaseOrder]:
        """The order each of these devices' desired documents carries (none: left out)."""
        stored = self.store.orders(device_ids)
        manifests: dict[int, SignedManifest | None] = {}
        result: dict[str, AgentReleaseOrder] = {}
        for device_id, order in stored.items():
            release = order.release
            if release.id not in manifests:
                manifests[release.id] = self._manifest(release)
            result[device_id] = AgentReleaseOrder(
                version=release.version,
                arch=cast(Literal["aarch64", "x86_64"], release.arch),
                artifact=AgentReleaseArtifact(
                    url=self.url_of(release),
                    sha256=release.sha256,
                    size=release.size,
                    format=cast(Literal["deb", "tar.gz"], release.format),
                    signed=manifests[release.id],
                ),
                allow_downgrade=order.allow_downgrade,
                **(
                    {"confirm_within_s": order.confirm_within_s}
                    if order.confirm_within_s is not None
                    else {}
                ),
            )
        return result

    def _manifest(self, release: AgentReleaseRecord) -> SignedManifest | None:
        """The release's signed manifest (stored, or signed now and stored)."""
        if self._signer is None:
            return None
        signed, fresh = self._signer.agent_manifest(release)
        if fresh:
            self.store.set_manifest(release.id, signed.model_dump(mode="json", by_alias=True))
        return signed


def _built_for(arch: str, jetpack: Sequence[str]) -> str:
    """``aarch64, JetPack 6`` (or just the architecture when it runs on any line)."""
    return f"{arch}, JetPack {','.join(jetpack)}" if jetpack else arch
