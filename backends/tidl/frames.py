"""Calibration frames: the model inputs TIDL's calibration runs on.

    frames = load_frames("frames.npz", partitioned)             # arrays by input name, frames on the batch axis
    frames = load_frames("calib_images/", partitioned,          # a folder: one image per file
                         mean=[123.675, 116.28, 103.53], scale=[0.017125, 0.017507, 0.017429])
    frames = load_frames(None, partitioned, count=20)           # no data: seeded random frames, with a warning
    frames = load_frames({"img": array}, partitioned)           # arrays in memory, as in an .npz
    len(frames); frames[0]["img"].shape                         # each frame: input name -> one model input

A *frame* is one complete set of model inputs (for a batch-N model, N images): TIDL runs its
calibration on frames and takes its statistics from batch index 0 of each.

* ``.npz`` file or a mapping: one array per input name. Frames are on the batch axis: an array
  of shape ``(F * N, ...)`` for an input of shape ``(N, ...)`` gives F frames; ``(F, N, ...)``
  (one more axis) is read the same way. Every input must have the same number of frames; arrays
  are converted to the input's dtype when numpy calls that a ``same_kind`` cast (float64 ->
  float32, uint8 -> float32), anything else is an error.
* A folder: each file, in name order, is one image for the model's one image input (rank 4,
  NCHW). Per channel ``(x - mean) * scale`` as TI's model configs write ``input_mean`` and
  ``input_scale`` (default mean 0, scale 1: raw pixel values); each image is resized to the
  input's H x W first, bilinearly with half-pixel centres and no antialiasing (tidlx's choice:
  TI's configs name the size, not the filter). For batch N, N consecutive images make one
  frame. Images come as ``.npy`` files (an H x W x C or H x W array, as an image decoder
  returns it); ``.png``/``.jpg``/``.jpeg``/``.bmp`` files need Pillow, which tidlx does not
  install: without it they are an error that says how to convert them.
* Nothing: ``count`` frames of seeded standard-normal values (float inputs only), with a
  TidlxWarning that ranges from them say nothing about real data.

``count`` (TI's ``calibration_frames``) takes the first ``count`` frames; when fewer are
available, all of them are used and a TidlxWarning says so.
"""

from __future__ import annotations

import os
import warnings
import zipfile
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ...ir.errors import TidlxError, TidlxWarning
from ...ir.module import IRModule
from ...ir.types import TensorType

#: Files of a frame folder read as images: numpy arrays, and (with Pillow) image formats.
NPY_SUFFIX = ".npy"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")

#: The seed of random frames when none is given.
DEFAULT_SEED = 0


class CalibrationDataError(TidlxError):
    """Calibration frames that cannot be used: a missing or unknown input, a wrong shape or dtype,
    an unreadable file, an empty folder."""


@dataclass(frozen=True)
class CalibrationFrames:
    """Frames for calibration: each maps every model input name to one array of the input's exact
    shape and dtype. ``source`` says where they came from (for messages and reports);
    ``random`` is True for generated frames."""

    frames: Tuple[Mapping[str, np.ndarray], ...]
    source: str
    random: bool = False

    def __len__(self) -> int:
        return len(self.frames)

    def __getitem__(self, index: int) -> Mapping[str, np.ndarray]:
        return self.frames[index]

    def __iter__(self):
        return iter(self.frames)


InputTypes = Mapping[str, TensorType]
FrameSource = Union[None, str, "os.PathLike[str]", Mapping[str, Any], CalibrationFrames]


def model_inputs(model: Union[IRModule, InputTypes], entry: str = "main") -> Dict[str, TensorType]:
    """The input names and types frames must supply: ``@entry``'s parameters, or a mapping given as is."""
    if isinstance(model, IRModule):
        if entry not in model:
            raise CalibrationDataError(f"the module has no @{entry} function to calibrate")
        fn = model[entry]
        if not all(p.has_type for p in fn.params):
            model.infer_types()
        types = {p.name_hint: p.checked_type for p in fn.params}
    elif isinstance(model, Mapping):
        types = dict(model)
    else:
        raise CalibrationDataError(f"calibration frames need the model's inputs: an IRModule or a mapping of input "
                                   f"names to TensorTypes, got {type(model).__name__}")
    for name, t in types.items():
        if not isinstance(t, TensorType):
            raise CalibrationDataError(f"input '{name}' has type {t}: calibration frames are tensors only")
    return types


# -- arrays by input name (an .npz file or a mapping) -------------------------------------------------

