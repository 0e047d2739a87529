"""``jetfleet``: the operator's commands and ``jetfleet serve``, one click group (:mod:`.main`).

One module per command group (models, devices, deploy, configs, rollouts, engines, profile/tune,
tokens, enrolment and devices' security, keys, db, broker, login, analyze, demo, serve);
:mod:`.render` (tables and JSON for people and scripts), :mod:`.fetch` (a version's bytes for
``models analyze``), :mod:`.serve_options` (``serve``'s click options, made from the settings
tree ``controller.settings.ServeOptions``). Commands are thin: they parse options and call the
API through :mod:`controller.client`, or, for the offline ones (``db``, ``keys``, ``tokens``
bootstrap, ``broker config``, ``serve``), one service function.

Layer: the top. May use every package below it (server, demo, client and the server side).
"""
