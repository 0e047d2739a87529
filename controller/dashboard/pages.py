"""Server-rendered HTML of the built-in dashboard (pure: data in, escaped HTML out).

Charts are ``<div class="jf-chart">`` boxes carrying their data as JSON; the vendored
``jfchart.js`` draws them as SVG. Everything else is plain HTML, readable without JavaScript.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import urlencode

from controller.dashboard.facts_rows import ABSENT, fact_rows
from controller.dashboard.view import DeviceRow
from controller.records import EventEntry

SORT_KEYS = ("id", "health", "cpu", "temperature", "p99", "errors", "last_seen")
_HEALTH_ORDER = {"offline": 0, "degraded": 1, "healthy": 2}


def _page(title: str, body: str, refresh_s: int | None = None) -> str:
    refresh = f'<meta http-equiv="refresh" content="{refresh_s}">' if refresh_s else ""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title)} · Jetfleet</title>{refresh}"
        "<link rel='stylesheet' href='/dashboard/static/dashboard.css'>"
        "<script src='/dashboard/static/jfchart.js' defer></script></head><body>"
        "<header><b>Jetfleet</b><a href='/dashboard'>Fleet</a>"
        "<a href='/dashboard/rollouts'>Rollouts</a><a href='/metrics'>/metrics</a></header>"
        f"<main>{body}</main></body></html>"
    )


def _num(value: Any, fmt: str = "{:.0f}", suffix: str = "") -> str:
    return "-" if value is None else escape(fmt.format(value) + suffix)


def _when(ts: datetime | None) -> str:
    return "never" if ts is None else escape(ts.strftime("%Y-%m-%d %H:%M:%S"))


def sort_rows(rows: Sequence[DeviceRow], key: str) -> list[DeviceRow]:
    """Rows sorted by a column of the device table (worst first for health and load)."""

    def value(r: DeviceRow) -> Any:
        j = r.as_json()
        if key == "health":
            return (_HEALTH_ORDER[r.health.state.value], r.device.id)
        if key == "last_seen":
            return r.device.last_seen.timestamp() if r.device.last_seen else 0.0
        column = {"cpu": "cpu_percent", "temperature": "temperature_c", "p99": "p99_ms"}
        if key in column:
            return -(j[column[key]] or 0.0)
        if key == "errors":
            return -(j["error_rate"] or 0.0)
        return r.device.id

    return sorted(rows, key=value)


def fleet_page(
    rows: Sequence[DeviceRow], counts: Mapping[str, int], filters: Mapping[str, str], sort: str
) -> str:
    """Health counts, filters and the device table."""
    cards = "".join(
        f"<a class='count' href='/dashboard?{urlencode({'health': state})}'>"
        f"<b>{n}</b><span class='badge {state}'>{state}</span></a>"
        for state, n in counts.items()
    )
    label = escape(filters.get("label", ""))
    health = filters.get("health", "")
    options = "".join(
        f"<option value='{s}'{' selected' if s == health else ''}>{s or 'any health'}</option>"
        for s in ("", "healthy", "degraded", "offline")
    )
    form = (
        "<form class='filters' method='get' action='/dashboard'>"
        f"<label>label <input name='label' value='{label}' placeholder='site=line-1'></label>"
        f"<select name='health'>{options}</select>"
        f"<input type='hidden' name='sort' value='{escape(sort)}'><button>filter</button></form>"
    )
    heads = [
        ("id", "device"),
        ("health", "health"),
        (None, "labels"),
        (None, "hardware"),
        ("cpu", "CPU %"),
        (None, "GPU %"),
        ("temperature", "temp °C"),
        (None, "mem free"),
        ("p99", "p99 ms"),
        ("errors", "errors"),
        (None, "engines"),
        (None, "agent"),
        ("last_seen", "last seen"),
    ]
    th = "".join(
        f"<th><a href='/dashboard?{urlencode({**filters, 'sort': key})}'>{name}</a></th>"
        if key
        else f"<th>{name}</th>"
        for key, name in heads
    )
    body_rows = "".join(_device_tr(r) for r in rows)
    if not rows:
        body_rows = f"<tr><td colspan='{len(heads)}'>no device matches</td></tr>"
    table = f"<table id='devices'><thead><tr>{th}</tr></thead><tbody>{body_rows}</tbody></table>"
    return _page("Fleet", f"<h1>Fleet</h1><div class='counts'>{cards}</div>{form}{table}", 15)


def _device_tr(r: DeviceRow) -> str:
    j = r.as_json()
    state = r.health.state.value
    reasons = "".join(f"<div class='reasons'>{escape(x)}</div>" for x in r.health.reasons)
    labels = " ".join(f"{escape(k)}={escape(v)}" for k, v in sorted(r.device.labels.items()))
    engines = "<br>".join(
        escape(f"{e['model']}:{e['version'] or '?'} {e['runtime'] or ''} {e['phase'] or ''}")
        for e in r.engines
    )
    headroom = j["memory_headroom"]
    return (
        f"<tr data-device='{escape(r.device.id)}' data-health='{state}'>"
        f"<td><a href='/dashboard/devices/{escape(r.device.id)}'>{escape(r.device.id)}</a></td>"
        f"<td><span class='badge {state}'>{state}</span>{reasons}</td>"
        f"<td>{labels}</td><td>{escape(r.hardware)}</td>"
        f"<td>{_num(j['cpu_percent'])}</td><td>{_num(j['gpu_load_percent'])}</td>"
        f"<td>{_num(j['temperature_c'], '{:.1f}')}</td>"
        f"<td>{_num(None if headroom is None else headroom * 100, '{:.0f}', '%')}</td>"
        f"<td>{_num(j['p99_ms'], '{:.1f}')}</td>"
        f"<td>{_num(None if j['error_rate'] is None else j['error_rate'] * 100, '{:.1f}', '%')}"
        f"</td><td>{engines}</td><td class='agent'>{_agent(r)}</td>"
        f"<td>{_when(r.device.last_seen)}</td></tr>"
    )


def _agent(r: DeviceRow) -> str:
    """The agent release a device runs, and its latest update's phase (why, when it failed)."""
    update = r.device.agent_update
    text = escape(r.device.agent_version or "?")
    if update is not None:
        text += f"<div class='reasons'>{escape(update.phase)} {escape(update.version)}</div>"
        if update.error:
            text += f"<div class='reasons'>{escape(update.error)}</div>"
    return text


