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

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use zerocopy::{FromBytes, IntoBytes};

use crate::fault::{FaultConfig, FaultCounters, FaultState};
use crate::gid::GidEntry;
use crate::hw::{self, *};
use crate::mem::{GuestMemory, IrqSink};
use crate::objects::{Ah, Arm, Cq, Eq, Mr, Pd, Qp, Table};
use crate::transport::{DataCounters, Engine};

/// Resource limits of one device instance (reported by QUERY_CAPS).
#[derive(Debug, Clone, Serialize)]
pub struct Limits {
    /// Protection domains.
    pub max_pd: u32,
    /// Memory regions.
    pub max_mr: u32,
    /// Completion queues.
    pub max_cq: u32,
    /// Queue pairs (not counting the GSI QP).
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
    /// Data path counters (not part of QUERY_COUNTERS).
    pub data: DataCounters,
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
    /// Address handles by ahn.
    pub ahs: Vec<Entry<Ah>>,
}

/// One object with its handle.
#[derive(Debug, Clone, Serialize)]
pub struct Entry<T> {
    /// Handle (eqn, pdn, MR index, cqn, qpn, ahn).
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
    /// Port MAC.
    pub mac: String,
    /// Admin SQ consumer index.
    pub adminq_ci: u16,
}

/// Admin queue state while enabled.
#[derive(Debug, Clone)]
pub(crate) struct AdminQ {
    pub sq_base: u64,
    pub cq_base: u64,
    pub depth: u32,
    pub ci: u16,
}

/// Everything behind the device lock.
pub(crate) struct State {
    pub cfg: DeviceConfig,
    pub mem: Arc<dyn GuestMemory>,
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
    pub ahs: Table<Ah>,
    pub gids: Vec<Option<GidEntry>>,
    pub counters: Counters,
    // data path
    pub engines: BTreeMap<u32, Engine>,
    /// Frames waiting to go out on the wire.
    pub tx: VecDeque<Vec<u8>>,
    /// Frames this device sent to its own MAC.
    pub loopback: VecDeque<Vec<u8>>,
    /// QPs with a coalesced ACK pending.
    pub ack_list: Vec<u32>,
    /// Bumped whenever an MR stops translating as before (DEREG_MR,
    /// LOCAL_INV, remote invalidation): translations the engine cached
    /// under an older value are redone before use.
    pub mr_epoch: u64,
    /// The data path clock (ns), advanced by [`Device::tick`].
    pub now_ns: u64,
    /// IPv4 identification of the next frame.
    pub ip_id: u16,
    /// Data path counters.
    pub data: DataCounters,
    /// Fault injection.
    pub faults: FaultState,
    /// Called when frames were queued for the wire outside the port's threads.
    pub waker: Option<Waker>,
    /// Real-time clock base (None: virtual time, advanced by `tick` only).
    pub clock: Option<std::time::Instant>,
    /// Reports the attached port's counters.
    pub port_stats: Option<StatsFn>,
}

/// Produces the port counters for [`Device::counters`].
pub(crate) type StatsFn = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

/// Wakes the port's engine thread.
pub(crate) type Waker = Arc<dyn Fn() + Send + Sync>;

