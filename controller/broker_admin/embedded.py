"""Broker authorisation for the embedded amqtt broker: logins checked against the enrolled
identities, the topic rules of :mod:`controller.broker_admin.acl`, and kicking revoked devices.

The only module besides ``controller.broker_admin.amqtt_broker`` that imports amqtt. amqtt loads
plugins
by dotted path and hands each its ``Config`` dataclass; :func:`amqtt_plugins` builds that part
of the broker configuration around one :class:`AccessPolicy`. amqtt does not check a Last
Will's topic when it fires, so :class:`JetfleetAuthPlugin` refuses a login whose Will points
anywhere the client may not publish (Mosquitto refuses those too).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from amqtt.contexts import Action
from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin
from amqtt.session import Session

from controller.broker_admin.acl import (
    client_id_allowed,
    controller_may_publish,
    controller_may_receive,
    controller_may_subscribe,
    device_may_publish,
    device_may_receive,
    device_may_subscribe,
    device_of_username,
)
from controller.broker_admin.login_throttle import LOCK_S, LoginThrottle

logger = logging.getLogger(__name__)

DeviceLogin = Callable[[str, str], bool]
"""(broker user name, password) → True for an enrolled, unrevoked device credential."""


class AccessPolicy:
    """Who may log in to the embedded broker and what each may publish and subscribe to."""

    def __init__(
        self,
        prefix: str,
        controller_user: str,
        controller_password: str,
        device_login: DeviceLogin,
        throttle: LoginThrottle | None = None,
    ) -> None:
        self.prefix = prefix
        self.controller_user = controller_user
        self._controller_password = controller_password
        self._device_login = device_login
        self.throttle = throttle or LoginThrottle()

    def login(self, username: str | None, password: str | None, address: str | None = None) -> bool:
        """True for the controller's credential or an enrolled device's (may touch the DB).
        A user name or address that failed too often lately is refused without checking
        (:mod:`controller.broker_admin.login_throttle`)."""
        if not username or password is None:
            return False
        if self.throttle.locked(address, username):
            return False
        if username == self.controller_user:
            ok = hmac.compare_digest(password.encode(), self._controller_password.encode())
        else:
            ok = device_of_username(username) is not None and self._device_login(username, password)
        if ok:
            self.throttle.succeeded(address, username)
        elif self.throttle.failed(address, username):
            logger.warning(
                "embedded broker: logins of %r from %s failed too often; refused without "
                "checking for the next %g s",
                username,
                address or "an unknown address",
                LOCK_S,
            )
        return ok

    def may_use_client_id(self, username: str | None, client_id: str | None) -> bool:
        """A device's credential only with its own agent client id; the controller's with any
        id but an agent's (:func:`controller.broker_admin.acl.client_id_allowed`)."""
        if not username or not client_id:
            return False
        if username == self.controller_user:
            return client_id_allowed(None, client_id)
        device_id = device_of_username(username)
        return device_id is not None and client_id_allowed(device_id, client_id)

    def may(self, username: str | None, topic: str, action: str) -> bool:
        """``action`` is ``publish``, ``subscribe`` or ``receive`` (amqtt's ``Action`` values)."""
        if not username:
            return False
        if username == self.controller_user:
            check = {
                "publish": controller_may_publish,
                "subscribe": controller_may_subscribe,
                "receive": controller_may_receive,
            }.get(action)
            return check is not None and check(topic, self.prefix)
        device_id = device_of_username(username)
        if device_id is None:
            return False
        device_check = {
            "publish": device_may_publish,
            "subscribe": device_may_subscribe,
            "receive": device_may_receive,
        }.get(action)
        return device_check is not None and device_check(device_id, topic, self.prefix)


class JetfleetAuthPlugin(BaseAuthPlugin):  # type: ignore[misc]
    """Accepts the controller and enrolled devices, each only with a client id of its own;
    nobody anonymous. :class:`~controller.broker_admin.amqtt_broker.GuardedBroker` runs this
    before any session is deleted or taken over."""

    @dataclass
    class Config:
        policy: Any = None

    async def authenticate(self, *, session: Session) -> bool:
        policy: AccessPolicy = self.context.config.policy
        username, password = session.username, session.password
        address = getattr(session, "remote_address", None)
        ok = await asyncio.get_running_loop().run_in_executor(
            None, policy.login, username, password, address
        )
        if not ok:
            logger.warning("embedded broker refused login of %r (bad credentials)", username)
            return False
        if not policy.may_use_client_id(username, session.client_id):
            logger.warning(
                "embedded broker refused %r: client id %r belongs to another identity",
                username,
                session.client_id,
            )
            return False
        if session.will_flag and not policy.may(username, session.will_topic or "", "publish"):
            logger.warning(
                "embedded broker refused %r: Last Will topic %r not allowed",
                username,
                session.will_topic,
            )
            return False
        return True


class JetfleetTopicPlugin(BaseTopicPlugin):  # type: ignore[misc]
    """Per-topic publish/subscribe/receive rules (:class:`AccessPolicy.may`)."""

    @dataclass
    class Config:
        policy: Any = None

    async def topic_filtering(
        self,
        *,
        session: Session | None = None,
        topic: str | None = None,
        action: Action | None = None,
    ) -> bool:
        if session is None or topic is None or action is None:
            return False
        policy: AccessPolicy = self.context.config.policy
        allowed = policy.may(session.username, topic, str(action.value))
        if not allowed:
            logger.info("embedded broker denied %s %s to %r", action.value, topic, session.username)
        return allowed


def amqtt_plugins(policy: AccessPolicy) -> dict[str, dict[str, Any]]:
    """The ``plugins`` section of an amqtt broker configuration enforcing ``policy``."""
    return {
        f"{__name__}.JetfleetAuthPlugin": {"policy": policy},
        f"{__name__}.JetfleetTopicPlugin": {"policy": policy},
    }


async def close_sessions(broker: Any, username: str) -> int:
    """Close every live connection of ``username`` on an amqtt ``broker``; how many."""
    closed = 0
    for session, handler in list(broker.sessions.values()):
        if session.username != username or handler is None or handler.writer is None:
            continue
        await handler.writer.close()
        closed += 1
    return closed


class EmbeddedAdmin:
    """:class:`~controller.broker_admin.base.BrokerAdmin` of the embedded broker.

    Credentials live in the database (checked by :class:`AccessPolicy` at each login), so
    adding a device needs nothing here; removing one closes its live connections.
    """

    manages_credentials = True

    def __init__(self, disconnect: Callable[[str], int]) -> None:
        self._disconnect = disconnect

    def add_device(self, device_id: str, username: str, password: str) -> None:
        return None

    def remove_device(self, device_id: str, username: str) -> None:
        closed = self._disconnect(username)
        if closed:
            logger.info("disconnected %d session(s) of device %s (%s)", closed, device_id, username)

    def bind_client_ids(self, devices: list[tuple[str, str]]) -> None:
        """The embedded broker binds ids by rule (:meth:`AccessPolicy.may_use_client_id`)."""
        return

    def ping(self) -> None:
        return None
