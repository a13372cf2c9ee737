// SPDX-License-Identifier: GPL-2.0

//! Attribute structures exchanged with ib_core, and safe views of them.

use super::unions;
use crate::bindings as b;
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};
use kernel::{
    error::{
        to_result,
        Result, //
    },
    num::casts::u32_into_u8,
    str::{
        CStr,
        CStrExt, //
    }, //
};

/// Device attributes (`struct ib_device_attr`), zeroed by ib_core before
/// `query_device` and filled in by the driver.
pub type DeviceAttr = b::ib_device_attr;

/// Port attributes (`struct ib_port_attr`), zeroed by ib_core before
/// `query_port` and filled in by the driver.
pub type PortAttr = b::ib_port_attr;

/// Immutable port attributes (`struct ib_port_immutable`).
pub type PortImmutable = b::ib_port_immutable;

/// Link layer of a port (`enum rdma_link_layer`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LinkLayer {
    /// Ethernet (RoCE, iWARP).
    Ethernet,
}

impl LinkLayer {
    pub(super) fn as_raw(self) -> b::rdma_link_layer {
        match self {
            Self::Ethernet => b::rdma_link_layer_IB_LINK_LAYER_ETHERNET,
        }
    }
}

/// Node type of a device (`enum rdma_node_type`): what ib_core and rdma-core
/// take it for (an InfiniBand or RoCE channel adapter, or an iWARP RNIC).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NodeType {
    /// A channel adapter: InfiniBand or RoCE.
    Ca,
    /// An iWARP RNIC.
    Rnic,
}

impl NodeType {
    pub(super) fn as_raw(self) -> u8 {
        match self {
            Self::Ca => u32_into_u8::<{ b::RDMA_NODE_IB_CA }>(),
            Self::Rnic => u32_into_u8::<{ b::RDMA_NODE_RNIC }>(),
        }
    }
}

/// Type of a GID table entry (`enum ib_gid_type`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum GidType {
    /// InfiniBand GID.
    Ib,
    /// RoCE v1 (Ethertype 0x8915).
    RoceV1,
    /// RoCE v2 (UDP port 4791).
    RoceV2,
}

/// A network device, borrowed for `'a` (ib_core or the caller holds a
/// reference on it).
///
/// # Invariants
///
/// `ptr` points to a valid `struct net_device` for `'a`.
#[derive(Clone, Copy)]
pub struct NetDev<'a> {
    ptr: NonNull<kernel::bindings::net_device>,
    _p: PhantomData<&'a kernel::bindings::net_device>,
}

impl<'a> NetDev<'a> {
    /// # Safety
    ///
    /// `ptr` must point to a `struct net_device` that stays valid for `'a`.
    pub(super) unsafe fn from_raw(ptr: NonNull<kernel::bindings::net_device>) -> Self {
        // INVARIANT: per the safety requirements.
        Self {
            ptr,
            _p: PhantomData,
        }
    }

    pub(super) fn as_raw(&self) -> *mut kernel::bindings::net_device {
        self.ptr.as_ptr()
    }

    /// Whether `self` and `other` are the same netdev.
    pub fn same_as(&self, other: &NetDev<'_>) -> bool {
        self.ptr == other.ptr
    }

    /// Whether the netdev is an Ethernet device (`ARPHRD_ETHER`, 6-byte
    /// addresses).
    pub fn is_ether(&self) -> bool {
        // SAFETY: `ptr` is a valid netdev (type invariant); the helpers read
        // one field each.
        unsafe {
            u32::from(b::netdev_type(self.ptr.as_ptr())) == b::ARPHRD_ETHER
                && u32::from(b::netdev_addr_len(self.ptr.as_ptr())) == kernel::bindings::ETH_ALEN
        }
    }

    /// Copies the first 6 bytes of an address array of the netdev, `None`
    /// if its addresses are not 6 bytes long.
    fn addr6(&self, addr: *const u8) -> Option<[u8; 6]> {
        // SAFETY: `ptr` is a valid netdev (type invariant).
        let len = unsafe { b::netdev_addr_len(self.ptr.as_ptr()) };
        if u32::from(len) != kernel::bindings::ETH_ALEN || addr.is_null() {
            return None;
        }
        let mut mac = [0u8; 6];
        // SAFETY: `addr` is one of the netdev's address arrays, which hold
        // at least `addr_len` (6) bytes; `mac` has room for 6.
        unsafe { core::ptr::copy_nonoverlapping(addr, mac.as_mut_ptr(), 6) };
        Some(mac)
    }

    /// The current Ethernet address of the netdev (`dev_addr`), `None` if it
    /// is not 6 bytes long.
    pub fn mac(&self) -> Option<[u8; 6]> {
        // SAFETY: `ptr` is a valid netdev (type invariant).
        self.addr6(unsafe { b::netdev_dev_addr(self.ptr.as_ptr()) })
    }

    /// The permanent (burnt-in) Ethernet address of the netdev
    /// (`perm_addr`, all zeroes if it has none), `None` if its addresses
    /// are not 6 bytes long.
    pub fn perm_addr(&self) -> Option<[u8; 6]> {
        // SAFETY: `ptr` is a valid netdev (type invariant).
        self.addr6(unsafe { b::netdev_perm_addr(self.ptr.as_ptr()) })
    }

    /// `is_vlan_dev()`.
    pub fn is_vlan(&self) -> bool {
        // SAFETY: `ptr` is a valid netdev (type invariant).
        unsafe { b::is_vlan_dev(self.ptr.as_ptr()) }
    }

