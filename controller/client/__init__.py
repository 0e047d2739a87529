"""Talking to a running controller over its HTTP API, from outside it.

:mod:`.http` (:class:`~controller.client.http.ControllerClient`: one method per API call, every
failure an :class:`~controller.client.http.ApiError` with one line a person can act on) and
:mod:`.user_config` (where the URL, token and CA bundle come from: options, environment, the file
``jetfleet login`` writes).

Used by :mod:`controller.cli` (the operator's commands) and :mod:`controller.demo` (which drives
its controller as an operator would); it imports nothing of the controller's server side, and
nothing below it in the layers may import it (the server never calls its own API).
"""
