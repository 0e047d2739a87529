"""Trust: the fleet's signing key, device enrolment, and who may put what into the fleet.

:mod:`.signing` (ed25519 key; the only controller module that imports cryptography),
:mod:`.enrolment` (one-time tokens → device identities; revocation), :mod:`.enrolment_rate`
(token bucket per address, pure), :mod:`.engine_trust` (who may upload and pull an engine, pure),
:mod:`.tls_files` (TLS file checks at start).
"""
