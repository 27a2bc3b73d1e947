"""ResNet-50 on ImageNet-shaped data: `keras.applications.ResNet50(weights=None)`, 224 x 224 x 3, 1,000 classes.

A reference workload that loads a current GPU, where the 2017-2018 scripts leave it mostly idle.

Data. Synthetic by default, as TensorFlow's tf_cnn_benchmarks measured ResNet-50: a pool of labelled synthetic
uint8 images (benchmarks/data/images.py), recorded as `synthetic:imagenet` in the metadata and the file name. Real
images with `--dataset imagenet --data-dir DIR`: DIR/imagenet/train/<class>/*.JPEG (and optionally
DIR/imagenet/val/<class>/*.JPEG), decoded with Pillow on the CPU; the model then has one output per class folder.
Images travel to the device as uint8 (a quarter of float32's bytes) and the model casts them there. The images
are not mean-subtracted (ResNet50's `preprocess_input`): from random weights the first batch normalisation
rescales them, and the step's work is the same.

Precision (`SPEC.mixed_precision`, applied by the harness's `build_model`). mixed_bfloat16 where the backend sees a
GPU (bfloat16 compute on tensor cores, float32 variables), or mixed_float16 with `--precision float16` (the loss
then scaled dynamically by the LossScaleOptimizer Keras adds at compile time), float32 on CPUs; the run's
`settings.dtype_policy` records which. The classifier's softmax is
folded into the loss (`from_logits`), which computes in float32: the 1,000 logits are the only half-precision output.

Batch. 256 images per step (per GPU on one GPU), the batch of Goyal et al.'s reference recipe (learning rate 0.1
per 256 images) and the per-GPU batch NVIDIA's DeepLearningExamples train ResNet-50 with in mixed precision, down to
16 GB V100s. It fits an 80 GB H100 with room to spare: ResNet-50 stores roughly 100 MB of activations per 224 px
image for the backward pass in float32, half that in float16, so about 13 GB at batch 256, beside 0.3 GB of
weights, gradients and momentum, leaving the frameworks their workspaces and cuDNN's or XLA's algorithm choices.
Every convolution then works on 256 x H x W rows, enough to keep the tensor cores busy; a larger batch would change
the recipe's learning rate for little more throughput.

Slices. `quick`: 8 training and 4 validation images of the full 224 px model, one step per epoch: seconds per
epoch on a CPU, with the GPU runs' model and image size (a smaller input, down to the 32 px ResNet50 allows, would
be faster still but a different program from the one the GPU runs measure). `short`: 20 steps of 256 (5,120
images) and 2 of validation, 5 epochs: about 1.5-2.5 s per steady epoch on an H100 if Keras reaches 2,000-3,500
images/s, the range NVIDIA publishes for its own mixed-precision ResNet-50 code on A100s and H100s (unmeasured
here yet). `bounded` and `full`: 90 epochs, the recipe's length; `full` of ImageNet's 1,281,167 images, days on one
GPU; `bounded` caps an epoch at 100 steps (tf_cnn_benchmarks' default run length) and validation at 10.

Hyperparameters. SGD with momentum 0.9, learning rate 0.1 for batch 256 and weight decay 1e-4 (Keras's
decoupled form) as Goyal et al.; their step decay at epochs 30, 60 and 80 is left out (it changes no step's
time), as is data augmentation.
"""

from typing import Any

import keras

from benchmarks.data import images, synthetic
from benchmarks.data.files import DatasetUnavailable, FileLocations
from benchmarks.data.loaders import SYNTHETIC_NAME
from benchmarks.data.types import REAL, SYNTHETIC, Data, DataInfo, DataRequest
from benchmarks.workloads import Cut, WorkloadSpec

IMAGE_SIZE = 224
CLASSES = 1000
IMAGENET_SIZES = (1_281_167, 50_000)  # ILSVRC2012 training and validation images
REAL_NAME = "imagenet"

