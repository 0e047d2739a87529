"""Serving overhead: agent HTTP (KServe v2) p50 against ONNX Runtime called in-process.

Same model (a MobileNetV2-like 1x3x224x224 classifier built in code, tests/analysis_models.py),
same input, same run, one client, sequential requests. The agent's serving stack (Starlette +
uvicorn + the KServe v2 handlers) runs in its own process, as on a gateway; the client is the
bench process. Two HTTP encodings are measured (JSON tensors, the binary tensor data extension)
and three clients for the binary one: a minimal keep-alive client on a raw socket (request bytes
built once, one ``sendall``, head and body read by Content-Length, as wrk does), the standard
library's http.client and httpx. The raw client costs least on the bench's side, so its row is
closest to the agent's own cost; the other rows add their client's cost. A second agent serving a
one-operator model (GlobalAveragePool over the same 1x3x224x224 input, ~0.1 ms of ONNX Runtime)
shows the agent's cost for the same 600 KB request without a 10 ms model run in between. The
"shared memory" rows pass the input through a registered ``/dev/shm`` region (Triton's system
shared-memory extension, :mod:`agent.serving.shared_memory`): the client copies the frame into the
region
(timed) and sends a small JSON request; the output comes back as binary data.
The JSON request body is encoded once, as the binary one is (a client such as curl sends bytes
it has): the rows compare what the agent costs per encoding, not the client's JSON encoder.
Every answer is checked, the timed ones included: each response's outputs are decoded (outside the
timed span) and compared with what ONNX Runtime answers in-process for the same model and input,
bit for bit (JSON tensors too: orjson writes float32 values as text that reads back exactly); one
mismatch ends the run with an error naming the path and the request, and nothing is written.
Reported: p50 / p99 per path, what HTTP adds at p50 over its in-process baseline (goal: <= 1 ms
with binary data), p50 as a ratio of that baseline, and the JSON row's p50 as a ratio of the
binary row's with the same httpx client (goal: <= 2x). Usage:
``python bench/serving_overhead.py [--requests 300] [--out bench/results]``; each run appends a
dated section to ``serving_overhead.md`` (earlier runs are kept).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any, TypeVar

import httpx
import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.runtimes.base import LoadedModel
from agent.runtimes.ort import load_ort
from agent.serving.app import HEADER_LENGTH, create_app
from agent.serving.core import ModelRegistry, ServedModel
from agent.serving.http_server import READ_SIZE, ServingServer
from agent.serving.shared_memory import SharedMemoryRegions
from agent.telemetry.metrics import Metrics
from bench.provenance import Provenance
from tests.analysis_models import mobilenet_v2_like

T = TypeVar("T")


class RawClient:
    """A minimal keep-alive HTTP/1.1 client on a raw socket, the way wrk measures servers.

    The request bytes are built once; each call sends them with one ``sendall``, reads until
    the head ends, takes the status and Content-Length from it, reads the body, and checks
    that the status is 200 and the body has that length into a buffer allocated once. No
    header parsing beyond those two fields: what is left is (almost) only server time. The call
    returns the response (its head and a view of its body in that buffer, valid until the next
    call) for the check after the timed span.
    """

    def __init__(self, port: int, path: str, headers: dict[str, str], body: bytes) -> None:
        self._port = port
        self._sock = self._connect()
        head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        head.append(f"Content-Length: {len(body)}")
        self._request = ("\r\n".join(head) + "\r\n\r\n").encode() + body
        self._buffer = bytearray(1 << 20)

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self._port), timeout=60)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def reconnect(self) -> None:
        self._sock.close()
        self._sock = self._connect()

    def __call__(self) -> Answer:
        sock, buf = self._sock, self._buffer
        view = memoryview(buf)
        sock.sendall(self._request)
        filled = 0
        while True:
            got = sock.recv_into(view[filled:])
            if not got:
                raise ConnectionError("the server closed the connection")
            filled += got
            end = buf.find(b"\r\n\r\n", 0, filled)
            if end >= 0:
                break
        head = bytes(buf[:end]).lower()
        status = int(head[9:12])
        at = head.find(b"\r\ncontent-length:")
        if status != 200 or at < 0:
            raise AssertionError(f"status {status}, or no Content-Length: {head[:200]!r}")
        stop = head.find(b"\r\n", at + 17)
        length = int(head[at + 17 : stop if stop >= 0 else len(head)])
        total = end + 4 + length
        if total > len(buf):
            raise AssertionError(f"response of {total} bytes is larger than the buffer")
        while filled < total:
            got = sock.recv_into(view[filled:total])
            if not got:
                raise ConnectionError("the server closed the connection mid-body")
            filled += got
        if filled != total:
            raise AssertionError(f"{filled - total} bytes past the body of {length}")
        return Answer(head, view[end + 4 : total])

    def close(self) -> None:
        self._sock.close()


class Answer:
    """One HTTP response for the check: its head (lower-cased bytes) and body."""

    def __init__(self, head: bytes, body: bytes | memoryview) -> None:
        self.head = head
        self.body = body

    def header_length(self) -> int | None:
        """The binary extension's Inference-Header-Content-Length (None: a JSON body)."""
        for line in self.head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip() == HEADER_LENGTH.encode():
                return int(value)
        return None


