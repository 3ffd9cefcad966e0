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
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

/// Where a conditional jump goes when its test holds.
#[derive(Clone, Copy)]
enum Target {
    Deny,
    NoSys,
    Clone,
    Ioctl,
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
    let deny_at = main.len();
    main.push(stmt(RET_K, errno(libc::EPERM)));
    let nosys_at = main.len();
    main.push(stmt(RET_K, errno(libc::ENOSYS)));

    let mut out = Vec::with_capacity(main.len());
    for (i, insn) in main.iter().enumerate() {
        let (jt, jf) = match insn.on_true {
            None if insn.code == JEQ_K => (1, 0),
            None => (0, 0),
            Some(target) => {
                let to = match target {
                    Target::Deny => deny_at,
                    Target::NoSys => nosys_at,
                    Target::Clone => clone_at,
                    Target::Ioctl => ioctl_at,
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

    /// Walks the program like the kernel would for one syscall with the given first two
    /// arguments (only the instructions this program uses).
    fn run(prog: &[libc::sock_filter], arch: u32, nr: u32, args: [u32; 2]) -> u32 {
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
                        k => panic!("load of offset {k}"),
                    }
                }
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
        assert!(prog.len() < 64, "{} instructions", prog.len());
        let nr = |n: libc::c_long| u32::try_from(n).unwrap();
        let eperm = errno(libc::EPERM);
        let cases = [
            (ARCH, nr(libc::SYS_read), [0, 0], libc::SECCOMP_RET_ALLOW),
            (ARCH, nr(libc::SYS_ptrace), [0, 0], eperm),
            (ARCH, nr(libc::SYS_io_uring_setup), [0, 0], eperm),
            (ARCH, nr(libc::SYS_clone3), [0, 0], errno(libc::ENOSYS)),
            (
                ARCH,
                nr(libc::SYS_clone),
                [libc::SIGCHLD as u32, 0],
                libc::SECCOMP_RET_ALLOW,
            ),
            (
                ARCH,
                nr(libc::SYS_clone),
                [libc::CLONE_NEWUSER as u32, 0],
                eperm,
            ),
            (
                ARCH,
                nr(libc::SYS_clone),
                [libc::CLONE_NEWNET as u32 | 17, 0],
                eperm,
            ),
            (ARCH, nr(libc::SYS_ioctl), [0, libc::TIOCSTI as u32], eperm),
            (
                ARCH,
                nr(libc::SYS_ioctl),
                [0, libc::TIOCGWINSZ as u32],
                libc::SECCOMP_RET_ALLOW,
            ),
            (
                0x4000_0003,
                nr(libc::SYS_read),
                [0, 0],
                libc::SECCOMP_RET_KILL_PROCESS,
            ),
        ];
        for (arch, call, args, expect) in cases {
            assert_eq!(
                run(&prog, arch, call, args),
                expect,
                "syscall {call} args {args:?}"
            );
        }
    }
}
