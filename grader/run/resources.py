"""What the compiler knows about each kernel of an exercise, for the grade's resource report:
registers per thread, spills, static and dynamic shared memory, and the theoretical occupancy at
the block size its launcher uses.

- The numbers are ptxas's own (`--resource-usage`, i.e. `-Xptxas -v`), kept per object by
  grader.toolchain.build in `<build folder>/logs/<object>.log`, for every architecture the build targets.
- The block size and dynamic shared memory of each kernel come from its launches in the exercise's
  own `.cu` files (`kernel<...><<<grid, block, smem, stream>>>` or `course::launch_after_previous(
  kernel<...>, grid, block, smem, stream, ...)`), evaluated from the constants they name (`constexpr`,
  `const` locals, `dim3`, the kernel's template arguments). A launch this module cannot evaluate is
  reported as such, never guessed.
- Occupancy follows the CUDA occupancy calculator (`cuda_occupancy.h`,
  cudaOccMaxActiveBlocksPerMultiprocessor) with each architecture's limits (ARCHS), so it works
  without a GPU; on a GPU, tests/test_resources.py compares it with the driver's answer.

    python -m grader.run.resources solutions/05_matmul     the report of a built folder
"""
from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from grader import env
from grader.toolchain import build
from grader.run.report import kib, pct
from grader.verify.sass import arch_capability, demangle, split_name, _split_top  # the compiler's names: sass's

# ------------------------------------------------------------------------------------ occupancy


