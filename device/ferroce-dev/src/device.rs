// SPDX-License-Identifier: GPL-2.0
//! The device: BAR0 register file, reset/enable handshake, admin queue,
//! event queues, doorbell pages and the object tables.
//!
//! A vfio-user server drives it through [`Device::bar_read`],
//! [`Device::bar_write`] and [`Device::reset`]; the control socket through
//! [`Device::set_link`], [`Device::gids`], [`Device::objects`] and
//! [`Device::counters`]. Nothing here panics on guest input: every guest
//! value is range-checked, arithmetic on it is checked or wrapping by
//! design, and DMA failures are reported as statuses.
//!
//! This file holds the [`Device`] handle and the [`State`] behind its lock;
//! the parts of the programming model live in submodules: `registers`
//! (BAR0, DEV_CTRL, the enable check), `adminq` (ADMINQ_DB and command
//! completions), `eq_cq` (EQEs, EQ_DB, CQ doorbells, CQEs), `doorbells`
//! (BAR2 decoding, SQ/RQ doorbells) and `bus_master` (PCI Bus Master
//! Enable: the DMA gate and what is held while it is clear).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, TryLockError};
use std::time::Instant;

use crate::fault::{FaultConfig, FaultCounters, FaultState};
use crate::gid::GidEntry;
use crate::hw::{self, *};
use crate::mem::{GuestMemory, IrqSink};
use crate::objects::{Ah, Cq, Eq, McastGroup, Mr, Pd, Qp, Srq, Table};
use crate::transport::DataCounters;
use serde::Serialize;

mod adminq;
mod bus_master;
mod doorbells;
mod eq_cq;
mod registers;

pub(crate) use adminq::AdminQ;
pub use bus_master::BusMasterCounters;
use bus_master::{BusMasterGate, Deferred};

/// Resource limits of one device instance (reported by QUERY_CAPS).
#[derive(Debug, Clone, Serialize)]
pub struct Limits {
    /// Protection domains.
    pub max_pd: u32,
    /// Memory regions.
    pub max_mr: u32,
    /// Completion queues.
    pub max_cq: u32,
    /// Queue pairs (not counting the GSI QP); also the number of SRQs.
    pub max_qp: u32,
    /// Address handles.
    pub max_ah: u32,
    /// Entries per CQ (<= 32768).
    pub max_cqe: u32,
    /// Entries per SQ/RQ (<= 32768).
    pub max_qp_wr: u32,
    /// SGEs per WQE.
    pub max_sge: u32,
    /// Inline bytes per SQ WQE.
    pub max_inline: u32,
    /// Largest MR in bytes.
    pub max_mr_size: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_pd: 1024,
            max_mr: 4096,
            max_cq: 1024,
            max_qp: 1024,
            max_ah: 4096,
            max_cqe: 32768,
            max_qp_wr: 16384,
            max_sge: 16,
            max_inline: 256,
            max_mr_size: 1 << 40,
        }
    }
}

/// Construction parameters.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceConfig {
    /// Port MAC address.
    pub mac: [u8; 6],
    /// Initial Ethernet MTU.
    pub mtu: u32,
    /// MSI-X vectors (1..=64); EQs 1..n-1 are completion EQs.
    pub num_vectors: u16,
    /// Object limits.
    pub limits: Limits,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        Self {
            mac: [0x52, 0x54, 0x00, 0xfe, 0x00, 0x01],
            mtu: PORT_MTU_DEFAULT,
            num_vectors: MSIX_VECTORS,
            limits: Limits::default(),
        }
    }
}

/// Device counters: those QUERY_COUNTERS returns, and more.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counters {
    /// The counters QUERY_COUNTERS returns (`struct ferroce_counters`);
    /// flattened into the control socket's JSON.
    #[serde(flatten)]
    pub hw: hw::Counters,
    /// The last few refusals, newest last (diagnostics only).
    pub recent_errors: VecDeque<String>,
    /// Data path counters (most also in QUERY_COUNTERS since 1.4).
    pub data: DataCounters,
    /// PCI Bus Master Enable and what was held or refused while it was clear.
    pub bus_master: BusMasterCounters,
    /// Port counters, when a port is attached (control socket only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<serde_json::Value>,
}

const RECENT_ERRORS: usize = 16;

