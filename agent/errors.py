"""The agent's error hierarchy; each class carries its retry policy (see ``agent`` docstring)."""

from __future__ import annotations


class AgentError(Exception):
    """Base of every error the agent raises on purpose; the message says what to do."""


class SettingsError(AgentError):
    """A setting is missing or invalid. ``key`` names it as the operator spells it."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"invalid setting {key}: {reason}")
        self.key = key
        self.reason = reason


class TransientError(AgentError):
    """Worth retrying later unchanged: the network, the broker or the server may recover."""


class PermanentError(AgentError):
    """Retrying the same desired state cannot help; it stays failed until the state changes."""


class StateDirError(TransientError):
    """The state directory cannot take a write now (full, over quota, read-only)."""


class DownloadError(TransientError):
    """The artifact could not be fetched right now (connection error, timeout, 5xx)."""


class ArtifactUnavailable(PermanentError):
    """The artifact server refused the request (4xx): the URL or the artifact is wrong."""


class IntegrityError(PermanentError):
    """The fetched bytes are not the ones the desired state names (size or sha256)."""


class ModelLoadError(PermanentError):
    """The runtime could not load the model or run its warm-up inference."""


class InvalidInputError(AgentError):
    """An inference request does not fit the model (name, datatype, shape, data)."""


class InferenceError(AgentError):
    """The runtime failed on a request that fit the model."""


class StartupError(AgentError):
    """The agent cannot start: a port is taken, the state directory is not writable..."""
