"""Model slots: from a desired document to served engines, one stage at a time.

:mod:`.plan` is the pure reconcile decision (``plan(desired, actual)`` → steps);
:mod:`.pipeline` runs each step through its stages (phases, events, failures) and
:mod:`.stages` holds the stage objects (verify, download, batching, resolve, reference, swap);
:mod:`.assembly` puts them together for the daemon; :mod:`.restore` serves the swap journal's
engines at start-up; :mod:`.records` keeps the slot records (one owner, the loop thread) and the
frozen view other threads read; :mod:`.events` numbers and spools the agent's events;
:mod:`.state_store` keeps the last desired document on disk.

May use: :mod:`agent.swap`, :mod:`agent.serving`, :mod:`agent.runtimes`, :mod:`agent.engines`,
:mod:`agent.trust`, :mod:`agent.telemetry`, :mod:`agent.link`, :mod:`agent.hardware`,
:mod:`shared`; never the daemon, jobs or service packages above it.
"""