/// Objects of the device, for dumps.
#[derive(Debug, Clone, Serialize)]
pub struct ObjectsSnapshot {
    /// Event queues by eqn.
    pub eqs: Vec<Entry<Eq>>,
    /// Protection domains by pdn.
    pub pds: Vec<Entry<Pd>>,
    /// Memory regions by index (the key is inside).
    pub mrs: Vec<Entry<Mr>>,
    /// Completion queues by cqn.
    pub cqs: Vec<Entry<Cq>>,
    /// Queue pairs by qpn.
    pub qps: Vec<Entry<Qp>>,
    /// Shared receive queues by srqn.
    pub srqs: Vec<Entry<Srq>>,
    /// Address handles by ahn.
    pub ahs: Vec<Entry<Ah>>,
    /// Multicast groups (1.7) with their attached QPs, oldest group first.
    pub mcast: Vec<McastGroup>,
}

/// One object with its handle.
#[derive(Debug, Clone, Serialize)]
pub struct Entry<T> {
    /// Handle (eqn, pdn, MR index, cqn, qpn, srqn, ahn).
    pub handle: u32,
    /// The object.
    #[serde(flatten)]
    pub obj: T,
}

/// Device status summary.
#[derive(Debug, Clone, Serialize)]
pub struct StatusInfo {
    /// DEV_STATUS register.
    pub dev_status: u32,
    /// FATAL_CODE register.
    pub fatal_code: u32,
    /// Link up.
    pub link_up: bool,
    /// Ethernet MTU.
    pub mtu: u32,
    /// The port's current MAC.
    pub mac: String,
    /// Admin SQ consumer index.
    pub adminq_ci: u16,
}

/// The MACs the port answers to (device.rst "Port MAC"), readable without
/// the device lock by the port's receive steering: the current MAC, and the
/// source MACs of VLAN GID entries that differ from it (a VLAN netdev with an
/// address of its own).
#[derive(Debug, Default)]
pub(crate) struct PortMacs {
    current: AtomicU64,
    others: RwLock<Vec<[u8; 6]>>,
}

impl PortMacs {
    fn new(mac: [u8; 6]) -> Self {
        let m = Self::default();
        m.set(mac);
        m
    }

