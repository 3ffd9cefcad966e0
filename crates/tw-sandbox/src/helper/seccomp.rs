//! The seccomp filter of strict and restricted, written as one short BPF program. A generic filter
//! compiler (seccompiler) produced 302 instructions in two programs for the same rules, and
//! installing a filter costs time in proportion to its length (the kernel pre-evaluates it for
//! every syscall number to build its allow cache), so this small program is the sandbox's
//! cheapest large win.
//!
//! The program: the architecture must be the one Toolwarden was built for (else the process is
//! killed); x32 syscalls are refused; `clone3` answers ENOSYS (its flags sit in memory a filter
//! cannot read, and ENOSYS makes libc fall back to `clone`); `clone` with any namespace flag,
//! `ioctl` TIOCSTI/TIOCLINUX and every syscall in [`DENIED`] answer EPERM; everything else is
//! allowed.
//!
//! No file a confined tool creates or changes may carry the set-user-ID or set-group-ID bit, be a
//! device node, or hold a file capability: when Toolwarden runs as root the workspace is an
//! id-mapped mount, so a file the sandbox uid owns is root's on the host, and a set-user-ID copy
//! of a shell left there would make any local user root. Every syscall that sets a file's mode
//! is checked on its mode argument: `chmod`, `fchmod`, `fchmodat`, `fchmodat2`, `open`, `openat`
//! and `creat` (whatever the flags: `O_CREAT` and `O_TMPFILE` use the mode, and without them
//! libc passes 0) and `mknod`/`mknodat`, which also may not make character or block devices.
//! `openat2` keeps its mode in memory a filter cannot read, so it answers ENOSYS (libc and
//! programs fall back to `openat`). Extended attributes cannot be set at all (`security.capability`
//! is one; EOPNOTSUPP, which `cp -a` and `tar` take as "not supported here"). `mkdir` needs no
//! check: the kernel keeps only the permission and sticky bits of its mode.
#![allow(unsafe_code)]

use super::sys::{Errno, check};

/// Syscalls a confined tool has no business making.
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_syslog,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_adjtimex,
    libc::SYS_quotactl,
    libc::SYS_vhangup,
];

/// Set-user-ID and set-group-ID: no mode a confined tool gives a file may hold them.
const SET_ID_BITS: u32 = libc::S_ISUID | libc::S_ISGID;

/// `setxattrat` (Linux 6.13), not yet in the libc crate; the same number on every architecture
/// Toolwarden builds for.
const SYS_SETXATTRAT: libc::c_long = 463;

/// Syscalls that set extended attributes (a file capability is one): EOPNOTSUPP.
const XATTR_SETTERS: &[libc::c_long] = &[
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    SYS_SETXATTRAT,
];

/// Syscalls that set a file's mode, and which argument holds it.
#[cfg(target_arch = "x86_64")]
const MODE_SETTERS: &[(libc::c_long, u32)] = &[
    (libc::SYS_chmod, 1),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (libc::SYS_fchmodat2, 2),
    (libc::SYS_creat, 1),
    (libc::SYS_open, 2),
    (libc::SYS_openat, 3),
];
#[cfg(target_arch = "aarch64")]
const MODE_SETTERS: &[(libc::c_long, u32)] = &[
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (libc::SYS_fchmodat2, 2),
    (libc::SYS_openat, 3),
];

/// `mknod`-like syscalls, and which argument holds the mode (with the file type).
#[cfg(target_arch = "x86_64")]
const NODE_MAKERS: &[(libc::c_long, u32)] = &[(libc::SYS_mknod, 1), (libc::SYS_mknodat, 2)];
#[cfg(target_arch = "aarch64")]
const NODE_MAKERS: &[(libc::c_long, u32)] = &[(libc::SYS_mknodat, 2)];

/// Namespace flags a confined `clone` may not ask for.
const NAMESPACE_FLAGS: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP;

#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64
/// Syscall numbers with this bit are the x32 ABI on x86_64.
#[cfg(target_arch = "x86_64")]
const X32_BIT: u32 = 0x4000_0000;

/// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH_OFFSET: u32 = 4;
/// The low 32 bits of argument `n` (little-endian).
const fn arg_low(n: u32) -> u32 {
    16 + 8 * n
}

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
#[cfg(target_arch = "x86_64")]
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

