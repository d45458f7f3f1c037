"""TIDL's ONNX Runtime artifact files: ``allowedNode.txt`` (the ONNX nodes of each TIDL subgraph)
and ``onnxrtMetaData.txt`` (each subgraph's inputs and outputs), written and read in TI's format.

allowedNode.txt, one decimal number a line::

    2          <- the number of subgraphs
    3          <- subgraph 0: its number of nodes, then its node indices
    0
    1
    2
    1          <- subgraph 1
    4

Node indices are positions in the ONNX graph's node list as TIDL saw it. onnxrtMetaData.txt is
``numGraphNodes=<n>``, then per subgraph ``k`` the lines ``k:subGraphName=``, ``k:numInputs=``,
``k:numOutputs=``, ``k:inputIdx=``, ``k:inDataNames=`` and ``k:outDataNames=`` (lists joined by
commas).

    allowed = read_allowed_nodes("artifacts/allowedNode.txt")   # AllowedNodesError names file:line
    allowed.groups                                              # ((0, 1, 2), (4,))
    diff = compare_allowed(report.ort, allowed)                  # node by node, where tidlx differs
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...ir.errors import TidlxError

ALLOWED_NODES_FILE = "allowedNode.txt"
ORT_METADATA_FILE = "onnxrtMetaData.txt"

#: Read at most this many bytes (an allowedNode.txt lists node indices, it is small).
MAX_ALLOWED_NODES_BYTES = 64 << 20


class AllowedNodesError(TidlxError):
    """A malformed allowedNode.txt; the message names the file and the line."""


def format_allowed_nodes(groups: Sequence[Sequence[int]]) -> str:
    """allowedNode.txt for ``groups`` (node indices per subgraph, in the order given)."""
    lines = [str(len(groups))]
    for group in groups:
        lines.append(str(len(group)))
        lines.extend(str(int(i)) for i in group)
    return "\n".join(lines) + "\n"


def format_ort_metadata(num_nodes: int, names: Sequence[str], inputs: Sequence[Sequence[str]],
                        outputs: Sequence[Sequence[str]]) -> str:
    """onnxrtMetaData.txt: the node count, then per subgraph its name, input and output counts,
    input indices (its inputs in order: 0, 1, ...) and tensor names."""
    lines = [f"numGraphNodes={num_nodes}"]
    for k, (name, ins, outs) in enumerate(zip(names, inputs, outputs)):
        lines += [f"{k}:subGraphName={name}", f"{k}:numInputs={len(ins)}", f"{k}:numOutputs={len(outs)}",
                  f"{k}:inputIdx={','.join(str(i) for i in range(len(ins)))}",
                  f"{k}:inDataNames={','.join(ins)}", f"{k}:outDataNames={','.join(outs)}"]
    return "\n".join(lines) + "\n"


def node_ranges(nodes: Sequence[int]) -> str:
    """``0-3, 5, 9-10``: node indices in their order, runs of consecutive ones as ranges."""
    parts: List[str] = []
    k = 0
    while k < len(nodes):
        j = k
        while j + 1 < len(nodes) and nodes[j + 1] == nodes[j] + 1:
            j += 1
        parts.append(str(nodes[k]) if j == k else f"{nodes[k]}-{nodes[j]}")
        k = j + 1
    return ", ".join(parts) if parts else "none"


@dataclass(frozen=True)
class AllowedNodes:
    """An allowedNode.txt: node indices per subgraph, in the file's order."""

    path: str
    groups: Tuple[Tuple[int, ...], ...]

    @property
    def num_nodes(self) -> int:
        return sum(len(g) for g in self.groups)

    def subgraph_of(self) -> Dict[int, int]:
        return {n: k for k, g in enumerate(self.groups) for n in g}

    def to_dict(self) -> Dict[str, Any]:
        return {"file": self.path, "num_subgraphs": len(self.groups), "offloaded_nodes": self.num_nodes,
                "subgraphs": [list(g) for g in self.groups]}

    def lines(self) -> List[str]:
        out = [f"{self.path}: {len(self.groups)} subgraph(s), {self.num_nodes} node(s) offloaded"]
        for k, g in enumerate(self.groups):
            out.append(f"  subgraph {k}: {len(g)} node(s): {node_ranges(g)}")
        return out


def _number(path: str, line_no: int, text: str, what: str) -> int:
    stripped = text.strip()
    if not stripped:
        raise AllowedNodesError(f"{path}:{line_no}: empty line where {what} belongs")
    if not stripped.isascii() or not stripped.isdigit():
        shown = stripped if len(stripped) <= 40 else stripped[:37] + "..."
        raise AllowedNodesError(f"{path}:{line_no}: {shown!r} is not {what} (allowedNode.txt holds one "
                                f"non-negative integer a line)")
    return int(stripped)


