"""The agent updates itself: signed agent releases installed side by side, switched atomically,
confirmed by the new release or rolled back by the launcher (docs/agent-updates.md).

- :mod:`~agent.update.release_meta`: what a release says of itself (``release.json``), pure;
- :mod:`~agent.update.unpack_rules`: which archive members may be written where, pure;
- :mod:`~agent.update.archives`: tar.gz release trees and ``jetfleet-agent_*.deb`` into a
  ``<version>.partial`` directory, then renamed;
- :mod:`~agent.update.layout`: the releases directory (``current``, ``previous``, the
  launcher's boot-counting files);
- :mod:`~agent.update.journal` and :mod:`~agent.update.decisions`: the persisted state machine
  and its pure decisions;
- :mod:`~agent.update.installer`: download → verify → unpack → self-check (a worker thread);
- :mod:`~agent.update.restart`: the KServe socket handed across ``execv`` of the launcher;
- :mod:`~agent.update.updates`: what the daemon calls.

Each step of an update passes a named checkpoint (:mod:`agent.checkpoints`).

The launcher that starts releases and rolls them back is ``packaging/scripts/agent-launch``;
the self-check a release passes first is :mod:`agent.service.self_check`.
"""