    pub(crate) fn set(&self, mac: [u8; 6]) {
        let [a, b, c, d, e, f] = mac;
        let v = u64::from_be_bytes([0, 0, a, b, c, d, e, f]);
        self.current.store(v, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> [u8; 6] {
        let [_, _, a, b, c, d, e, f] = self.current.load(Ordering::Relaxed).to_be_bytes();
        [a, b, c, d, e, f]
    }

    pub(crate) fn set_others(&self, macs: Vec<[u8; 6]>) {
        *self.others.write().unwrap_or_else(|e| e.into_inner()) = macs;
    }

    /// Whether frames for `mac` are the port's.
    pub(crate) fn answers(&self, mac: &[u8; 6]) -> bool {
        *mac == self.get()
            || self
                .others
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .contains(mac)
    }
}

/// Everything behind the device lock.
pub(crate) struct State {
    /// The configuration; `cfg.mac` is the port's permanent MAC.
    pub cfg: DeviceConfig,
    /// The port's current MAC (SET_PORT_MAC), also in [`Device`]'s
    /// lock-free copy; set through [`State::set_mac`].
    pub mac: [u8; 6],
    pub mac_shared: Arc<PortMacs>,
    /// The source MACs of VLAN GID entries other than `mac` (kept by
    /// [`State::sync_gid_macs`], also published in `mac_shared`).
    pub gid_macs: Vec<[u8; 6]>,
    /// Guest memory, behind `gate`.
    pub mem: Arc<dyn GuestMemory>,
    /// PCI Bus Master Enable: refuses DMA while it is clear.
    pub gate: Arc<BusMasterGate>,
    /// What is held while BME is clear.
    pub deferred: Deferred,
    pub bus_master_counters: BusMasterCounters,
    pub irq: Arc<dyn IrqSink>,
    // registers
    pub enabled: bool,
    pub status: u32,
    pub fatal_code: u32,
    pub scratch: u32,
    pub adminq_base: u64,
    pub admincq_base: u64,
    pub adminq_depth: u32,
    pub aeq_base: u64,
    pub aeq_depth: u32,
    pub mtu: u32,
    pub link_up: bool,
    // queues and objects
    pub adminq: Option<AdminQ>,
    pub eqs: Vec<Option<Eq>>,
    pub pds: Table<Pd>,
    pub mrs: Table<Mr>,
    pub cqs: Table<Cq>,
    pub qps: Table<Qp>,
    /// Shared receive queues (1.6), as many as QPs.
    pub srqs: Table<Srq>,
    pub ahs: Table<Ah>,
    /// Multicast groups (1.7, ATTACH_MCAST), at most `MAX_MCAST_GRP`,
    /// oldest first; none is empty.
    pub mcast: Vec<McastGroup>,
    pub gids: Vec<Option<GidEntry>>,
    pub counters: Counters,
    // data path
    /// Frames waiting to go out on the wire.
    pub tx: VecDeque<Vec<u8>>,
    /// Frames this device sent to its own MAC.
    pub loopback: VecDeque<Vec<u8>>,
    /// Buffers of frames already sent, for new frames (no allocation per
    /// frame): given back by [`Device::swap_tx`] and after a looped-back
    /// frame was received.
    pub spare_frames: Vec<Vec<u8>>,
    /// QPs with a coalesced ACK pending.
    pub ack_list: Vec<u32>,
    /// UC QPs waiting for room in the TX queue (they have no window).
    pub tx_waiters: Vec<u32>,
    /// Bumped whenever an MR stops translating as before (DEREG_MR,
    /// LOCAL_INV, remote invalidation, MODIFY_MR) or a memory window
    /// changes (1.7: bind, unbind, invalidation, DEREG_MR): translations
    /// the engine cached under an older value are redone before use.
    pub mr_epoch: u64,
    /// The data path clock (ns), advanced by [`Device::tick`].
    pub now_ns: u64,
    /// RC QPs with packets unacknowledged, as last counted
    /// (`transport::State::rc_window`), and when.
    pub busy_rc: usize,
    pub busy_counted_ns: u64,
    /// Their packets sent and not acknowledged, as each last reported them
    /// (`transport::State::count_inflight`).
    pub rc_inflight: u32,
    /// IPv4 identification of the next frame.
    pub ip_id: u16,
    /// Where a send or receive WQE is read to be decoded: kept, not
    /// zeroed for each WQE (each read overwrites the bytes it decodes).
    /// Lent out while a WQE is decoded (`transport::State::with_wqe_buf`).
    pub wqe_buf: Vec<u8>,
    /// Data path counters.
    pub data: DataCounters,
    /// Fault injection.
    pub faults: FaultState,
    /// Wakes the engine thread: for looped-back frames left over, and for
    /// frames queued for the wire when no `sender` is installed.
    pub waker: Option<Waker>,
    /// Sends the queued frames on the calling thread; an entry point calls
    /// it after it released the device lock (see [`Device::release`]).
    pub sender: Option<Waker>,
    /// The earliest data path timer armed by an entry point since the
    /// engine thread last computed its sleep ([`Device::sleep_until`]).
    pub timer_armed: Option<u64>,
    /// Until when the engine thread sleeps, unless woken.
    pub engine_sleeps_until: u64,
    /// Real-time clock base (None: virtual time, advanced by `tick` only).
    pub clock: Option<std::time::Instant>,
    /// Reports the attached port's counters.
    pub port_stats: Option<StatsFn>,
}

/// Produces the port counters for [`Device::counters`].
pub(crate) type StatsFn = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

/// Wakes the port's engine thread, or sends the queued frames.
pub(crate) type Waker = Arc<dyn Fn() + Send + Sync>;

/// How often the device lock was taken and waited for, kept outside the
/// lock (reported in [`DataCounters`]).
#[derive(Debug, Default)]
struct LockStats {
    taken: AtomicU64,
    contended: AtomicU64,
    wait_ns: AtomicU64,
}

/// The ferroce device model.
pub struct Device {
    state: Mutex<State>,
    /// The MACs the port answers to, shared with `State`.
    mac: Arc<PortMacs>,
    lock_stats: LockStats,
}

/// A CQE could not be delivered (see [`Device::post_cqe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    /// No such CQ.
    #[error("no such CQ")]
    NoCq,
    /// The CQ is in error (overflowed or hit a DMA error).
    #[error("CQ in error")]
    CqError,
    /// The CQ is full: it is now in error and a CQ_ERROR event was posted.
    #[error("CQ overflow")]
    Overflow,
    /// A DMA access failed: the CQ is now in error.
    #[error("DMA error")]
    Dma,
    /// Bus Master Enable is clear: nothing was written, the CQ is unchanged.
    #[error("bus mastering disabled")]
    NoBusMaster,
}

pub(crate) fn is_pow2_in(v: u32, min: u32, max: u32) -> bool {
    v.is_power_of_two() && v >= min && v <= max
}

impl Device {
    /// Creates a device in the reset state with the link up.
    pub fn new(cfg: DeviceConfig, mem: Arc<dyn GuestMemory>, irq: Arc<dyn IrqSink>) -> Self {
        let mut cfg = cfg;
        cfg.num_vectors = cfg.num_vectors.clamp(1, 64);
        cfg.limits.max_cqe = cfg.limits.max_cqe.clamp(2, 32768);
        cfg.limits.max_qp_wr = cfg.limits.max_qp_wr.clamp(1, 32768);
        cfg.limits.max_sge = cfg.limits.max_sge.clamp(1, 60);
        cfg.limits.max_inline = cfg.limits.max_inline.min(1024 - 64);
        cfg.limits.max_qp = cfg.limits.max_qp.min(QPN_MASK - FIRST_QPN);
        cfg.limits.max_mr = cfg.limits.max_mr.min(1 << 24);
        if !(PORT_MTU_MIN..=PORT_MTU_MAX).contains(&cfg.mtu) {
            cfg.mtu = PORT_MTU_DEFAULT;
        }
        let limits = cfg.limits.clone();
        let gate = Arc::new(BusMasterGate::new(mem));
        let mac = Arc::new(PortMacs::new(cfg.mac));
        let st = State {
            mac: cfg.mac,
            mac_shared: mac.clone(),
            gid_macs: Vec::new(),
            mem: gate.clone(),
            gate,
            deferred: Deferred::default(),
            bus_master_counters: BusMasterCounters {
                enabled: true,
                ..BusMasterCounters::default()
            },
            irq,
            enabled: false,
            status: 0,
            fatal_code: FATAL_NONE,
            scratch: 0,
            adminq_base: 0,
            admincq_base: 0,
            adminq_depth: 0,
            aeq_base: 0,
            aeq_depth: 0,
            mtu: cfg.mtu,
            link_up: true,
            adminq: None,
            eqs: vec![None; usize::from(cfg.num_vectors)],
            pds: Table::new(1, limits.max_pd),
            mrs: Table::new(1, limits.max_mr),
            cqs: Table::new(1, limits.max_cq),
            // qpn 1 is the GSI QP, regular QPs start at FIRST_QPN.
            qps: Table::new(GSI_QPN, limits.max_qp.saturating_add(1)),
            srqs: Table::new(FIRST_SRQN, limits.max_qp),
            ahs: Table::new(1, limits.max_ah),
            mcast: Vec::new(),
            gids: vec![None; GID_TABLE_LEN],
            counters: Counters::default(),
            tx: VecDeque::new(),
            loopback: VecDeque::new(),
            spare_frames: Vec::new(),
            ack_list: Vec::new(),
            tx_waiters: Vec::new(),
            mr_epoch: 0,
            now_ns: 0,
            busy_rc: 0,
            busy_counted_ns: 0,
            rc_inflight: 0,
            ip_id: 0,
            wqe_buf: Vec::new(),
            data: DataCounters::default(),
            faults: FaultState::default(),
            waker: None,
            timer_armed: None,
            engine_sleeps_until: 0,
            sender: None,
            clock: None,
            port_stats: None,
            cfg,
        };
        Self {
            state: Mutex::new(st),
            mac,
            lock_stats: LockStats::default(),
        }
    }

