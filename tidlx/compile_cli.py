"""``tidlx compile MODEL -o DIR`` writes a compiled folder (docs/artifacts.md); ``tidlx inspect DIR|FILE``
prints its layer table.

    tidlx compile model.onnx -o out/model_tidl                       # the folder
    tidlx compile model.onnx -o out/model_tidl -o tensor_bits=16 --calib frames.npz
    tidlx compile model.onnx --batch 6 -o out/b6 -o max_batch_size=6 \\
        -o advanced_options:inference_mode=1 -o advanced_options:num_cores=2
    tidlx inspect out/model_tidl                                      # every subgraph's layers
    tidlx inspect out/model_tidl/tidl_subgraph0_net.bin --json
    tidlx compile model.onnx -o out/model_ort --flow ort              # also TI's ONNX Runtime files
    tidlx inspect artifacts/allowedNode.txt                           # TI's or tidlx's allowedNode.txt

``-o`` takes the output folder (a value without ``=``) and TI's options (``key=value``), as TI's
tools do; ``--out DIR`` names the folder explicitly. An existing non-empty folder is replaced only
with ``--force``; the folder is written beside its place and renamed, never half-written.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import warnings

from .ir import TidlxError

COMMAND_ORDER = 50


def _split_o(values, out):
    folders = [v for v in values if "=" not in v]
    options = [v for v in values if "=" in v]
    if out is not None:
        folders = [out] + folders
    if not folders:
        raise TidlxError("tidlx compile: say where to write the folder: -o DIR (or --out DIR)")
    if len(folders) > 1:
        raise TidlxError(f"tidlx compile: one output folder, got {len(folders)}: {', '.join(folders)} (options are "
                         f"written key=value)")
    return folders[0], options


def cmd_compile(args) -> int:
    from .cli import load_model, print_warnings_once
    from .compiled import compile_model, load_compiled
    from .ir.text import printable
    from .partition_cli import attach_nodes, flow_options

    folder, options = _split_o(args.option, args.out)
    options, flow = flow_options(options, args.flow)
    if args.calib is not None and not os.path.exists(args.calib):
        raise TidlxError(f"--calib {args.calib}: no such file or folder")
    from .compare_cli import progress_bar

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = load_model(args)
        if flow == "ort":
            attach_nodes(mod, args.model)
        with progress_bar(sys.stderr.isatty(), STAGE_LABELS) as progress:
            written = compile_model(mod, folder, options, args.calib, force=args.force, option_strings=options,
                                    target=args.target, progress=progress,
                                    name=os.path.splitext(os.path.basename(args.model))[0])
        ort_files = _write_ort_files(mod, options, written) if flow == "ort" else []
    print_warnings_once(caught)
    compiled = load_compiled(written)   # what was written reads back: the folder is complete
    layers = sum(len(s.network.subgraph.compute_layers()) for s in compiled.subgraphs.values())
    print(printable(f"wrote {written}: {len(compiled.subgraphs)} TIDL subgraph(s), {layers} layers, "
                    f"{len(compiled.manifest['sha256'])} files"))
    if ort_files:
        print(printable(f"ONNX Runtime flow files: {', '.join(ort_files)}"))
    if args.target is not None:
        _print_host_part(written, args.target)
    return 0


def _write_ort_files(mod, options, folder: str):
    """TI's ONNX Runtime files beside the compiled folder's (docs/ort-flow.md): allowedNode.txt,
    onnxrtMetaData.txt, and each subgraph's net and I/O files copied under TI's names."""
    from .backends.tidl.allowed_nodes import ort_artifact_files, write_files
    from .backends.tidl.flow import partition_for_tidl
    from .compiled import read_manifest

    ort = partition_for_tidl(mod, options)[1].ort   # the partition compile_model made: the same inputs
    entries = {e["function"]: e for e in read_manifest(folder)["subgraphs"]}
    subgraphs = {}
    for fn, entry in entries.items():
        with open(os.path.join(folder, entry["net"]), "rb") as f_net, open(os.path.join(folder, entry["io"]), "rb") as f_io:
            subgraphs[fn] = (f_net.read(), f_io.read())
    files = ort_artifact_files(ort, subgraphs)
    write_files(folder, files)
    return sorted(files)


#: compile_model's stages as the progress bar names them
STAGE_LABELS = {"partition": "partitioning for TIDL", "calibration": "calibrating",
                "quantize": "calibrating in fixed point (iterations x frames)",
                "host": "building the host part with TVM",
                "artifacts": "writing the folder"}


def _print_host_part(folder: str, target: str) -> None:
    from .backends.tvm.deploy.run import read_graph
    from .ir.text import printable

    kinds = collections.Counter(node["kind"] for node in read_graph(folder)["nodes"])   # the folder compile_model just wrote
    lib = "deploy_lib.c" if target == "c7x" else "deploy_lib.so"
    print(printable(f"host part for {target}: {lib}, deploy_graph.json, deploy_params.params and the C driver "
                    f"(driver/deploy_model.c: model_run()); graph nodes: "
                    + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))))


def shows_zero_points(sub) -> bool:
    """Whether a subgraph's tables show zero points: style 4's (quantization style 6, docs/numerics.md §12)
    or any tensor with a non-zero one. The symmetric styles' tables keep their columns."""
    from .backends.tidl.numerics import ASYM_NP2

    return sub.quantization_style == ASYM_NP2 or any(t.zero_point != 0 for t in sub.tensors)


