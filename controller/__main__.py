"""``python -m controller`` runs the ``jetfleet`` CLI (used by the demo to start subprocesses)."""

from controller.cli.main import main

main()