/// Where a conditional jump goes when its test holds.
#[derive(Clone, Copy)]
enum Target {
    Deny,
    NoSys,
    NotSupported,
    Clone,
    Ioctl,
    /// Refuse if argument `n` holds a set-id bit.
    Mode(u32),
    /// Refuse if argument `n` holds a set-id bit or makes a device.
    Node(u32),
}

/// An instruction whose jump may still name a label.
struct Insn {
    code: u16,
    k: u32,
    on_true: Option<Target>,
}

fn stmt(code: u16, k: u32) -> Insn {
    Insn {
        code,
        k,
        on_true: None,
    }
}

fn jump(code: u16, k: u32, to: Target) -> Insn {
    Insn {
        code,
        k,
        on_true: Some(to),
    }
}

fn errno(e: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA)
}

/// The whole program, jumps resolved.
pub(crate) fn program() -> Result<Vec<libc::sock_filter>, String> {
    let nr = |n: libc::c_long| u32::try_from(n).map_err(|_| format!("syscall {n} out of range"));
    let mut main = vec![
        stmt(LD_W_ABS, ARCH_OFFSET),
        // Wrong architecture: the next instruction kills; the right one skips it.
        Insn {
            code: JEQ_K,
            k: ARCH,
            on_true: None,
        },
        stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(LD_W_ABS, NR),
    ];
    #[cfg(target_arch = "x86_64")]
    main.push(jump(JGE_K, X32_BIT, Target::Deny));
    main.push(jump(JEQ_K, nr(libc::SYS_clone3)?, Target::NoSys));
    main.push(jump(JEQ_K, nr(libc::SYS_clone)?, Target::Clone));
    main.push(jump(JEQ_K, nr(libc::SYS_ioctl)?, Target::Ioctl));
    main.push(jump(JEQ_K, nr(libc::SYS_openat2)?, Target::NoSys));
    for &(call, arg) in MODE_SETTERS {
        main.push(jump(JEQ_K, nr(call)?, Target::Mode(arg)));
    }
    for &(call, arg) in NODE_MAKERS {
        main.push(jump(JEQ_K, nr(call)?, Target::Node(arg)));
    }
    for &call in XATTR_SETTERS {
        main.push(jump(JEQ_K, nr(call)?, Target::NotSupported));
    }
    for &call in DENIED {
        main.push(jump(JEQ_K, nr(call)?, Target::Deny));
    }
    main.push(stmt(RET_K, libc::SECCOMP_RET_ALLOW));
    let clone_at = main.len();
    main.push(stmt(LD_W_ABS, arg_low(0)));
    main.push(jump(JSET_K, NAMESPACE_FLAGS as u32, Target::Deny));
    main.push(stmt(RET_K, libc::SECCOMP_RET_ALLOW));
    let ioctl_at = main.len();
    // The request number is an `unsigned int` in the kernel; only its low 32 bits count.
    main.push(stmt(LD_W_ABS, arg_low(1)));
    main.push(jump(JEQ_K, libc::TIOCSTI as u32, Target::Deny));
    main.push(jump(JEQ_K, libc::TIOCLINUX as u32, Target::Deny));
    main.push(stmt(RET_K, libc::SECCOMP_RET_ALLOW));
    // One short block per mode argument position: the set-id bits refuse the call.
    let mut mode_at = Vec::new();
    for arg in positions(MODE_SETTERS) {
        mode_at.push((arg, main.len()));
        main.push(stmt(LD_W_ABS, arg_low(arg)));
        main.push(jump(JSET_K, SET_ID_BITS, Target::Deny));
        main.push(stmt(RET_K, libc::SECCOMP_RET_ALLOW));
    }
    // mknod: no set-id bits, and no character or block device.
    let mut node_at = Vec::new();
    for arg in positions(NODE_MAKERS) {
        node_at.push((arg, main.len()));
        main.push(stmt(LD_W_ABS, arg_low(arg)));
        main.push(jump(JSET_K, SET_ID_BITS, Target::Deny));
        main.push(stmt(AND_K, libc::S_IFMT));
        main.push(jump(JEQ_K, libc::S_IFCHR, Target::Deny));
        main.push(jump(JEQ_K, libc::S_IFBLK, Target::Deny));
        main.push(stmt(RET_K, libc::SECCOMP_RET_ALLOW));
    }
    let deny_at = main.len();
    main.push(stmt(RET_K, errno(libc::EPERM)));
    let nosys_at = main.len();
    main.push(stmt(RET_K, errno(libc::ENOSYS)));
    let not_supported_at = main.len();
    main.push(stmt(RET_K, errno(libc::EOPNOTSUPP)));
    let block = |blocks: &[(u32, usize)], arg: u32| {
        blocks
            .iter()
            .find(|(a, _)| *a == arg)
            .map(|(_, at)| *at)
            .ok_or_else(|| format!("no seccomp block for argument {arg}"))
    };

    let mut out = Vec::with_capacity(main.len());
    for (i, insn) in main.iter().enumerate() {
        let (jt, jf) = match insn.on_true {
            None if insn.code == JEQ_K => (1, 0),
            None => (0, 0),
            Some(target) => {
                let to = match target {
                    Target::Deny => deny_at,
                    Target::NoSys => nosys_at,
                    Target::NotSupported => not_supported_at,
                    Target::Clone => clone_at,
                    Target::Ioctl => ioctl_at,
                    Target::Mode(arg) => block(&mode_at, arg)?,
                    Target::Node(arg) => block(&node_at, arg)?,
                };
                let offset = u8::try_from(to - i - 1)
                    .map_err(|_| "the seccomp program is too long for a jump".to_owned())?;
                (offset, 0)
            }
        };
        out.push(libc::sock_filter {
            code: insn.code,
            jt,
            jf,
            k: insn.k,
        });
    }
    Ok(out)
}