    /// The port's current MAC (device.rst "Port MAC"): what receive
    /// steering accepts RoCE frames for. Does not take the device lock.
    pub fn current_mac(&self) -> [u8; 6] {
        self.mac.get()
    }

    /// Whether `mac` is one of the port's own (unicast) MACs: the current
    /// MAC or a VLAN GID entry's source MAC. Receive steering takes RoCE
    /// frames for these, and (1.7) for every multicast MAC
    /// ([`crate::port::steer`]). Does not take the device lock.
    pub fn answers_mac(&self, mac: &[u8; 6]) -> bool {
        self.mac.answers(mac)
    }

    /// Takes the device lock, counting the times it had to wait.
    fn lock(&self) -> MutexGuard<'_, State> {
        let stats = &self.lock_stats;
        stats.taken.fetch_add(1, Ordering::Relaxed);
        match self.state.try_lock() {
            Ok(st) => st,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                let start = Instant::now();
                let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let waited = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
                stats.contended.fetch_add(1, Ordering::Relaxed);
                stats.wait_ns.fetch_add(waited, Ordering::Relaxed);
                st
            }
        }
    }

    /// A guest read of `data.len()` bytes at `offset` of BAR `bar`.
    pub fn bar_read(&self, bar: u8, offset: u64, data: &mut [u8]) {
        let mut st = self.lock();
        match u32::from(bar) {
            BAR_REGS => {
                let ok_size = data.len() == 4 && offset % 4 == 0 && offset < BAR0_SIZE;
                if !ok_size {
                    st.counters.hw.bad_reg_access += 1;
                    st.note(format!("bad BAR0 read size {} at {offset:#x}", data.len()));
                    data.fill(0xff);
                    return;
                }
                let v = st.reg_read(offset);
                data.copy_from_slice(&v.to_le_bytes());
            }
            BAR_DB => data.fill(0),
            _ => {
                st.counters.hw.bad_reg_access += 1;
                data.fill(0xff);
            }
        }
    }

    /// A guest write of `data` at `offset` of BAR `bar`.
    pub fn bar_write(&self, bar: u8, offset: u64, data: &[u8]) {
        let mut st = self.lock();
        match u32::from(bar) {
            BAR_REGS => {
                let aligned = offset % 4 == 0 && offset < BAR0_SIZE;
                let word = <[u8; 4]>::try_from(data).ok().filter(|_| aligned);
                let Some(word) = word else {
                    st.counters.hw.bad_reg_access += 1;
                    st.note(format!("bad BAR0 write size {} at {offset:#x}", data.len()));
                    return;
                };
                st.reg_write(offset, u32::from_le_bytes(word));
            }
            BAR_DB => {
                st.update_clock();
                st.doorbell_write(offset, data);
            }
            _ => st.counters.hw.bad_reg_access += 1,
        }
        st.pump();
        Self::release(st);
    }

    /// Switches the data path clock to real time (monotonic ns since this
    /// call); [`Device::tick`] arguments are then ignored in favour of it.
    pub fn use_real_clock(&self) {
        let mut st = self.lock();
        if st.clock.is_none() {
            st.clock = Some(std::time::Instant::now());
        }
    }

    /// Installs the function called when a doorbell queued frames for the
    /// wire (the port wakes its sender with it).
    pub fn set_tx_waker(&self, f: Box<dyn Fn() + Send + Sync>) {
        self.lock().waker = Some(Arc::from(f));
    }

    /// Installs the function that sends the frames queued for the wire on
    /// the calling thread (the port's, which serialises its senders). A
    /// BAR write or a received batch then puts its frames on the wire
    /// itself once it released the device lock, instead of waking the
    /// engine thread for them: one thread wakeup fewer between a doorbell
    /// and its first frame, and between a request and its ACK. The
    /// function must not call back into an entry point of this device.
    pub fn set_tx_sender(&self, f: Box<dyn Fn() + Send + Sync>) {
        self.lock().sender = Some(Arc::from(f));
    }

    /// Ends an entry point: wakes the engine thread if it has work
    /// ([`State::wake`]), releases the device lock and then sends the
    /// frames queued for the wire through the installed sender.
    fn release(mut st: MutexGuard<'_, State>) {
        let send = st.wake();
        drop(st);
        if let Some(send) = send {
            send();
        }
    }

    /// Follows the PCI COMMAND register's Bus Master Enable bit: while it
    /// is clear the device issues no DMA and no interrupt; work is held (see
    /// `Documentation/ferroce/device.rst`, "Bus mastering") and resumes
    /// when it is set again. A device starts with BME set; the vfio-user
    /// glue clears it to match a fresh config space.
    pub fn set_bus_master(&self, on: bool) {
        let mut st = self.lock();
        st.set_bus_master(on);
        Self::release(st);
    }

    /// Whether Bus Master Enable is set.
    pub fn bus_master(&self) -> bool {
        self.lock().bus_master()
    }

    /// Function-level reset (also what DEV_CTRL.RESET does).
    pub fn reset(&self) {
        self.lock().reset();
    }

    /// Sets the port link state; posts PORT_ACTIVE/PORT_DOWN when it changes.
    pub fn set_link(&self, up: bool) {
        let mut st = self.lock();
        if st.link_up == up {
            return;
        }
        st.link_up = up;
        let ev = if up { EQE_PORT_ACTIVE } else { EQE_PORT_DOWN };
        st.post_async(ev, 1, 0, 0);
    }

    /// The valid entries of the hardware GID table.
    pub fn gids(&self) -> Vec<GidEntry> {
        self.lock().gids.iter().flatten().cloned().collect()
    }

    /// All live objects.
    pub fn objects(&self) -> ObjectsSnapshot {
        let st = self.lock();
        fn entries<T: Clone>(t: &Table<T>) -> Vec<Entry<T>> {
            t.iter()
                .map(|(handle, obj)| Entry {
                    handle,
                    obj: obj.clone(),
                })
                .collect()
        }
        ObjectsSnapshot {
            eqs: st
                .eqs
                .iter()
                .enumerate()
                .filter_map(|(i, e)| {
                    e.as_ref().map(|obj| Entry {
                        handle: i as u32,
                        obj: obj.clone(),
                    })
                })
                .collect(),
            pds: entries(&st.pds),
            mrs: entries(&st.mrs),
            cqs: entries(&st.cqs),
            qps: entries(&st.qps),
            srqs: entries(&st.srqs),
            ahs: entries(&st.ahs),
            mcast: st.mcast.clone(),
        }
    }

    /// A copy of the counters.
    pub fn counters(&self) -> Counters {
        let (mut counters, port_stats) = {
            let st = self.lock();
            let mut counters = st.counters.clone();
            counters.hw = st.guest_counters();
            counters.data = st.data.clone();
            let stats = &self.lock_stats;
            counters.data.lock_taken = stats.taken.load(Ordering::Relaxed);
            counters.data.lock_contended = stats.contended.load(Ordering::Relaxed);
            counters.data.lock_wait_us = stats.wait_ns.load(Ordering::Relaxed) / 1000;
            counters.bus_master = st.bus_master_counters;
            counters.bus_master.dma_refused = st.gate.refused();
            (counters, st.port_stats.clone())
        };
        counters.port = port_stats.map(|stats| stats());
        counters
    }

    /// Installs the function reporting the attached port's counters.
    pub fn set_port_stats(&self, f: Box<dyn Fn() -> serde_json::Value + Send + Sync>) {
        self.lock().port_stats = Some(Arc::from(f));
    }

    /// Hands one received Ethernet frame to the RDMA engine. Frames that
    /// are not RoCE, not for this device or malformed are dropped and
    /// counted; this never panics.
    pub fn receive(&self, frame: &[u8]) {
        let mut st = self.lock();
        if !st.bus_master() {
            st.bus_master_counters.rx_dropped += 1;
            return;
        }
        st.update_clock();
        st.rx_frame(frame);
        st.pump();
        Self::release(st);
    }

    /// Hands a batch of received frames to the engine; ACKs are coalesced
    /// over the batch.
    pub fn receive_batch<'a>(&self, frames: impl IntoIterator<Item = &'a [u8]>) {
        let mut st = self.lock();
        if !st.bus_master() {
            st.bus_master_counters.rx_dropped += frames.into_iter().count() as u64;
            return;
        }
        st.update_clock();
        for f in frames {
            st.rx_frame(f);
        }
        st.pump();
        Self::release(st);
    }

    /// Takes the frames the engine queued for the wire.
    pub fn take_tx(&self) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        self.swap_tx(&mut frames);
        frames
    }

    /// [`Device::take_tx`] for a sender that gives the buffers back:
    /// `frames` holds frames sent since the last call (their buffers are
    /// reused for new frames) and is refilled with the frames queued now.
    pub fn swap_tx(&self, frames: &mut Vec<Vec<u8>>) {
        let mut st = self.lock();
        st.recycle_frames(frames.drain(..));
        frames.extend(st.tx.drain(..));
        // The queue has room again: READ responses held back resume.
        st.pump();
    }

    /// Whether frames are waiting in [`Device::take_tx`].
    pub fn has_tx(&self) -> bool {
        !self.lock().tx.is_empty()
    }

    /// Advances the data path clock to `now_ns` (monotonic nanoseconds) and
    /// runs the retransmission and RNR timers that expired.
    pub fn tick(&self, now_ns: u64) {
        let mut st = self.lock();
        st.now_ns = st.now_ns.max(now_ns);
        st.update_clock();
        if !st.data_path_runs() {
            return;
        }
        let now = st.now_ns;
        for f in st.faults.release(now, true) {
            st.queue_frame(f);
        }
        st.run_timers();
        st.pump();
    }

    /// Sets the fault injection rates (egress RoCE frames).
    pub fn set_faults(&self, cfg: FaultConfig) {
        self.lock().faults.set(cfg);
    }

    /// The fault configuration and what was injected so far.
    pub fn faults(&self) -> (FaultConfig, FaultCounters, bool) {
        let st = self.lock();
        (st.faults.cfg, st.faults.counters, st.faults.stalled)
    }

    /// Stalls (or resumes) the device: while stalled, doorbells (admin
    /// queue included) are only recorded, received frames are dropped and
    /// timers do not run. Recorded work resumes on unstall.
    pub fn set_stall(&self, on: bool) {
        let mut st = self.lock();
        st.faults.stalled = on;
        if !on && st.bus_master() {
            if let Some(pi) = st.deferred.adminq_pi.take() {
                st.adminq_doorbell(u32::from(pi));
            }
        }
        if st.data_path_runs() {
            let qpns: Vec<u32> = st.qps.iter().map(|(q, _)| q).collect();
            for q in qpns {
                st.sq_progress(q);
            }
            st.pump();
            Self::release(st);
        }
    }

    /// The data path clock.
    pub fn now_ns(&self) -> u64 {
        self.lock().now_ns
    }

    /// Whether work is left over from a bounded entry point (looped-back
    /// frames beyond [`PUMP_BUDGET`]); the engine thread then calls
    /// [`Device::tick`] again without waiting.
    pub fn has_backlog(&self) -> bool {
        self.lock().has_backlog()
    }

    /// The earliest pending data path timer (ns), if any.
    pub fn next_timer(&self) -> Option<u64> {
        self.lock().next_timer()
    }

    /// For the engine thread about to sleep: the data path clock, and the
    /// earliest pending timer or `now + max_ns`, whichever comes first. A
    /// timer that an entry point arms for earlier than that wakes it.
    pub fn sleep_until(&self, max_ns: u64) -> (u64, u64) {
        let mut st = self.lock();
        let now = st.now_ns;
        let until = st
            .next_timer()
            .unwrap_or(u64::MAX)
            .min(now.saturating_add(max_ns));
        st.engine_sleeps_until = until;
        st.timer_armed = None;
        (now, until)
    }

    /// Status summary.
    pub fn status(&self) -> StatusInfo {
        let st = self.lock();
        StatusInfo {
            dev_status: st.status,
            fatal_code: st.fatal_code,
            link_up: st.link_up,
            mtu: st.mtu,
            mac: crate::gid::fmt_mac(&st.mac),
            adminq_ci: st.adminq.as_ref().map_or(0, |a| a.ci),
        }
    }

    /// The configuration in force (after clamping).
    pub fn config(&self) -> DeviceConfig {
        self.lock().cfg.clone()
    }

    /// The state of QP `qpn` (`QPS_*`), if it exists.
    pub fn qp_state(&self, qpn: u32) -> Option<u8> {
        self.lock().qps.get(qpn).map(|q| q.state)
    }

    /// Writes a CQE into CQ `cqn` the way the data path does: owner bit from
    /// the producer index, overflow check against the CQ doorbell record,
    /// completion event when armed. `cqe.owner` is ignored.
    pub fn post_cqe(&self, cqn: u32, cqe: Cqe) -> Result<(), PostError> {
        self.lock().post_cqe(cqn, cqe)
    }

    /// Moves QP `qpn` to `QPS_SQE` (UD/GSI only) or `QPS_ERR` the way the
    /// data path does on a send error; posts QP_FATAL when entering ERR.
    /// Returns false (and changes nothing) for any other request.
    pub fn qp_async_transition(&self, qpn: u32, state: u8) -> bool {
        let mut st = self.lock();
        if !st.bus_master() {
            return false;
        }
        let Some(qp) = st.qps.get_mut(qpn) else {
            return false;
        };
        let ud = qp.qp_type != QPT_RC;
        let ok = match state {
            QPS_SQE => ud && qp.state == QPS_RTS,
            QPS_ERR => qp.state != QPS_RESET,
            _ => false,
        };
        if ok {
            let old = qp.state;
            qp.state = state;
            qp.attr.qp_state = state;
            qp.attr.cur_qp_state = state;
            if state == QPS_ERR {
                st.post_async(EQE_QP_FATAL, qpn, 0, 0);
                st.engine_modified(qpn, old, state);
            }
            st.pump();
        }
        ok
    }

    /// Posts an async QP event (`EQE_QP_*`) to the AEQ; for the data path.
    pub fn post_qp_event(&self, qpn: u32, event: u8, syndrome: u32) {
        self.lock().post_async(event, qpn, syndrome, 0);
    }
}

