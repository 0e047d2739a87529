"""Artifacts: the bytes the fleet downloads, and the engines built from them.

:mod:`.store` (content-addressed files), :mod:`.byte_range` (HTTP ``Range``, pure),
:mod:`.engines` (engine uploads, manifests, build leases; ARCHITECTURE.md §4),
:mod:`.leases` (may this device build this engine now? pure).
"""