def _ints(value):
    """An MMA multiplier or shift as JSON: an int, or a list (one per output channel or per input)."""
    if value is None:
        return None
    if hasattr(value, "shape") and value.shape != ():
        return [int(v) for v in value.reshape(-1)]
    return int(value)


def _layer_rows(sub):
    from .emulator.fixed.artifact_runtime import layer_macs

    zero_points = shows_zero_points(sub)
    rows = []
    for layer in sub.layers:
        ins = [sub.tensors[t] for t in layer.inputs]
        outs = [sub.tensors[t] for t in layer.outputs]
        rb = layer.round_bits
        outputs = []
        for t in outs:
            out = {"id": t.id, "shape": list(t.shape), "element_type": t.element_type, "bits": t.bits,
                   "signed": t.signed, "scale": t.scale}
            if zero_points:
                out["zero_point"] = t.zero_point
            outputs.append(out)
        row = {
            "index": layer.index, "name": layer.name, "type": layer.type, "type_id": layer.type_id,
            "activation": layer.activation,
            "inputs": [{"id": t.id, "shape": list(t.shape)} for t in ins],
            "outputs": outputs,
            "round_bits": int(rb) if not hasattr(rb, "shape") else [int(v) for v in rb.reshape(-1)],
            "weight_bits": layer.weight_bits, "macs": layer_macs(layer, sub.tensors)}
        if zero_points:
            row["inputs"] = [dict(i, zero_point=t.zero_point) for i, t in zip(row["inputs"], ins)]
            row["mma_scale"], row["mma_shift"] = _ints(layer.mma_scale), _ints(layer.mma_shift)
        rows.append(row)
    return rows


def mma_summary(row) -> str:
    """A style-4 layer's requantization (docs/numerics.md §12.4): ``scale >> shift``, or the span of each
    over the output channels (a convolution, an inner product) or the inputs (a concat); empty for a layer
    without one."""
    m, s = row.get("mma_scale"), row.get("mma_shift")
    if m is None:
        return ""
    if not isinstance(m, list):
        return f"{m} >> {s}"

    def span(values):
        return str(values[0]) if min(values) == max(values) else f"{min(values)}..{max(values)}"

    if len(m) == 1:
        return f"{m[0]} >> {s[0]}"
    per = "per input" if row["type"] == "Concat" else "per channel"
    return f"{span(m)} >> {span(s)} {per}"


def _element_name(t) -> str:
    if t["bits"] == 0:
        return "f32"
    return f"{'s' if t['signed'] else 'u'}{t['bits']}"


