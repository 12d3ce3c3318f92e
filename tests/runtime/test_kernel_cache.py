"""The kernel cache under faults (runtime/kernel_cache.py, runtime/ops_cpu.py): a truncated entry (used to SIGBUS every later
process), an entry swapped for another valid kernel (a silent wrong result), a library without the kernel (a raw
AttributeError), a compiler that writes nothing or hangs, the folder deleted while kernels compile, a full disk, and the
size cap. Compilers that misbehave are shell scripts put in CC; every test compiles into its own CACHE_DIR.
"""
import dataclasses, hashlib, os, shutil, stat, subprocess, sys, time, uuid
import numpy as np
import pytest
from runtime import kernel_cache, ops_cpu
from runtime.device import Buffer, CompileError
from runtime.dtype import dtypes
from runtime.ops import Ops
from tensor import Tensor
from tensor.codegen import program_cache, target as codegen_target
from tensor.codegen.target import Target, target_for
from tensor.renderer import cstyle

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL_CC = shutil.which(os.environ.get("CC", "cc")) or "cc"

def kernel_source(name: str, k: int) -> str:
  """data0[i] = data1[i] + k for 4 ints, in the entry-point form the renderer writes (runtime/ops_cpu.load)."""
  return (f"void {name}(int* restrict data0, int* restrict data1) {{ for (int i = 0; i < 4; i++) data0[i] = data1[i] + {k}; }}\n"
          f"void {name}_call(void* const* bufs, const long long* ivals, const double* fvals) {{ {name}((int*)bufs[0], (int*)bufs[1]); }}\n")

def run(prog) -> list[int]:
  out, inp = Buffer("CPU", 4, dtypes.int32), Buffer("CPU", 4, dtypes.int32, np.arange(4, dtype=np.int32))
  prog([out, inp])
  return out.numpy().tolist()

def entries(d) -> list[str]: return sorted(f for f in os.listdir(d) if f.endswith(".so")) if os.path.isdir(d) else []

@pytest.fixture
def compiler(tmp_path, monkeypatch):
  """compiler(script_body) puts a shell script in CC; `$REAL` is the real compiler. Forgets what was learnt about CC."""
  def make(body: str) -> str:
    path = tmp_path / f"cc-{uuid.uuid4().hex[:6]}"
    path.write_text(f"#!/bin/sh\nREAL={REAL_CC}\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CC", str(path))
    forget()
    return str(path)
  def forget(): ops_cpu.find_compiler.cache_clear(); ops_cpu.compiler_version.cache_clear()  # noqa: E702
  yield make
  forget()

def replace(path: str, data: bytes) -> None:
  # by rename, as another process would: writing in place into a library this process has loaded would crash it, as any program
  with open(path + ".new", "wb") as f: f.write(data)
  os.replace(path + ".new", path)

def new_kernel(k: int = 5) -> tuple[str, str]:
  name = f"k_{uuid.uuid4().hex[:8]}"
  return name, kernel_source(name, k)

# ---- what is loaded is what was built ----

def test_an_entry_is_the_elf_file_and_a_trailer(cache):
  name, src = new_kernel()
  path = ops_cpu.compile_c(src)
  data = open(path, "rb").read()
  assert data.startswith(b"\x7fELF") and kernel_cache.MAGIC in data[-200:]
  assert run(ops_cpu.program(src, name)) == [5, 6, 7, 8]

