"""Profiling and tuning jobs: create them, carry them to devices, collect what comes back.

``service`` creates, reads and cancels jobs (the API's entry point); ``schemas`` is what the API
takes and answers; ``carry`` puts a device's unfinished jobs in its desired document;
``results`` applies the job events devices send; ``loop`` is the supervised thread that does so
every second. May use ``controller.db``, ``controller.fleet``, ``controller.trust`` and
``shared``; the API and the composition root use it.
"""
