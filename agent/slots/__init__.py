"""Model slots: what the desired document asks for, what the device has, and the next step.

:mod:`.plan` is the pure reconcile decision (``plan(desired, actual)`` → steps);
:mod:`.records` is the agent's record of one slot as it is reported; :mod:`.state_store` keeps
the last desired document on disk.

May use: :mod:`agent.swap`, :mod:`agent.serving`, :mod:`agent.runtimes`, :mod:`agent.engines`,
:mod:`agent.trust`, :mod:`agent.telemetry`, :mod:`agent.link`, :mod:`agent.hardware`,
:mod:`shared`; never the daemon, jobs or service packages above it.
"""