def _split_frames(name: str, array: np.ndarray, t: TensorType, where: str) -> List[np.ndarray]:
    shape = tuple(int(d) for d in t.shape)
    batch = shape[0] if shape else 1
    if array.ndim == len(shape) + 1 and tuple(array.shape[1:]) == shape:
        frames = [array[k] for k in range(array.shape[0])]
    elif shape and array.ndim == len(shape) and tuple(array.shape[1:]) == shape[1:] and batch \
            and array.shape[0] % batch == 0:
        frames = [array[k * batch:(k + 1) * batch] for k in range(array.shape[0] // batch)]
    elif not shape and array.ndim == 1:
        frames = [array[k] for k in range(array.shape[0])]
    else:
        lead = f"(F * {batch}, {', '.join(str(d) for d in shape[1:])})" if shape else "(F,)"
        raise CalibrationDataError(f"{where}: input '{name}' has shape {tuple(array.shape)}, which is no stack of "
                                   f"frames of the input's shape {shape}: expected {lead} with the frames on the "
                                   f"batch axis, or (F, {', '.join(str(d) for d in shape)})")
    if not frames:
        raise CalibrationDataError(f"{where}: input '{name}' holds no frames (its shape is {tuple(array.shape)})")
    return frames


def _converted(name: str, array: np.ndarray, dtype: str, where: str) -> np.ndarray:
    target = np.dtype(dtype)
    if array.dtype == target:
        return array
    if array.dtype.kind not in "biuf" or not np.can_cast(array.dtype, target, "same_kind"):
        raise CalibrationDataError(f"{where}: input '{name}' has dtype {array.dtype}, which does not convert to the "
                                   f"input's {dtype} (give {dtype} values)")
    return array.astype(target)


def frames_from_arrays(arrays: Mapping[str, Any], inputs: InputTypes, where: str = "calibration arrays") \
        -> CalibrationFrames:
    """Frames from one array per input name, the frames on the batch axis (what an .npz holds)."""
    names = list(inputs)
    missing = [n for n in names if n not in arrays]
    if missing:
        given = ", ".join(f"'{k}'" for k in arrays) or "none"
        raise CalibrationDataError(f"{where}: no array for input{'s' if len(missing) > 1 else ''} "
                                   f"{', '.join(repr(n) for n in missing)} (it has {given}; the model's inputs are "
                                   f"{', '.join(repr(n) for n in names)})")
    unknown = [k for k in arrays if k not in inputs]
    if unknown:
        raise CalibrationDataError(f"{where}: {', '.join(repr(k) for k in unknown)} "
                                   f"{'is no input' if len(unknown) == 1 else 'are no inputs'} of the model (its "
                                   f"inputs are {', '.join(repr(n) for n in names)})")
    per_input: Dict[str, List[np.ndarray]] = {}
    for name in names:
        value = arrays[name]
        array = value if isinstance(value, np.ndarray) else np.asarray(value)
        array = _converted(name, array, inputs[name].dtype, where)
        per_input[name] = _split_frames(name, array, inputs[name], where)
    counts = {name: len(f) for name, f in per_input.items()}
    if len(set(counts.values())) > 1:
        raise CalibrationDataError(f"{where}: the inputs hold different numbers of frames: "
                                   + ", ".join(f"'{n}' {c}" for n, c in counts.items()))
    count = counts[names[0]] if names else 0
    frames = tuple({name: np.ascontiguousarray(per_input[name][k]) for name in names} for k in range(count))
    return CalibrationFrames(frames, where)


def load_npz(path: Union[str, "os.PathLike[str]"], inputs: InputTypes) -> CalibrationFrames:
    """Frames from an ``.npz`` file of arrays by input name (``np.savez(path, img=frames)``)."""
    path = os.fspath(path)
    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise CalibrationDataError(f"{path}: no such calibration file") from None
    except IsADirectoryError:
        raise CalibrationDataError(f"{path}: a folder, not an .npz file") from None
    except OSError as exc:
        raise CalibrationDataError(f"{path}: cannot read the calibration file ({exc.strerror or exc})") from None
    except (ValueError, EOFError) as exc:
        raise CalibrationDataError(f"{path}: not a readable .npz archive of arrays by input name ({exc})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise CalibrationDataError(f"{path}: one array, not an .npz archive of arrays by input name (write it with "
                                   f"numpy.savez(path, <input name>=frames, ...))")
    try:
        arrays = {k: data[k] for k in data.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise CalibrationDataError(f"{path}: a damaged .npz archive ({exc})") from None
    finally:
        data.close()
    return frames_from_arrays(arrays, inputs, where=path)


# -- a folder of images -------------------------------------------------------------------------------

def _per_channel(values, channels: int, what: str, where: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if array.size == 1:
        array = np.repeat(array, channels)
    if array.size != channels or not np.all(np.isfinite(array)):
        raise CalibrationDataError(f"{where}: {what} must be one finite number or {channels} (one per channel), "
                                   f"got {values!r}")
    return array


def resize_bilinear(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """An H x W x C float image resized to ``height`` x ``width``: bilinear, half-pixel centres
    (source position ``(i + 0.5) * in / out - 0.5``, clamped to the image), no antialiasing."""
    def taps(n_in: int, n_out: int):
        pos = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5
        pos = np.clip(pos, 0.0, n_in - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, pos - lo

    if image.shape[0] == height and image.shape[1] == width:
        return image
    y0, y1, wy = taps(image.shape[0], height)
    x0, x1, wx = taps(image.shape[1], width)
    rows = image[y0] * (1.0 - wy)[:, None, None] + image[y1] * wy[:, None, None]
    return rows[:, x0] * (1.0 - wx)[None, :, None] + rows[:, x1] * wx[None, :, None]


def _read_image(path: str) -> np.ndarray:
    suffix = os.path.splitext(path)[1].lower()
    if suffix == NPY_SUFFIX:
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise CalibrationDataError(f"{path}: not a readable .npy image ({exc})") from None
        if not isinstance(array, np.ndarray) or array.dtype.kind not in "biuf":
            raise CalibrationDataError(f"{path}: an .npy image must hold numbers, got {getattr(array, 'dtype', '?')}")
        return array
    try:
        from PIL import Image  # optional: tidlx does not install Pillow
    except ImportError:
        raise CalibrationDataError(
            f"{path}: reading {suffix} images needs Pillow, which is not installed; install it, or save each "
            f"decoded image as an H x W x C array with numpy.save (.npy) in the folder") from None
    try:
        with Image.open(path) as img:
            return np.asarray(img.convert("RGB"))
    except Exception as exc:  # Pillow raises many kinds for a broken file
        raise CalibrationDataError(f"{path}: not a readable image ({exc})") from None


def _image_input(inputs: InputTypes, where: str) -> Tuple[str, TensorType]:
    images = [(n, t) for n, t in inputs.items() if len(t.shape) == 4]
    if len(inputs) != 1 or len(images) != 1:
        described = ", ".join(f"'{n}' {tuple(t.shape)}" for n, t in inputs.items()) or "none"
        raise CalibrationDataError(f"{where}: a folder of images feeds a model with one NCHW image input; this model's "
                                   f"inputs are {described} (give an .npz with an array per input instead)")
    return images[0]


def load_folder(path: Union[str, "os.PathLike[str]"], inputs: InputTypes, mean=None, scale=None) \
        -> CalibrationFrames:
    """Frames from a folder of images (``.npy`` H x W x C arrays; image files with Pillow), in name
    order: resized to the input's H x W, ``(x - mean) * scale`` per channel, NCHW, the input's dtype."""
    path = os.fspath(path)
    name, t = _image_input(inputs, path)
    batch, channels, height, width = (int(d) for d in t.shape)
    if np.dtype(t.dtype).kind != "f":
        raise CalibrationDataError(f"{path}: input '{name}' is {t.dtype}; images are preprocessed to float inputs")
    mean_c = _per_channel(0.0 if mean is None else mean, channels, "mean", path)
    scale_c = _per_channel(1.0 if scale is None else scale, channels, "scale", path)
    try:
        entries = sorted(os.listdir(path))
    except OSError as exc:
        raise CalibrationDataError(f"{path}: cannot list the calibration folder ({exc.strerror or exc})") from None
    files = [os.path.join(path, e) for e in entries
             if os.path.splitext(e)[1].lower() in (NPY_SUFFIX,) + IMAGE_SUFFIXES
             and os.path.isfile(os.path.join(path, e))]
    if not files:
        raise CalibrationDataError(f"{path}: no calibration images in the folder (expected {NPY_SUFFIX} arrays, or "
                                   f"{', '.join(IMAGE_SUFFIXES)} files with Pillow installed)")
    if len(files) < batch:
        raise CalibrationDataError(f"{path}: {len(files)} image(s) for input '{name}' of batch {batch}: one frame "
                                   f"takes {batch} images")
    images = []
    for file in files:
        image = _read_image(file)
        if image.ndim == 2:
            image = image[:, :, None]
        if image.ndim != 3 or image.shape[2] != channels or image.shape[0] < 1 or image.shape[1] < 1:
            raise CalibrationDataError(f"{file}: image of shape {tuple(image.shape)} for input '{name}' of {channels} "
                                       f"channel(s): expected H x W x {channels}" + (" or H x W" if channels == 1
                                                                                      else ""))
        pixels = resize_bilinear(image.astype(np.float64), height, width)
        pixels = (pixels - mean_c) * scale_c
        images.append(np.ascontiguousarray(pixels.transpose(2, 0, 1)).astype(t.dtype))
    count, left = divmod(len(images), batch)
    if left:
        warnings.warn(f"{path}: {len(images)} images make {count} frame(s) of batch {batch}; the last {left} "
                      f"image(s) are not used", TidlxWarning, stacklevel=3)
    frames = tuple({name: np.stack(images[k * batch:(k + 1) * batch])} for k in range(count))
    return CalibrationFrames(frames, path)


# -- random frames ------------------------------------------------------------------------------------

def random_frames(inputs: InputTypes, count: int, seed: int = DEFAULT_SEED) -> CalibrationFrames:
    """``count`` frames of standard-normal values from ``numpy.random.default_rng(seed)`` (inputs in
    parameter order, frame by frame), with a TidlxWarning: the ranges say nothing about real data."""
    not_float = [f"'{n}' ({t.dtype})" for n, t in inputs.items() if np.dtype(t.dtype).kind != "f"]
    if not_float:
        raise CalibrationDataError(f"no calibration frames given, and random frames are float only: input "
                                   f"{', '.join(not_float)} needs real data (an .npz with an array per input)")
    warnings.warn(f"no calibration data given: calibrating on {count} deterministic random frame(s) (standard "
                  f"normal, seed {seed}); the ranges will not reflect real inputs (give frames as an .npz or a "
                  f"folder of images)", TidlxWarning, stacklevel=3)
    rng = np.random.default_rng(seed)
    frames = tuple({n: rng.standard_normal(tuple(int(d) for d in t.shape)).astype(t.dtype)
                    for n, t in inputs.items()} for _ in range(count))
    return CalibrationFrames(frames, f"random (seed {seed})", random=True)


# -- the entry point ----------------------------------------------------------------------------------

def _check_frames(frames: CalibrationFrames, inputs: InputTypes) -> None:
    for k, frame in enumerate(frames):
        for name, t in inputs.items():
            value = frame.get(name) if isinstance(frame, Mapping) else None
            where = f"{frames.source}, frame {k}"
            if value is None:
                raise CalibrationDataError(f"{where}: no value for input '{name}'")
            shape = tuple(int(d) for d in t.shape)
            if not isinstance(value, np.ndarray) or value.shape != shape or value.dtype != np.dtype(t.dtype):
                got = f"{value.dtype} {tuple(value.shape)}" if isinstance(value, np.ndarray) else type(value).__name__
                raise CalibrationDataError(f"{where}: input '{name}' is {got}, expected {t.dtype} {shape}")


def load_frames(source: FrameSource, model: Union[IRModule, InputTypes], count: Optional[int] = None, *,
                mean: Optional[Sequence[float]] = None, scale: Optional[Sequence[float]] = None,
                seed: int = DEFAULT_SEED) -> CalibrationFrames:
    """The calibration frames of ``source`` for ``model`` (an IRModule: its @main's inputs), at most
    ``count`` of them (None: all; for random frames, 20 = TI's default ``calibration_frames``).

    ``source``: a path to an ``.npz`` file or to a folder of images (``mean``/``scale``: TI's
    per-channel preprocessing), a mapping of arrays by input name, ``CalibrationFrames``, or None
    for random frames (seeded by ``seed``, with a TidlxWarning)."""
    inputs = model_inputs(model)
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise CalibrationDataError(f"calibration_frames must be an integer >= 1, got {count!r}")
    if (mean is not None or scale is not None) and not isinstance(source, (str, os.PathLike)):
        raise CalibrationDataError("mean and scale preprocess a folder of images; give the folder's path")
    if source is None:
        return random_frames(inputs, 20 if count is None else count, seed)
    if isinstance(source, CalibrationFrames):
        frames = source
    elif isinstance(source, Mapping):
        frames = frames_from_arrays(source, inputs)
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if os.path.isdir(path):
            frames = load_folder(path, inputs, mean, scale)
        elif mean is not None or scale is not None:
            raise CalibrationDataError(f"{path}: mean and scale preprocess a folder of images, and this is not a "
                                       f"folder")
        else:
            frames = load_npz(path, inputs)
    else:
        raise CalibrationDataError(f"calibration frames must be a path (.npz or a folder of images), a mapping of "
                                   f"arrays by input name or None, got {type(source).__name__}")
    _check_frames(frames, inputs)
    if count is not None:
        if len(frames) < count:
            warnings.warn(f"{frames.source}: {len(frames)} calibration frame(s) available, fewer than "
                          f"calibration_frames={count}: calibrating on all {len(frames)}", TidlxWarning, stacklevel=2)
        elif len(frames) > count:
            frames = CalibrationFrames(frames.frames[:count], frames.source, frames.random)
    return frames


__all__ = ["CalibrationFrames", "CalibrationDataError", "load_frames", "load_npz", "load_folder",
           "frames_from_arrays", "random_frames", "resize_bilinear", "model_inputs", "IMAGE_SUFFIXES",
           "NPY_SUFFIX", "DEFAULT_SEED"]