@dataclass(frozen=True)
class Arch:
    """Per-SM limits of one compute capability (CUDA C++ Programming Guide, "Technical
    Specifications per Compute Capability"; granularities and block limits as cuda_occupancy.h)."""

    cc: tuple[int, int]
    max_threads_per_sm: int
    max_blocks_per_sm: int
    smem_per_sm: int  # bytes, the largest shared-memory carveout
    smem_per_block_optin: int  # bytes, with cudaFuncAttributeMaxDynamicSharedMemorySize
    reserved_smem_per_block: int  # bytes the driver keeps per block (from 8.0 on)
    smem_granularity: int  # bytes
    barriers_per_block_slot: int = 2  # named-barrier slots per resident block (Hopper on)
    regs_per_sm: int = 65536
    regs_per_block: int = 65536
    reg_granularity: int = 256  # registers, per warp
    sub_partitions: int = 4
    max_threads_per_block: int = 1024
    smem_per_block: int = 48 * 1024  # bytes, without opting in
    warp_size: int = 32

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    @property
    def name(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"


KIB = 1024
ARCHS = {a.cc: a for a in (
    Arch((7, 5), 1024, 16, 64 * KIB, 64 * KIB, 0, 256),  # T4, RTX 20xx
    Arch((8, 0), 2048, 32, 164 * KIB, 163 * KIB, KIB, 128),  # A100
    Arch((8, 6), 1536, 16, 100 * KIB, 99 * KIB, KIB, 128, 1),  # RTX 30xx, A10
    Arch((8, 9), 1536, 24, 100 * KIB, 99 * KIB, KIB, 128, 1),  # L4, RTX 40xx
    Arch((9, 0), 2048, 32, 228 * KIB, 227 * KIB, KIB, 128),  # H100, H200
    Arch((10, 0), 2048, 32, 228 * KIB, 227 * KIB, KIB, 128),  # B200
    Arch((12, 0), 1536, 24, 100 * KIB, 99 * KIB, KIB, 128, 1),  # RTX 50xx
)}

# the carveouts (KiB) a Volta-or-newer SM can give shared memory; the driver picks the smallest that fits
_CARVEOUTS = {7: (32, 64), 8: (0, 8, 16, 32, 64, 100, 132, 164), 9: (0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
              10: (0, 8, 16, 32, 64, 100, 132, 164, 196, 228), 12: (0, 8, 16, 32, 64, 100)}


def arch_of(name: str) -> Arch | None:
    """`sm_90`, `sm_90a`, `sm_100f` or `9.0` -> its limits; None for an architecture not listed."""
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+?)(\d)[a-z]?", name.replace(".", ""))
    return ARCHS.get((int(m.group(1)), int(m.group(2)))) if m else None


def _round_up(x: int, step: int) -> int:
    return -(-x // step) * step


def _blocks_by_registers(arch: Arch, registers: int, warps_per_block: int) -> int:
    if registers <= 0:
        return 1 << 30
    per_warp = _round_up(registers * arch.warp_size, arch.reg_granularity)
    # the hardware checks a block's registers as if its warps filled every sub-partition evenly
    if (per_warp * _round_up(warps_per_block, arch.sub_partitions) > arch.regs_per_block
            or per_warp * warps_per_block > arch.regs_per_block or registers > 255):
        return 0
    warps_per_sm = (arch.regs_per_sm // arch.sub_partitions // per_warp) * arch.sub_partitions
    return warps_per_sm // warps_per_block


def occupancy(arch: Arch, registers: int, static_smem: int, block: int, dynamic_smem: int = 0,
              barriers: int = 0, opt_in: bool = False) -> dict:
    """Theoretical occupancy of a kernel launched with `block` threads: blocks and warps resident
    per SM, their fraction of the SM's warps, and what limits it ("registers", "shared memory",
    "block size": the warps or blocks an SM holds, "barriers"). As cudaOccMaxActiveBlocksPerMultiprocessor
    with the default carveout preference. `opt_in`: the launcher raised the kernel's dynamic
    shared-memory limit (cudaFuncAttributeMaxDynamicSharedMemorySize)."""
    warps_per_block = -(-block // arch.warp_size)
    limits: dict[str, int] = {}
    limits["block size"] = (min(arch.max_warps_per_sm // warps_per_block, arch.max_blocks_per_sm)
                            if 0 < block <= arch.max_threads_per_block else 0)
    limits["registers"] = _blocks_by_registers(arch, registers, warps_per_block)
    smem = _round_up(static_smem + arch.reserved_smem_per_block + dynamic_smem, arch.smem_granularity)
    per_block_limit = (arch.smem_per_block_optin if opt_in else arch.smem_per_block) + arch.reserved_smem_per_block
    if smem > per_block_limit:
        limits["shared memory"] = 0
    elif static_smem + dynamic_smem == 0 and arch.reserved_smem_per_block == 0:
        limits["shared memory"] = 1 << 30
    else:
        limits["shared memory"] = arch.smem_per_sm // smem
    if arch.cc[0] >= 9 and barriers > 0:
        limits["barriers"] = arch.max_blocks_per_sm * arch.barriers_per_block_slot // barriers
    blocks = max(0, min(limits.values()))
    warps = blocks * warps_per_block
    limited_by = [k for k, v in limits.items() if v == blocks]
    return {"arch": arch.name, "block": block, "dynamic_smem": dynamic_smem, "blocks_per_sm": blocks,
            "warps_per_sm": warps, "max_warps_per_sm": arch.max_warps_per_sm,
            "occupancy": warps / arch.max_warps_per_sm, "smem_per_block": smem,
            "limits": {k: min(v, 1 << 30) for k, v in limits.items()}, "limited_by": limited_by}


def registers_for(arch: Arch, blocks: int, block: int) -> int:
    """The most registers per thread that still let `blocks` blocks of `block` threads fit an SM (0: none)."""
    warps = -(-block // arch.warp_size)
    for r in range(255, 0, -1):
        if _blocks_by_registers(arch, r, warps) >= blocks:
            return r
    return 0


# ---------------------------------------------------------------------------- ptxas's own report

_ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '(\w+)' for '(sm_\w+)'")
_PROPS_FOR = re.compile(r"ptxas info\s*: Function properties for (\w+)")
_USED = re.compile(r"ptxas info\s*: Used (\d+) registers")


def parse_ptxas(text: str) -> list[dict]:
    """Every entry function of ptxas's `-v` output: mangled name, arch, registers, barriers,
    static shared memory, stack frame, spill stores and loads (bytes)."""
    out: list[dict] = []
    current: dict | None = None
    props_for = None
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            current = {"mangled": m.group(1), "arch": m.group(2), "registers": 0, "barriers": 0, "static_smem": 0,
                       "stack": 0, "spill_stores": 0, "spill_loads": 0}
            out.append(current)
            props_for = None
        elif m := _PROPS_FOR.search(line):
            props_for = m.group(1)
        elif current is not None and "bytes stack frame" in line and props_for == current["mangled"]:
            for key, pattern in (("stack", r"(\d+) bytes stack frame"), ("spill_stores", r"(\d+) bytes spill stores"),
                                 ("spill_loads", r"(\d+) bytes spill loads")):
                if m := re.search(pattern, line):
                    current[key] = int(m.group(1))
        elif current is not None and (m := _USED.search(line)):
            current["registers"] = int(m.group(1))
            if b := re.search(r"used (\d+) barriers", line):
                current["barriers"] = int(b.group(1))
            if s := re.search(r"(\d+) bytes smem", line):
                current["static_smem"] = int(s.group(1))
            current = None  # "Used" closes the entry's report
    return out


def short_name(base: str, args: list[str]) -> str:
    """`matmul_kernel3<true, false>`, `leaky_relu_kernel<Half>` (namespaces dropped)."""
    if not args:
        return base
    return f"{base}<{', '.join(a.split('::')[-1] for a in args)}>"


# --------------------------------------------------------------------- launches in the sources


def strip_comments(text: str) -> str:
    """The source without comments and string literals, offsets and line numbers kept."""
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', blank, text, flags=re.S)


@dataclass
class KernelDef:
    name: str
    template_params: list[str]  # names, in order
    file: str
    line: int


@dataclass
class Launch:
    kernel: str
    template_args: list[str] | None  # as written; None when deduced
    block: str
    smem: str
    file: str
    line: int
    offset: int


@dataclass
class Definition:
    name: str
    expr: str
    file: str
    offset: int


_KERNEL_DEF = re.compile(
    r"(?:template\s*<(?P<tparams>[^{};]*?)>\s*)?__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
    r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(?P<name>\w+)\s*\(")
_CONST_DECL = re.compile(
    r"\b(?:static\s+)?(?:constexpr|const)\s+(?:unsigned\s+int|unsigned|int|int64_t|int32_t|uint32_t|size_t|"
    r"std::size_t|long|auto)\s+(?P<decls>\w+\s*=[^;{}]*);")
_DIM3_DECL = re.compile(r"\bdim3\s+(?P<name>\w+)\s*[({](?P<args>[^;]*)[)}]\s*;")
_COURSE_INCLUDE = re.compile(r'#\s*include\s*[<"](?P<path>course/[\w./]+)[>"]')


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _match_forward(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """The offset of the `close_ch` matching the `open_ch` at text[start]; -1 if none."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i
    return -1


def _match_back(text: str, end: int, open_ch: str, close_ch: str) -> int:
    """The offset of the `open_ch` matching the `close_ch` at text[end]; -1 if none."""
    depth = 0
    for i in range(end, -1, -1):
        if text[i] == close_ch:
            depth += 1
        elif text[i] == open_ch:
            depth -= 1
            if depth == 0:
                return i
    return -1


def _constants(text: str, file: str) -> list[Definition]:
    """The integer constants (`constexpr`, `const`) a source defines, where it defines them."""
    defs = []
    for m in _CONST_DECL.finditer(text):
        for decl in _split_top(m.group("decls")):
            name, _, expr = decl.partition("=")
            if expr:
                defs.append(Definition(name.strip(), expr.strip(), file, m.start()))
    return defs


def scan_sources(exercise_dir: Path) -> tuple[list[KernelDef], list[Launch], list[Definition], str]:
    """The exercise's kernels, their launches and the constants those may name; and the text of
    every source (to look for a raised shared-memory limit)."""
    kernels, launches, defs, texts = [], [], [], []
    files = sorted(p for p in exercise_dir.iterdir() if p.suffix in (".cu", ".cuh", ".h", ".hpp") and p.is_file())
    for path in files:
        text = strip_comments(path.read_text(errors="replace"))
        texts.append(text)
        for m in _KERNEL_DEF.finditer(text):
            params = []
            for p in _split_top(m.group("tparams") or ""):
                p = p.split("=")[0].strip()
                if p:
                    params.append(p.split()[-1])
            kernels.append(KernelDef(m.group("name"), params, path.name, _line_of(text, m.start("name"))))
        defs += _constants(text, path.name)
        for m in _DIM3_DECL.finditer(text):
            defs.append(Definition(m.group("name"), f"dim3({m.group('args')})", path.name, m.start()))
        for m in re.finditer(r"<<<", text):
            end = text.find(">>>", m.end())
            if end < 0:
                continue
            config = _split_top(text[m.end():end].replace("\n", " "))
            i = m.start() - 1
            while i >= 0 and text[i].isspace():
                i -= 1
            targs = None
            if i >= 0 and text[i] == ">":
                start = _match_back(text, i, "<", ">")
                targs = _split_top(" ".join(text[start + 1:i].split()))
                i = start - 1
            j = i
            while j >= 0 and (text[j].isalnum() or text[j] in "_:"):
                j -= 1
            callee = text[j + 1:i + 1].split("::")[-1]
            if not callee or len(config) < 2:
                continue
            launches.append(Launch(callee, targs, config[1], config[2] if len(config) > 2 else "0", path.name,
                                   _line_of(text, m.start()), m.start()))
        # course::launch_after_previous(kernel<...>, grid, block, dynamic smem, stream, args...)
        for m in re.finditer(r"\blaunch_after_previous\s*\(", text):
            close = _match_forward(text, m.end() - 1, "(", ")")
            args = _split_top(text[m.end():close].replace("\n", " ")) if close > 0 else []
            if len(args) < 5:
                continue
            name, lt = args[0], args[0].find("<")
            targs = _split_top(name[lt + 1:name.rfind(">")]) if lt >= 0 else None
            callee = (name[:lt] if lt >= 0 else name).strip().split("::")[-1]
            launches.append(Launch(callee, targs, args[2], args[3], path.name, _line_of(text, m.start()), m.start()))
    # a launch may name a constant of a course header the exercise includes (e.g. course/tf32_conv.cuh's
    # kTcThreads): its constants count too, after the exercise's own of that name
    for header in sorted({m.group("path") for text in texts for m in _COURSE_INCLUDE.finditer(text)}):
        if (env.INCLUDE_DIR / header).is_file():
            defs += _constants(strip_comments((env.INCLUDE_DIR / header).read_text(errors="replace")), header)
    return kernels, launches, defs, "\n".join(texts)


_SIZEOF = {"float": 4, "double": 8, "int": 4, "unsigned": 4, "int64_t": 8, "int32_t": 4, "uint32_t": 4,
           "char": 1, "Half": 2, "BFloat16": 2, "half": 2, "__half": 2, "__nv_bfloat16": 2, "float4": 16,
           "float2": 8, "size_t": 8, "long": 8, "short": 2, "bool": 1}


class _Unknown(Exception):
    pass


def evaluate(expr: str, lookup, depth: int = 0) -> int:
    """An integer C++ constant expression: literals, + - * / % << >>, parentheses, casts,
    `dim3(x, y, z)` (its thread count), std::min/max, course::ceil_div, sizeof of a known type;
    names through `lookup(name) -> int`. Raises _Unknown for anything else."""
    if depth > 20:
        raise _Unknown(expr)
    s = " ".join(expr.split())
    s = re.sub(r"\b(?:static_cast|reinterpret_cast)\s*<[^<>]*>\s*", "", s)
    s = re.sub(r"\b(?:std::)?(min|max)\s*<[^<>]*>\s*\(", r"\1(", s)
    s = re.sub(r"\bstd::(min|max)\s*\(", r"\1(", s)
    s = re.sub(r"\b(?:course::)?ceil_div\s*(?:<[^<>]*>)?\s*\(", "_ceil_div(", s)
    s = re.sub(r"\bsizeof\s*\(\s*(?:const\s+)?([\w:]+)\s*\)", lambda m: f"_sizeof('{m.group(1)}')", s)
    s = re.sub(r"\b(?:int64_t|int32_t|uint32_t|unsigned|int|size_t|long)\s*\(", "(", s)
    s = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", s)
    s = re.sub(r"\btrue\b", "1", re.sub(r"\bfalse\b", "0", s))
    s = s.replace("/", "//").replace("dim3(", "_dim3(")
    if "?" in s or "::" in s:
        raise _Unknown(expr)
    try:
        tree = ast.parse(s, mode="eval")
    except SyntaxError:
        raise _Unknown(expr) from None

    ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.FloorDiv: lambda a, b: int(a / b), ast.Mod: lambda a, b: a % b, ast.LShift: lambda a, b: a << b,
           ast.RShift: lambda a, b: a >> b}
    calls = {"_dim3": lambda *a: a[0] * (a[1] if len(a) > 1 else 1) * (a[2] if len(a) > 2 else 1),
             "min": min, "max": max, "_ceil_div": lambda a, b: -(-a // b)}

    def ev(node) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ops[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -ev(node.operand) if isinstance(node.op, ast.USub) else ev(node.operand)
        if isinstance(node, ast.Name):
            return lookup(node.id, depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            if node.func.id == "_sizeof" and isinstance(node.args[0], ast.Constant):
                t = str(node.args[0].value)
                size = _SIZEOF.get(t.split("::")[-1])
                if size is None:
                    size = _SIZEOF.get(str(lookup_type(t)).split("::")[-1]) if lookup_type else None
                if size is None:
                    raise _Unknown(t)
                return size
            if node.func.id in calls:
                return calls[node.func.id](*(ev(a) for a in node.args))
        raise _Unknown(ast.dump(node))

    lookup_type = getattr(lookup, "type_of", None)
    return ev(tree)


class _Scope:
    """Names a launch may use: the kernel's template arguments bound at the launch, then the
    nearest definition before the launch in its file, then any other definition of the name."""

    def __init__(self, defs: list[Definition], launch: Launch, bound: dict[str, str]):
        self.defs, self.launch, self.bound = defs, launch, bound

    def __call__(self, name: str, depth: int = 0) -> int:
        if name in self.bound:
            value = _literal(self.bound[name])
            if value is None:
                raise _Unknown(name)
            return value
        same = [d for d in self.defs if d.name == name and d.file == self.launch.file]
        before = [d for d in same if d.offset < self.launch.offset]
        chosen = (max(before, key=lambda d: d.offset) if before else
                  (same or [d for d in self.defs if d.name == name] or [None])[0])
        if chosen is None:
            raise _Unknown(name)
        # a definition's own names resolve from where it stands, the launcher's template arguments
        # still bound (a local such as `const dim3 block(BM / 2, 2)` uses them)
        inner = _Scope(self.defs, Launch(self.launch.kernel, None, "", "", chosen.file, 0, chosen.offset), self.bound)
        return evaluate(chosen.expr, inner, depth)

    def type_of(self, name: str) -> str:
        return self.bound.get(name, name)


def _literal(text: str) -> int | None:
    t = text.strip()
    if t in ("true", "false"):
        return int(t == "true")
    m = re.fullmatch(r"(?:\(\w+\))?\s*(-?\d+)[uUlL]*", t)
    return int(m.group(1)) if m else None


def launch_configs(kernel: KernelDef | None, args: list[str], launches: list[Launch],
                   defs: list[Definition]) -> list[dict]:
    """The (block, dynamic shared memory) of each launch of this instantiation (`args`: its template
    arguments), with where it is; `block` None when the launch could not be evaluated."""
    out = []
    for launch in launches:
        bound: dict[str, str] = {}
        if kernel is not None:
            bound.update(zip(kernel.template_params, args))  # names the kernel's own launch bounds use
        if launch.template_args is not None:
            if len(launch.template_args) > len(args):
                continue
            matches = True
            for written, actual in zip(launch.template_args, args):
                try:
                    value = evaluate(written, _Scope(defs, launch, {}))
                except _Unknown:
                    if re.fullmatch(r"\w+", written):
                        bound[written] = actual  # a template parameter of the launcher, e.g. BM
                    continue
                if _literal(actual) is not None and value != _literal(actual):
                    matches = False
                    break
            if not matches:
                continue
        scope = _Scope(defs, launch, bound)
        entry = {"where": f"{launch.file}:{launch.line}", "block_expr": launch.block, "smem_expr": launch.smem}
        try:
            entry["block"] = evaluate(launch.block, scope)
        except (_Unknown, ZeroDivisionError, TypeError):
            entry["block"] = None
        try:
            entry["dynamic_smem"] = evaluate(launch.smem, scope)
        except (_Unknown, ZeroDivisionError, TypeError):
            entry["dynamic_smem"] = None
        if entry not in out:
            out.append(entry)
    return out


# -------------------------------------------------------------------------------- the report


def _cuda_objects(out_dir: Path) -> dict[str, str]:
    """The objects build.ninja compiles, object -> source."""
    ninja = out_dir / "build.ninja"
    if not ninja.is_file():
        return {}
    found = {}
    for m in re.finditer(r"^build (\S+\.o): (\w+) (\S+)", ninja.read_text(), flags=re.M):
        found[m.group(1)] = m.group(3)
    return found


def step_logs(exercise_dir: Path) -> dict[str, str | None]:
    """Each object of the exercise's build -> its last compile's output, None when that is not
    known (an object built before the logs were kept, or rebuilt by something else since)."""
    out_dir = build.build_dir_for(exercise_dir)
    logs: dict[str, str | None] = {}
    for obj in _cuda_objects(out_dir):
        log, target = build.step_log_path(out_dir, obj), out_dir / obj
        fresh = log.is_file() and target.is_file() and log.stat().st_mtime >= target.stat().st_mtime
        logs[obj] = log.read_text(errors="replace") if fresh else None
    return logs


def compiler_warnings(exercise_dir: Path, logs: dict[str, str | None] | None = None) -> list[str]:
    """The compiler's warnings about the exercise's own files (not PyTorch's headers), each with
    the lines that show where; ptxas's warnings too."""
    exercise_dir = Path(exercise_dir).resolve()
    logs = step_logs(exercise_dir) if logs is None else logs
    own = re.compile(rf"^(?:{re.escape(str(exercise_dir))}/)?[\w.-]+\.(?:cu|cpp|h|cuh|hpp)[(:]\d+")
    out: list[str] = []
    for text in logs.values():
        lines = (text or "").splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if ("warning" in line and own.match(line)) or line.startswith("ptxas warning"):
                block = [line.replace(str(exercise_dir) + "/", "")]
                i += 1
                while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()) \
                        and not lines[i].lstrip().startswith("Remark"):
                    if lines[i].strip():
                        block.append(lines[i].rstrip())
                    i += 1
                if "\n".join(block) not in out:
                    out.append("\n".join(block))
                continue
            i += 1
    return out


def _names(group: list[dict]) -> str:
    """`k<float>, k<double>`, or `k (4 instantiations)` for more."""
    if len(group) <= 2:
        return ", ".join(k["name"] for k in group)
    return f"{group[0]['kernel']} ({len(group)} instantiations)"


def _span(values: list[int]) -> str:
    return str(min(values)) if min(values) == max(values) else f"{min(values)}-{max(values)}"


def kernel_notes(kernels: list[dict]) -> list[str]:
    """One line per thing worth knowing, for the instantiations of one kernel on one architecture:
    spills, and an occupancy below 100% with what limits it (instantiations that share the story
    share the line)."""
    notes = []
    spilling = [k for k in kernels if k["spill_stores"] or k["spill_loads"]]
    for k in spilling:
        notes.append(f"{k['name']}: spills {k['spill_stores']} bytes per thread to local memory and loads "
                     f"{k['spill_loads']} back: its live values did not fit in the {k['registers']} registers it got ("
                     + ("255 is the most a thread may have" if k["registers"] >= 255 else
                        "a register cap, such as __launch_bounds__'s minimum blocks per SM, forces it")
                     + "); local memory is as slow as global memory when L1 misses")
    unlaunched = [k for k in kernels if k.get("needs_capability")]
    if unlaunched:
        major, minor = unlaunched[0]["needs_capability"]
        notes.append(f"{_names(unlaunched)}: compiled for {unlaunched[0]['arch']} but never launched there: the "
                     f"versions that run it need compute capability {major}.{minor}")
    groups: dict[tuple, list[tuple[dict, dict]]] = {}
    for k in kernels:
        for occ in k.get("occupancy") or []:
            if occ["occupancy"] < 1:
                key = (occ["arch"], occ["block"], occ["blocks_per_sm"], tuple(occ["limited_by"]), occ["smem_per_block"])
                groups.setdefault(key, []).append((k, occ))
    for (arch_name, block, blocks, limited_by, smem), members in groups.items():
        group = [k for k, _ in members]
        occ = members[0][1]
        arch = arch_of(arch_name)
        if blocks == 0:
            notes.append(f"{_names(group)}: a block of {block} threads cannot run on {arch_name}: it needs more "
                         f"{' and '.join(limited_by)} than an SM has")
            continue
        why = []
        for limit in limited_by:
            if limit == "registers" and arch:
                fewer = registers_for(arch, blocks + 1, block)
                why.append(f"registers ({_span([k['registers'] for k in group])} per thread"
                           + (f"; {fewer} or fewer would fit {blocks + 1} blocks)" if fewer else ")"))
            elif limit == "shared memory" and arch:
                why.append(f"shared memory ({kib(smem)} per block, counting the driver's reserve, of "
                           f"{kib(arch.smem_per_sm)} per SM)")
            elif limit == "block size" and arch:
                why.append(f"the block size ({block} threads; an SM holds at most {arch.max_threads_per_sm} "
                           f"threads in {arch.max_blocks_per_sm} blocks)")
            else:
                why.append(f"{limit} ({_span([k['barriers'] for k in group])} per block)")
        notes.append(f"{_names(group)}: occupancy {pct(occ['occupancy'])} ({occ['warps_per_sm']} of "
                     f"{occ['max_warps_per_sm']} warps: {blocks} block{'s' if blocks != 1 else ''} of {block} threads "
                     f"per SM), limited by {' and '.join(why)}")
    return notes


def device_arch(built: list[str], device_cc: str | None) -> tuple[str | None, str]:
    """The built architecture whose code this GPU runs (same major, minor not above the GPU's),
    else the newest built one; and a word on the choice."""
    archs = sorted(set(built), key=arch_capability)
    if not archs:
        return None, ""
    if device_cc:
        major, minor = (int(x) for x in device_cc.split(".")[:2])
        runs = [a for a in archs if arch_capability(a)[0] == major and arch_capability(a)[1] <= minor]
        if runs:
            return runs[-1], f"the code this GPU (compute capability {device_cc}) runs"
        return archs[-1], (f"this GPU (compute capability {device_cc}) JIT-compiles PTX: no build matches it, "
                           f"the numbers are the newest build's")
    return archs[-1], "no GPU here: the newest architecture built"


def exercise_report(exercise_dir: str | Path, device_cc: str | None = None,
                    gated: dict[str, tuple[int, int]] | None = None) -> dict:
    """The resource report of an exercise folder's last build: per kernel and architecture,
    ptxas's numbers, the launches' block size and dynamic shared memory, the theoretical occupancy,
    and notes; the compiler's warnings about the exercise's files. `gated`: kernels that only run
    from a compute capability on (default: the exercise's spec says, grader.specs.capability_gated_kernels);
    on an older architecture they get no occupancy, only `needs_capability` and a note."""
    exercise_dir = Path(exercise_dir).resolve()
    if gated is None:
        from grader.specs import capability_gated_kernels  # noqa: PLC0415 (imports torch)

        gated = capability_gated_kernels(exercise_dir.name)
    logs = step_logs(exercise_dir)
    report: dict = {"kernels": [], "notes": [], "warnings": [], "archs": [], "arch": None, "arch_why": "",
                    "missing": [], "unknown_logs": []}
    if not logs:
        report["error"] = "no build of this folder was found"
        return report
    report["warnings"] = compiler_warnings(exercise_dir, logs)
    kernels, launches, defs, all_text = scan_sources(exercise_dir)
    by_name = {k.name: k for k in kernels}
    opt_in = "cudaFuncAttributeMaxDynamicSharedMemorySize" in all_text
    entries = []
    for obj, text in logs.items():
        if text is None:
            if obj.endswith(".cuda.o"):
                report["unknown_logs"].append(obj)
            continue
        entries += parse_ptxas(text)
    readable = demangle(sorted({e["mangled"] for e in entries}))
    for e in entries:
        base, args = split_name(readable[e["mangled"]])
        if base not in by_name:  # c++filt missing or odd: find the source kernel in the mangled name
            base = next((k.name for k in kernels if f"{len(k.name)}{k.name}" in e["mangled"]), base)
        where = by_name.get(base)
        k = {**e, "kernel": base, "template_args": args, "name": short_name(base, args),
             "defined": f"{where.file}:{where.line}" if where else ""}
        k["launches"] = launch_configs(by_name.get(base), args, [l for l in launches if l.kernel == base], defs)
        arch = arch_of(e["arch"])
        k["occupancy"] = []
        if arch_capability(e["arch"]) < gated.get(base, (0, 0)):
            k["needs_capability"] = gated[base]  # never launched on this architecture
        for launch in k["launches"] if "needs_capability" not in k else []:
            if arch and launch["block"] is not None and launch["dynamic_smem"] is not None:
                occ = occupancy(arch, e["registers"], e["static_smem"], launch["block"], launch["dynamic_smem"],
                                e["barriers"], opt_in)
                if occ not in k["occupancy"]:
                    k["occupancy"].append(occ)
        report["kernels"].append(k)
    report["archs"] = sorted({k["arch"] for k in report["kernels"]})
    report["arch"], report["arch_why"] = device_arch(report["archs"], device_cc)
    order = {k.name: i for i, k in enumerate(kernels)}
    report["kernels"].sort(key=lambda k: (order.get(k["kernel"], len(order)), k["kernel"], k["name"], k["arch"]))
    compiled = {k["kernel"] for k in report["kernels"]}
    report["missing"] = [k.name for k in kernels if k.name not in compiled]  # never instantiated
    for arch in report["archs"]:
        for base in dict.fromkeys(k["kernel"] for k in report["kernels"]):
            notes = kernel_notes([k for k in report["kernels"] if k["kernel"] == base and k["arch"] == arch])
            report.setdefault("notes_by_arch", {}).setdefault(arch, []).extend(notes)
    report["notes"] = report.get("notes_by_arch", {}).get(report["arch"], [])
    return report


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    from grader.run.report import resources_text  # noqa: PLC0415 (the command line's presentation)

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="+", type=Path, help="built exercise folders")
    parser.add_argument("--cc", help="report for this compute capability's build, e.g. 8.6")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    for d in args.dirs:
        report = exercise_report(d, args.cc)
        if args.json:
            print(json.dumps(report, indent=1))
        else:
            print(resources_text(d.resolve().name, report, verbose=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
