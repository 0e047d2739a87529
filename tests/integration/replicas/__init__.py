"""Several ``jetfleet serve`` processes on one PostgreSQL database and one Mosquitto."""
