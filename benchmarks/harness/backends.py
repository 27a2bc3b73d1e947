"""What differs between backends: device synchronization, versions, accelerator facts, default settings.

Imported only after KERAS_BACKEND is set; each function imports just the framework it is asked about.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

BACKENDS: tuple[str, ...] = ("tensorflow", "jax", "torch")
# Backends that train a workload's native twin instead of its Keras model (benchmarks.workloads.native), and the
# framework each runs on.
NATIVE = "torch-native"
NATIVE_BACKENDS: tuple[str, ...] = (NATIVE,)
ALL_BACKENDS: tuple[str, ...] = (*BACKENDS, *NATIVE_BACKENDS)
FRAMEWORKS: dict[str, str] = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch", NATIVE: "torch"}


def framework(backend: str) -> str:
    """The framework a backend runs on: itself for Keras's backends, torch for torch-native."""
    return FRAMEWORKS[backend]


def is_native(backend: str) -> bool:
    return backend in NATIVE_BACKENDS


@dataclass(frozen=True)
class Settings:
    """Settings that change a number; recorded next to it."""

    jit_compile: bool | str  # "auto" lets Keras decide (XLA on TF/JAX where supported; eager on torch)
    steps_per_execution: int  # must be 1 on torch (Keras's rule)
    use_cudnn: bool | str = "auto"  # LSTM layers: "auto" takes cuDNN where it applies; False forces the generic loop
    # float32 matmuls and convolutions on GPUs: "tf32" (tensor cores, 10-bit mantissa inputs) or "float32".
    # JAX and TensorFlow default to TF32 on Ampere and later, PyTorch only for convolutions: one value for all.
    float32_matmul: str = "float32"
    # The compute type of the workloads that train in mixed precision on GPUs (SPEC.mixed_precision): float16 or
    # bfloat16 (Keras's mixed_float16 or mixed_bfloat16 policy, autocast on torch-native), or float32.
    precision: str = "float16"


# The suite's default per backend: the fastest configuration measured that keeps the published hyperparameters
# ("auto" is XLA on JAX, XLA on TensorFlow GPUs, eager PyTorch; cuDNN LSTMs where Keras can use them).
DEFAULTS: dict[str, Settings] = {
    "tensorflow": Settings(jit_compile="auto", steps_per_execution=1),
    "jax": Settings(jit_compile="auto", steps_per_execution=1),
    "torch": Settings(jit_compile="auto", steps_per_execution=1),
    NATIVE: Settings(jit_compile=False, steps_per_execution=1),
}


# PyTorch's CPU kernels run on an OpenMP pool (the libgomp its wheels ship), whose threads spin while they wait for
# the next parallel region by default. On a CPU shared with anything else (the runner's own threads, a second
# process, other users) a spinning thread takes the core its partner needs: on a loaded 2-core machine mnist_mlp's
# epoch used 8 s of CPU instead of 0.7 s, and a Bidirectional LSTM (Keras runs it step by step on PyTorch) 15-25 s
# instead of 1.3 s (docs/cpu.md). Waiting passively keeps the threads and drops the spinning. libgomp reads it once,
# when torch loads it: set before the first import, and recorded in each run's metadata. A value the user set wins.
OMP_WAIT_POLICY = "OMP_WAIT_POLICY"
TORCH_OMP_WAIT_POLICY = "PASSIVE"


def prepare_process(backend: str) -> None:
    """Set what the framework reads once, at import: the Keras backend, and OpenMP's wait policy for PyTorch."""
    os.environ["KERAS_BACKEND"] = framework(backend)  # the native twins' data loaders use Keras's PyDataset
    if framework(backend) == "torch":
        os.environ.setdefault(OMP_WAIT_POLICY, TORCH_OMP_WAIT_POLICY)


def omp_wait_policy(backend: str) -> str | None:
    """The OpenMP wait policy the run's framework reads (PyTorch's CPU kernels), None where none applies."""
    return os.environ.get(OMP_WAIT_POLICY, "ACTIVE (libgomp's default)") if framework(backend) == "torch" else None


