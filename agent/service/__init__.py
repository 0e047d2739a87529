"""The agent as a system service: systemd notify, the doctor, logging.

:mod:`.lifecycle` (READY, STATUS, watchdog), :mod:`.sd_notify` (the protocol, no libsystemd),
:mod:`.doctor` (what stands between this gateway and serving, each with its fix),
:mod:`.logging_setup`.

May use: every package below it (jobs, slots, ... hardware); only :mod:`agent.cli` and
:mod:`agent.daemon` use it.
"""
