"""Is a mutant's machine code the solution's own? Then it is an equivalent program, whatever its source says.

`make mutants` (grader.run.mutants) lists a survivor as equivalent by hand, with a reason. Some survivors
are equivalent for a reason only the compiler knows: a division by a literal zero that nvcc folds, a
store past a register array it drops, a dead store. `same_code(mutant)` decides those objectively, on
the CPU (no GPU, no cuobjdump): the solution's changed file and the mutant's are compiled at the SAME
path with the SAME command the course's build runs for it (torch's build.ninja in the build folder of
grader.toolchain.build, so CUDA_FLAGS, the TORCH_CUDA_ARCH_LIST architectures, the include paths and
the precompiled header are the build's own), and their code compared:

  host code    `objdump -d -r` of the object's code sections (relocations symbolic, so no address or
               path of the build folder counts), the symbol table and the section sizes, and the
               contents and relocations of its data sections (a constant table is code too), but the
               device code's (.nv_fatbin and the module id: compared as PTX below);
  device code  for a .cu file, the PTX of every architecture the build compiles for (nvcc --keep).
               ptxas is deterministic, so the same PTX is the same SASS.

Two things that are no code are normalised before the comparison: names in an anonymous namespace
carry a hash of the translation unit and nvcc's process id (`_GLOBAL__N__<hash>_<len>_<file>_<hash>_<pid>`),
and the PTX's line info (-lineinfo) gives each position's column, which a change earlier in its line
moves (`if (false) ` before a statement); the line numbers, which a one-line mutant keeps, still count.

The check is one way (conservative): the same code on every listing shows the mutant equivalent (the
same instructions, so the same results at the same speed); a different listing shows nothing, since
two different programs may still be equivalent (a block of 255 threads instead of 256). A header
mutant (.h, .cuh) compiles every source of the exercise. A .py mutant is not decided: Python has no
machine code to compare (its bytecode would differ on a constant the program never reaches), so it
is left to a reason written by hand.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader import env

WORK = env.BUILD_ROOT / "same-code"  # WORK/<exercise>: where both are compiled (one fixed path)
# Device code lives in these sections of a .cu object: compared as PTX instead (the fatbin holds the
# SASS that ptxas makes from that PTX; the module id is a hash of the translation unit)
DEVICE_SECTIONS = (".nv_fatbin", ".nvFatBinSegment", "__nv_module_id", "__nv_relfatbin")


@dataclass
class Verdict:
    same: bool | None  # None: not decided (a .py mutant, a mutant that does not compile)
    why: str
    differ: list[str] = field(default_factory=list)  # the listings that differ, e.g. "x.cuda.o: ptx sm_90a"
    flags: str = ""  # the build's code flags, for the reason written into equivalent.txt


_ANON = re.compile(r"(\d*)(_GLOBAL__N__|_INTERNAL_)[0-9a-f]+_(\d+)_")


def anon_normalised(text: str) -> str:
    """`text` with each name of an anonymous namespace or of internal linkage, as nvcc makes them
    (`_GLOBAL__N__<hash>_<len>_<file>_<hash>_<pid>`, `_INTERNAL_...`: a hash of the translation unit and
    nvcc's process id), replaced by one fixed name, its mangled length prefix with it."""
    out, i = [], 0
    while True:
        m = _ANON.search(text, i)
        if m is None:
            break
        digits, kind, name_len = m.group(1), m.group(2), int(m.group(3))
        name = text[m.end():m.end() + name_len]
        fixed = f"{kind}ANON_{name}"
        start = m.start(2)
        token = text[start:start + int(digits)] if digits else ""
        if digits and re.fullmatch(rf"{kind}[0-9a-f]+_{name_len}_{re.escape(name)}_[0-9a-f]+_\d+", token):
            out.append(text[i:m.start()] + f"{len(fixed)}{fixed}")  # mangled: its length says where it ends
            i = start + int(digits)
            continue
        tail = re.compile(r"_[0-9a-f]+(?:_\d+)?").match(text, m.end() + name_len)
        out.append(text[i:start] + fixed)
        i = tail.end() if tail else m.end() + name_len
    out.append(text[i:])
    return "".join(out)


def ptx_normalised(text: str) -> str:
    """PTX with its byte strings (the line info's function names, `.b8 95,90,78,...`) read as text, the
    line info's columns left out, and the anonymous names normalised (anon_normalised). Line info is no
    code: it maps the SASS to source lines, which a one-line mutant keeps."""
    lines, run, out = text.splitlines(), [], []

    def flush() -> None:
        if run:
            out.append(".b8 " + repr(anon_normalised(bytes(run).decode("latin-1"))))
            run.clear()

    for line in lines:
        m = re.fullmatch(r"\s*\.b8\s+([\d,\s]+)", line)
        values = [int(v) for v in m.group(1).replace(",", " ").split()] if m else []
        if values and all(v < 256 for v in values):
            run.extend(values)
            continue
        flush()
        out.append(line)
    flush()
    # a line-info position's column (`.loc 1 80 5`, `inlined_at 1 43 5`): a change within a line moves
    # the columns after it (`if (false) ` before a statement), while the code is the same
    text = re.sub(r"(\.loc\s+\d+\s+\d+)\s+\d+", r"\1", "\n".join(out))
    text = re.sub(r"(inlined_at\s+\d+\s+\d+)\s+\d+", r"\1", text)
    return anon_normalised(text)


def _objdump(*args: str) -> str:
    proc = subprocess.run(["objdump", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"objdump {' '.join(args)}: {proc.stderr.strip()}")
    # less its `<file>:     file format ...` line (the object's path)
    return "\n".join(l for l in proc.stdout.splitlines() if "file format" not in l)


def elf_sections(obj: Path) -> list[tuple[str, int, int, int, bytes]]:
    """(name, type, flags, size, contents) of each section of a 64-bit little-endian ELF object."""
    b = obj.read_bytes()
    if b[:4] != b"\x7fELF" or b[4] != 2 or b[5] != 1:
        raise RuntimeError(f"{obj}: not a 64-bit little-endian ELF object")
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", b, shoff + k * shentsize) for k in range(shnum)]
    strtab = heads[shstrndx]
    names = b[strtab[4]:strtab[4] + strtab[5]]
    out = []
    for name, kind, flags, _addr, offset, size in heads:
        text = names[name:names.index(b"\0", name)].decode()
        out.append((text, kind, flags, size, b"" if kind == 8 else b[offset:offset + size]))  # 8: SHT_NOBITS (.bss)
    return out


SHF_ALLOC, SHF_EXECINSTR = 0x2, 0x4


def host_listing(obj: Path) -> str:
    """The host code of an object file, as text to compare (see the module's docstring)."""
    sections = [s for s in elf_sections(obj) if s[0] and not any(d in s[0] for d in DEVICE_SECTIONS)]
    # each section's size (.bss's too), not its file offset (it follows the fatbin's size)
    text = ["sections:", *(f"{n} type {k} flags {f:#x} size {z}" for n, k, f, z, _ in sections)]
    data = [(n, d) for n, k, f, _, d in sections if f & SHF_ALLOC and not f & SHF_EXECINSTR and k != 8]
    text += [_objdump("-d", "-r", "-w", str(obj)), _objdump("-t", "-w", str(obj))]
    for n, d in data:  # as text: a kernel's name registered with the runtime is normalised there too
        text.append(f"contents of {n}: " + anon_normalised(d.decode("latin-1")).encode("unicode_escape").decode())
    if data:
        text.append(_objdump("-r", "-w", *(w for n, _ in data for w in ("-j", n)), str(obj)))
    return anon_normalised("\n".join(text))


def _build_objects(build_dir: Path) -> dict[str, str]:
    """object -> source path, from torch's build.ninja: its compile steps."""
    found = {}
    for line in (build_dir / "build.ninja").read_text().splitlines():
        m = re.match(r"build (\S+): (compile|cuda_compile) (\S+)$", line.strip())
        if m:
            found[m.group(1)] = m.group(3)
    return found


def _compile_command(build_dir: Path, obj: str) -> list[str]:
    """The command ninja runs for `obj` (its rule with the build's variables filled in)."""
    proc = subprocess.run([_ninja(), "-t", "commands", obj], cwd=build_dir, capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"ninja -t commands {obj} in {build_dir}: {proc.stderr.strip()}")
    return shlex.split(proc.stdout.strip().splitlines()[-1])


def _ninja() -> str:
    from grader.toolchain.build import _ninja as find

    found = find()
    if not found:
        raise RuntimeError("no ninja: the course's build needs it")
    return found


def code_flags(command: list[str]) -> str:
    """The flags of a compile command that choose its code: optimisation, architectures, CUDA's."""
    keep = [w for w in command if re.match(r"-O\d|-gencode|-arch|--use_fast_math|-lineinfo|-std=|-G$|-g$", w)]
    return " ".join(dict.fromkeys(keep))


def listings(build_dir: Path, obj: str, scratch: Path) -> tuple[dict[str, str], str]:
    """({what: listing}, its compiler and code flags) of one object compiled now by its build.ninja command, the
    object and the intermediates written under `scratch` (the build folder's own object untouched).
    Raises subprocess.CalledProcessError with the compiler's output when it does not compile."""
    command = _compile_command(build_dir, obj)
    scratch.mkdir(parents=True, exist_ok=True)
    out = scratch / Path(obj).name
    fixed, k = [], 0
    while k < len(command):
        w = command[k]
        if w == "-o" and k + 1 < len(command):
            fixed += ["-o", str(out)]
            k += 2
            continue
        if w in ("-MF", "--dependency-output") and k + 1 < len(command):
            fixed += [w, str(out) + ".d"]
            k += 2
            continue
        fixed.append(w)
        k += 1
    cuda = Path(fixed[0]).name == "nvcc"
    keep = scratch / "keep"
    if cuda:
        keep.mkdir(exist_ok=True)
        fixed += ["--keep", "--keep-dir", str(keep)]
    proc = subprocess.run(fixed, cwd=build_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, fixed, proc.stdout)
    found = {f"{obj}: host": host_listing(out)}
    if cuda:
        ptx = sorted(keep.glob("*.ptx"))
        if not ptx:
            raise RuntimeError(f"nvcc --keep left no PTX for {obj} in {keep}")
        for p in ptx:
            target = re.search(r"^\.target\s+(\S+)", p.read_text(), re.M)
            found[f"{obj}: ptx {target.group(1) if target else p.name}"] = ptx_normalised(p.read_text())
    return found, f"{compiler_version(fixed[0])}, {code_flags(fixed)}"


_solution_listings: dict[str, tuple[dict[str, str], str]] = {}  # (folder, object, sources) -> listings


def _sources_key(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.iterdir()):
        if p.is_file():
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def same_code(mutant, source: Path | None = None, work: Path | None = None) -> Verdict:
    """Whether `mutant` (grader.run.mutants.Mutant) compiles to the machine code of the solution
    folder `source` (default solutions/<exercise>): see the module's docstring. `work` is the folder
    both are compiled in (default WORK/<exercise>); its build folder is the course's, kept between
    calls, so only the first call of an exercise builds it whole."""
    from grader.toolchain.build import FolderLock, build, build_dir_for, write_slot

    if mutant.file.endswith(".py"):
        return Verdict(None, "a .py mutant: Python has no machine code to compare")
    source = source or env.REPO / "solutions" / mutant.exercise
    folder = (work or WORK / mutant.exercise).resolve()
    env.configure()
    write_slot(folder, source)
    built = build(folder, load=False)  # build.ninja for this path and configuration (cached after the first)
    if not built.ok:
        raise RuntimeError(f"the solution {source} does not build at {folder}:\n{built.error}")
    build_dir = build_dir_for(folder)
    objects = _build_objects(build_dir)
    path = str(folder / mutant.file)
    wanted = [o for o, s in objects.items() if s == path] if Path(path).suffix in (".cu", ".cpp") else list(objects)
    if not wanted:
        raise RuntimeError(f"{build_dir}/build.ninja compiles no {mutant.file}")
    solution_key = _sources_key(folder)
    with FolderLock(build_dir), tempfile.TemporaryDirectory(prefix="same-code-") as tmp:
        mine: dict[str, str] = {}
        theirs: dict[str, str] = {}
        described: list[str] = []  # each compile's compiler and flags
        for obj in wanted:
            key = f"{folder}\0{obj}\0{solution_key}"
            if key not in _solution_listings:
                _solution_listings[key] = listings(build_dir, obj, Path(tmp) / "solution" / obj)
            theirs.update(_solution_listings[key][0])
            described.append(_solution_listings[key][1])
        flags = "; ".join(dict.fromkeys(described))
        original = (folder / mutant.file).read_bytes()
        try:
            write_slot(folder, source, mutant.texts(source))
            for obj in wanted:
                try:
                    mine.update(listings(build_dir, obj, Path(tmp) / "mutant" / obj)[0])
                except subprocess.CalledProcessError as e:
                    first = next((l for l in (e.output or b"").decode(errors="replace").splitlines()
                                  if "error" in l), "")
                    return Verdict(None, f"the mutant does not compile: {first[:200]}", flags=flags)
        finally:
            (folder / mutant.file).write_bytes(original)
    differ = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
    if differ:
        return Verdict(False, "different code: " + ", ".join(differ), differ, flags)
    what = "host objects and PTX" if any(" ptx " in k for k in mine) else "host objects"
    return Verdict(True, f"the same machine code as the solution's: {what} identical ({flags})", [], flags)


def compiler_version(compiler: str) -> str:
    """`nvcc 13.0`, `gcc 12.2.0`: the compiler the code was compared with."""
    name = Path(compiler).name
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return name
    if name == "nvcc":
        m = re.search(r"release (\d+\.\d+)", out)
        return f"nvcc {m.group(1)}" if m else name
    first = out.splitlines()[0] if out else ""
    m = re.search(r"(\d+\.\d+(?:\.\d+)?)\s*$", first)
    kind = "clang" if "clang" in first else "gcc" if ("gcc" in first.lower() or "g++" in first or "c++" in first) else name
    return f"{kind} {m.group(1)}" if m else name


def check_survivors(report: Path, every: dict, equivalents: dict[str, str], ids: list[str],
                    append: Path | None = None, out=lambda line: print(line, flush=True)) -> int:
    """`python -m grader.run.mutants --same-code`: run same_code on the survivors of `report` (its
    report.json) not listed in `equivalents` (or on the mutants `ids`, listed or not), print the lines
    for tests/mutants/equivalent.txt of those with the solution's machine code and list the others;
    with `append`, add the lines to that file. `every`: exercise -> its mutants today. Returns 0."""
    known = {m.id: m for ms in every.values() for m in ms}
    if ids:
        asked = list(dict.fromkeys(ids))
        where = "asked for by --id"
    else:
        rows = json.loads(report.read_text()).get("mutants", []) if report.is_file() else []
        numbers = {x[:2] for x in every}
        asked = [r["id"] for r in rows if r.get("outcome") == "survived" and r["id"] not in equivalents
                 and r["id"].split(":", 1)[0] in numbers]
        where = f"the survivors of {report} not in the equivalents file"
    gone = [i for i in asked if i not in known]
    todo = [known[i] for i in asked if i in known]
    out(f"{len(asked)} mutant(s), {where}: compiled here, the solution's file and the mutant's at one path "
        f"with the build's commands (TORCH_CUDA_ARCH_LIST={os.environ.get('TORCH_CUDA_ARCH_LIST', '')})")
    same, differ, undecided = [], [], []
    for m in todo:
        start = time.perf_counter()
        verdict = same_code(m)
        word = "same code" if verdict.same else "not decided" if verdict.same is None else "differs"
        out(f"  {m.id}: {word} ({time.perf_counter() - start:.0f} s){'' if verdict.same else ': ' + verdict.why}")
        (same if verdict.same else undecided if verdict.same is None else differ).append((m, verdict))
    lines = [f"{m.id} # {v.why}" for m, v in same]
    out("")
    out(f"the same machine code as the solution's ({len(same)}): equivalent programs" + (":" if lines else ""))
    for line in lines:
        out(f"  {line}")
    out(f"different code ({len(differ)}): a hole in the grader, or equivalent for a reason to write by hand")
    for m, v in differ:
        out(f"  {m.id} ({', '.join(v.differ)})")
    if undecided:
        out(f"not decided ({len(undecided)}):")
        for m, v in undecided:
            out(f"  {m.id}: {v.why}")
    if gone:
        out(f"no such mutant of today's solutions ({len(gone)}; a line moved or changed?): {', '.join(gone)}")
    if append is not None and lines:
        text = append.read_text() if append.is_file() else ""
        append.write_text(text + ("" if not text or text.endswith("\n") else "\n") + "\n".join(lines) + "\n")
        out(f"appended {len(lines)} line(s) to {append}")
    return 0