REFERENCE = ("resnet50", "gpt_nietzsche")  # benchmarks.workloads.REFERENCE_WORKLOADS (not imported: no cycle)


def _on_gpu(backend: str, **changes: Any) -> Settings:
    return replace(DEFAULTS[backend], float32_matmul="tf32", **changes)


# On GPUs every backend computes float32 matmuls in TF32, and a workload's default is the configuration that was
# fastest in steady epochs on an H200 (docs/results.md's configurations table, logs in logs/reference/NVIDIA-H200):
# several steps per dispatch on JAX, XLA's own LSTM loop on JAX, torch.compile for PyTorch's non-recurrent models.
GPU_DEFAULTS: dict[tuple[str, str], Settings] = {
    ("jax", "mnist_mlp"): _on_gpu("jax", steps_per_execution=32),
    ("jax", "mnist_cnn"): _on_gpu("jax", steps_per_execution=32),
    ("jax", "cifar10_cnn"): _on_gpu("jax", steps_per_execution=8),
    ("jax", "imdb_fasttext"): _on_gpu("jax", steps_per_execution=32),
    ("jax", "siamese_lstm"): _on_gpu("jax", steps_per_execution=8),
    **{
        ("jax", name): _on_gpu("jax", steps_per_execution=8, use_cudnn=False)
        for name in ("imdb_bidirectional_lstm", "lstm_text_generation", "text_generator_keras")
    },
    **{
        ("torch", name): _on_gpu("torch", jit_compile=True)
        for name in ("mnist_mlp", "mnist_cnn", "cifar10_cnn", "imdb_fasttext")
    },
    # The reference workloads train in bfloat16 on every backend, so that Keras and the native twins compute alike
    # (float16 was no faster for Keras on JAX and slower for native PyTorch: campaign/notes/2026-11-28-gpu-cost.md);
    # the native twins run compiled (torch.compile), their fastest; the GPT takes 4 steps per dispatch on JAX.
    **{(backend, name): _on_gpu(backend, precision="bfloat16") for backend in BACKENDS for name in REFERENCE},
    ("jax", "gpt_nietzsche"): _on_gpu("jax", precision="bfloat16", steps_per_execution=4),
    **{(NATIVE, name): _on_gpu(NATIVE, precision="bfloat16", jit_compile=True) for name in REFERENCE},
}


def default_settings(backend: str, workload: str, gpu: bool) -> Settings:
    if not gpu:
        return DEFAULTS[backend]
    return GPU_DEFAULTS.get((backend, workload)) or _on_gpu(backend)


@dataclass(frozen=True)
class Overrides:
    """Settings given explicitly on the command line; None keeps the default."""

    jit_compile: bool | str | None = None
    steps_per_execution: int | None = None
    use_cudnn: bool | str | None = None
    float32_matmul: str | None = None
    precision: str | None = None

    def apply(self, settings: Settings) -> Settings:
        return Settings(
            jit_compile=settings.jit_compile if self.jit_compile is None else self.jit_compile,
            steps_per_execution=self.steps_per_execution or settings.steps_per_execution,
            use_cudnn=settings.use_cudnn if self.use_cudnn is None else self.use_cudnn,
            float32_matmul=self.float32_matmul or settings.float32_matmul,
            precision=self.precision or settings.precision,
        )


FLOAT32_MATMUL = ("tf32", "float32")


def apply_float32_matmul(backend: str, value: str) -> None:
    """Set the framework's float32 matmul/convolution precision (GPUs without TF32 compute in float32 anyway)."""
    tf32 = {"tf32": True, "float32": False}[value]
    if framework(backend) == "torch":
        import torch

        torch.set_float32_matmul_precision("high" if tf32 else "highest")
        torch.backends.cudnn.allow_tf32 = tf32
    elif framework(backend) == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if tf32 else "float32")
    else:
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(tf32)