/// Most looped-back frames one entry point (a BAR write, a received batch,
/// one [`Device::tick`]) processes while it holds the device lock. A
/// doorbell write runs on the vCPU that wrote it, so the work it does
/// synchronously must be bounded; frames left over stay queued, the waker
/// is called, [`Device::next_timer`] reports them as due now and the
/// device's engine thread processes them in further bounded ticks.
pub const PUMP_BUDGET: usize = 256;

impl State {
    /// `struct ferroce_counters` as QUERY_COUNTERS returns it: the device
    /// counters and, since 1.4, the data path's (1.5: UC drops, 1.9:
    /// credits, 1.10: keep-alives).
    pub(crate) fn guest_counters(&self) -> hw::Counters {
        let d = &self.data;
        hw::Counters {
            tx_pkts: d.tx_frames,
            rx_pkts: d.rx_pkts,
            tx_bytes: d.tx_bytes,
            rx_bytes: d.rx_bytes,
            loopback_pkts: d.loopback_frames,
            tx_dropped: d.tx_overflow,
            rx_stalled: d.rx_stalled,
            rx_truncated: d.rx_truncated,
            rx_not_roce: d.rx_not_roce,
            rx_bad_header: d.rx_bad_header,
            rx_bad_bth: d.rx_bad_bth,
            rx_bad_icrc: d.rx_bad_icrc,
            rx_no_qp: d.rx_no_qp,
            rx_bad_key: d.rx_bad_key,
            rx_bad_addr: d.rx_bad_addr,
            rx_ud_no_wqe: d.rx_ud_no_wqe,
            dup_requests: d.dup_requests,
            seq_naks_sent: d.seq_naks_sent,
            rnr_naks_sent: d.rnr_naks_sent,
            err_naks_sent: d.err_naks_sent,
            acks_sent: d.acks_sent,
            responses_rcvd: d.responses_rcvd,
            rnr_naks_rcvd: d.rnr_naks_rcvd,
            seq_naks_rcvd: d.seq_naks_rcvd,
            stale_responses: d.stale_responses,
            timeouts: d.timeouts,
            ack_retries: d.ack_retries,
            retransmits: d.retransmits,
            retry_exceeded: d.retry_exceeded,
            rnr_retry_exceeded: d.rnr_retry_exceeded,
            cqes: d.cqes,
            cqe_errors: d.cqe_errors,
            cqe_flushed: d.cqe_flushed,
            rx_uc_dropped: d.rx_uc_dropped,
            rx_uc_seq_err: d.rx_uc_seq_err,
            rx_uc_no_wqe: d.rx_uc_no_wqe,
            rx_uc_bad_req: d.rx_uc_bad_req,
            credit_waits: d.credit_waits,
            credit_updates: d.credit_updates,
            credit_keepalives: d.credit_keepalives,
            ..self.counters.hw
        }
    }

