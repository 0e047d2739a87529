"""The controller's built-in web dashboard: fleet overview, device pages, rollout progress.

:mod:`.view` (the fleet as dashboards see it: devices, health verdicts, latest vitals; one place,
so the JSON API, ``/metrics`` and the pages agree), :mod:`.pages` (HTML, pure), :mod:`.routes`
(the pages and the vendored static files), :mod:`.login` (the cookie login page).

Layer: the API includes its routes (``controller.api.routes_health``, ``create_app``); it may use
fleet (health verdicts), auth (the login cookie), db and the leaves, never the API or the
services above it.
"""