def reset_compiled_state(backend: str) -> None:
    """Forget what earlier workloads of this process compiled, so each starts as in a fresh process.

    Keras's torch trainer compiles one `train_step` function for every model: without a reset, the compiles
    of earlier workloads count against torch.compile's recompile limit and a later model silently runs eager.
    """
    import keras

    keras.utils.clear_session()
    if framework(backend) == "torch":
        import torch

        torch._dynamo.reset()


def set_random_seed(backend: str, seed: int) -> None:
    """keras.utils.set_random_seed, which also seeds TensorFlow wherever it is installed (for tf.data pipelines).
    JAX and PyTorch runs feed no tf.data, and importing TensorFlow there cost every process 2.7-2.9 s of start-up
    (on a 2-core CPU) and left TensorFlow's threads beside the run; so outside TensorFlow runs Keras finds
    TensorFlow absent (a None entry in sys.modules fails its import), unless something imported it already."""
    import keras

    if backend == "tensorflow" or "tensorflow" in sys.modules:
        keras.utils.set_random_seed(seed)
        return
    sys.modules["tensorflow"] = None  # type: ignore[assignment]
    try:
        keras.utils.set_random_seed(seed)
    finally:
        del sys.modules["tensorflow"]


def synchronizer(backend: str, model: Any) -> Callable[[], None]:
    """A function that returns once all work queued on the device has finished."""
    if backend == "jax":
        import jax

        # Every update of an epoch feeds the model's variables: once they are ready, the device is idle.
        return lambda: jax.block_until_ready([v.value for v in model.variables])
    if framework(backend) == "torch":
        import torch

        if torch.cuda.is_available():
            return torch.cuda.synchronize
        return lambda: None  # CPU ops run synchronously
    if backend == "tensorflow":
        import tensorflow as tf

        sync: Callable[[], None] = tf.test.experimental.sync_devices
        return sync
    raise ValueError(f"unknown backend {backend!r}")


def gpu_available(backend: str) -> bool:
    if backend == "jax":
        import jax

        return jax.default_backend() == "gpu"
    if framework(backend) == "torch":
        import torch

        return torch.cuda.is_available()
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


def framework_versions(backend: str) -> dict[str, Any]:
    """Framework version and the CUDA/cuDNN it runs with (None on CPU builds)."""
    if backend == "jax":
        import jax
        import jaxlib.version

        device = jax.devices()[0]
        return {
            "framework": "jax",
            "framework_version": jax.__version__,
            "jaxlib": jaxlib.version.__version__,
            "device_kind": device.device_kind,
            "cuda": _jax_platform_version() if device.platform == "gpu" else None,
            "cudnn": None,
        }
    if framework(backend) == "torch":
        import torch

        cuda = torch.version.cuda if torch.cuda.is_available() else None
        cudnn = torch.backends.cudnn.version() if cuda else None
        return {"framework": "torch", "framework_version": torch.__version__, "cuda": cuda, "cudnn": cudnn}
    import tensorflow as tf

    build = tf.sysconfig.get_build_info()
    return {
        "framework": "tensorflow",
        "framework_version": tf.__version__,
        "cuda": build.get("cuda_version"),
        "cudnn": build.get("cudnn_version"),
    }


def _jax_platform_version() -> str | None:
    try:
        from jax.extend.backend import get_backend

        version: str | None = get_backend().platform_version
        return version
    except (ImportError, AttributeError, RuntimeError):
        return None


def lstm_kernel(model: Any, backend: str) -> str | None:
    """Which LSTM implementation the model's LSTM layers run: "cudnn" or "generic" (Keras's step loop).

    Keras picks cuDNN silently and falls back silently, so ask the backend's fused kernel directly, with the
    layer's own weights, whether it accepts this configuration. None when the model has no LSTM.
    """
    lstms = list(lstm_layers(model))
    if not lstms:
        return None
    if not gpu_available(backend):
        return "generic"
    return "cudnn" if all(_fused_kernel_accepts(layer) for layer in lstms) else "generic"


