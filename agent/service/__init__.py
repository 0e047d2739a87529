"""The agent as a system service: systemd notify, the doctor, logging.

:mod:`.lifecycle` (READY, STATUS, watchdog), :mod:`.sd_notify` (the protocol, no libsystemd),
:mod:`.doctor` (what stands between this gateway and serving, each with its fix: the
command, the pure verdicts in :mod:`.doctor_checks`, the probes in :mod:`.doctor_probes`),
:mod:`.logging_setup`.

May use: every package below it (jobs, slots, ... hardware); only :mod:`agent.cli` and
:mod:`agent.daemon` use it.
"""