def _subgraph_table(title: str, rows, zero_points: bool = False):
    """The layer table; ``zero_points``: style 4's columns too (each output's zero point, the MMA
    multiplier and shift)."""
    from rich.table import Table
    from rich.text import Text

    from .ir.text import printable

    table = Table(title=Text(printable(title)))
    columns = [("#", "right"), ("layer", "left"), ("type", "left"), ("in", "left"), ("out", "left"),
               ("scale", "right")]
    columns += [("zero point", "right")] if zero_points else []
    columns += [("roundBits", "right")]
    columns += [("MMA scale >> shift", "right")] if zero_points else []
    columns += [("MACs", "right")]
    for col, justify in columns:
        table.add_column(col, justify=justify)
    for r in rows:
        kind = r["type"] + ("" if r["activation"] == "none" else f"+{r['activation']}")
        ins = " ".join("x".join(map(str, i["shape"])) for i in r["inputs"])
        outs = " ".join(f"{'x'.join(map(str, o['shape']))} {_element_name(o)}" for o in r["outputs"])
        scales = " ".join(f"{o['scale']:.6g}" for o in r["outputs"])
        rb = r["round_bits"]
        rb_text = str(rb) if isinstance(rb, int) else f"{min(rb)}..{max(rb)} per channel"
        cells = [str(r["index"]), Text(printable(r["name"])), Text(printable(kind)), ins, outs, scales]
        if zero_points:
            cells.append(" ".join(str(o["zero_point"]) for o in r["outputs"]))
            cells.append("" if r.get("mma_scale") is not None else rb_text)
            cells.append(mma_summary(r))
        else:
            cells.append(rb_text)
        cells.append(f"{r['macs']:,}" if r["macs"] else "")
        table.add_row(*cells)
    return table


def _inspect_allowed_nodes(path: str, as_json: bool) -> int:
    from .backends.tidl.allowed_nodes import read_allowed_nodes
    from .ir.text import printable

    allowed = read_allowed_nodes(path)
    if as_json:
        sys.stdout.write(json.dumps(allowed.to_dict(), indent=1, ensure_ascii=False) + "\n")
    else:
        for line in allowed.lines():
            print(printable(line))
    return 0


