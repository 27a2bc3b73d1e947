"""Keep compiled programs across fresh processes, opt in, and say per run whether its compile hit the cache.

Every fresh process compiles its model again: XLA on JAX, and Dynamo, AOTAutograd and Inductor for torch.compile
(31-58 s a model on an H200). With KCB_COMPILE_CACHE=DIR (or `gpu_session run --compile-cache DIR`) JAX's
persistent compilation cache and Inductor's FX-graph, AOTAutograd and Triton caches live under DIR, so a later
process of the same model and shapes loads what an earlier one compiled. The first epoch then measures a cache
load, not a compile: a run records the frameworks' own hit and miss counters, and the report keeps cached and
cold first epochs apart (steady epochs run the same programs either way).
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import metadata
from benchmarks.harness.backends import framework

ENV = "KCB_COMPILE_CACHE"

# The frameworks' counters of one cache lookup each: (group, key) in torch._dynamo.utils.counters.
TORCH_HITS = (("inductor", "fxgraph_cache_hit"), ("aot_autograd", "autograd_cache_hit"))
TORCH_MISSES = (("inductor", "fxgraph_cache_miss"), ("aot_autograd", "autograd_cache_miss"))
# JAX counts lookups and hits; a miss is a lookup that did not hit.
JAX_LOOKUP = "/jax/compilation_cache/compile_requests_use_cache"
JAX_HIT = "/jax/compilation_cache/cache_hits"


def state(hits: int, misses: int) -> str:
    """cold: everything compiled here; warm: everything loaded; mixed: some of each; unused: nothing was looked up
    (an eager model compiles nothing a cache could keep)."""
    if not hits:
        return "cold" if misses else "unused"
    return "mixed" if misses else "warm"


@dataclass
class Tracker:
    """The cache of one process, counting lookups from `mark()` on (one workload's compiles)."""

    backend: str
    directory: Path
    _jax_events: Counter[str] = field(default_factory=Counter)
    _start: tuple[int, int] = (0, 0)

    def mark(self) -> None:
        self._start = self._totals()

    def record(self) -> metadata.CompileCache:
        hits, misses = (now - then for now, then in zip(self._totals(), self._start, strict=True))
        return metadata.CompileCache(str(self.directory), state(hits, misses), hits, misses)

    def _totals(self) -> tuple[int, int]:
        if framework(self.backend) == "jax":
            hits = self._jax_events[JAX_HIT]
            return hits, self._jax_events[JAX_LOOKUP] - hits
        if framework(self.backend) == "torch":
            from torch._dynamo.utils import counters

            return sum(counters[g][k] for g, k in TORCH_HITS), sum(counters[g][k] for g, k in TORCH_MISSES)
        return 0, 0

    def _on_event(self, event: str, **_: object) -> None:
        if event in (JAX_HIT, JAX_LOOKUP):
            self._jax_events[event] += 1


def activate(backend: str) -> Tracker | None:
    """Turn the backend's persistent compile caches on under $KCB_COMPILE_CACHE; None when no cache was asked for.
    Call before the process compiles anything it should cache; later calls of the process share one tracker."""
    return _activate(backend, os.environ.get(ENV) or None)


@functools.cache
def _activate(backend: str, directory: str | None) -> Tracker | None:
    if not directory:
        return None
    root = Path(directory).resolve()
    root.mkdir(parents=True, exist_ok=True)
    tracker = Tracker(backend, root)
    if framework(backend) == "jax":
        _activate_jax(root / "jax", tracker)
    elif framework(backend) == "torch":
        _activate_torch(root / "torch")
    return tracker


def _activate_jax(root: Path, tracker: Tracker) -> None:
    import jax

    jax.config.update("jax_compilation_cache_dir", str(root))
    # JAX caches only programs that took a second to compile and entries over a size by default: a Keras train
    # step of a small model is under both, and it is what a fresh process recompiles.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    jax.monitoring.register_event_listener(tracker._on_event)


def _activate_torch(root: Path) -> None:
    # Read when Inductor and Triton first compile, which is after this.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(root / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(root / "triton")
    import torch._functorch.config
    import torch._inductor.config

    torch._inductor.config.fx_graph_cache = True
    torch._functorch.config.enable_autograd_cache = True