def parse_allowed_nodes(text: str, path: str = ALLOWED_NODES_FILE) -> AllowedNodes:
    """An allowedNode.txt from its text; AllowedNodesError names ``path`` and the line of a fault."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    while lines and not lines[-1].strip():   # blank lines at the end
        lines.pop()
    if not lines:
        raise AllowedNodesError(f"{path}:1: the file is empty (allowedNode.txt starts with the number of subgraphs)")
    count = _number(path, 1, lines[0], "the number of subgraphs")
    groups: List[Tuple[int, ...]] = []
    seen: Dict[int, int] = {}
    pos = 1
    for k in range(count):
        if pos >= len(lines):
            raise AllowedNodesError(f"{path}:{pos + 1}: the file ends after {k} of the {count} subgraphs line 1 "
                                    f"announces")
        size_line = pos + 1
        size = _number(path, size_line, lines[pos], f"the node count of subgraph {k}")
        if size == 0:
            raise AllowedNodesError(f"{path}:{size_line}: subgraph {k} has no nodes")
        pos += 1
        group = []
        for j in range(size):
            if pos >= len(lines):
                raise AllowedNodesError(f"{path}:{pos + 1}: the file ends inside subgraph {k}: {size} node(s) "
                                        f"announced at line {size_line}, {j} given")
            node = _number(path, pos + 1, lines[pos], f"a node index of subgraph {k}")
            if node in seen:
                raise AllowedNodesError(f"{path}:{pos + 1}: node {node} is listed twice (first at line {seen[node]})")
            seen[node] = pos + 1
            group.append(node)
            pos += 1
        groups.append(tuple(group))
    if pos < len(lines):
        raise AllowedNodesError(f"{path}:{pos + 1}: more lines than the {count} subgraph(s) line 1 announces")
    return AllowedNodes(path, tuple(groups))


def read_allowed_nodes(path) -> AllowedNodes:
    """Reads an allowedNode.txt (TI's or tidlx's); AllowedNodesError names the file and the line."""
    path = os.fspath(path)
    try:
        size = os.path.getsize(path)
        if size > MAX_ALLOWED_NODES_BYTES:
            raise AllowedNodesError(f"{path}:1: {size} bytes, larger than an allowedNode.txt can be")
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise AllowedNodesError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise AllowedNodesError(f"{path}:{line}: not text (byte 0x{data[exc.start]:02x}); allowedNode.txt holds "
                                f"one non-negative integer a line") from None
    return parse_allowed_nodes(text.replace("\r\n", "\n"), path)


def looks_like_allowed_nodes(path) -> bool:
    """Whether the file at ``path`` is an allowedNode.txt to read: named so, or its first line is a
    number (a tidlx network record or I/O descriptor starts with its magic, Relay text with words)."""
    path = os.fspath(path)
    if "allowednode" in os.path.basename(path).lower():
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return False
    first = head.split(b"\n", 1)[0].strip()
    return bool(first) and first.isdigit() and (b"\n" in head or len(head) < 64)


# -- the files of a compile in the ORT flow -------------------------------------------------------

def ort_artifact_files(ort, subgraphs) -> Dict[str, bytes]:
    """TI's ONNX Runtime files for an ``OrtPartition``: allowedNode.txt, onnxrtMetaData.txt and, per
    subgraph k, ``subgraph_<k>_tidl_net.bin`` / ``subgraph_<k>_tidl_io_1.bin``: the bytes given in
    ``subgraphs`` (function name -> (net file, I/O file)) for the subgraph's function."""
    if set(subgraphs) != set(ort.functions):
        raise TidlxError(f"the compiled subgraphs {sorted(subgraphs)} are not the ONNX Runtime flow's "
                         f"{sorted(ort.functions)}")
    files = {ALLOWED_NODES_FILE: ort.allowed_nodes_text().encode("ascii"),
             ORT_METADATA_FILE: ort.metadata_text().encode("utf-8")}
    for k, fn in enumerate(ort.functions):
        net, io = subgraphs[fn]
        files[f"subgraph_{k}_tidl_net.bin"] = net
        files[f"subgraph_{k}_tidl_io_1.bin"] = io
    return files


def write_files(folder, files) -> None:
    """Writes each file into ``folder``, each one whole or not at all (a temporary file, renamed)."""
    from .artifacts import write_file_atomically

    folder = os.fspath(folder)
    for name, data in sorted(files.items()):
        path = os.path.join(folder, name)
        try:
            write_file_atomically(path, data)
        except OSError as exc:
            raise TidlxError(f"{path}: cannot be written ({exc.strerror or exc})") from None


# -- comparing with a real compile ----------------------------------------------------------------