def chart(title: str, unit: str, lines: Mapping[str, Sequence[tuple[datetime, float]]]) -> str:
    """One chart box: the JSON jfchart.js draws."""
    spec = {
        "title": title,
        "unit": unit,
        "lines": [
            {"name": name, "points": [[int(t.timestamp() * 1000), v] for t, v in points]}
            for name, points in lines.items()
        ],
    }
    data = json.dumps(spec).replace("</", "<\\/")
    return f"<div class='jf-chart'><script type='application/json'>{data}</script></div>"


def device_page(
    row: DeviceRow, charts: Sequence[str], events: Sequence[EventEntry], window_s: float
) -> str:
    """Health, charts over time, active engines, facts and recent events of one device."""
    d = row.device
    state = row.health.state.value
    reasons = "".join(f"<li>{escape(x)}</li>" for x in row.health.reasons) or "<li>none</li>"
    engines = "".join(
        f"<tr><td>{escape(str(e['model']))}</td><td>{escape(str(e['version']))}</td>"
        f"<td>{escape(str(e['phase'] or '-'))}</td><td>{escape(str(e['runtime'] or '-'))}</td>"
        f"<td><code>{escape(str(e['engine_key'] or '-'))}</code></td></tr>"
        for e in row.engines
    )
    shown = fact_rows(d.device_facts, d.agent_version) if d.device_facts else []
    facts = (
        "".join(
            f"<tr data-fact='{key}'><th>{escape(label)}</th><td>{escape(text)}</td></tr>"
            for key, label, text in shown
        )
        or f"<tr><td colspan='2'>{ABSENT}</td></tr>"
    )
    if d.facts_unreadable:
        facts = f"<tr><td colspan='2'>{escape(d.facts_unreadable)}</td></tr>"
    evs = (
        "".join(
            f"<tr><td>{_when(e.ts)}</td><td>{escape(e.kind)}</td><td>{escape(e.slot or '')}</td>"
            f"<td>{escape(e.message)}</td></tr>"
            for e in events
        )
        or "<tr><td colspan='4'>no events</td></tr>"
    )
    windows = " ".join(
        f"<a href='?{urlencode({'window_s': w})}'>{label}</a>"
        for w, label in (
            (900, "15 min"),
            (3600, "1 h"),
            (21600, "6 h"),
            (86400, "24 h"),
            (604800, "7 d"),
        )
    )
    body = (
        f"<h1>{escape(d.id)} <span class='badge {state}'>{state}</span></h1>"
        f"<ul class='reasons'>{reasons}</ul>"
        f"<p>last seen {_when(d.last_seen)} · window {window_s / 60:.0f} min · {windows}</p>"
        f"<div class='charts'>{''.join(charts)}</div>"
        "<h2>Active engines</h2><table id='engines'><thead><tr><th>model</th><th>version</th>"
        f"<th>phase</th><th>runtime</th><th>engine key</th></tr></thead><tbody>{engines}"
        "</tbody></table>"
        f"<h2>Facts</h2><table id='facts'>{facts}</table>"
        "<h2>Recent events</h2><table id='events'><thead><tr><th>time</th><th>kind</th>"
        f"<th>slot</th><th>message</th></tr></thead><tbody>{evs}</tbody></table>"
    )
    return _page(d.id, body, 30)


def rollouts_page(rollouts: Sequence[Mapping[str, Any]]) -> str:
    """Each rollout's state and per-wave progress (succeeded of targets)."""
    items = []
    for r in rollouts:
        waves = []
        for wave, statuses in r["targets"].items():
            total = sum(statuses.values()) or 1
            done = statuses.get("succeeded", 0)
            pct = 100 * done / total
            detail = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
            waves.append(
                f"<div>wave {wave}: <span class='bar'><span style='width:{pct:.0f}%'></span>"
                f"</span> {done}/{total} ({escape(detail)})</div>"
            )
        name = f"{r['model']}:{r['version']}"
        items.append(
            f"<tr><td>{escape(r['id'])}</td><td>{escape(name)}</td>"
            f"<td>{escape(str(r['state']))}</td>"
            f"<td>{escape(str(r['current_wave']))}/{escape(str(r['waves']))}</td>"
            f"<td>{''.join(waves) or '-'}</td></tr>"
        )
    rows = "".join(items) or "<tr><td colspan='5'>no rollouts yet</td></tr>"
    body = (
        "<h1>Rollouts</h1><table id='rollouts'><thead><tr><th>id</th><th>model</th>"
        f"<th>state</th><th>wave</th><th>progress</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    return _page("Rollouts", body, 10)
