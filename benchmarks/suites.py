"""Named suites: which workloads on which backends, cut down or with the published epochs.

Importable without Keras: the suite runner and the orchestrator plan from it before any framework loads.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.harness.backends import BACKENDS, NATIVE_BACKENDS
from benchmarks.workloads import WORKLOADS

KERAS_2017 = (
    "mnist_mlp",
    "mnist_cnn",
    "cifar10_cnn",
    "imdb_fasttext",
    "imdb_bidirectional_lstm",
    "lstm_text_generation",
    "text_generator_keras",
)


@dataclass(frozen=True)
class Suite:
    name: str
    workloads: tuple[str, ...]
    backends: tuple[str, ...]
    cut: (
        str | None
    )  # "quick", "short" or "bounded": each workload's cut of that name; None: published epochs, full data
    description: str
    published_backends: tuple[str, ...] = ()  # the study's own backends, where they differ (CNTK is gone)

    def subset(self, what: str, text: str | None) -> list[str]:
        """The suite's workloads or backends (`what`) named in a comma-separated `text`, all of them for None;
        UnknownSuite names any that the suite does not have."""
        allowed = self.workloads if what == "workload" else self.backends
        if text is None:
            return list(allowed)
        names = [name.strip() for name in text.split(",") if name.strip()]
        # a native backend trains any suite's workloads' native twins, when named (benchmarks.workloads.native)
        extra = NATIVE_BACKENDS if what == "backend" else ()
        unknown = [name for name in names if name not in allowed and name not in extra]
        if unknown or not names:
            raise UnknownSuite(
                f"unknown {what} {', '.join(unknown) or repr(text)} for suite {self.name}; "
                f"choose from {', '.join(allowed)}"
            )
        return names


SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite(
            "quick",
            WORKLOADS,
            BACKENDS,
            cut="quick",
            description="every workload cut down (3 epochs, small slices): a smoke benchmark, minutes on a laptop",
        ),
        Suite(
            "bounded",
            WORKLOADS,
            BACKENDS,
            cut="bounded",
            description="published epochs; fewer samples only where a full run takes hours (tweets, VoxCeleb pairs)",
        ),
        Suite(
            "short",
            WORKLOADS,
            BACKENDS,
            cut="short",
            description="5 epochs, slices sized for 1-3 s GPU epochs: repeats of every workload in minutes",
        ),
        Suite("full", WORKLOADS, BACKENDS, cut=None, description="every workload with its published epochs"),
        Suite(
            "cpu-or-gpu-2017-07",
            KERAS_2017,
            ("tensorflow",),
            cut=None,
            description="Woolf, 'Benchmarking TensorFlow on Cloud CPUs', July 2017: K80 vs 8-64 vCPU, pip vs compiled",
        ),
        Suite(
            "benchmark-gpus-2017-11",
            KERAS_2017[:-1],
            ("tensorflow",),
            cut=None,
            description="Woolf, 'Benchmarking Modern GPUs for Maximum Cloud Cost Efficiency', Nov 2017: K80/P100/CPU",
            published_backends=("tensorflow", "cntk"),
        ),
        Suite(
            "keras-cntk-2017-06",
            KERAS_2017,
            ("tensorflow",),
            cut=None,
            description="Woolf, 'Benchmarking CNTK on Keras', June 2017: TensorFlow vs CNTK on a K80",
            published_backends=("tensorflow", "cntk"),
        ),
        Suite(
            "gpu-providers-2018",
            ("twitter_sentiment_bilstm",),
            ("tensorflow",),
            cut=None,
            description="RaRe Technologies, 'Machine learning mega-benchmark: GPU providers', Feb 2018",
        ),
        Suite(
            "home-server-2018",
            ("siamese_lstm",),
            ("tensorflow",),
            cut=None,
            description="'Building and benchmarking my own Deep-Learning server', Jan 2018: GTX 1070 Ti vs p2.xlarge",
        ),
    )
}


class UnknownSuite(ValueError):
    pass


def get_suite(name: str) -> Suite:
    try:
        return SUITES[name]
    except KeyError:
        raise UnknownSuite(f"unknown suite {name!r}; choose from {', '.join(SUITES)}") from None
