"""The enrolment answer: what the controller gives a device that enrolled with a token.

``POST /api/v1/enroll`` answers it (the secrets are shown this once); the agent keeps its fields
in ``<state_dir>/identity.json`` (mode 0600), where the settings an identity provides are read
from. The controller builds it in ``controller.trust.enrolment``; ``agent.identity_file`` writes
and reads the file with these field names.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict


class EnrolmentAnswer(BaseModel):
    """The enrolled device's identity; the secrets are shown this once."""

    model_config = ConfigDict(frozen=True)

    device_id: str
    controller_url: str
    broker_url: str
    topic_prefix: str
    broker_username: str | None
    broker_password: str | None
    api_token: str | None
    fleet_key: dict[str, str] | None
    labels: dict[str, str]
    enrolled_at: datetime


ENROLMENT_FIELDS = tuple(EnrolmentAnswer.model_fields)
"""The answer's field names, in order: the keys of ``identity.json``."""
