"""Who may call the controller's HTTP API: bearer tokens with roles, the policy, the audit log.

``policy`` (pure) says which role a request needs; ``tokens`` (pure) mints and checks the
``jf_<id>.<secret>`` tokens; ``service`` resolves them against the database and records the audit
log; ``middleware`` enforces all of it for every route of the app, including routes added later;
``routes`` (tokens, audit, whoami) and ``install`` (the one call ``create_app`` makes).

Layer: near the bottom, beside broker_admin: may use db, the leaves and ``shared`` only. The
dashboard's login page and the enrolment service (trust) build on it.
"""