/// The ferroce device model.
pub struct Device {
    state: Mutex<State>,
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
        let l = cfg.limits.clone();
        let st = State {
            mem,
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
            pds: Table::new(1, l.max_pd),
            mrs: Table::new(1, l.max_mr),
            cqs: Table::new(1, l.max_cq),
            // qpn 1 is the GSI QP, regular QPs start at FIRST_QPN.
            qps: Table::new(GSI_QPN, l.max_qp.saturating_add(1)),
            ahs: Table::new(1, l.max_ah),
            gids: vec![None; GID_TABLE_LEN],
            counters: Counters::default(),
            engines: BTreeMap::new(),
            tx: VecDeque::new(),
            loopback: VecDeque::new(),
            ack_list: Vec::new(),
            mr_epoch: 0,
            now_ns: 0,
            ip_id: 0,
            data: DataCounters::default(),
            faults: FaultState::default(),
            waker: None,
            clock: None,
            port_stats: None,
            cfg,
        };
        Self {
            state: Mutex::new(st),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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
                let ok_size = data.len() == 4 && offset % 4 == 0 && offset < BAR0_SIZE;
                let mut b = [0u8; 4];
                if !ok_size || data.len() != 4 {
                    st.counters.hw.bad_reg_access += 1;
                    st.note(format!("bad BAR0 write size {} at {offset:#x}", data.len()));
                    return;
                }
                b.copy_from_slice(data);
                st.reg_write(offset, u32::from_le_bytes(b));
            }
            BAR_DB => {
                st.update_clock();
                st.doorbell_write(offset, data);
            }
            _ => st.counters.hw.bad_reg_access += 1,
        }
        st.pump();
        st.wake();
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
            ahs: entries(&st.ahs),
        }
    }

    /// A copy of the counters.
    pub fn counters(&self) -> Counters {
        let (mut c, stats) = {
            let st = self.lock();
            let mut c = st.counters.clone();
            c.data = st.data.clone();
            (c, st.port_stats.clone())
        };
        c.port = stats.map(|f| f());
        c
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
        st.update_clock();
        st.rx_frame(frame);
        st.pump();
    }

    /// Hands a batch of received frames to the engine; ACKs are coalesced
    /// over the batch.
    pub fn receive_batch<'a>(&self, frames: impl IntoIterator<Item = &'a [u8]>) {
        let mut st = self.lock();
        st.update_clock();
        for f in frames {
            st.rx_frame(f);
        }
        st.pump();
    }

    /// Takes the frames the engine queued for the wire.
    pub fn take_tx(&self) -> Vec<Vec<u8>> {
        let mut st = self.lock();
        let out = st.tx.drain(..).collect();
        // The queue has room again: READ responses held back resume.
        st.pump();
        out
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
        if st.faults.stalled {
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

    /// Stalls (or resumes) the data path: while stalled, doorbells are only
    /// recorded, received frames are dropped and timers do not run.
    pub fn set_stall(&self, on: bool) {
        let mut st = self.lock();
        st.faults.stalled = on;
        if !on {
            let qpns: Vec<u32> = st.qps.iter().map(|(q, _)| q).collect();
            for q in qpns {
                st.sq_progress(q);
            }
            st.pump();
            st.wake();
        }
    }

    /// The data path clock.
    pub fn now_ns(&self) -> u64 {
        self.lock().now_ns
    }

    /// The earliest pending data path timer (ns), if any.
    pub fn next_timer(&self) -> Option<u64> {
        self.lock().next_timer()
    }

    /// Status summary.
    pub fn status(&self) -> StatusInfo {
        let st = self.lock();
        StatusInfo {
            dev_status: st.status,
            fatal_code: st.fatal_code,
            link_up: st.link_up,
            mtu: st.mtu,
            mac: crate::gid::fmt_mac(&st.cfg.mac),
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

/// Largest number of looped-back frames processed per entry point.
const PUMP_LIMIT: usize = 1 << 20;

impl State {
    /// Sends pending ACKs and processes looped-back frames until quiet.
    pub(crate) fn pump(&mut self) {
        for _ in 0..PUMP_LIMIT {
            self.flush_acks();
            let Some(f) = self.loopback.pop_front() else {
                return;
            };
            self.rx_frame(&f);
        }
    }

    /// Advances `now_ns` from the real-time clock, if one is in use.
    pub(crate) fn update_clock(&mut self) {
        if let Some(c) = self.clock {
            let t = u64::try_from(c.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.now_ns = self.now_ns.max(t);
        }
    }

    pub(crate) fn wake(&self) {
        if !self.tx.is_empty() {
            if let Some(w) = &self.waker {
                w();
            }
        }
    }

    pub(crate) fn next_timer(&self) -> Option<u64> {
        let held = self.faults.held.as_ref().map(|_| self.now_ns);
        self.engines
            .values()
            .filter_map(|e| e.next_deadline())
            .chain(self.faults.next_release())
            .chain(held)
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

    fn device_caps() -> u32 {
        CAP_RC
            | CAP_UD
            | CAP_RDMA_READ
            | CAP_INLINE
            | CAP_SEND_IMM
            | CAP_WRITE_IMM
            | CAP_MR_2LEVEL
            | CAP_ZERO_BASED_MR
            | CAP_ROCE_V1
            | CAP_ROCE_V2
            | CAP_GSI
            | CAP_PHYS_MR
            | CAP_MEM_MGT_EXT
    }

    pub(crate) fn caps(&self) -> hw::Caps {
        let l = &self.cfg.limits;
        hw::Caps {
            device_caps: Self::device_caps(),
            max_qp: l.max_qp,
            max_qp_wr: l.max_qp_wr,
            max_sge: l.max_sge,
            max_inline: l.max_inline,
            max_cq: l.max_cq,
            max_cqe: l.max_cqe,
            max_mr: l.max_mr,
            max_pd: l.max_pd,
            max_ah: l.max_ah,
            max_eq: u32::from(self.cfg.num_vectors),
            max_eqe: EQ_DEPTH_MAX,
            max_qp_rd_atom: u32::from(MAX_RD_ATOMIC),
            max_qp_init_rd_atom: u32::from(MAX_RD_ATOMIC),
            gid_table_len: GID_TABLE_LEN as u32,
            pkey_table_len: PKEY_TABLE_LEN,
            num_ports: NUM_PORTS,
            max_msg_size: crate::transport::MAX_MSG_ADVERTISED,
            max_pbl_pages: PBL_MAX_PAGES,
            db_pages: DB_PAGES,
            local_ca_ack_delay: 15,
            max_path_mtu: u32::from(MTU_4096),
            max_mr_size: l.max_mr_size,
            page_size_cap: PAGE_SIZE_CAP,
            fw_version: u64::from(VERSION_MAJOR) << 32 | u64::from(VERSION_MINOR) << 16,
        }
    }

    fn mac_lo(&self) -> u32 {
        let m = self.cfg.mac;
        u32::from_be_bytes([m[2], m[3], m[4], m[5]])
    }

    fn mac_hi(&self) -> u32 {
        let m = self.cfg.mac;
        u32::from(u16::from_be_bytes([m[0], m[1]]))
    }

    fn reg_read(&mut self, off: u64) -> u32 {
        let Ok(off32) = u32::try_from(off) else {
            return 0;
        };
        match off32 {
            REG_VERSION => VERSION_MAJOR << VERSION_MAJOR_SHIFT | VERSION_MINOR,
            REG_DEV_CAPS => Self::device_caps(),
            REG_MAGIC => MAGIC_VALUE,
            REG_DEV_CTRL if self.enabled => CTRL_ENABLE,
            REG_DEV_CTRL => 0,
            REG_DEV_STATUS => self.status,
            REG_FATAL_CODE => self.fatal_code,
            REG_RESET_TIMEOUT_MS => RESET_TIMEOUT_MS,
            REG_CMD_TIMEOUT_MS => CMD_TIMEOUT_MS,
            REG_SCRATCH => self.scratch,
            REG_ADMINQ_BASE_LO => self.adminq_base as u32,
            REG_ADMINQ_BASE_HI => (self.adminq_base >> 32) as u32,
            REG_ADMINCQ_BASE_LO => self.admincq_base as u32,
            REG_ADMINCQ_BASE_HI => (self.admincq_base >> 32) as u32,
            REG_ADMINQ_DEPTH => self.adminq_depth,
            REG_ADMINQ_CI => self.adminq.as_ref().map_or(0, |a| u32::from(a.ci)),
            REG_AEQ_BASE_LO => self.aeq_base as u32,
            REG_AEQ_BASE_HI => (self.aeq_base >> 32) as u32,
            REG_AEQ_DEPTH => self.aeq_depth,
            REG_NUM_VECTORS => u32::from(self.cfg.num_vectors),
            REG_DB_PAGES => DB_PAGES,
            REG_DB_KERNEL_PAGES => DB_KERNEL_PAGES,
            REG_PORT_MAC_LO => self.mac_lo(),
            REG_PORT_MAC_HI => self.mac_hi(),
            REG_PORT_MTU => self.mtu,
            REG_PORT_STATE if self.link_up => PORT_STATE_LINK_UP,
            REG_PORT_STATE => 0,
            // write-only, reserved, MSI-X table and PBA (QEMU owns those)
            _ => 0,
        }
    }

    fn reg_write(&mut self, off: u64, v: u32) {
        let Ok(off32) = u32::try_from(off) else {
            return;
        };
        let config_reg = matches!(
            off32,
            REG_ADMINQ_BASE_LO
                | REG_ADMINQ_BASE_HI
                | REG_ADMINCQ_BASE_LO
                | REG_ADMINCQ_BASE_HI
                | REG_ADMINQ_DEPTH
                | REG_AEQ_BASE_LO
                | REG_AEQ_BASE_HI
                | REG_AEQ_DEPTH
        );
        if config_reg && self.enabled {
            self.counters.hw.bad_reg_access += 1;
            self.note(format!("write {v:#x} to {off32:#x} while enabled"));
            return;
        }
        let set_lo = |r: &mut u64, v: u32| *r = (*r & !0xffff_ffff) | u64::from(v);
        let set_hi = |r: &mut u64, v: u32| *r = (*r & 0xffff_ffff) | u64::from(v) << 32;
        match off32 {
            REG_DEV_CTRL => self.write_ctrl(v),
            REG_SCRATCH => self.scratch = v,
            REG_ADMINQ_BASE_LO => set_lo(&mut self.adminq_base, v),
            REG_ADMINQ_BASE_HI => set_hi(&mut self.adminq_base, v),
            REG_ADMINCQ_BASE_LO => set_lo(&mut self.admincq_base, v),
            REG_ADMINCQ_BASE_HI => set_hi(&mut self.admincq_base, v),
            REG_ADMINQ_DEPTH => self.adminq_depth = v,
            REG_AEQ_BASE_LO => set_lo(&mut self.aeq_base, v),
            REG_AEQ_BASE_HI => set_hi(&mut self.aeq_base, v),
            REG_AEQ_DEPTH => self.aeq_depth = v,
            REG_ADMINQ_DB => self.adminq_doorbell(v),
            REG_EQ_DB => self.eq_doorbell(v),
            REG_PORT_MTU => {
                if (PORT_MTU_MIN..=PORT_MTU_MAX).contains(&v) {
                    self.mtu = v;
                } else {
                    self.counters.hw.bad_reg_access += 1;
                    self.note(format!("PORT_MTU {v} out of range"));
                }
            }
            _ => {
                // read-only or reserved
                self.counters.hw.bad_reg_access += 1;
                self.note(format!("write {v:#x} to RO/reserved {off32:#x}"));
            }
        }
    }

    fn write_ctrl(&mut self, v: u32) {
        if v & !CTRL_VALID_MASK != 0 {
            self.counters.hw.bad_reg_access += 1;
            self.note(format!("DEV_CTRL reserved bits {v:#x}"));
            return;
        }
        if v & CTRL_RESET != 0 {
            self.reset();
            return;
        }
        let enable = v & CTRL_ENABLE != 0;
        if enable == self.enabled {
            return;
        }
        if !enable {
            self.reset();
            return;
        }
        self.enabled = true;
        match self.check_config() {
            Ok(()) => {
                self.adminq = Some(AdminQ {
                    sq_base: self.adminq_base,
                    cq_base: self.admincq_base,
                    depth: self.adminq_depth,
                    ci: 0,
                });
                if let Some(slot) = self.eqs.get_mut(0) {
                    *slot = Some(Eq {
                        vector: 0,
                        base: self.aeq_base,
                        depth: self.aeq_depth,
                        pi: 0,
                        ci: 0,
                        armed: true,
                        posted: 0,
                        overflows: 0,
                    });
                }
                self.status = DEV_STATUS_READY;
            }
            Err(code) => self.fatal(code),
        }
    }

    fn check_config(&mut self) -> Result<(), u32> {
        let d = self.adminq_depth;
        let a = self.aeq_depth;
        let aligned = |x: u64| x != 0 && x % u64::from(RING_ALIGN) == 0;
        if !is_pow2_in(d, ADMINQ_DEPTH_MIN, ADMINQ_DEPTH_MAX)
            || !is_pow2_in(a, EQ_DEPTH_MIN, EQ_DEPTH_MAX)
            || !aligned(self.adminq_base)
            || !aligned(self.admincq_base)
            || !aligned(self.aeq_base)
        {
            self.note("ENABLE with bad admin queue/AEQ configuration".into());
            return Err(FATAL_BAD_CONFIG);
        }
        let sq = self
            .mem
            .check_range(self.adminq_base, u64::from(d) * CMD_SIZE as u64);
        let cq = self
            .mem
            .check_range(self.admincq_base, u64::from(d) * CMD_COMP_SIZE as u64);
        if sq.is_err() || cq.is_err() {
            self.counters.hw.bad_dma += 1;
            self.note("admin queue not DMA-able".into());
            return Err(FATAL_ADMINQ_DMA);
        }
        if self
            .mem
            .check_range(self.aeq_base, u64::from(a) * EQE_SIZE as u64)
            .is_err()
        {
            self.counters.hw.bad_dma += 1;
            self.note("AEQ not DMA-able".into());
            return Err(FATAL_AEQ_DMA);
        }
        Ok(())
    }

    pub(crate) fn fatal(&mut self, code: u32) {
        self.status = (self.status & !DEV_STATUS_READY) | DEV_STATUS_FATAL;
        self.fatal_code = code;
        self.note(format!("device fatal, code {code}"));
        // Best effort: tell the driver through the AEQ if it still works.
        if code != FATAL_AEQ_DMA {
            self.post_eqe_raw(0, EQE_DEVICE_FATAL, 0, code, 0);
        }
    }

    pub(crate) fn reset(&mut self) {
        self.enabled = false;
        self.status = 0;
        self.fatal_code = FATAL_NONE;
        self.scratch = 0;
        self.adminq_base = 0;
        self.admincq_base = 0;
        self.adminq_depth = 0;
        self.aeq_base = 0;
        self.aeq_depth = 0;
        self.adminq = None;
        self.eqs.iter_mut().for_each(|e| *e = None);
        self.pds.clear();
        self.mrs.clear();
        self.cqs.clear();
        self.qps.clear();
        self.ahs.clear();
        self.gids.iter_mut().for_each(|g| *g = None);
        self.engines.clear();
        self.tx.clear();
        self.loopback.clear();
        self.ack_list.clear();
        self.counters.hw.resets += 1;
    }

    // ---------------------------------------------------------------- EQs

    /// Writes one EQE to EQ `eqn`; raises its vector if armed.
    pub(crate) fn post_eqe_raw(&mut self, eqn: usize, ty: u8, obj: u32, data: u32, data2: u32) {
        let Some(Some(eq)) = self.eqs.get_mut(eqn) else {
            return;
        };
        let depth = eq.depth;
        let used = u32::from(eq.pi.wrapping_sub(eq.ci));
        if used >= depth {
            eq.overflows += 1;
            self.counters.hw.eq_overflows += 1;
            self.note(format!("EQ {eqn} overflow, event {ty:#x} dropped"));
            return;
        }
        let idx = u32::from(eq.pi) & (depth - 1);
        let addr = eq.base.wrapping_add(u64::from(idx) * EQE_SIZE as u64);
        let owner = ((u32::from(eq.pi) >> depth.trailing_zeros()) & 1) as u8 ^ 1;
        let eqe = hw::Eqe {
            obj,
            data,
            data2,
            reserved: 0,
            subtype: 0,
            event_type: ty,
            owner: 0,
        };
        let bytes = eqe.as_bytes();
        let body = &bytes[..EQE_SIZE - 1];
        let ok = self.mem.write(addr, body).is_ok()
            && self
                .mem
                .write(addr.wrapping_add(EQE_SIZE as u64 - 1), &[owner])
                .is_ok();
        if !ok {
            self.counters.hw.bad_dma += 1;
            if eqn == 0 {
                self.status = (self.status & !DEV_STATUS_READY) | DEV_STATUS_FATAL;
                self.fatal_code = FATAL_AEQ_DMA;
            }
            self.note(format!("EQ {eqn} write failed"));
            return;
        }
        let vector = eq.vector;
        eq.pi = eq.pi.wrapping_add(1);
        eq.posted += 1;
        let fire = eq.armed;
        if fire {
            eq.armed = false;
        }
        self.counters.hw.eqes_posted += 1;
        if fire {
            self.counters.hw.interrupts += 1;
            self.irq.trigger(vector);
        }
    }

    /// Posts an async event to the AEQ (if the device is ready).
    pub(crate) fn post_async(&mut self, ty: u8, obj: u32, data: u32, data2: u32) {
        if !self.ready() {
            return;
        }
        self.counters.hw.async_events += 1;
        self.post_eqe_raw(0, ty, obj, data, data2);
    }

    fn eq_doorbell(&mut self, v: u32) {
        let eqn = ((v & EQ_DB_EQN_MASK) >> EQ_DB_EQN_SHIFT) as usize;
        let ci = (v & EQ_DB_CI_MASK) as u16;
        let arm = v & EQ_DB_ARM != 0;
        if v & EQ_DB_RSVD_MASK != 0 {
            return self.bad_doorbell(format!("EQ_DB reserved bits {v:#x}"));
        }
        let Some(Some(eq)) = self.eqs.get_mut(eqn) else {
            return self.bad_doorbell(format!("EQ_DB for missing EQ {eqn}"));
        };
        // The new ci must lie between the old ci and the producer index.
        if ci.wrapping_sub(eq.ci) > eq.pi.wrapping_sub(eq.ci) {
            let msg = format!("EQ_DB ci {ci} beyond pi {} on EQ {eqn}", eq.pi);
            return self.bad_doorbell(msg);
        }
        eq.ci = ci;
        let mut fire = None;
        if arm {
            if eq.pi != eq.ci {
                // Entries the driver has not consumed yet: interrupt now.
                eq.armed = false;
                fire = Some(eq.vector);
            } else {
                eq.armed = true;
            }
        }
        self.counters.hw.eq_doorbells += 1;
        if let Some(vec) = fire {
            self.counters.hw.interrupts += 1;
            self.irq.trigger(vec);
        }
    }

    pub(crate) fn bad_doorbell(&mut self, msg: String) {
        self.counters.hw.malformed_doorbells += 1;
        self.note(msg);
    }

    // ---------------------------------------------------------------- admin queue

    fn adminq_doorbell(&mut self, v: u32) {
        if !self.ready() {
            return self.bad_doorbell(format!("ADMINQ_DB {v:#x} while not ready"));
        }
        if v & !ADMINQ_IDX_MASK != 0 {
            return self.bad_doorbell(format!("ADMINQ_DB reserved bits {v:#x}"));
        }
        let Some(aq) = self.adminq.clone() else {
            return;
        };
        let pi = v as u16;
        if u32::from(pi.wrapping_sub(aq.ci)) > aq.depth {
            return self.bad_doorbell(format!("ADMINQ_DB pi {pi} > ci {} + depth", aq.ci));
        }
        let mut ci = aq.ci;
        while ci != pi && self.ready() {
            let slot = u32::from(ci) & (aq.depth - 1);
            let mut raw = [0u8; CMD_SIZE];
            let cmd_addr = aq.sq_base.wrapping_add(u64::from(slot) * CMD_SIZE as u64);
            if self.mem.read(cmd_addr, &mut raw).is_err() {
                self.counters.hw.bad_dma += 1;
                self.fatal(FATAL_ADMINQ_DMA);
                return;
            }
            let (cmd_id, status, out) = self.execute(&raw);
            if status == STATUS_SUCCESS {
                self.counters.hw.cmds_ok += 1;
            } else {
                self.counters.hw.cmds_failed += 1;
                let op = raw[0];
                self.note(format!("command {op:#04x} id {cmd_id} -> status {status}"));
            }
            if let Some(c) = self.counters.hw.cmd_status.get_mut(usize::from(status)) {
                *c += 1;
            }
            let next_ci = ci.wrapping_add(1);
            let comp = hw::CmdComp {
                cmd_id,
                status,
                reserved0: 0,
                sq_ci: next_ci,
                reserved1: 0,
                out,
                reserved2: [0; 3],
                flags: 0,
            };
            let phase = ((u32::from(ci) >> aq.depth.trailing_zeros()) & 1) as u8 ^ 1;
            let comp_addr = aq
                .cq_base
                .wrapping_add(u64::from(slot) * CMD_COMP_SIZE as u64);
            let bytes = comp.as_bytes();
            let ok = self
                .mem
                .write(comp_addr, &bytes[..CMD_COMP_SIZE - 1])
                .is_ok()
                && self
                    .mem
                    .write(
                        comp_addr.wrapping_add(CMD_COMP_SIZE as u64 - 1),
                        &[phase & COMP_PHASE],
                    )
                    .is_ok();
            if !ok {
                self.counters.hw.bad_dma += 1;
                self.fatal(FATAL_ADMINQ_DMA);
                return;
            }
            ci = next_ci;
            if let Some(a) = self.adminq.as_mut() {
                a.ci = ci;
            }
            self.post_eqe_raw(
                0,
                EQE_CMD_COMPLETION,
                u32::from(cmd_id),
                u32::from(status),
                slot,
            );
        }
    }

    // ---------------------------------------------------------------- doorbell pages

    fn doorbell_write(&mut self, offset: u64, data: &[u8]) {
        if offset >= BAR2_SIZE {
            return self.bad_doorbell(format!("doorbell write beyond BAR2 at {offset:#x}"));
        }
        let page = (offset >> DB_PAGE_SHIFT) as u32;
        let reg = offset & (DB_PAGE_SIZE - 1);
        let Ok(bytes) = <[u8; 8]>::try_from(data) else {
            return self.bad_doorbell(format!("doorbell write of {} bytes", data.len()));
        };
        let v = u64::from_le_bytes(bytes);
        if !self.ready() {
            return self.bad_doorbell(format!("doorbell {v:#x} while not ready"));
        }
        match reg {
            DB_SQ | DB_RQ => self.qp_doorbell(page, reg == DB_SQ, v),
            DB_CQ => self.cq_doorbell(page, v),
            _ => self.bad_doorbell(format!("doorbell at reserved offset {reg:#x}")),
        }
    }

    fn qp_doorbell(&mut self, page: u32, sq: bool, v: u64) {
        let which = if sq { "SQ" } else { "RQ" };
        if v & DB_QP_RSVD_MASK != 0 {
            return self.bad_doorbell(format!("{which} doorbell reserved bits {v:#x}"));
        }
        let qpn = (v & DB_QN_MASK) as u32;
        let pi = ((v & DB_IDX_MASK) >> DB_PI_SHIFT) as u16;
        let Some(qp) = self.qps.get_mut(qpn) else {
            return self.bad_doorbell(format!("{which} doorbell for missing QP {qpn}"));
        };
        if qp.db_page != page {
            let msg = format!(
                "{which} doorbell for QP {qpn} on page {page}, not {}",
                qp.db_page
            );
            return self.bad_doorbell(msg);
        }
        if qp.state == QPS_RESET {
            return self.bad_doorbell(format!("{which} doorbell for QP {qpn} in RESET"));
        }
        let (depth, last) = if sq {
            (qp.sq_depth, qp.sq_pi)
        } else {
            (qp.rq_depth, qp.rq_pi)
        };
        if depth == 0 || u32::from(pi.wrapping_sub(last)) > depth {
            let msg = format!("{which} doorbell pi {pi} jumps more than depth {depth} from {last}");
            return self.bad_doorbell(msg);
        }
        if sq {
            qp.sq_pi = pi;
            qp.sq_doorbells += 1;
            self.counters.hw.sq_doorbells += 1;
            if !self.faults.stalled {
                self.sq_progress(qpn);
            }
        } else {
            qp.rq_pi = pi;
            qp.rq_doorbells += 1;
            self.counters.hw.rq_doorbells += 1;
            self.rq_progress(qpn);
        }
    }

    fn cq_doorbell(&mut self, page: u32, v: u64) {
        if v & DB_CQ_RSVD_MASK != 0 {
            return self.bad_doorbell(format!("CQ doorbell reserved bits {v:#x}"));
        }
        let cqn = (v & DB_QN_MASK) as u32;
        let sn = ((v & DB_CQ_SN_MASK) >> DB_CQ_SN_SHIFT) as u8;
        let cmd = ((v & DB_CQ_CMD_MASK) >> DB_CQ_CMD_SHIFT) as u32;
        let ci = ((v & DB_IDX_MASK) >> DB_CQ_CI_SHIFT) as u16;
        let Some(cq) = self.cqs.get_mut(cqn) else {
            return self.bad_doorbell(format!("CQ doorbell for missing CQ {cqn}"));
        };
        if cq.db_page != page {
            let msg = format!(
                "CQ doorbell for CQ {cqn} on page {page}, not {}",
                cq.db_page
            );
            return self.bad_doorbell(msg);
        }
        if ci.wrapping_sub(cq.ci) > cq.pi.wrapping_sub(cq.ci) {
            let msg = format!("CQ doorbell ci {ci} beyond pi {} on CQ {cqn}", cq.pi);
            return self.bad_doorbell(msg);
        }
        let arm = match cmd {
            CQ_CMD_CI => None,
            CQ_CMD_ARM_NEXT => Some(Arm::Next),
            CQ_CMD_ARM_SOLICITED => Some(Arm::Solicited),
            _ => return self.bad_doorbell(format!("CQ doorbell with bad cmd {cmd}")),
        };
        cq.ci = ci;
        let mut fire = None;
        if let Some(a) = arm {
            // ARM_NEXT wins over ARM_SOLICITED until the event fires.
            cq.arm = match (cq.arm, a) {
                (Arm::Next, _) => Arm::Next,
                (_, a) => a,
            };
            cq.arm_sn = sn;
            // CQEs beyond the arm's consumer index fire it at once (mlx4/mlx5
            // semantics): software that arms with the index of what it has
            // polled never waits for an event that already happened.
            let pending = cq.pi.wrapping_sub(ci);
            let now = match cq.arm {
                Arm::None => false,
                Arm::Next => pending != 0,
                Arm::Solicited => cq
                    .last_solicited
                    .is_some_and(|s| s.wrapping_sub(ci) < pending),
            };
            if now {
                cq.arm = Arm::None;
                fire = Some((cq.eqn, sn));
            }
        }
        cq.doorbells += 1;
        self.counters.hw.cq_doorbells += 1;
        if let Some((eqn, sn)) = fire {
            self.post_eqe_raw(eqn as usize, EQE_COMPLETION, cqn, u32::from(sn), 0);
        }
    }

    // ---------------------------------------------------------------- CQEs

    fn cq_error(&mut self, cqn: u32, syndrome: u32) {
        if let Some(cq) = self.cqs.get_mut(cqn) {
            cq.error = true;
        }
        self.post_async(EQE_CQ_ERROR, cqn, syndrome, 0);
    }

    pub(crate) fn post_cqe(&mut self, cqn: u32, mut cqe: Cqe) -> Result<(), PostError> {
        let cq = self.cqs.get(cqn).ok_or(PostError::NoCq)?;
        if cq.error {
            return Err(PostError::CqError);
        }
        let (depth, pi, dbrec, shift) = (cq.depth, cq.pi, cq.dbrec, cq.page_shift);
        let mut rec = [0u8; 4];
        if self.mem.read(dbrec, &mut rec).is_err() {
            self.counters.hw.bad_dma += 1;
            self.cq_error(cqn, CQ_SYNDROME_DMA);
            return Err(PostError::Dma);
        }
        let ci = u32::from_le_bytes(rec) as u16;
        if u32::from(pi.wrapping_sub(ci)) >= depth {
            self.note(format!("CQ {cqn} overflow"));
            self.cq_error(cqn, CQ_SYNDROME_OVERFLOW);
            return Err(PostError::Overflow);
        }
        let idx = u64::from(u32::from(pi) & (depth - 1));
        let off = idx * CQE_SIZE as u64;
        let page = usize::try_from(off >> shift).unwrap_or(usize::MAX);
        let base = self.cqs.get(cqn).and_then(|c| c.pages.get(page).copied());
        let Some(base) = base else {
            self.cq_error(cqn, CQ_SYNDROME_DMA);
            return Err(PostError::Dma);
        };
        let addr = base.wrapping_add(off & ((1u64 << shift) - 1));
        cqe.owner = 0;
        let owner = ((u32::from(pi) >> depth.trailing_zeros()) & 1) as u8 ^ 1;
        let bytes = cqe.as_bytes();
        let ok = self.mem.write(addr, &bytes[..CQE_SIZE - 1]).is_ok()
            && self
                .mem
                .write(addr.wrapping_add(CQE_SIZE as u64 - 1), &[owner])
                .is_ok();
        if !ok {
            self.counters.hw.bad_dma += 1;
            self.cq_error(cqn, CQ_SYNDROME_DMA);
            return Err(PostError::Dma);
        }
        let Some(cq) = self.cqs.get_mut(cqn) else {
            return Err(PostError::NoCq);
        };
        cq.pi = pi.wrapping_add(1);
        if cqe.flags & CQE_SOLICITED != 0 || cqe.status != WC_SUCCESS {
            cq.last_solicited = Some(pi);
        }
        let fire = match cq.arm {
            Arm::None => false,
            Arm::Next => true,
            Arm::Solicited => cqe.flags & CQE_SOLICITED != 0 || cqe.status != WC_SUCCESS,
        };
        if fire {
            cq.arm = Arm::None;
            let (eqn, sn) = (cq.eqn, cq.arm_sn);
            self.post_eqe_raw(eqn as usize, EQE_COMPLETION, cqn, u32::from(sn), 0);
        }
        Ok(())
    }

    // ---------------------------------------------------------------- helpers for commands

    pub(crate) fn write_resp<T: IntoBytes + zerocopy::Immutable>(
        &mut self,
        addr: u64,
        len: u32,
        v: &T,
    ) -> Result<(), u8> {
        let bytes = v.as_bytes();
        if (len as usize) < bytes.len() {
            return Err(STATUS_BAD_PARAM);
        }
        if self.mem.write(addr, bytes).is_err() {
            self.counters.hw.bad_dma += 1;
            return Err(STATUS_DMA_ERROR);
        }
        Ok(())
    }

    pub(crate) fn parse<T: FromBytes>(raw: &[u8]) -> Result<T, u8> {
        T::read_from_prefix(raw)
            .map(|(t, _)| t)
            .map_err(|_| STATUS_BAD_PARAM)
    }
}
