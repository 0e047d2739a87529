"""The re-signing thread keeps re-signing after an unexpected error (it used to stop for good,
and manifests then expired on devices): after ``jetfleet keys rotate`` a device's retained
desired document is still signed again with the new key, without any deployment. Real SQLite,
real Mosquitto, real key files; the injected failure is a signer whose staleness check raises
once."""

from __future__ import annotations

from pathlib import Path

from controller.db.session import make_engine
from controller.db.signing_store import SigningStore
from controller.trust.refresher import SignatureRefresher
from controller.trust.signing import FleetSigner
from tests.integration.controller.conftest import poll
from tests.integration.fleet_parts import DesiredWatch, fleet_parts

DEVICE = "gw-resign-1"


class SignerFailingOnce(FleetSigner):
    """The fleet's signer; its first staleness check raises an unexpected error."""

    failed = False

    def stale(self) -> bool:
        if not self.failed:
            self.failed = True
            raise RuntimeError("injected: the staleness check failed")
        return super().stale()


def test_documents_are_signed_again_with_the_new_key_after_the_thread_crashed(
    sqlite_url: str, mosquitto: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    with fleet_parts(sqlite_url, mosquitto, data_dir) as parts:
        parts.add_device(DEVICE)
        parts.add_version("detector", "1.0.0")
        watch = DesiredWatch(mosquitto, parts.topics, DEVICE)
        engine = make_engine(sqlite_url)
        checker = SignerFailingOnce(SigningStore(engine), data_dir)
        refresher = SignatureRefresher(checker.stale, parts.fleet.republish_all, interval_s=0.05)
        try:
            parts.fleet.deploy_to([DEVICE], "detector", "1.0.0", None)
            first = watch.wait_for("the deployed document", lambda d: bool(d.slots))
            old_key = parts.signer.active()
            assert old_key is not None
            signed = first.slots[0].artifact.signed
            assert signed is not None
            assert signed.manifest.key_id == old_key.key_id

            new_key, _ = parts.signer.rotate()  # `jetfleet keys rotate` next to the controller
            refresher.start()

            def resigned() -> bool:
                doc = watch.latest()
                if doc is None or not doc.slots or doc.slots[0].artifact.signed is None:
                    return False
                return doc.slots[0].artifact.signed.manifest.key_id == new_key.key_id

            poll(resigned, 30, "the document signed again with the new key")
            assert checker.failed, "the injected failure happened first"
            assert refresher.restarts == 1
            doc = watch.latest()
            assert doc is not None
            assert doc.generation == first.generation  # republished, not redeployed
            assert doc.signature is not None
            assert doc.signature.key_id == new_key.key_id
            assert doc.fleet_keys[-1].key_id == new_key.key_id
        finally:
            refresher.stop()
            watch.close()
            engine.dispose()