@dataclass(frozen=True)
class NodeDifference:
    """One node where tidlx's ORT grouping differs from an allowedNode.txt: ``ti`` and ``tidlx``
    are subgraph numbers (None: on the host); ``kind`` is ``offload`` (one offloads it, the other
    does not) or ``grouping`` (both offload it, grouped with different nodes)."""

    index: int
    name: str
    op_type: str
    kind: str
    ti: Optional[int]
    tidlx: Optional[int]
    reason: Optional[str]
    ti_first: Optional[int] = None       # the first node of its subgraph, each side
    tidlx_first: Optional[int] = None

    def text(self) -> str:
        def side(k, first):
            if k is None:
                return "host"
            return f"subgraph {k}" + (f" (from node {first})" if self.kind == "grouping" else "")

        why = f" ({self.reason})" if self.reason else ""
        return (f"node {self.index} '{self.name}' ({self.op_type}): TI {side(self.ti, self.ti_first)}, tidlx "
                f"{side(self.tidlx, self.tidlx_first)}{why}")

    def to_dict(self) -> Dict[str, Any]:
        return {"index": self.index, "name": self.name, "op_type": self.op_type, "kind": self.kind, "ti": self.ti,
                "tidlx": self.tidlx, "reason": self.reason}


@dataclass(frozen=True)
class AllowedComparison:
    """tidlx's ORT grouping of a model against an allowedNode.txt of a real TI compile of it."""

    allowed: AllowedNodes
    total_nodes: int
    tidlx_groups: Tuple[Tuple[int, ...], ...]
    differences: Tuple[NodeDifference, ...]
    constant_nodes: int = 0      # Constant nodes of the model (ONNX Runtime makes them initializers)

    @property
    def same(self) -> bool:
        return not self.differences

    def lines(self) -> List[str]:
        agree = self.total_nodes - len(self.differences)
        out = [f"{self.allowed.path}: TI {len(self.allowed.groups)} subgraph(s), {self.allowed.num_nodes} node(s) "
               f"offloaded; tidlx {len(self.tidlx_groups)} subgraph(s), {sum(len(g) for g in self.tidlx_groups)} "
               f"node(s) offloaded; {agree} of {self.total_nodes} node(s) agree"]
        offload = [d for d in self.differences if d.kind == "offload"]
        grouping = [d for d in self.differences if d.kind == "grouping"]
        if offload:
            out.append(f"  {len(offload)} node(s) where one offloads and the other does not:")
            out.extend(f"    {d.text()}" for d in offload)
        if grouping:
            out.append(f"  {len(grouping)} node(s) offloaded by both, grouped with different nodes:")
            out.extend(f"    {d.text()}" for d in grouping)
        if not self.differences:
            out.append("  the same subgraphs, node for node")
        elif self.constant_nodes:
            out.append(f"  note: the model has {self.constant_nodes} Constant node(s); ONNX Runtime turns them into "
                       f"initializers before TIDL numbers the nodes, so a real compile's indices skip them: compare "
                       f"the model simplified (onnxsim) or as ONNX Runtime saved it (optimized_model_filepath)")
        return out

    def to_dict(self) -> Dict[str, Any]:
        return {"file": self.allowed.path, "same": self.same, "total_nodes": self.total_nodes,
                "constant_nodes": self.constant_nodes,
                "ti_subgraphs": [list(g) for g in self.allowed.groups],
                "tidlx_subgraphs": [list(g) for g in self.tidlx_groups],
                "differences": [d.to_dict() for d in self.differences]}


def compare_allowed(ort, allowed: AllowedNodes) -> AllowedComparison:
    """Node by node, where TI's grouping as tidlx predicts it (``ort``: an ``OrtPartition``) differs
    from ``allowed``. A node both sides offload differs in grouping when its subgraph starts with
    a different node on each side (the first node listed)."""
    total = ort.total_nodes
    for k, group in enumerate(allowed.groups):
        for node in group:
            if node >= total:
                raise AllowedNodesError(f"{allowed.path}: subgraph {k} lists node {node}, and the model has "
                                        f"{total} node(s) (indices 0 to {total - 1}): the file is of another model, "
                                        f"or of the graph after ONNX Runtime's optimizations")
    ti_of = allowed.subgraph_of()
    ours_of = {n: k for k, g in enumerate(ort.ti_groups) for n in g}
    ti_first = {n: allowed.groups[k][0] for n, k in ti_of.items()}
    ours_first = {n: ort.ti_groups[k][0] for n, k in ours_of.items()}
    out = []
    for node in ort.nodes:
        i = node.index
        ti, ours = ti_of.get(i), ours_of.get(i)
        verdict = ort.ti_verdicts[i]
        reason = verdict.reason if ours is None else None
        if (ti is None) != (ours is None):
            out.append(NodeDifference(i, node.name, node.op_type, "offload", ti, ours, reason))
        elif ti is not None and ti_first[i] != ours_first[i]:
            out.append(NodeDifference(i, node.name, node.op_type, "grouping", ti, ours, None, ti_first[i],
                                      ours_first[i]))
    constants = sum(1 for n in ort.nodes if n.op_type == "Constant")
    return AllowedComparison(allowed, total, tuple(ort.ti_groups), tuple(out), constants)


__all__ = ["ALLOWED_NODES_FILE", "ORT_METADATA_FILE", "AllowedNodes", "AllowedNodesError", "AllowedComparison",
           "NodeDifference", "format_allowed_nodes", "format_ort_metadata", "parse_allowed_nodes",
           "read_allowed_nodes", "compare_allowed", "node_ranges", "looks_like_allowed_nodes", "ort_artifact_files",
           "write_files"]
