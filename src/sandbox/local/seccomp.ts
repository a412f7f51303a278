/*
 * The seccomp filter every isolated command runs under, as the compiled classic BPF program
 * bubblewrap's `--seccomp FD` loads: an array of `struct sock_filter` (u16 code, u8 jt, u8 jf,
 * u32 k), 8 bytes each, in the machine's byte order (little-endian on both architectures here).
 *
 * The namespaces and dropped capabilities already keep a command from most of these calls'
 * effects; the filter takes away the kernel surface itself, which is where escapes start: other
 * processes' memory and file descriptors (ptrace, process_vm_*, pidfd_getfd), the kernel
 * keyring, BPF and perf (a long history of privilege escalations), userfaultfd (the usual way to
 * win a kernel race), new user namespaces (a full capability set again, inside them) and every
 * mount API. Anything else is allowed: the filter lists what is refused, so toolchains that make
 * unusual but harmless calls keep working.
 */

export type SeccompArch = "x64" | "arm64";

/** The calls that answer EPERM; clone only when it asks for a new user namespace. */
export const REFUSED_SYSCALLS = [
  "ptrace",
  "process_vm_readv",
  "process_vm_writev",
  "pidfd_getfd",
  "keyctl",
  "add_key",
  "request_key",
  "bpf",
  "perf_event_open",
  "userfaultfd",
  "unshare",
  "mount",
  "umount2",
  "pivot_root",
  "fsopen",
  "fsconfig",
  "fsmount",
  "fspick",
  "move_mount",
  "open_tree",
  "mount_setattr",
] as const;

type RefusedSyscall = (typeof REFUSED_SYSCALLS)[number];
type Syscall = RefusedSyscall | "clone" | "clone3";

/**
 * Syscall numbers from the kernel's tables: x86_64's arch/x86/entry/syscalls/syscall_64.tbl
 * (asm/unistd_64.h), and the generic table aarch64 uses (asm-generic/unistd.h).
 */
export const SYSCALL_NUMBERS: Record<SeccompArch, Record<Syscall, number>> = {
  x64: {
    ptrace: 101,
    process_vm_readv: 310,
    process_vm_writev: 311,
    pidfd_getfd: 438,
    keyctl: 250,
    add_key: 248,
    request_key: 249,
    bpf: 321,
    perf_event_open: 298,
    userfaultfd: 323,
    unshare: 272,
    clone: 56,
    clone3: 435,
    mount: 165,
    umount2: 166,
    pivot_root: 155,
    fsopen: 430,
    fsconfig: 431,
    fsmount: 432,
    fspick: 433,
    move_mount: 429,
    open_tree: 428,
    mount_setattr: 442,
  },
  arm64: {
    ptrace: 117,
    process_vm_readv: 270,
    process_vm_writev: 271,
    pidfd_getfd: 438,
    keyctl: 219,
    add_key: 217,
    request_key: 218,
    bpf: 280,
    perf_event_open: 241,
    userfaultfd: 282,
    unshare: 97,
    clone: 220,
    clone3: 435,
    mount: 40,
    umount2: 39,
    pivot_root: 41,
    fsopen: 430,
    fsconfig: 431,
    fsmount: 432,
    fspick: 433,
    move_mount: 429,
    open_tree: 428,
    mount_setattr: 442,
  },
};

/** linux/audit.h: the machine (EM_*) with the 64-bit and little-endian bits. */
const AUDIT_ARCH: Record<SeccompArch, number> = { x64: 0xc000003e, arm64: 0xc00000b7 };
/** x86_64's x32 ABI: the same architecture, syscall numbers with this bit set. */
const X32_SYSCALL_BIT = 0x40000000;
const CLONE_NEWUSER = 0x10000000;
const EPERM = 1;
const ENOSYS = 38;

// struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6].
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
/** The low 32 bits of args[0] (little-endian): clone's flags, all of which fit there. */
const OFFSET_ARG0_LOW = 16;

