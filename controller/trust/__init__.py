"""Trust: the fleet's signing key, device enrolment, and who may put what into the fleet.

:mod:`.signing` (the fleet key in use: manifests, rollbacks, documents), :mod:`.key_files`
(the private key files; the only controller module that imports cryptography), :mod:`.refresher`
(the supervised re-signing thread),
:mod:`.enrolment` (one-time tokens → device identities; revocation), :mod:`.enrolment_rate`
(token bucket per address, pure), :mod:`.engine_trust` (who may upload and pull an engine, pure),
:mod:`.tls_files` (TLS file checks at start), :mod:`.labels` (what a valid device label is and
who may set one, pure: labels are what selectors authorise by).

Layer: below fleet and artifacts (which sign and check through it); may use auth (the device's
API token), broker_admin (the device's broker credential), db, the leaves and ``shared``.
"""