    /// `netif_is_bridge_master()`.
    pub fn is_bridge_master(&self) -> bool {
        // SAFETY: `ptr` is a valid netdev (type invariant).
        unsafe { b::netif_is_bridge_master(self.ptr.as_ptr()) }
    }

    /// `netif_is_lag_master()` (bond and team masters).
    pub fn is_lag_master(&self) -> bool {
        // SAFETY: `ptr` is a valid netdev (type invariant).
        unsafe { b::netif_is_lag_master(self.ptr.as_ptr()) }
    }

    /// `netif_running() && netif_carrier_ok()`.
    pub fn oper_up(&self) -> bool {
        // SAFETY: `ptr` is a valid netdev (type invariant).
        unsafe { b::netif_running(self.ptr.as_ptr()) && b::netif_carrier_ok(self.ptr.as_ptr()) }
    }

    /// The netdev's MTU.
    pub fn mtu(&self) -> u32 {
        // SAFETY: `ptr` is a valid netdev (type invariant).
        unsafe { b::netdev_mtu(self.ptr.as_ptr()) }
    }

    /// The netdev's name. Only stable under RTNL: use it for messages.
    pub fn name(&self) -> &CStr {
        // SAFETY: `ptr` is a valid netdev (type invariant); its name is a
        // NUL-terminated array inside it, rewritten only under RTNL (with
        // the terminating NUL kept in place).
        unsafe { CStr::from_char_ptr(b::netdev_name(self.ptr.as_ptr())) }
    }
}

/// A reference on a netdev (taken with `dev_hold`), dropped with `dev_put`.
///
/// # Invariants
///
/// `ptr` points to a `struct net_device` on which this object holds a
/// reference.
pub struct NetDevRef {
    ptr: NonNull<kernel::bindings::net_device>,
}

// SAFETY: A netdev reference may be dropped from any thread.
unsafe impl Send for NetDevRef {}
// SAFETY: `NetDevRef` only gives out `NetDev` views, whose methods may be
// called from any thread.
unsafe impl Sync for NetDevRef {}

impl NetDevRef {
    /// # Safety
    ///
    /// `ptr` must point to a netdev on which the caller holds a reference
    /// (`dev_hold`), which the new object takes over.
    pub(super) unsafe fn from_held(ptr: NonNull<kernel::bindings::net_device>) -> Self {
        // INVARIANT: per the safety requirements.
        Self { ptr }
    }

    /// A view of the netdev for as long as the reference is held.
    pub fn get(&self) -> NetDev<'_> {
        // INVARIANT: the reference keeps the netdev alive for `'_`.
        NetDev {
            ptr: self.ptr,
            _p: PhantomData,
        }
    }
}

impl Drop for NetDevRef {
    fn drop(&mut self) {
        // SAFETY: we hold a reference on `ptr` (type invariant).
        unsafe { b::dev_put(self.ptr.as_ptr()) };
    }
}

/// A GID table entry as ib_core hands it to `add_gid`/`del_gid`.
///
/// # Invariants
///
/// `raw` is a valid `struct ib_gid_attr` for `'a`.
pub struct GidAttr<'a> {
    raw: &'a b::ib_gid_attr,
}

impl<'a> GidAttr<'a> {
    /// # Safety
    ///
    /// `ptr` must point to a valid `struct ib_gid_attr` for `'a`.
    pub(super) unsafe fn from_raw(ptr: *const b::ib_gid_attr) -> Self {
        // SAFETY: per the safety requirements.
        let raw = unsafe { &*ptr };
        Self { raw }
    }

    /// The GID, in network byte order.
    pub fn gid(&self) -> [u8; 16] {
        // SAFETY: every variant of `union ib_gid` is 16 plain bytes.
        unsafe { unions::read::<_, [u8; 16]>(&self.raw.gid) }
    }

    /// The index of the entry in the port's GID table.
    pub fn index(&self) -> u16 {
        self.raw.index
    }

    /// The port number (1-based).
    pub fn port(&self) -> u32 {
        self.raw.port_num
    }

    /// The type of the entry, `None` for values this layer does not know.
    pub fn gid_type(&self) -> Option<GidType> {
        match self.raw.gid_type {
            b::ib_gid_type_IB_GID_TYPE_IB => Some(GidType::Ib),
            b::ib_gid_type_IB_GID_TYPE_ROCE => Some(GidType::RoceV1),
            b::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP => Some(GidType::RoceV2),
            _ => None,
        }
    }

    /// The 802.1Q VLAN ID (`None` if untagged) and the MAC of frames sent
    /// with this entry, as ib_core derives them from the entry's netdev
    /// (`rdma_read_gid_l2_fields`: a VLAN netdev, or an upper device of
    /// one); `ENODEV` if the entry has no netdev.
    pub fn l2_fields(&self) -> Result<(Option<u16>, [u8; 6])> {
        let mut vlan = 0u16;
        let mut mac = [0u8; 6];
        // SAFETY: `raw` is a valid `ib_gid_attr` (type invariant); `vlan`
        // and `mac` (6 bytes, as `ether_addr_copy` writes) are writable.
        to_result(unsafe { b::rdma_read_gid_l2_fields(self.raw, &mut vlan, mac.as_mut_ptr()) })?;
        // 0xffff: not on a VLAN.
        Ok(((vlan != 0xffff).then_some(vlan), mac))
    }
}
