"""Engine reuse across twins: 20 simulated gateways in 3 hardware classes deploy one model.

Two runs on this machine, each with its own controller (SQLite, embedded broker) and 20 agent
processes:
- **shared**: agents use the controller's engine store, which trusts device builds
  (``engines trust default --devices``); per hardware class one device builds (it holds the
  build lease), its twins pull. Expected: 3 builds, 17 pulls.
- **independent** (baseline): agents without the engine store; every device builds.

Reported: builds, pulls, seconds from deploy to all 20 serving, and the ratio of the two (shared
/ independent, same run). Usage: ``python bench/engine_reuse.py [--devices 20]
[--out bench/results]``; each run replaces ``engine_reuse.md`` and ``engine_reuse.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.provenance import Provenance
from bench.results_file import ratio, write
from controller.demo import sample_models
from controller.demo.fleet import DemoFleet, GatewaySpec, all_desired_serving, wait_for

CLASSES = ("orin-nano-8gb", "orin-nx-16gb", "x86-rtx")


def gateways(n: int) -> list[GatewaySpec]:
    return [
        GatewaySpec(f"bench-{i:02d}", CLASSES[i % len(CLASSES)], {"fleet": "bench"})
        for i in range(n)
    ]


def run(mode: str, n: int) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix=f"jetfleet-bench-{mode}-"))
    # The baseline's agents know no controller URL (so no engine store), hence no origin to send
    # a device token to: that controller runs without authentication.
    fleet = DemoFleet(workdir, telemetry_interval_s=5.0, auth=(mode == "shared"))
    try:
        fleet.start_controller()
        with fleet.client() as client:
            client.push_model_bytes(sample_models.classifier(), "classifier", "1.0.0")
            if mode == "shared":  # what is measured: twins pull their fellow devices' builds
                client.set_engine_trust("default", "devices")
            specs = gateways(n)
            for spec in specs:
                fleet.start_gateway(spec, engine_store=(mode == "shared"))
            fleet.label_gateways(specs, timeout=300)
            start = time.monotonic()
            client.deploy({"model": "classifier", "version": "1.0.0", "selector": "fleet=bench"})
            devices = wait_for(
                f"all {n} gateways serving",
                lambda: (ds := client.devices()) and all_desired_serving(ds) and ds,
                600,
                fleet.processes,
                0.2,
            )
            seconds = time.monotonic() - start
            sources = Counter(s.get("engine_source") for d in devices for s in d["reported"])
            classes = {d["id"]: d.get("hardware_class") for d in devices}
            keys = {s.get("engine_key") for d in devices for s in d["reported"]}
            engines = client._request("GET", "/api/v1/engines") if mode == "shared" else []
        return {
            "mode": mode,
            "devices": n,
            "serving": sum(len(d["reported"]) for d in devices),
            "builds": sources.get("built", 0),
            "pulls": sources.get("pulled", 0),
            "cached": sources.get("cached", 0),
            "distinct_engine_keys": len(keys),
            "hardware_classes": len(set(classes.values())),
            "engines_in_store": len(engines),
            "seconds_to_all_serving": round(seconds, 2),
        }
    finally:
        fleet.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def table(rows: list[dict[str, Any]]) -> str:
    cols = ["mode", "devices", "serving", "builds", "pulls", "distinct_engine_keys",
            "engines_in_store", "seconds_to_all_serving"]  # fmt: skip
    lines = [" | ".join(cols), " | ".join("---" for _ in cols)]
    lines += [" | ".join(str(r[c]) for c in cols) for r in rows]
    return "\n".join(lines)


def summary_line(shared: dict[str, Any], independent: dict[str, Any], time_ratio: float) -> str:
    """The ``engine-reuse:`` line a reader quotes: shared against independent, same run."""
    return (
        f"engine-reuse: devices={shared['devices']} builds={shared['builds']} vs "
        f"{independent['builds']} pulls={shared['pulls']} "
        f"classes={shared['hardware_classes']} time_ratio={time_ratio:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    provenance = Provenance()
    rows = [run("shared", args.devices), run("independent", args.devices)]
    shared, independent = rows
    time_ratio = ratio(shared["seconds_to_all_serving"], independent["seconds_to_all_serving"])
    text = table(rows)
    summary = summary_line(shared, independent, time_ratio)
    print(f"{text}\n\n{summary}")
    write(
        args.out,
        "engine_reuse.py",
        "Engine reuse across twins",
        f"{args.devices} simulated gateways (agent processes) in {len(CLASSES)} hardware classes "
        "deploy one model (`controller.demo.sample_models.classifier`, ONNX Runtime CPU), each "
        "run with its own controller (SQLite, embedded broker). **shared**: agents use the "
        "controller's engine store, which trusts device builds; per hardware class one device "
        "builds and its twins pull. The baseline, **independent**, in the same run: agents "
        "without the engine store, every device builds. Seconds are from the deploy until all "
        "devices serve; time_ratio is shared / independent.",
        provenance,
        text,
        summary,
    )
    (args.out / "engine_reuse.json").write_text(
        json.dumps(
            {
                "rows": rows,
                "ratio": time_ratio,
                "summary": summary,
                "provenance": {
                    "started": provenance.started.isoformat(timespec="seconds"),
                    "commit": provenance.revision,
                    "machine": provenance.machine,
                    "command": provenance.command,
                },
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