    /// Sends pending ACKs and processes up to [`PUMP_BUDGET`] looped-back
    /// frames; what is left stays in `loopback` for the engine thread.
    pub(crate) fn pump(&mut self) {
        if !self.data_path_runs() {
            return;
        }
        for _ in 0..PUMP_BUDGET {
            self.flush_acks();
            self.resume_tx_waiters();
            let Some(frame) = self.loopback.pop_front() else {
                return;
            };
            self.rx_frame(&frame);
            self.recycle_frames([frame]);
        }
        self.flush_acks();
        self.resume_tx_waiters();
    }

    /// Whether looped-back frames wait for the engine thread (and it may
    /// process them: not while the data path is stalled).
    pub(crate) fn has_backlog(&self) -> bool {
        !self.loopback.is_empty() && self.data_path_runs()
    }

    /// Advances `now_ns` from the real-time clock, if one is in use.
    pub(crate) fn update_clock(&mut self) {
        if let Some(c) = self.clock {
            let t = u64::try_from(c.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.now_ns = self.now_ns.max(t);
        }
    }

    /// Wakes the engine thread when looped-back frames wait to be
    /// processed, frames wait for the wire and no sender is installed, or
    /// a timer was armed that expires before the engine thread would wake.
    /// Returns the sender when frames wait for it: the caller runs it once
    /// it released the device lock.
    #[must_use]
    pub(crate) fn wake(&mut self) -> Option<Waker> {
        let queued = !self.tx.is_empty();
        let early = self
            .timer_armed
            .take()
            .is_some_and(|t| t < self.engine_sleeps_until);
        if early || self.has_backlog() || (queued && self.sender.is_none()) {
            if let Some(waker) = &self.waker {
                waker();
            }
        }
        self.sender.clone().filter(|_| queued)
    }

    /// An entry point armed a data path timer that expires at `t`: the
    /// engine thread, which may sleep past it, is woken to run it.
    pub(crate) fn arm(&mut self, t: u64) {
        self.timer_armed = Some(self.timer_armed.map_or(t, |a| a.min(t)));
    }

    pub(crate) fn next_timer(&self) -> Option<u64> {
        let held = self.faults.held.as_ref().map(|_| self.now_ns);
        let backlog = self.has_backlog().then_some(self.now_ns);
        self.qps
            .iter()
            .filter_map(|(_, qp)| qp.engine.get()?.next_deadline())
            .chain(self.faults.next_release())
            .chain(held)
            .chain(backlog)
            .min()
    }

    pub(crate) fn note(&mut self, msg: String) {
        let q = &mut self.counters.recent_errors;
        if q.len() >= RECENT_ERRORS {
            q.pop_front();
        }
        q.push_back(msg);
    }

    fn ready(&self) -> bool {
        self.status & DEV_STATUS_READY != 0
    }
}
