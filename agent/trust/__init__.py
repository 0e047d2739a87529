"""What the agent trusts: pinned fleet keys, signed manifests, rollback authorisations.

:mod:`.verifier` checks manifests and key rotations, :mod:`.store` keeps ``trust.json``,
:mod:`.signatures` is the only agent module that imports cryptography.

May use: :mod:`agent.link`, :mod:`agent.hardware`, :mod:`shared`.
"""
