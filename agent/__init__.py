"""The Jetfleet gateway agent: probe facts, reconcile desired models, serve them, report.

Error hierarchy (``agent.errors``)::

    AgentError
    ├── SettingsError            bad configuration; the CLI exits 2
    ├── TransientError           retried on the next reconcile pass
    │   ├── StateDirError        the state directory cannot take a write now (full, read-only)
    │   ├── DownloadError        network failure or 5xx while fetching an artifact
    │   ├── StoreUnavailable     the engine store cannot be reached (the device builds alone)
    │   └── Unreachable          no HTTP answer (refused, reset, DNS, timeout, TLS; agent.link.http)
    ├── PermanentError           reported as ``failed`` until the desired state changes
    │   ├── ArtifactUnavailable  the artifact server refused the request (4xx)
    │   ├── IntegrityError       size or sha256 of the bytes does not match the desired state
    │   ├── ModelLoadError       the runtime refused the model or its warm-up
    │   ├── BuildFailed          an engine build failed, timed out or was cancelled
    │   └── StoreRejected        the engine store refused a request (StoreConflict: 409)
    ├── InvalidInputError        a bad inference request (HTTP 400)
    ├── InferenceError           the runtime failed on a valid request (HTTP 500)
    └── StartupError             a port is taken, the state directory is not writable...
"""
