"""Who may use the broker, enforced by the broker itself.

``acl`` decides (pure) what a device and the controller may publish and subscribe to; ``base``
is the small interface the enrolment service uses to add and remove device credentials;
``dynsec`` implements it for Mosquitto's dynamic security plugin, ``embedded`` for the
in-process amqtt broker (``embedded_broker``, ``amqtt_broker``); ``passwords`` makes and checks
broker password hashes; ``mosquitto_config`` writes the broker configuration they need;
``startup`` starts the broker side of ``jetfleet serve`` and checks device logins.

Layer: near the bottom, beside auth: may use db, ``controller.mqtt_bus`` (the paho adapter), the
leaves and ``shared``. Enrolment (trust) and ingest use it; it never imports them.
"""
