"""Jobs the controller asks for once: profiling, tuning candidates, power modes.

:mod:`.runner` (the jobs thread) with :mod:`.journal` (each job once), :mod:`.host` (what a job
may use from the agent), :mod:`.profile_job` and :mod:`.tune_job` (the two kinds);
:mod:`.profiling` (where an inference's time goes, pure) with
:mod:`.profiling_trt` (TensorRT per-layer times),
:mod:`.tuning_bench` (one tuning candidate: build → admit → load → time → validate),
:mod:`.power` (nvpmodel decision and adapter), :mod:`.power_facts` (facts kept in step with the
power mode for the reconcile loop).

May use: :mod:`agent.slots` and everything below it.
"""
