"""Who may use the broker, enforced by the broker itself (issue 7, item 2).

``acl`` decides (pure) what a device and the controller may publish and subscribe to; ``base``
is the small interface the enrolment service uses to add and remove device credentials;
``dynsec`` implements it for Mosquitto's dynamic security plugin, ``embedded`` for the
in-process amqtt broker; ``mosquitto_config`` writes the broker configuration they need.
"""