Outputs = dict[str, np.ndarray]


class WrongAnswer(AssertionError):
    """A response whose outputs are not ONNX Runtime's: the run is not a measurement."""


def outputs_of(answer: Answer) -> Outputs:
    """The output tensors of a KServe v2 infer response, JSON or binary-extension body."""
    body = bytes(answer.body)
    length = answer.header_length()
    document = json.loads(body if length is None else body[:length])
    raw = b"" if length is None else body[length:]
    at, found = 0, {}
    for output in document["outputs"]:
        if output["datatype"] != "FP32":
            raise WrongAnswer(f"output {output['name']!r} is {output['datatype']}, not FP32")
        size = (output.get("parameters") or {}).get("binary_data_size")
        if size is None:
            array = np.asarray(output["data"], dtype=np.float32)
        else:
            array = np.frombuffer(raw, dtype="<f4", count=size // 4, offset=at)
            at += size
        found[output["name"]] = array.reshape(output["shape"])
    if at != len(raw):
        raise WrongAnswer(f"{len(raw) - at} bytes after the outputs the header declares")
    return found


def compare(got: Outputs, expected: Outputs) -> None:
    """Raise WrongAnswer unless ``got`` holds ``expected``'s outputs, bit for bit (JSON text
    too: the agent's orjson writes a float32 as text that reads back as the same float32)."""
    if set(got) != set(expected):
        raise WrongAnswer(f"outputs {sorted(got)}, expected {sorted(expected)}")
    for name, want in expected.items():
        have = got[name]
        if have.shape != want.shape:
            raise WrongAnswer(f"{name} has shape {have.shape}, expected {want.shape}")
        if not np.array_equal(have, want):
            worst = float(np.max(np.abs(have.astype(np.float64) - want.astype(np.float64))))
            raise WrongAnswer(f"{name} differs from ONNX Runtime's (max |diff| {worst:g})")


class Checked:
    """Counts the answers checked per path; the first wrong one raises, naming the request."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def checker(
        self, path: str, expected: Outputs, decode: Callable[[Any], Outputs]
    ) -> Callable[[Any], None]:
        def check(answer: Any) -> None:
            index = self.counts.get(path, 0)
            try:
                compare(decode(answer), expected)
            except (WrongAnswer, KeyError, ValueError, TypeError) as exc:
                raise WrongAnswer(f"{path!r}, request {index + 1}: {exc}") from exc
            self.counts[path] = index + 1

        return check


ORT = "ONNX Runtime in-process"
ORT_SMALL = "1-op model: ONNX Runtime in-process"
BINARY = "agent HTTP, binary tensors, httpx"
JSON = "agent HTTP, JSON tensors, httpx"


def serve(path: str, ports: multiprocessing.Queue[int]) -> None:
    """The agent's serving stack over one model, in this (child) process until killed."""
    registry = ModelRegistry()
    registry.swap(ServedModel("m", "1", "0" * 64, load_ort(Path(path))))
    app = create_app(registry, Metrics(), lambda: True, "b", shared_memory=SharedMemoryRegions())
    server = ServingServer(app, "127.0.0.1", 0)
    ports.put(server.start())
    threading.Event().wait()


def timed(fn: Callable[[], T], n: int, check: Callable[[T], None]) -> list[float]:
    """``n`` timed calls (after 10 untimed); every answer, warm-up too, is checked after its
    timed span ends."""
    for _ in range(10):
        check(fn())
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        answer = fn()
        out.append((time.perf_counter() - t0) * 1000)
        check(answer)
    return out


def one_op_model() -> bytes:
    """GlobalAveragePool over a 1x3x224x224 FP32 input: the same request, almost no model."""
    graph = helper.make_graph(
        [helper.make_node("GlobalAveragePool", ["image"], ["pooled"])],
        "one_op",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [1, 3, 1, 1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    data: bytes = model.SerializeToString()
    return data


def binary_request(name: str, image: np.ndarray) -> tuple[bytes, bytes]:
    """(JSON header, header + raw tensor bytes) of a binary-extension infer request."""
    raw = image.astype("<f4").tobytes()
    tensor = {"name": name, "shape": list(image.shape), "datatype": "FP32"}
    header = json.dumps(
        {
            "inputs": [{**tensor, "parameters": {"binary_data_size": len(raw)}}],
            "parameters": {"binary_data_output": True},
        }
    ).encode()
    return header, header + raw


class ShmClient:
    """Each call copies the frame into a registered shared-memory region, then asks over HTTP."""

    def __init__(self, port: int, name: str, image: np.ndarray) -> None:
        self._raw = image.astype("<f4").tobytes()
        self.segment = shared_memory.SharedMemory(
            name=f"jf-bench-{port}", create=True, size=len(self._raw)
        )
        region = f"frame-{port}"
        reply = httpx.post(
            f"http://127.0.0.1:{port}/v2/systemsharedmemory/region/{region}/register",
            json={"key": f"/{self.segment.name}", "offset": 0, "byte_size": len(self._raw)},
        )
        reply.raise_for_status()
        request = json.dumps(
            {
                "inputs": [
                    {
                        "name": name,
                        "shape": list(image.shape),
                        "datatype": "FP32",
                        "parameters": {
                            "shared_memory_region": region,
                            "shared_memory_byte_size": len(self._raw),
                        },
                    }
                ],
                "parameters": {"binary_data_output": True},
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        self.http = RawClient(port, "/v2/models/m/infer", headers, request)

    def __call__(self) -> Answer:
        buf = self.segment.buf
        assert buf is not None
        buf[: len(self._raw)] = self._raw  # the camera writes its frame
        return self.http()

    def close(self) -> None:
        self.http.close()
        self.segment.close()
        self.segment.unlink()


def raw_client(port: int, header: bytes, body: bytes) -> RawClient:
    headers = {
        "Inference-Header-Content-Length": str(len(header)),
        "Content-Type": "application/octet-stream",
    }
    return RawClient(port, "/v2/models/m/infer", headers, body)


def expected_outputs(model: LoadedModel, feeds: dict[str, np.ndarray]) -> Outputs:
    """ONNX Runtime's answer, computed once before anything is timed."""
    return {name: np.array(value, copy=True) for name, value in model.infer(feeds).items()}


def same_outputs(answer: Outputs) -> Outputs:
    """An in-process row's answer is already its output tensors."""
    return answer


def httpx_answer(response: httpx.Response) -> Answer:
    head = "\r\n".join(f"{k}: {v}" for k, v in response.headers.items())
    return Answer(head.lower().encode(), response.content)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3, help="Interleaved rounds per path.")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    provenance = Provenance()
    with tempfile.TemporaryDirectory() as tmp:
        path, small_path = Path(tmp) / "mobilenet.onnx", Path(tmp) / "one_op.onnx"
        path.write_bytes(mobilenet_v2_like())
        small_path.write_bytes(one_op_model())
        model, small = load_ort(path), load_ort(small_path)
        spec = model.inputs[0]
        image = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
        # what every answer must be: ONNX Runtime straight on the same model file and input
        expected = expected_outputs(model, {spec.name: image})
        expected_small = expected_outputs(small, {small.inputs[0].name: image})
        ctx = multiprocessing.get_context("spawn")
        agents, agent_ports = [], []
        for served in (path, small_path):
            ports: multiprocessing.Queue[int] = ctx.Queue()
            agents.append(ctx.Process(target=serve, args=(str(served), ports), daemon=True))
            agents[-1].start()
            agent_ports.append(ports.get(timeout=60))
        port, small_port = agent_ports
        url = f"http://127.0.0.1:{port}/v2/models/m/infer"
        tensor = {"name": spec.name, "shape": [1, 3, 224, 224], "datatype": "FP32"}
        json_body = json.dumps({"inputs": [{**tensor, "data": image.ravel().tolist()}]}).encode()
        json_headers = {"Content-Type": "application/json"}
        header, body = binary_request(spec.name, image)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        clients = [
            raw_client(port, header, body),
            raw_client(small_port, *binary_request(small.inputs[0].name, image)),
        ]
        shm_clients = [
            ShmClient(port, spec.name, image),
            ShmClient(small_port, small.inputs[0].name, image),
        ]
        try:
            with httpx.Client(timeout=60) as client:

                def via_json() -> Answer:
                    r = client.post(url, content=json_body, headers=json_headers)
                    assert r.status_code == 200
                    return httpx_answer(r)

                def via_binary() -> Answer:
                    r = client.post(
                        url,
                        content=body,
                        headers={"Inference-Header-Content-Length": str(len(header))},
                    )
                    assert r.status_code == 200
                    return httpx_answer(r)

                def via_binary_stdlib() -> Answer:
                    conn.request(
                        "POST",
                        "/v2/models/m/infer",
                        body=body,
                        headers={
                            "Inference-Header-Content-Length": str(len(header)),
                            "Content-Type": "application/octet-stream",
                        },
                    )
                    response = conn.getresponse()
                    data = response.read()
                    assert response.status == 200
                    head = "\r\n".join(f"{k}: {v}" for k, v in response.getheaders())
                    return Answer(head.lower().encode(), data)

                n = args.requests
                # name: (call, requests, the in-process row it is compared with)
                paths: dict[str, tuple[Callable[[], Any], int, str]] = {
                    ORT: (lambda: model.infer({spec.name: image}), n, ORT),
                    "agent HTTP, binary tensors, raw socket client": (clients[0], n, ORT),
                    "agent HTTP, binary tensors, http.client": (via_binary_stdlib, n, ORT),
                    BINARY: (via_binary, n, ORT),
                    JSON: (via_json, n, ORT),
                    ORT_SMALL: (lambda: small.infer({small.inputs[0].name: image}), n, ORT_SMALL),
                    "agent HTTP, input in shared memory, raw socket client": (
                        shm_clients[0],
                        n,
                        ORT,
                    ),
                    "1-op model: agent HTTP, binary tensors, raw socket client": (
                        clients[1],
                        n,
                        ORT_SMALL,
                    ),
                    "1-op model: agent HTTP, input in shared memory, raw socket client": (
                        shm_clients[1],
                        n,
                        ORT_SMALL,
                    ),
                }
                checked = Checked()
                checks = {
                    name: checked.checker(
                        name,
                        expected if base == ORT else expected_small,
                        same_outputs if name in (ORT, ORT_SMALL) else outputs_of,
                    )
                    for name, (_, _, base) in paths.items()
                }
                # Interleaved rounds: a noisy neighbour slows every path alike, not just one.
                rows: dict[str, list[float]] = {name: [] for name in paths}
                for _ in range(args.rounds):
                    for name, (fn, count, _) in paths.items():
                        # uvicorn closes a connection idle for 5 s (its keep-alive timeout), as
                        # between a client's turns: each turn starts on a fresh connection.
                        conn.close()
                        for c in [*clients, *(s.http for s in shm_clients)]:
                            c.reconnect()
                        rows[name] += timed(fn, max(1, count // args.rounds), checks[name])
        finally:
            conn.close()
            for c in clients:
                c.close()
            for shm in shm_clients:
                shm.close()
            for agent in agents:
                agent.kill()
                agent.join()
    lines = [
        "| path | p50 ms | p99 ms | added at p50 ms | p50 / in-process |",
        "|---|---|---|---|---|",
    ]
    for name, values in rows.items():
        p50, p99 = np.percentile(values, 50), np.percentile(values, 99)
        base = float(np.percentile(rows[paths[name][2]], 50))
        lines.append(f"| {name} | {p50:.2f} | {p99:.2f} | {p50 - base:+.2f} | {p50 / base:.2f}x |")
    json_p50, binary_p50 = (float(np.percentile(rows[name], 50)) for name in (JSON, BINARY))
    lines.append(
        f"\nJSON tensors p50 / binary tensors p50, same httpx client, same run: "
        f"{json_p50 / binary_p50:.2f}x (goal <= 2x)"
    )
    lines.append(
        f"\nAnswers checked against ONNX Runtime in-process: {sum(checked.counts.values())} "
        f"responses (warm-up included), every one bit for bit equal."
    )
    text = "\n".join(lines)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "serving_overhead.md"
    if not path.exists():
        path.write_text(
            "# Serving overhead\n\nWritten by `bench/serving_overhead.py`, one section per run, "
            "newest last: what the agent's KServe v2 HTTP path adds over calling ONNX Runtime "
            "in-process (the baseline, timed in the same run, rounds interleaved).\n"
        )
    with path.open("a") as results:
        results.write(
            f"\n## Run of {provenance.started:%Y-%m-%d %H:%M} UTC\n\n{provenance.block()}\n"
            f"ONNX Runtime CPU, MobileNetV2-like 1x3x224x224 "
            f"(tests/analysis_models.py), one sequential client, agent serving stack in its own "
            f"process (uvicorn with httptools, {READ_SIZE >> 10} KiB socket reads), JSON "
            f"request body encoded once.\n\n{text}\n"
        )


if __name__ == "__main__":
    main()