def apply_lstm_setting(model: Any, use_cudnn: bool | str) -> None:
    """Set every LSTM layer's kernel choice; the layer reads it at call time."""
    for layer in lstm_layers(model):
        layer.use_cudnn = use_cudnn


def lstm_layers(model: Any) -> Iterator[Any]:
    import keras

    for layer in model.layers:
        if isinstance(layer, keras.layers.Bidirectional):
            yield from (layer.forward_layer, layer.backward_layer)
        elif isinstance(layer, keras.layers.LSTM):
            yield layer


def _fused_kernel_accepts(layer: Any) -> bool:
    from keras import ops
    from keras.src import backend as keras_backend  # the fused-kernel entry point the LSTM layer itself calls

    if layer.use_cudnn is False or layer.recurrent_dropout:
        return False
    cell = layer.cell
    inputs = ops.zeros((2, 3, cell.kernel.shape[0]))
    state = ops.zeros((2, cell.units))
    try:
        keras_backend.lstm(
            inputs,
            state,
            state,
            None,
            kernel=cell.kernel,
            recurrent_kernel=cell.recurrent_kernel,
            bias=cell.bias,
            activation=cell.activation,
            recurrent_activation=cell.recurrent_activation,
            return_sequences=layer.return_sequences,
            go_backwards=layer.go_backwards,
            unroll=layer.unroll,
        )
    except NotImplementedError:
        return False
    return True


# The half-precision type of the workloads that train in mixed precision on GPUs (SPEC.mixed_precision): float32
# variables, float16 or bfloat16 compute on tensor cores (float16 with the dynamically scaled loss Keras adds at
# compile time). On CPUs they stay in float32: CPUs have no float16 matrix units, and float16 convolutions there are
# slow or missing. `--precision` chooses; float32 trains them in float32 on GPUs too.
PRECISIONS = ("float16", "bfloat16", "float32")
DEFAULT_PRECISION = "float16"


def dtype_policy(precision: str) -> str:
    """Keras's name for a mixed-precision workload's policy at `precision`."""
    return "float32" if precision == "float32" else f"mixed_{precision}"


def build_model(module: Any, data: Any, precision: str = DEFAULT_PRECISION) -> Any:
    """The workload module's model, built in mixed precision where its SPEC asks for it and this backend sees a
    GPU: every caller that times or measures a workload's model builds it here, so all build the same one.

    In mixed precision its Embedding layers compute in float32, as PyTorch's autocast leaves embeddings: the
    gradient of a lookup is a scatter-add of every position's gradient into the table's rows, and in float16 or
    bfloat16 XLA turns it into half-precision atomic adds that collide on a small vocabulary (16,384 positions into
    65 rows for gpt_nietzsche's batch): that one operation made the GPT's step 5.6 times slower on an H200
    (docs/timing.md). In float32 the lookup's output is cast to the next layer's compute type, as any input is."""
    if not module.SPEC.mixed_precision:
        return module.build_model(data)
    with gpu_mixed_precision(precision) as policy:
        model = module.build_model(data)
    if policy != "float32":
        embeddings_in_float32(model)
    return model


def embeddings_in_float32(model: Any) -> list[str]:
    """Set the model's Embedding layers (nested ones too) to compute in float32; their names."""
    import keras

    changed = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.Embedding):
            layer.dtype_policy = keras.DTypePolicy("float32")
            changed.append(layer.name)
    return changed


@contextlib.contextmanager
def gpu_mixed_precision(precision: str = DEFAULT_PRECISION) -> Iterator[str]:
    """Build a model inside: every layer made here takes the mixed policy of `precision` where this backend sees a
    GPU, `float32` elsewhere. The global policy is restored afterwards, so the process's next workload is
    unaffected; the model keeps its policy, which the run's metadata records (`settings.dtype_policy`)."""
    import keras

    backend = keras.backend.backend()
    before = keras.config.dtype_policy()
    policy = dtype_policy(precision) if gpu_available(backend) else "float32"
    keras.config.set_dtype_policy(policy)
    try:
        yield policy
    finally:
        keras.config.set_dtype_policy(before)