def test_a_truncated_entry_is_rebuilt_in_a_new_process(cache):
  # half the file, ELF header intact: loading it used to kill every later process with SIGBUS
  name, src = new_kernel(3)
  path = ops_cpu.compile_c(src)
  with open(path, "r+b") as f: f.truncate(os.path.getsize(path) // 2)
  code = ("import numpy as np\nfrom runtime import ops_cpu\nfrom runtime.device import Buffer\nfrom runtime.dtype import dtypes\n"
          "out, inp = Buffer('CPU', 4, dtypes.int32), Buffer('CPU', 4, dtypes.int32, np.arange(4, dtype=np.int32))\n"
          f"ops_cpu.program({src!r}, {name!r})([out, inp])\nprint(out.numpy().tolist())")
  r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert r.returncode == 0 and r.stdout.strip() == "[3, 4, 5, 6]", (r.returncode, r.stderr)
  assert "rebuilding" in r.stderr and "truncated" in r.stderr
  assert os.path.getsize(path) > 1000 and kernel_cache.open_verified(path) >= 0

def test_an_entry_swapped_for_another_kernel_is_rebuilt(cache, capsys):
  # two valid kernels with the same symbol: the wrong one used to run silently ([10, 19, 28] instead of [8, 15, 22])
  name = f"k_{uuid.uuid4().hex[:8]}"
  mine, other = kernel_source(name, 5), kernel_source(name, 9)
  path, other_path = ops_cpu.compile_c(mine), ops_cpu.compile_c(other)
  replace(path, open(other_path, "rb").read())
  assert run(ops_cpu.program(mine, name)) == [5, 6, 7, 8]
  assert "holds the kernel" in capsys.readouterr().err
  # a foreign library without our trailer
  replace(path, open(other_path, "rb").read()[:-kernel_cache._TRAILER.size])
  assert run(ops_cpu.program(mine, name)) == [5, 6, 7, 8]
  assert "no cache trailer" in capsys.readouterr().err

def test_an_entry_without_the_kernel_is_rebuilt_then_refused_clearly(cache, capsys):
  name, src = new_kernel(2)
  path = ops_cpu.compile_c(src)
  # a well-formed entry for this key whose library lacks the symbol (as a broken writer could leave): rebuilt, then it works
  other_name, other = new_kernel(2)
  elf_path = ops_cpu.compile_c(other)
  n = os.path.getsize(elf_path) - kernel_cache._TRAILER.size
  elf = open(elf_path, "rb").read()[:n]
  key = os.path.basename(path)[2:-3]
  replace(path, elf + kernel_cache._TRAILER.pack(kernel_cache.MAGIC, key.encode(), hashlib.sha256(elf).digest(), n))
  assert run(ops_cpu.program(src, name)) == [2, 3, 4, 5]
  assert "has no kernel named" in capsys.readouterr().err
  # a source that really lacks the kernel: a CompileError that says so, not an AttributeError
  with pytest.raises(CompileError, match="has no kernel named not_there"): ops_cpu.program(src, "not_there")

# ---- compilers that misbehave ----

@pytest.mark.parametrize("output", ["", "garbage"])
def test_a_compiler_that_writes_no_shared_object(cache, compiler, output):
  compiler(f'case "$*" in *-shared*) for a; do [ "$prev" = "-o" ] && printf "{output}" > "$a"; prev=$a; done; exit 0;; esac\nexec $REAL "$@"')
  with pytest.raises(CompileError, match="wrote no shared object"): ops_cpu.compile_c(new_kernel()[1])
  assert entries(cache) == []  # nothing cached, nothing half-written

def test_a_hanging_compiler_times_out(cache, compiler, monkeypatch):
  tag = f"600.{uuid.uuid4().int % 10**9}"  # a sleep no other process runs
  # the driver waits on a child, as gcc waits on cc1: both are stopped
  compiler(f'case "$*" in *-shared*) sleep {tag} & wait; exit 0;; esac\nexec $REAL "$@"')
  monkeypatch.setenv("CC_TIMEOUT", "1")
  t0 = time.monotonic()
  with pytest.raises(CompileError, match="did not finish compiling .* in 1 s .*CC_TIMEOUT"): ops_cpu.compile_c(new_kernel()[1])
  assert time.monotonic() - t0 < 60
  time.sleep(0.2)
  left = subprocess.run(["pgrep", "-f", f"sleep {tag}"], capture_output=True, text=True).stdout.split() if shutil.which("pgrep") else []
  assert left == [], f"processes of the stopped compiler still run: {left}"
  assert entries(cache) == []

def test_a_failing_compiler_is_a_compile_error(cache, compiler):
  compiler('case "$*" in *-shared*) echo "error: bad kernel" >&2; exit 1;; esac\nexec $REAL "$@"')
  with pytest.raises(CompileError, match="failed on a generated kernel:\nerror: bad kernel"): ops_cpu.compile_c(new_kernel()[1])
  assert entries(cache) == []

def test_compiler_output_that_is_not_utf8_is_shown_not_a_crash(cache, compiler):
  """Non-UTF-8 compiler output crashed the driver with UnicodeDecodeError (subprocess.run(text=True))."""
  compiler('case "$*" in *-shared*) printf "error: \\377\\376 in a Latin-1 locale\\n" >&2; exit 1;; esac\nexec $REAL "$@"')
  with pytest.raises(CompileError, match="failed on a generated kernel:\nerror: \ufffd\ufffd in a Latin-1 locale"): ops_cpu.compile_c(new_kernel()[1])
  compiler('case "$*" in *--version*) printf "cc \\377 1.0\\n"; exit 0;; esac\nexec $REAL "$@"')
  assert ops_cpu.compiler_version() == "cc \ufffd 1.0"

@pytest.mark.parametrize("probe", ["--version", "-dM", "-fsyntax-only"])
def test_every_probe_of_the_compiler_keeps_cc_timeout(cache, compiler, monkeypatch, tmp_path, probe):
  """The --version, flag and macro probes had their own 30-60 s timeouts: a hung compiler took 216 s to fail, and the
  processes it started were left running. Each run of the compiler now keeps CC_TIMEOUT, and its process group is killed."""
  pids = tmp_path / "pids"
  tag = f"600.{uuid.uuid4().int % 10**9}"
  compiler(f'case "$*" in *{probe}*) sleep {tag} & echo $! >> {pids}; wait; exit 0;; esac\nexec $REAL "$@"')
  monkeypatch.setenv("CC_TIMEOUT", "1")
  monkeypatch.setattr(ops_cpu, "_hung", {})
  t0 = time.monotonic()
  with pytest.raises(CompileError, match=f"did not finish .*{probe}.* in 1 s .*CC_TIMEOUT"):
    ops_cpu.compile_c(new_kernel()[1])
    ops_cpu.cflags(new_kernel()[1])
    ops_cpu.target_macros("x86-64-v2")  # a march no earlier probe asked about
  with pytest.raises(CompileError, match="CC_TIMEOUT"): ops_cpu.compile_c(new_kernel()[1])  # at once: the compiler hung
  assert time.monotonic() - t0 < 30
  time.sleep(0.2)
  for pid in pids.read_text().split(): assert not running(int(pid)), "a process the stopped compiler started still runs"

def running(pid: int) -> bool:
  """Whether pid is a live process (a zombie left for init to reap is not)."""
  try:
    with open(f"/proc/{pid}/stat") as f: return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except FileNotFoundError: return False
  except OSError:
    try: os.kill(pid, 0)
    except ProcessLookupError: return False
    return True

# ---- the folder ----

def test_the_folder_deleted_while_compiling_is_made_again(cache, compiler, tmp_path):
  marker = tmp_path / "deleted-once"
  # the first compile removes the whole cache folder before the compiler writes into it
  compiler(f'case "$*" in *-shared*) [ -e {marker} ] || {{ touch {marker}; rm -rf {cache}; }};; esac\nexec $REAL "$@"')
  name, src = new_kernel(7)
  assert run(ops_cpu.program(src, name)) == [7, 8, 9, 10]
  assert marker.exists() and len(entries(cache)) == 1

def test_a_full_disk_falls_back_to_a_temporary_folder_with_one_warning(cache, compiler, tmp_path):
  # the compiler's own message when it can't write its output
  full = 'echo "fatal error: error writing to /tmp/cc.s: No space left on device" >&2; exit 1'
  compiler(f'case "$*" in *-shared*{cache}*) {full};; esac\nexec $REAL "$@"')
  with pytest.warns(UserWarning, match="full") as record:
    for k in (1, 2):
      name, src = new_kernel(k)
      assert run(ops_cpu.program(src, name)) == [k, k + 1, k + 2, k + 3]
  told = [str(w.message) for w in record if "full" in str(w.message)]
  assert len(told) == 1 and str(cache) in told[0]
  assert entries(cache) == [] and len(entries(tmp_path / "tmp" / f"rulegrad-{os.getuid()}")) == 2

def test_our_own_write_failing_for_space_falls_back_too(cache, monkeypatch, tmp_path):
  real_replace = os.replace
  def full(src, dst):
    if str(cache) in str(dst): raise OSError(28, "No space left on device")
    return real_replace(src, dst)
  monkeypatch.setattr(kernel_cache.os, "replace", full)
  name, src = new_kernel(4)
  with pytest.warns(UserWarning, match="full"): assert run(ops_cpu.program(src, name)) == [4, 5, 6, 7]
  assert entries(cache) == [] and not [f for f in os.listdir(cache) if f.endswith(".tmp.so")]

def test_the_size_cap_evicts_the_least_recently_used(cache, monkeypatch):
  names = [new_kernel(k) for k in range(6)]
  paths = [ops_cpu.compile_c(src) for _, src in names[:2]]
  size = os.path.getsize(paths[0])
  monkeypatch.setenv("CACHE_MAX_MB", str(3.5 * size / 2**20))  # room for three entries
  old = time.time_ns() - 10**9
  os.utime(paths[1], ns=(old, old))
  os.utime(paths[0], ns=(old - 10**9, old - 10**9))
  for _, src in names[2:]:
    run(ops_cpu.program(names[0][1], names[0][0]))  # the first kernel stays in use
    ops_cpu.compile_c(src)
  left = set(entries(cache))
  assert kernel_cache.folder_size(str(cache)) <= 3.5 * size and len(left) <= 3
  assert os.path.basename(paths[0]) in left and os.path.basename(paths[1]) not in left
  # the folder's size is kept in a file, so a process need not count the folder to add an entry
  assert kernel_cache._read_size(str(cache)) == kernel_cache.folder_size(str(cache))

# ---- one folder, several kinds of machine ----

def other_machine(here: str) -> str:
  """A compiler on another kind of machine, as a CC script: there -march=native means AVX2 (x86-64-v3, the CI machine kind)
  when this machine has AVX-512, else SSE4.2 (x86-64-v2). Every call is logged to $LOG."""
  march = "x86-64-v3" if "__AVX512F__" in here else "x86-64-v2"
  return (f'echo "$*" >> "$LOG"\nfor a do shift; [ "$a" = -march=native ] && a=-march={march}; set -- "$@" "$a"; done\n'
          'exec $REAL "$@"')

def test_machines_of_another_kind_build_their_own_objects(cache, compiler, tmp_path, monkeypatch):
  # a home directory shared by an AVX-512 machine and an AVX2 one: the same source and flags (-march=native), and the same
  # compiler version, used to give the same key, so the AVX2 machine loaded the AVX-512 object and died of SIGILL
  here, version = ops_cpu.native_macros(), ops_cpu.compiler_version()
  name, src = new_kernel(6)
  mine = ops_cpu.compile_c(src)
  monkeypatch.setenv("LOG", str(tmp_path / "calls"))
  compiler(other_machine(here))
  theirs = ops_cpu.compile_c(src)
  assert ops_cpu.native_macros() != here and ops_cpu.compiler_version() == version
  assert theirs != mine and len(entries(cache)) == 2
  assert run(ops_cpu.load(name, theirs)) == [6, 7, 8, 9]
  # what -march=native means is asked once per process, whatever the number of kernels
  for k in (7, 8): ops_cpu.compile_c(new_kernel(k)[1])
  calls = (tmp_path / "calls").read_text().splitlines()
  assert sum("-dM" in c for c in calls) == 1 and sum("-shared" in c for c in calls) == 3

def test_the_machine_is_in_the_key_of_lowered_programs(monkeypatch):
  # a program is rendered for the vector registers and the cores of the machine: another kind must not reuse it
  a = Tensor(np.ones(64, np.float32)).realize() * 2
  a.kernelize()
  ast = next(u.arg.ast for u in a.uop.toposort() if u.op is Ops.KERNEL)
  key = program_cache.program_key(ast, target_for("CPU"), False)
  caps = cstyle.cpu_vector_caps()
  assert program_cache.program_key(ast, target_for("CPU"), False) == key
  other = dataclasses.replace(caps, register_bytes=caps.register_bytes // 2, registers=caps.registers // 2)  # AVX2 on AVX-512
  assert program_cache.program_key(ast, Target("CPU", cstyle.CRenderer(other)), False) != key
  n = codegen_target.cores()
  monkeypatch.setattr(codegen_target, "cores", lambda: n + 1)
  assert program_cache.program_key(ast, target_for("CPU"), False) != key

def test_compiler_probes_are_kept_checked_and_never_trusted_blindly(cache, compiler, tmp_path, monkeypatch):
  """The compiler's answers to the probes (version, macros, flags) are kept in the cache folder, so a new process runs
  no compiler for them; a probes file of the wrong shape (values of other types, not JSON) is ignored and the probes
  run again, giving the same answers."""
  monkeypatch.setenv("LOG", str(tmp_path / "calls"))
  cc = compiler('echo "$*" >> "$LOG"\nexec $REAL "$@"')
  def ask(): return ops_cpu.compiler_version(), ops_cpu._takes_flag(cc, "-fwrapv"), ops_cpu.target_macros("native")
  def new_process():
    for f in (ops_cpu.compiler_version, ops_cpu._takes_flag, ops_cpu._predefined_macros): f.cache_clear()
    ops_cpu._probes_seen.clear()
  def calls(): return len((tmp_path / "calls").read_text().splitlines()) if (tmp_path / "calls").exists() else 0
  first = ask()
  assert calls() == 3 and first[1] is True and ("__x86_64__" in first[2] or "__aarch64__" in first[2])
  new_process()
  assert ask() == first and calls() == 3                      # from the file
  path = os.path.join(str(cache), ops_cpu.PROBES_FILE)
  key = next(iter(__import__("json").load(open(path))))
  for bad in ('{"%s": {"version": 5, "flag -fwrapv": "yes", "macros native": ["#define X 1"]}}' % key, "not json", "[1, 2]"):
    replace(path, bad.encode())
    new_process()
    n = calls()
    assert ask() == first and calls() == n + 3                # ignored: asked again, the same answers