SPEC = WorkloadSpec(
    name="resnet50",
    epochs=90,
    batch_size=256,
    datasets=(SYNTHETIC_NAME, REAL_NAME),
    hyperparameters={
        "model": "keras.applications.ResNet50(weights=None)",
        "image_size": IMAGE_SIZE,
        "optimizer": "SGD",
        "learning_rate": 0.1,
        "momentum": 0.9,
        "weight_decay": 1e-4,
        "precision": "mixed_bfloat16 on GPUs (mixed_float16 with --precision float16), float32 on CPUs",
    },
    quick=Cut(epochs=3, train_limit=8, val_limit=4),
    short=Cut(epochs=5, train_limit=5_120, val_limit=512),  # 20 and 2 steps of 256
    bounded=Cut(epochs=90, train_limit=25_600, val_limit=2_560),  # 100 and 10 steps of 256
    mixed_precision=True,
    reference="Goyal et al. 2017, arXiv:1706.02677 (recipe); tensorflow/benchmarks tf_cnn_benchmarks (synthetic data)",
    notes="synthetic ImageNet-shaped data by default; real class-folder images with --dataset imagenet --data-dir",
)


def load_data(request: DataRequest, where: FileLocations) -> Data:
    batch_size = request.batch_size or SPEC.batch_size
    if request.dataset == SYNTHETIC_NAME:
        return _synthetic(request, batch_size)
    return _real(request, where, batch_size)


def _synthetic(request: DataRequest, batch_size: int) -> Data:
    n_train = min(request.train_limit or IMAGENET_SIZES[0], IMAGENET_SIZES[0])
    n_val = min(request.val_limit or IMAGENET_SIZES[1], IMAGENET_SIZES[1])
    pool_train, pool_val = min(n_train, images.POOL_IMAGES), min(n_val, images.POOL_IMAGES // 4)
    x, y = synthetic.imagenet_like(pool_train + pool_val, IMAGE_SIZE, CLASSES, request.seed)
    train = images.CyclicBatches(x[:pool_train], y[:pool_train], n_train, batch_size)
    val = images.CyclicBatches(x[pool_train:], y[pool_train:], n_val, batch_size) if n_val else None
    info = DataInfo(f"{SYNTHETIC_NAME}:{REAL_NAME}", SYNTHETIC, n_train, n_val if val else 0)
    return Data(train, None, val, None, info, extras={"classes": CLASSES})


def _real(request: DataRequest, where: FileLocations, batch_size: int) -> Data:
    train_dir = images.find_folder(where, REAL_NAME, "train")
    if train_dir is None:
        raise DatasetUnavailable(
            f"{REAL_NAME}: no folder {REAL_NAME}/train of class subfolders of JPEG files under --data-dir "
            f"({where.data_dir or 'not given'}); see benchmarks/data/images.py for the layout"
        )
    train = images.scan(train_dir, request.seed).head(request.train_limit)
    val_dir = images.find_folder(where, REAL_NAME, "val")
    val = images.scan(val_dir, request.seed, train.classes).head(request.val_limit) if val_dir else None
    info = DataInfo(
        REAL_NAME,
        REAL,
        len(train.files),
        len(val.files) if val else 0,
        files=[folder.record() for folder in (train, val) if folder is not None],
    )
    return Data(
        images.FileBatches(train, batch_size, IMAGE_SIZE),
        None,
        images.FileBatches(val, batch_size, IMAGE_SIZE) if val else None,
        None,
        info,
        extras={"classes": len(train.classes)},
    )


def build_model(data: Data) -> keras.Model:
    model: keras.Model = keras.applications.ResNet50(
        weights=None,
        input_shape=(IMAGE_SIZE, IMAGE_SIZE, 3),
        classes=data.extras["classes"],
        classifier_activation=None,  # logits: the softmax is the loss's, in float32
    )
    return model


def compile_args() -> dict[str, Any]:
    return {
        "loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        "optimizer": keras.optimizers.SGD(learning_rate=0.1, momentum=0.9, weight_decay=1e-4),
        "metrics": ["accuracy"],
    }
