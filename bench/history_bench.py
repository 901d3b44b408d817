"""History write cost: what one op costs a worker with each way of writing it; prints JSON.

The options (each writes the same consumer-like `deliver` op N times to a file in the run
base, /dev/shm when it has room, as the workers do):

* `file_flush_json`: a buffered text file, json.dumps, write + flush per op (the writer
  before load work);
* `os_write_json`: one unbuffered os.write per op, json.dumps;
* `os_write_orjson`: one unbuffered os.write per op, orjson (HistoryWriter.op now);
* `batch_N_orjson`: N ops produced together in one os.write (HistoryWriter.ops: a pipelined
  publish batch, a batch XACK's acks).

All but the batch lose at most the op being written to a SIGKILL; a batch loses at most
itself (tests/checker/test_history_io.py and tests/workload/test_load_producer.py kill real
writers). The machine is shared: the load average is recorded.

    python bench/history_bench.py [--ops 200000] [--batch 20,256]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chaos.cluster.rundirs import base_dir  # noqa: E402
from chaos.history import HistoryWriter, dump_op  # noqa: E402

FIELDS = {"event_id": "e123-45", "key": "123", "version": 45, "etype": "step-45", "entry_id": "1796290799449-43",
          "stream": "orders.4.1", "delivery_count": 1, "via": "read"}


def _op() -> dict:
    op = {"time": time.monotonic(), "process": "C1", "type": "ok", "f": "deliver"}
    op.update(FIELDS)
    return op


def file_flush_json(path: Path, n: int) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        for _ in range(n):
            fh.write(json.dumps(_op(), default=str, separators=(",", ":")) + "\n")
            fh.flush()


def os_write_json(path: Path, n: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for _ in range(n):
            os.write(fd, (json.dumps(_op(), default=str, separators=(",", ":")) + "\n").encode())
    finally:
        os.close(fd)


def os_write_orjson(path: Path, n: int) -> None:
    with HistoryWriter(path, "C1") as writer:
        for _ in range(n):
            writer.op("ok", "deliver", **FIELDS)


def batched(size: int):
    def run(path: Path, n: int) -> None:
        with HistoryWriter(path, "C1") as writer:
            for start in range(0, n, size):
                writer.ops([writer.make("ok", "deliver", **FIELDS) for _ in range(min(size, n - start))])
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200_000)
    parser.add_argument("--batch", default="20,256")
    args = parser.parse_args()
    options = {"file_flush_json": file_flush_json, "os_write_json": os_write_json, "os_write_orjson": os_write_orjson}
    for size in (int(b) for b in args.batch.split(",") if b):
        options[f"batch_{size}_orjson"] = batched(size)
    directory = Path(tempfile.mkdtemp(prefix="history-bench-", dir=base_dir()))
    out = {"bench": "history", "ops": args.ops, "dir": str(directory.parent), "op_bytes": len(dump_op(_op())),
           "load_average_at_start": round(os.getloadavg()[0], 2), "us_per_op": {}}
    try:
        for name, write in options.items():
            path = directory / f"{name}.jsonl"
            started = time.perf_counter()
            write(path, args.ops)
            out["us_per_op"][name] = round((time.perf_counter() - started) / args.ops * 1e6, 2)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    base = out["us_per_op"]["file_flush_json"]
    out["relative_to_file_flush_json"] = {k: round(v / base, 2) for k, v in out["us_per_op"].items()}
    out["load_average_at_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
