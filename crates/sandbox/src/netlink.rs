//! Bring up the loopback interface of a fresh network namespace (it starts
//! down): one `RTM_NEWLINK` message over a netlink socket, with the kernel's
//! acknowledgement read back. What `ip link set lo up` does, without
//! depending on iproute2 being installed.
//!
//! Layer: used by the launcher's second stage for `network = "loopback"`.

use std::os::fd::AsRawFd;

use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto, socket,
};

use crate::SandboxError;

const RTM_NEWLINK: u16 = 16;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLMSG_ERROR: u16 = 2;
const IFF_UP: u32 = 1;
/// `lo` is the first interface of every network namespace.
const LOOPBACK_INDEX: i32 = 1;

/// Set `lo` up in this process's network namespace.
pub fn loopback_up() -> Result<(), SandboxError> {
    let fail = |e: nix::Error| SandboxError::Setup(format!("cannot bring loopback up: {e}"));
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )
    .map_err(fail)?;
    let mut msg = Vec::with_capacity(32);
    // struct nlmsghdr
    msg.extend_from_slice(&32u32.to_ne_bytes());
    msg.extend_from_slice(&RTM_NEWLINK.to_ne_bytes());
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    // struct ifinfomsg: family (AF_UNSPEC), padding, type, index, flags, change
    msg.extend_from_slice(&[0, 0]);
    msg.extend_from_slice(&0u16.to_ne_bytes());
    msg.extend_from_slice(&LOOPBACK_INDEX.to_ne_bytes());
    msg.extend_from_slice(&IFF_UP.to_ne_bytes());
    msg.extend_from_slice(&IFF_UP.to_ne_bytes());
    sendto(
        fd.as_raw_fd(),
        &msg,
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )
    .map_err(fail)?;
    let mut answer = [0u8; 256];
    let n = recv(fd.as_raw_fd(), &mut answer, MsgFlags::empty()).map_err(fail)?;
    // struct nlmsgerr: the header, then the error (0: done).
    let kind = answer.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let code = answer
        .get(16..20)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    match (n >= 20, kind, code) {
        (true, Some(NLMSG_ERROR), Some(0)) => Ok(()),
        (true, Some(NLMSG_ERROR), Some(code)) => Err(SandboxError::Setup(format!(
            "cannot bring loopback up: {}",
            std::io::Error::from_raw_os_error(-code)
        ))),
        _ => Err(SandboxError::Setup(
            "cannot bring loopback up: the kernel's answer was not understood".to_owned(),
        )),
    }
}