def cmd_inspect(args) -> int:
    from .backends.tidl.allowed_nodes import ALLOWED_NODES_FILE, looks_like_allowed_nodes
    from .cli import make_console
    from .compiled import MANIFEST, load_compiled
    from .emulator.fixed.artifact_format import IO_MAGIC
    from .emulator.fixed.artifact_reader import read_io, read_network

    path = args.path
    if os.path.isfile(path) and looks_like_allowed_nodes(path):
        return _inspect_allowed_nodes(path, args.json)
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, MANIFEST)) \
            and os.path.isfile(os.path.join(path, ALLOWED_NODES_FILE)):   # TI's artifacts folder
        return _inspect_allowed_nodes(os.path.join(path, ALLOWED_NODES_FILE), args.json)
    entries = []   # (title, network artifact)
    if os.path.isdir(path):
        compiled = load_compiled(path)
        for name, s in sorted(compiled.subgraphs.items(), key=lambda kv: kv[1].number):
            entries.append((s.files[0], s.network))
    elif os.path.isfile(path):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise TidlxError(f"{path}: cannot be read ({exc.strerror})") from None
        if data[:8] == IO_MAGIC:
            io = read_io(data, path)
            doc = {"file": path, "inputs": [b.__dict__ for b in io.inputs], "outputs": [b.__dict__ for b in io.outputs],
                   "num_cores": io.num_cores, "inference_mode": io.inference_mode}
            if args.json:
                sys.stdout.write(json.dumps(doc, indent=1, ensure_ascii=False, default=list) + "\n")
            else:
                from .ir.text import printable
                for b in io.inputs + io.outputs:
                    print(printable(f"{b.direction:3} data id {b.data_id} '{b.name}': {list(b.shape)} element type "
                                    f"{b.element_type}, scale {b.scale:.6g}, zero point {b.zero_point}, {b.layout}"))
            return 0
        entries.append((os.path.basename(path), read_network(data, path)))
    else:
        raise TidlxError(f"{path}: no such file or folder")
    docs = []
    for title, net in entries:
        sub = net.subgraph
        docs.append({"file": title, "subgraph": sub.name, "format": f"{net.version[0]}.{net.version[1]}",
                     "tensor_bits": sub.tensor_bits, "quantization_style": sub.quantization_style,
                     "calibration_options": net.calibration_options, "inference_mode": net.inference_mode,
                     "num_cores": net.num_cores, "layers": _layer_rows(sub)})
    if args.json:
        sys.stdout.write(json.dumps(docs if os.path.isdir(path) else docs[0], indent=1, ensure_ascii=False) + "\n")
        return 0
    console = make_console()
    for doc, (_, net) in zip(docs, entries):
        macs = sum(r["macs"] for r in doc["layers"])
        title = (f"{doc['file']}: @{doc['subgraph']}, format {doc['format']}, {doc['tensor_bits']} bit, "
                 f"quantization style {doc['quantization_style']}, inference mode {doc['inference_mode']} on "
                 f"{doc['num_cores']} core(s), {macs:,} MACs")
        console.print(_subgraph_table(title, doc["layers"], shows_zero_points(net.subgraph)))
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    from .backends.tidl.options import FLOWS
    from .cli import add_model_arguments, subcommand

    p = subcommand(
        subparsers, "compile", "quantize a model and write its TIDL artifacts as a folder",
        "Partition, calibrate and quantize a model for TIDL and write the compiled folder: per TIDL subgraph "
        "tidl_subgraph<N>_net.bin (the network record), tidl_subgraph<N>_io_1.bin (the I/O descriptor) and "
        "tidl_subgraph<N>.json (the same, readable); the host part as Relay text (host_module.txt) and, with "
        "--target, built by apache-tvm (deploy_lib.so / deploy_lib.c, deploy_graph.json, deploy_params.params, "
        "driver/); tidlx_artifacts.json (the manifest). The same model and options give the same bytes.",
        ["tidlx compile model.onnx -o out/model_tidl",
         "tidlx compile model.onnx -o out/model_tidl -o tensor_bits=16 --calib frames.npz",
         "tidlx compile model.onnx --batch 6 -o out/b6 -o max_batch_size=6 -o advanced_options:inference_mode=1 "
         "-o advanced_options:num_cores=2",
         "tidlx compile model.onnx -o out/model_arm --target arm     (host part for the A72 cores, aarch64)",
         "tidlx compile model.onnx -o out/model_c7x --target c7x     (host part as C source for the C7x)",
         "tidlx inspect out/model_tidl"])
    add_model_arguments(p)
    p.add_argument("-o", "--option", action="append", default=[], metavar="DIR|KEY=VALUE",
                   help="the output folder (a value without '='), or a TIDL option by TI's name (tensor_bits=16, "
                        "accuracy_level=0, debug_level=3, advanced_options:inference_mode=1, "
                        "advanced_options:num_cores=2, max_batch_size=6, ...); repeatable")
    p.add_argument("--out", metavar="DIR", help="the output folder (instead of -o DIR)")
    p.add_argument("--flow", choices=FLOWS, default=None,
                   help="which of TI's flows to follow: tvm (the default) or ort (TI's ONNX Runtime import: its "
                        "grouping, and also allowedNode.txt, onnxrtMetaData.txt and subgraph_<N>_tidl_net.bin / "
                        "_tidl_io_1.bin, copies of tidlx's files under TI's names)")
    p.add_argument("--calib", metavar="FILE",
                   help="calibration frames: an .npz of arrays by input name (frames on the batch axis) or a "
                        "folder of images (default: seeded random frames, with a warning)")
    p.add_argument("--force", action="store_true", help="replace an existing non-empty output folder")
    p.add_argument("--target", choices=["x86", "arm", "c7x"],
                   help="also build the host part with apache-tvm for this target and write it beside the TIDL "
                        "artifacts: deploy_lib.so (x86, arm: aarch64) or deploy_lib.c (c7x: C source), "
                        "deploy_graph.json, deploy_params.params and a plain C driver (default: the host part as "
                        "IR only)")
    p.set_defaults(func=cmd_compile)

    q = subcommand(
        subparsers, "inspect", "print the layer table of a compiled folder or one artifact file",
        "Read a compiled folder (every file checked) or one tidl_subgraph<N>_net.bin / _io_1.bin and print "
        "each subgraph's layers: type and activation, input and output shapes, element types, tensorScale, "
        "roundBits, MACs; for quantization_scale_type 4 (quantization style 6) also each output's zero point "
        "and the MMA multiplier >> shift (their span over the output channels). An allowedNode.txt (TI's or tidlx's), or a TI artifacts folder holding one: the ONNX "
        "nodes of each TIDL subgraph.",
        ["tidlx inspect out/model_tidl", "tidlx inspect out/model_tidl/tidl_subgraph0_net.bin",
         "tidlx inspect out/model_tidl --json", "tidlx inspect artifacts/allowedNode.txt"])
    q.add_argument("path", metavar="DIR|FILE", help="a compiled folder, one artifact file, or an allowedNode.txt")
    q.add_argument("--json", action="store_true", help="the table as JSON")
    q.set_defaults(func=cmd_inspect)
    return p
