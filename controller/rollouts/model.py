"""Rollout records: defined in :mod:`controller.records.rollouts` (the database stores them);
this module keeps the import path the rollout code uses."""

from __future__ import annotations

from controller.records.rollouts import ACTIVE as ACTIVE
from controller.records.rollouts import AuditEntry as AuditEntry
from controller.records.rollouts import Baseline as Baseline
from controller.records.rollouts import FailurePolicy as FailurePolicy
from controller.records.rollouts import Gates as Gates
from controller.records.rollouts import Operation as Operation
from controller.records.rollouts import Rollout as Rollout
from controller.records.rollouts import RolloutSpec as RolloutSpec
from controller.records.rollouts import RolloutState as RolloutState
from controller.records.rollouts import Strategy as Strategy
from controller.records.rollouts import Target as Target
from controller.records.rollouts import TargetSpec as TargetSpec
from controller.records.rollouts import TargetStatus as TargetStatus