/// The distinct argument positions of a table, in order.
fn positions(table: &[(libc::c_long, u32)]) -> Vec<u32> {
    let mut out: Vec<u32> = table.iter().map(|&(_, arg)| arg).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Installs `program` on the calling thread (and so on everything it starts). `no_new_privs`
/// must already be set.
pub(crate) fn install(program: &[libc::sock_filter]) -> Result<(), Errno> {
    let prog = libc::sock_fprog {
        len: u16::try_from(program.len()).map_err(|_| Errno(libc::E2BIG))?,
        filter: program.as_ptr().cast_mut(),
    };
    check(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &prog as *const libc::sock_fprog,
        )
    })
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walks the program like the kernel would for one syscall with the given first four
    /// arguments (only the instructions this program uses).
    fn run(prog: &[libc::sock_filter], arch: u32, nr: u32, args: [u32; 4]) -> u32 {
        let mut pc = 0;
        let mut acc = 0u32;
        loop {
            let i = prog[pc];
            pc += 1;
            match i.code {
                LD_W_ABS => {
                    acc = match i.k {
                        ARCH_OFFSET => arch,
                        NR => nr,
                        k if k == arg_low(0) => args[0],
                        k if k == arg_low(1) => args[1],
                        k if k == arg_low(2) => args[2],
                        k if k == arg_low(3) => args[3],
                        k => panic!("load of offset {k}"),
                    }
                }
                AND_K => acc &= i.k,
                RET_K => return i.k,
                code => {
                    let taken = match code {
                        JEQ_K => acc == i.k,
                        JSET_K => acc & i.k != 0,
                        #[cfg(target_arch = "x86_64")]
                        JGE_K => acc >= i.k,
                        other => panic!("opcode {other:#x}"),
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
            }
        }
    }

    #[test]
    fn the_program_refuses_what_it_should_and_nothing_else() {
        let prog = program().unwrap();
        assert!(prog.len() < 128, "{} instructions", prog.len());
        let nr = |n: libc::c_long| u32::try_from(n).unwrap();
        let eperm = errno(libc::EPERM);
        let allow = libc::SECCOMP_RET_ALLOW;
        let suid = libc::S_ISUID;
        let sgid = libc::S_ISGID;
        let reg = libc::S_IFREG;
        let chr = libc::S_IFCHR;
        let blk = libc::S_IFBLK;
        let fifo = libc::S_IFIFO;
        let mut cases = vec![
            // Modes: the set-id bits are refused wherever a mode is given, nothing else is.
            (ARCH, nr(libc::SYS_fchmod), [3, 0o755, 0, 0], allow),
            (ARCH, nr(libc::SYS_fchmod), [3, 0o4755, 0, 0], eperm),
            (ARCH, nr(libc::SYS_fchmodat), [0, 0, 0o2755, 0], eperm),
            (ARCH, nr(libc::SYS_fchmodat), [0, 0, 0o1777, 0], allow),
            (ARCH, nr(libc::SYS_fchmodat2), [0, 0, 0o6000, 0], eperm),
            (ARCH, nr(libc::SYS_openat), [0, 0, 0o101, 0o644], allow),
            (ARCH, nr(libc::SYS_openat), [0, 0, 0o101, 0o4755], eperm),
            (
                ARCH,
                nr(libc::SYS_openat2),
                [0, 0, 0, 0],
                errno(libc::ENOSYS),
            ),
            (ARCH, nr(libc::SYS_mknodat), [0, 0, fifo | 0o644, 0], allow),
            (ARCH, nr(libc::SYS_mknodat), [0, 0, reg | 0o644, 0], allow),
            (
                ARCH,
                nr(libc::SYS_mknodat),
                [0, 0, reg | suid | 0o755, 0],
                eperm,
            ),
            (
                ARCH,
                nr(libc::SYS_mknodat),
                [0, 0, chr | 0o666, 0x103],
                eperm,
            ),
            (
                ARCH,
                nr(libc::SYS_mknodat),
                [0, 0, blk | 0o600, 0x801],
                eperm,
            ),
            (ARCH, nr(libc::SYS_mkdirat), [0, 0, sgid | 0o755, 0], allow),
            (
                ARCH,
                nr(libc::SYS_fsetxattr),
                [3, 0, 0, 20],
                errno(libc::EOPNOTSUPP),
            ),
            (
                ARCH,
                nr(SYS_SETXATTRAT),
                [0, 0, 0, 0],
                errno(libc::EOPNOTSUPP),
            ),
            (ARCH, nr(libc::SYS_fgetxattr), [3, 0, 0, 20], allow),
        ];
        #[cfg(target_arch = "x86_64")]
        cases.extend([
            (ARCH, nr(libc::SYS_chmod), [0, 0o4755, 0, 0], eperm),
            (ARCH, nr(libc::SYS_chmod), [0, 0o755, 0, 0], allow),
            (ARCH, nr(libc::SYS_creat), [0, 0o2755, 0, 0], eperm),
            (ARCH, nr(libc::SYS_open), [0, 0o1101, 0o644, 0], allow),
            (ARCH, nr(libc::SYS_open), [0, 0o1101, 0o4755, 0], eperm),
            (ARCH, nr(libc::SYS_mknod), [0, chr | 0o666, 0x103, 0], eperm),
            (ARCH, nr(libc::SYS_mknod), [0, fifo | 0o600, 0, 0], allow),
            (
                ARCH,
                nr(libc::SYS_setxattr),
                [0, 0, 0, 20],
                errno(libc::EOPNOTSUPP),
            ),
        ]);
        cases.extend([
            (ARCH, nr(libc::SYS_read), [0, 0, 0, 0], allow),
            (ARCH, nr(libc::SYS_ptrace), [0, 0, 0, 0], eperm),
            (ARCH, nr(libc::SYS_io_uring_setup), [0, 0, 0, 0], eperm),
            (
                ARCH,
                nr(libc::SYS_clone3),
                [0, 0, 0, 0],
                errno(libc::ENOSYS),
            ),
            (
                ARCH,
                nr(libc::SYS_clone),
                [libc::SIGCHLD as u32, 0, 0, 0],
                allow,
            ),
            (
                ARCH,
                nr(libc::SYS_clone),
                [libc::CLONE_NEWUSER as u32, 0, 0, 0],
                eperm,
            ),
            (
                ARCH,
                nr(libc::SYS_clone),
                [libc::CLONE_NEWNET as u32 | 17, 0, 0, 0],
                eperm,
            ),
            (
                ARCH,
                nr(libc::SYS_ioctl),
                [0, libc::TIOCSTI as u32, 0, 0],
                eperm,
            ),
            (
                ARCH,
                nr(libc::SYS_ioctl),
                [0, libc::TIOCGWINSZ as u32, 0, 0],
                allow,
            ),
            (
                0x4000_0003,
                nr(libc::SYS_read),
                [0, 0, 0, 0],
                libc::SECCOMP_RET_KILL_PROCESS,
            ),
        ]);
        for (arch, call, args, expect) in cases {
            assert_eq!(
                run(&prog, arch, call, args),
                expect,
                "syscall {call} args {args:?}"
            );
        }
    }
}
