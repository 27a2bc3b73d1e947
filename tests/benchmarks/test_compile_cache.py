"""The persistent compile cache across fresh processes, with real JAX: the first process compiles and fills the
folder (cold), a second one loads every program from it (warm), and without the variable nothing is cached."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.harness import compile_cache

ROOT = Path(__file__).resolve().parents[2]
# A fresh process: activate the cache as the runner does, compile one program, print what the tracker recorded.
PROGRAM = """
import json, sys
from benchmarks.harness import compile_cache
tracker = compile_cache.activate("jax")
if tracker is None:
    print(json.dumps(None)); sys.exit()
tracker.mark()
import jax, jax.numpy as jnp
jax.jit(lambda x: jnp.tanh(x @ x.T).sum())(jnp.ones((64, 64))).block_until_ready()
record = tracker.record()
print(json.dumps({"state": record.state, "hits": record.hits, "misses": record.misses, "dir": record.dir}))
"""


def _fresh_process(cache: Path | None) -> dict | None:
    env = {k: v for k, v in os.environ.items() if k != compile_cache.ENV}
    if cache is not None:
        env[compile_cache.ENV] = str(cache)
    env["JAX_PLATFORMS"] = "cpu"
    out = subprocess.run([sys.executable, "-c", PROGRAM], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_fresh_process_loads_what_the_first_compiled(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _fresh_process(cache)
    assert first is not None and first["state"] == "cold" and first["hits"] == 0 and first["misses"] >= 1
    assert any((cache / "jax").iterdir())  # small programs are cached too (no size or time threshold)
    second = _fresh_process(cache)
    assert second == {"state": "warm", "hits": first["misses"], "misses": 0, "dir": str(cache.resolve())}


def test_no_cache_is_used_unless_asked_for(tmp_path: Path) -> None:
    assert _fresh_process(None) is None


def test_state_names_cold_warm_and_mixed() -> None:
    assert compile_cache.state(0, 5) == "cold" and compile_cache.state(0, 0) == "unused"
    assert compile_cache.state(5, 0) == "warm" and compile_cache.state(3, 2) == "mixed"