const BPF_LD_W_ABS = 0x20;
const BPF_JEQ_K = 0x15;
const BPF_JSET_K = 0x45;
const BPF_RET_K = 0x06;
const SECCOMP_RET_KILL_PROCESS = 0x80000000;
const SECCOMP_RET_ERRNO = 0x00050000;
const SECCOMP_RET_ALLOW = 0x7fff0000;

interface Instruction {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

/** The machine this process runs on, as the filter knows it; undefined when it has no filter for it. */
export function hostSeccompArch(arch: string = process.arch): SeccompArch | undefined {
  return arch === "x64" || arch === "arm64" ? arch : undefined;
}

/**
 * The filter for `arch`: another architecture's calls (i386 on x86_64, arm32 on aarch64) and
 * x32 calls kill the process, since their numbers mean different calls and would walk past
 * every rule below; the refused calls answer EPERM; clone with CLONE_NEWUSER answers EPERM;
 * clone3, whose flags sit in memory a filter cannot read, answers ENOSYS, so the C library
 * falls back to clone, where the flags are checked.
 */
export function seccompFilter(arch: SeccompArch): Buffer {
  const numbers = SYSCALL_NUMBERS[arch];
  const refused = REFUSED_SYSCALLS.map((name) => numbers[name]);
  // Layout, with the returns at the end so every jump is forward and short:
  //   arch check, nr load, x32 check, one JEQ per refused call, clone, clone3, allow,
  //   clone's flag check (load, JSET, allow), then EPERM, ENOSYS and KILL.
  const program: Instruction[] = [];
  const labels = { eperm: -1, enosys: -1, kill: -1, cloneFlags: -1 };
  const jumps: Array<{ at: number; to: keyof typeof labels; when: "true" | "false" }> = [];
  const emit = (code: number, k: number, jt = 0, jf = 0): number => program.push({ code, jt, jf, k }) - 1;
  const jumpIf = (code: number, k: number, to: keyof typeof labels, when: "true" | "false" = "true"): void => {
    jumps.push({ at: emit(code, k), to, when });
  };

  emit(BPF_LD_W_ABS, OFFSET_ARCH);
  jumpIf(BPF_JEQ_K, AUDIT_ARCH[arch], "kill", "false");
  emit(BPF_LD_W_ABS, OFFSET_NR);
  if (arch === "x64") jumpIf(BPF_JSET_K, X32_SYSCALL_BIT, "kill");
  for (const number of refused) jumpIf(BPF_JEQ_K, number, "eperm");
  jumpIf(BPF_JEQ_K, numbers.clone, "cloneFlags");
  jumpIf(BPF_JEQ_K, numbers.clone3, "enosys");
  emit(BPF_RET_K, SECCOMP_RET_ALLOW);
  labels.cloneFlags = emit(BPF_LD_W_ABS, OFFSET_ARG0_LOW);
  jumpIf(BPF_JSET_K, CLONE_NEWUSER, "eperm");
  emit(BPF_RET_K, SECCOMP_RET_ALLOW);
  labels.eperm = emit(BPF_RET_K, SECCOMP_RET_ERRNO | EPERM);
  labels.enosys = emit(BPF_RET_K, SECCOMP_RET_ERRNO | ENOSYS);
  labels.kill = emit(BPF_RET_K, SECCOMP_RET_KILL_PROCESS);

  for (const { at, to, when } of jumps) {
    // A jump's offset counts from the next instruction, and must fit the 8-bit jt/jf field.
    const offset = labels[to] - at - 1;
    if (offset < 0 || offset > 255) throw new Error(`seccomp jump out of range (${String(offset)})`);
    const instruction = program[at];
    if (!instruction) throw new Error("seccomp jump to nowhere");
    if (when === "true") instruction.jt = offset;
    else instruction.jf = offset;
  }

  const bytes = Buffer.alloc(program.length * 8);
  program.forEach(({ code, jt, jf, k }, index) => {
    bytes.writeUInt16LE(code, index * 8);
    bytes.writeUInt8(jt, index * 8 + 2);
    bytes.writeUInt8(jf, index * 8 + 3);
    bytes.writeUInt32LE(k >>> 0, index * 8 + 4);
  });
  return bytes;
}
