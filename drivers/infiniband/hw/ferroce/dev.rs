// SPDX-License-Identifier: GPL-2.0

//! PCI bring-up and teardown of the ferroce function
//! (`Documentation/ferroce/device.rst`, "Bring-up: reset and ready
//! handshake"), the admin commands, and the port state. The EQ handlers
//! are `events`, the counters and debugfs `counters`; the pairing of the
//! port with a netdev is `pairing.rs`.

#![forbid(unsafe_code)]

mod counters;
mod events;

use counters::Debugfs;
pub(crate) use counters::Stats;
pub(crate) use events::EqHandler;

use crate::{
    bindings::{
        self as hw,
        Command, //
    },
    cmdq::{
        self,
        CmdQ,
        Completion, //
    },
    dbrec::DbRecPool,
    diag::RateLimit,
    eq::{
        self,
        Eq, //
    },
    ib::{
        self,
        IbDev, //
    },
    pairing::PortWatch,
    pbl::{
        PblBuilder,
        PblScratch, //
    },
    port::{
        self,
        PortState, //
    },
    rdma::{
        self,
        kext,
        CqTable,
        EventRef,
        NetdevNotifier,
        PortEvent,
        QpTable,
        SrqTable, //
    },
    regs::{
        self,
        Bar0,
        DevresBar0, //
    },
    verbs::{
        self,
        DbPages, //
    }, //
};
use core::sync::atomic::{
    AtomicBool,
    AtomicU16,
    AtomicU32,
    AtomicU8,
    Ordering, //
};
use kernel::{
    device::{
        Bound,
        Core, //
    },
    io::{
        poll::read_poll_timeout,
        Io, //
    },
    new_mutex,
    new_spinlock_irq,
    num::casts::FromSafeCast,
    pci,
    prelude::*,
    sync::aref::ARef,
    sync::barrier::{
        dma_mb,
        Read, //
    },
    sync::{
        Arc,
        Mutex,
        SpinLockIrq, //
    },
    time::Delta,
    transmute::FromBytes, //
};

/// What QUERY_CAPS reported (`struct ferroce_caps`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Caps {
    pub(crate) device_caps: u32,
    pub(crate) max_qp: u32,
    pub(crate) max_qp_wr: u32,
    pub(crate) max_sge: u32,
    pub(crate) max_inline: u32,
    pub(crate) max_cq: u32,
    pub(crate) max_cqe: u32,
    pub(crate) max_mr: u32,
    pub(crate) max_pd: u32,
    pub(crate) max_ah: u32,
    pub(crate) max_qp_rd_atom: u32,
    pub(crate) max_qp_init_rd_atom: u32,
    pub(crate) gid_table_len: u32,
    pub(crate) pkey_table_len: u32,
    pub(crate) max_msg_size: u32,
    pub(crate) db_pages: u32,
    pub(crate) local_ca_ack_delay: u32,
    pub(crate) max_path_mtu: u32,
    pub(crate) max_mr_size: u64,
    pub(crate) page_size_cap: u64,
    pub(crate) fw_version: u64,
}

/// What QUERY_PORT reported.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PortInfo {
    /// Ethernet MTU.
    pub(crate) mtu: u32,
    /// Active IB MTU (`FERROCE_MTU_*` = `enum ib_mtu`).
    pub(crate) active_mtu: u32,
    pub(crate) mac: [u8; 6],
}

/// Room for the largest response [`Shared::exec_resp`] reads (the 1.5
/// counters have 536 bytes).
const RESP_MAX: usize = 1024;
const _: () = assert!(
    core::mem::size_of::<hw::ferroce_caps>() <= RESP_MAX
        && core::mem::size_of::<hw::ferroce_qp_attr>() <= RESP_MAX
        && core::mem::size_of::<hw::ferroce_counters>() <= RESP_MAX
);

/// The port state and where its events go.
struct PortSlot {
    state: PortState,
    /// Set once the `ib_device` is registered; emptied before it is
    /// unregistered.
    events: Option<EventRef>,
}

/// BAR0; dropping it resets the device first, so the device stops its DMA
/// before the rings (later fields of [`Shared`]) are freed.
struct Regs(DevresBar0);

impl Regs {
    fn reset(&self) {
        if let Some(bar) = self.0.try_access() {
            bar.write_reg(regs::DEV_CTRL::zeroed().with_reset(true));
        }
    }
}

impl Drop for Regs {
    fn drop(&mut self) {
        self.reset();
    }
}

/// The kernel's doorbell page of BAR2 (page 0), mapped.
type DevresDbPage = pci::DevresBar<{ hw::FERROCE_DB_PAGE_SIZE as usize }>;

/// Device state shared by the PCI driver, the IRQ handlers and the
/// `ib_device`.
#[pin_data]
pub(crate) struct Shared {
    /// First field: dropped (device reset) before the rings.
    bar: Regs,
    /// Doorbells of kernel queues.
    db: DevresDbPage,
    /// Doorbell records of kernel queues.
    pub(crate) dbrecs: Arc<DbRecPool>,
    pdev: ARef<pci::Device>,
    #[pin]
    cmdq: Mutex<CmdQ>,
    /// Where page lists are built (taken before `cmdq`).
    #[pin]
    pbl: Mutex<PblScratch>,
    /// CQs by number, for completion and CQ events.
    pub(crate) cqs: Arc<CqTable<IbDev>>,
    /// QPs by number, for QP events.
    pub(crate) qps: Arc<QpTable<IbDev>>,
    /// SRQs by number, for SRQ events.
    pub(crate) srqs: Arc<SrqTable<IbDev>>,
    eqs: KVec<Eq>,
    cmd_timeout: Delta,
    reset_timeout: Delta,
    /// Set when the device stopped answering or reported FATAL: every
    /// further command fails with `EIO` at once, and the device is reset.
    dead: AtomicBool,
    /// Set once the reset of a dead device completed (DEV_STATUS read 0):
    /// the device no longer accesses any memory it was given, which may be
    /// freed from then on.
    quiesced: AtomicBool,
    pub(crate) stats: Stats,
    /// Rate limit of the path warnings (diag.rs).
    pub(crate) path_warn: RateLimit,
    /// Port state (device link bit, paired netdev state) and the event sink;
    /// updated from the IRQ handlers and the netdev notifier.
    #[pin]
    port: SpinLockIrq<PortSlot>,
}

impl Shared {
    pub(crate) fn dev(&self) -> &kernel::device::Device {
        self.pdev.as_ref()
    }

    /// Runs `f` with the mapped BAR; `ENODEV` once the device is unbound.
    /// `f` runs in an RCU read section (the devres guard): it must not sleep.
    fn with_bar<R>(&self, f: impl FnOnce(&Bar0<'_>) -> R) -> Result<R> {
        let bar = self.bar.0.try_access().ok_or(ENODEV)?;
        Ok(f(&bar))
    }

    /// Marks the device dead (any context): later commands fail at once,
    /// the device is told to reset (which stops its DMA and interrupts and
    /// destroys its objects), and ib_core's clients, userspace included, get
    /// `IB_EVENT_DEVICE_FATAL`.
    fn mark_dead(&self, why: &str) {
        if !self.dead.swap(true, Ordering::Relaxed) {
            dev_err!(
                self.dev(),
                "device dead: {}; reset, commands fail from now on\n",
                why
            );
            self.reset();
            if let Some(ib) = self.port.lock().events.as_ref() {
                ib.device_fatal();
            }
        }
    }

    /// Whether the device is dead and quiet: the reset that [`mark_dead`]
    /// asked for completed, so nothing it was given is accessed any more.
    /// Process context (sleeps up to RESET_TIMEOUT_MS, polling DEV_STATUS,
    /// if the reset has not been seen to complete yet). A device whose
    /// registers read all ones is gone (surprise removal) and counts as
    /// quiet. A device that does not complete its reset otherwise is not
    /// quiet: memory it was given is leaked.
    ///
    /// [`mark_dead`]: Self::mark_dead
    fn quiesce(&self) -> bool {
        if !self.dead.load(Ordering::Relaxed) {
            return false;
        }
        if self.quiesced.load(Ordering::Acquire) {
            return true;
        }
        self.reset();
        // All ones: reads no longer reach the device (it fell off the bus,
        // or its vfio-user server is gone), so it cannot access memory
        // either.
        let status = poll_status(
            || self.with_bar(|bar| bar.read(regs::DEV_STATUS)),
            self.reset_timeout,
            |s| s.into_raw() == 0 || s.into_raw() == u32::MAX,
        );
        let Ok(status) = status else {
            return false;
        };
        self.quiesced.store(true, Ordering::Release);
        if status.into_raw() == u32::MAX {
            dev_info!(
                self.dev(),
                "dead device unreachable (reads all ones); its memory is released\n"
            );
        } else {
            dev_info!(self.dev(), "dead device reset; its memory is released\n");
        }
        true
    }

    /// Executes a destroy command (DESTROY_*, DEREG_MR, DEALLOC_PD).
    /// `Ok` if the device destroyed the object, or if the device is dead
    /// and quiet ([`Self::quiesce`]): the object no longer exists and its
    /// memory may be freed. `Err` only if the device may still access it
    /// (a live device refused, or a dead one did not complete its reset):
    /// then the caller must leak the object's memory.
    pub(crate) fn exec_destroy<C: Command>(&self, cmd: &C) -> Result {
        match self.exec(cmd) {
            Ok(_) => Ok(()),
            Err(_) if self.quiesce() => Ok(()),
            Err(e) => {
                dev_err!(
                    self.dev(),
                    "destroy command {} failed (error {}): its memory is leaked\n",
                    C::OPCODE,
                    e.to_errno()
                );
                Err(e)
            }
        }
    }

    /// After a failed create command: frees `mem` (what the command gave
    /// the device) if the device never got it or is dead and quiet, leaks
    /// it if the command timed out and the reset did not complete.
    pub(crate) fn release_after_failure<M>(&self, mem: M) {
        if self.dead.load(Ordering::Relaxed) && !self.quiesce() {
            core::mem::forget(mem);
        }
    }

    /// Executes an admin command. Never hangs: a device that does not answer
    /// within CMD_TIMEOUT_MS is marked dead (`ETIMEDOUT`), later commands
    /// fail with `EIO`.
    pub(crate) fn exec<C: Command>(&self, cmd: &C) -> Result<Completion> {
        if self.dead.load(Ordering::Relaxed) {
            return Err(EIO);
        }
        let mut q = self.cmdq.lock();
        if self.dead.load(Ordering::Relaxed) {
            return Err(EIO);
        }
        let seen = |status: u32| {
            if let Some(c) = self.stats.cmd_status.get(usize::from_safe_cast(status)) {
                c.fetch_add(1, Ordering::Relaxed);
            }
        };
        match q.exec(&self.bar.0, cmd, self.cmd_timeout, seen) {
            Err(e) if e == ETIMEDOUT => {
                self.stats.cmd_timeouts.fetch_add(1, Ordering::Relaxed);
                self.mark_dead("admin command timed out");
                drop(q);
                // Wait for the reset now, so that the caller may free what
                // the command named (or knows it must not).
                self.quiesce();
                Err(ETIMEDOUT)
            }
            r => r,
        }
    }

    /// Builds a command that names page lists (`build` places them with
    /// the builder it gets) and executes it while the lists exist.
    pub(crate) fn exec_with_lists<C: Command>(
        &self,
        build: impl FnOnce(&mut PblBuilder<'_>) -> Result<C>,
    ) -> Result<Completion> {
        let mut scratch = self.pbl.lock();
        let cmd = build(&mut scratch.builder())?;
        self.exec(&cmd)
    }

    /// Executes a command that hands the device `mem` (rings, records,
    /// pinned pages), built as in [`Self::exec_with_lists`] with a view of
    /// `mem`. Returns the completion and `mem`, which the caller keeps for
    /// the object's life; after a failure `mem` goes as
    /// [`Self::release_after_failure`] says.
    pub(crate) fn exec_create<C: Command, M>(
        &self,
        mem: M,
        build: impl FnOnce(&mut PblBuilder<'_>, &M) -> Result<C>,
    ) -> Result<(Completion, M)> {
        match self.exec_with_lists(|lists| build(lists, &mem)) {
            Ok(out) => Ok((out, mem)),
            Err(e) => {
                self.release_after_failure(mem);
                Err(e)
            }
        }
    }

    /// Executes a command whose result the device DMA-writes to
    /// `resp_addr` (`cmd` builds it from that address and the length of
    /// `R`). The response lands in the page-list area, whose lock
    /// serialises its users, so no command allocates DMA memory for it.
    pub(crate) fn exec_resp<C: Command, R: FromBytes>(
        &self,
        cmd: impl FnOnce(u64, u32) -> C,
    ) -> Result<R> {
        let mut buf = [0u8; RESP_MAX];
        let out = buf.get_mut(..core::mem::size_of::<R>()).ok_or(EINVAL)?;
        let len = u32::try_from(out.len())?;
        let mut scratch = self.pbl.lock();
        // A growable response (QUERY_COUNTERS) from an older device is
        // shorter than `R`: its new fields read 0.
        scratch.clear_resp(out.len())?;
        self.exec(&cmd(scratch.resp_addr(), len))?;
        dma_mb(Read);
        scratch.read_resp(out)?;
        R::from_bytes_copy(out).ok_or(EIO)
    }

    /// QUERY_COUNTERS. The counters new in 1.4 read 0 on older devices
    /// (which write only the first 240 bytes). `EIO` at once on a dead
    /// device, without a message.
    pub(crate) fn query_counters(&self) -> Result<hw::ferroce_counters> {
        self.exec_resp(|resp_addr, resp_len| hw::ferroce_cmd_query_counters {
            resp_addr,
            resp_len,
            ..Default::default()
        })
    }

    /// QUERY_QP: the device's view of QP `qpn`.
    pub(crate) fn query_qp(&self, qpn: u32) -> Result<hw::ferroce_qp_attr> {
        self.exec_resp(|resp_addr, resp_len| hw::ferroce_cmd_query_qp {
            resp_addr,
            resp_len,
            qpn,
            ..Default::default()
        })
    }

    /// Writes a doorbell of the kernel page (one 8-byte store at
    /// `offset`); `ENODEV` once the device is unbound. Any context.
    pub(crate) fn kernel_doorbell(&self, offset: usize, value: u64) -> Result {
        let db = self.db.try_access().ok_or(ENODEV)?;
        db.try_write64(value, offset)
    }

    /// The device's link bit.
    pub(crate) fn link_up(&self) -> bool {
        self.port.lock().state.link
    }

    /// Changes the port state with `f` and dispatches `PORT_ACTIVE` or
    /// `PORT_ERR` if the combined state changed.
    pub(crate) fn update_port(&self, f: impl FnOnce(&mut PortState)) {
        let mut p = self.port.lock();
        f(&mut p.state);
        if let Some(ev) = p.state.update() {
            let what = match ev {
                PortEvent::Active => "ACTIVE",
                PortEvent::Err => "DOWN",
            };
            dev_info!(self.dev(), "port 1 {}\n", what);
            if let Some(ib) = p.events.as_ref() {
                ib.port_event(1, ev);
            }
        }
    }

    /// Sets the Ethernet MTU of the port (SET_PORT_MTU), clamped to what the
    /// device accepts.
    pub(crate) fn set_port_mtu(&self, netdev_mtu: u32) -> Result {
        let mtu = port::device_mtu(netdev_mtu);
        if mtu != netdev_mtu {
            dev_warn!(
                self.dev(),
                "netdev MTU {} out of the device's range, using {}\n",
                netdev_mtu,
                mtu
            );
        }
        let cmd = hw::ferroce_cmd_set_port_mtu {
            port: 1,
            mtu,
            ..Default::default()
        };
        self.exec(&cmd).map(|_| ())
    }

    /// Sets the port's current MAC (SET_PORT_MAC, device.rst "Port MAC"):
    /// the one RoCE frames are steered to the device for.
    pub(crate) fn set_port_mac(&self, mac: [u8; 6]) -> Result {
        let cmd = hw::ferroce_cmd_set_port_mac {
            port: 1,
            mac,
            ..Default::default()
        };
        self.exec(&cmd).map(|_| ())
    }

    /// Resets the device: stops its DMA and interrupts, destroys its
    /// objects. Best effort (the device may be gone).
    fn reset(&self) {
        self.bar.reset();
    }
}

/// A bound ferroce function.
pub(crate) struct Ferroce<'bound> {
    /// debugfs files (they read `shared`); removed first.
    debugfs: Option<Debugfs>,
    /// The netdev notifier; unregistered next.
    notifier: Option<NetdevNotifier<PortWatch>>,
    /// The `ib_device`; unregistered next.
    ib: Option<rdma::Registration<'bound, IbDev>>,
    irqs: Pin<KBox<kext::MsixIrqs<'bound, EqHandler>>>,
    shared: Arc<Shared>,
}

impl Drop for Ferroce<'_> {
    fn drop(&mut self) {
        // Reverse of probe: unregister the ib_device (waits for its users,
        // drops its state), stop the device, then free IRQs, vectors and
        // rings (field drops).
        drop(self.debugfs.take());
        if let Some(n) = self.notifier.as_ref() {
            n.handler().close();
        }
        drop(self.notifier.take());
        let events = self.shared.port.lock().events.take();
        drop(events);
        drop(self.ib.take());
        self.shared.reset();
        self.irqs.synchronize();
        let s = &self.shared.stats;
        dev_info!(
            self.shared.dev(),
            "removed; dropped events: {} for unknown CQs, {} for unknown objects, {} of unknown type\n",
            s.unknown_cq_events.load(Ordering::Relaxed),
            s.unknown_obj_events.load(Ordering::Relaxed),
            s.unknown_events.load(Ordering::Relaxed)
        );
    }
}

/// Polls DEV_STATUS (through `read`, which must not hold any lock or RCU
/// read section across calls: this sleeps between reads) until `done`.
fn poll_status(
    read: impl Fn() -> Result<regs::DEV_STATUS>,
    timeout: Delta,
    done: impl Fn(&regs::DEV_STATUS) -> bool,
) -> Result<regs::DEV_STATUS> {
    read_poll_timeout(read, |s| done(s), Delta::from_micros(100), timeout)
}

/// A timeout the device advertises in a register, capped at twice the
/// header's promise (a broken device must not make us wait for ages).
fn timeout_ms(reg: u32, promised: u32) -> Delta {
    let ms = if reg == 0 {
        promised
    } else {
        reg.min(2 * promised)
    };
    Delta::from_millis(i64::from(ms))
}

fn query_caps(shared: &Shared) -> Result<Caps> {
    let c: hw::ferroce_caps =
        shared.exec_resp(|resp_addr, resp_len| hw::ferroce_cmd_query_caps {
            resp_addr,
            resp_len,
            ..Default::default()
        })?;
    Ok(Caps {
        device_caps: c.device_caps,
        max_qp: c.max_qp,
        max_qp_wr: c.max_qp_wr,
        max_sge: c.max_sge,
        max_inline: c.max_inline,
        max_cq: c.max_cq,
        max_cqe: c.max_cqe,
        max_mr: c.max_mr,
        max_pd: c.max_pd,
        max_ah: c.max_ah,
        max_qp_rd_atom: c.max_qp_rd_atom,
        max_qp_init_rd_atom: c.max_qp_init_rd_atom,
        gid_table_len: c.gid_table_len,
        pkey_table_len: c.pkey_table_len,
        max_msg_size: c.max_msg_size,
        db_pages: c.db_pages,
        local_ca_ack_delay: c.local_ca_ack_delay,
        max_path_mtu: c.max_path_mtu,
        max_mr_size: c.max_mr_size,
        page_size_cap: c.page_size_cap,
        fw_version: c.fw_version,
    })
}

fn query_port(shared: &Shared) -> Result<(PortInfo, bool)> {
    let cmd = hw::ferroce_cmd_query_port {
        port: 1,
        ..Default::default()
    };
    let out = shared.exec(&cmd)?.out;
    let info = PortInfo {
        mtu: out[hw::FERROCE_PORT_OUT_MTU as usize],
        active_mtu: out[hw::FERROCE_PORT_OUT_ACTIVE_MTU as usize],
        mac: regs::mac_from_regs(
            out[hw::FERROCE_PORT_OUT_MAC_LO as usize],
            out[hw::FERROCE_PORT_OUT_MAC_HI as usize],
        ),
    };
    let up = out[hw::FERROCE_PORT_OUT_STATE as usize] == hw::FERROCE_PORT_ACTIVE;
    Ok((info, up))
}

/// Formats a MAC address as `aa:bb:cc:dd:ee:ff`.
pub(crate) struct Mac<'a>(pub(crate) &'a [u8; 6]);

impl kernel::fmt::Display for Mac<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// Logs one clear line for a failed probe step and passes the error on.
fn step<T>(pdev: &pci::Device<Core<'_>>, what: &str, r: Result<T>) -> Result<T> {
    r.inspect_err(|e| dev_err!(pdev, "probe failed: {} (error {})\n", what, e.to_errno()))
}

impl<'bound> Ferroce<'bound> {
    /// Brings the function up; on any failure everything done so far is
    /// undone (RAII, in reverse) and one line says which step failed.
    pub(crate) fn probe(pdev: &'bound pci::Device<Core<'_>>) -> Result<Self> {
        step(pdev, "enable PCI device", pdev.enable_device_mem())?;
        pdev.set_master();
        let bar = step(
            pdev,
            "map BAR0",
            pdev.iomap_region_sized::<{ regs::REGS_SIZE }>(hw::FERROCE_BAR_REGS, c"ferroce"),
        )?;

        // 1. Version and magic.
        let version = bar.read(regs::VERSION);
        let (major, minor) = (version.major(), version.minor());
        if u32::from(major) != hw::FERROCE_VERSION_MAJOR {
            dev_err!(
                pdev,
                "unsupported programming model {}.{} (driver supports {}.x), not binding\n",
                major,
                minor,
                hw::FERROCE_VERSION_MAJOR
            );
            return Err(ENODEV);
        }
        let magic = bar.read(regs::MAGIC).into_raw();
        if magic != hw::FERROCE_MAGIC_VALUE {
            dev_err!(pdev, "bad MAGIC {:#x} in BAR0, not binding\n", magic);
            return Err(ENODEV);
        }

        // 2. Reset, poll for DEV_STATUS == 0.
        let reset_timeout = timeout_ms(
            bar.read(regs::RESET_TIMEOUT_MS).into_raw(),
            hw::FERROCE_RESET_TIMEOUT_MS,
        );
        let cmd_timeout = timeout_ms(
            bar.read(regs::CMD_TIMEOUT_MS).into_raw(),
            hw::FERROCE_CMD_TIMEOUT_MS,
        );
        bar.write_reg(regs::DEV_CTRL::zeroed().with_reset(true));
        step(
            pdev,
            "reset did not complete",
            poll_status(
                || Ok(bar.read(regs::DEV_STATUS)),
                reset_timeout,
                |s| s.into_raw() == 0,
            ),
        )?;

        // Vectors: 1 async + min(online CPUs, device max - 1) completion.
        let dev_vectors = bar.read(regs::NUM_VECTORS).into_raw();
        let want = 1 + kext::num_online_cpus().min(dev_vectors.saturating_sub(1));
        if want < 2 {
            dev_err!(
                pdev,
                "probe failed: device has {} MSI-X vectors\n",
                dev_vectors
            );
            return Err(ENODEV);
        }

        // 3. Rings: admin SQ/CQ, one EQ per wanted vector.
        let dev: &kernel::device::Device<Bound> = pdev.as_ref();
        let cmdq = step(pdev, "allocate admin queue", CmdQ::new(dev))?;
        let pbl = step(pdev, "allocate page-list area", PblScratch::new(dev))?;
        let mut eqs = step(
            pdev,
            "allocate EQs",
            KVec::with_capacity(usize::from_safe_cast(want), GFP_KERNEL).map_err(Error::from),
        )?;
        for i in 0..want {
            let depth = if i == 0 { eq::AEQ_DEPTH } else { eq::CEQ_DEPTH };
            // EQ numbers are bytes (the EQ doorbell's eqn field).
            let eq = u8::try_from(i)
                .map_err(Error::from)
                .and_then(|eqn| Eq::new(dev, eqn, depth));
            eqs.push(step(pdev, "allocate EQ", eq)?, GFP_KERNEL)?;
        }
        let (sq, cq) = cmdq.dma_addrs();
        let aeq = eqs[0].dma_addr();
        bar.write_reg(regs::ADMINQ_BASE_LO::from_raw(regs::lower_32_bits(sq)));
        bar.write_reg(regs::ADMINQ_BASE_HI::from_raw(regs::upper_32_bits(sq)));
        bar.write_reg(regs::ADMINCQ_BASE_LO::from_raw(regs::lower_32_bits(cq)));
        bar.write_reg(regs::ADMINCQ_BASE_HI::from_raw(regs::upper_32_bits(cq)));
        bar.write_reg(regs::ADMINQ_DEPTH::from_raw(u32::from(cmdq::DEPTH)));
        bar.write_reg(regs::AEQ_BASE_LO::from_raw(regs::lower_32_bits(aeq)));
        bar.write_reg(regs::AEQ_BASE_HI::from_raw(regs::upper_32_bits(aeq)));
        bar.write_reg(regs::AEQ_DEPTH::from_raw(u32::from(eqs[0].depth())));

        let bar = step(pdev, "register BAR0 with devres", bar.into_devres())?;
        // BAR2 is requested as a whole (user contexts map their pages from
        // it); the kernel only maps its own page, page 0.
        let db = step(
            pdev,
            "map the kernel doorbell page of BAR2",
            pdev.iomap_region_sized::<{ hw::FERROCE_DB_PAGE_SIZE as usize }>(
                hw::FERROCE_BAR_DB,
                c"ferroce-db",
            )
            .and_then(|b| b.into_devres()),
        )?;
        let dbrecs = step(
            pdev,
            "allocate doorbell-record pool",
            Arc::pin_init(DbRecPool::new(), GFP_KERNEL),
        )?;
        let cqs = step(pdev, "allocate CQ table", CqTable::new())?;
        let qps = step(pdev, "allocate QP table", QpTable::new())?;
        let srqs = step(pdev, "allocate SRQ table", SrqTable::new())?;
        let (shared_cqs, shared_qps, shared_srqs) = (cqs.clone(), qps.clone(), srqs.clone());
        let shared = Arc::pin_init(
            try_pin_init!(Shared {
                bar: Regs(bar),
                db,
                dbrecs,
                pdev: pdev.into(),
                cmdq <- new_mutex!(cmdq),
                pbl <- new_mutex!(pbl),
                cqs: shared_cqs,
                qps: shared_qps,
                srqs: shared_srqs,
                eqs,
                cmd_timeout,
                reset_timeout,
                dead: AtomicBool::new(false),
                quiesced: AtomicBool::new(false),
                stats: Stats::default(),
                path_warn: RateLimit::new(),
                port <- new_spinlock_irq!(PortSlot {
                    state: PortState::default(),
                    events: None,
                }),
            }? Error),
            GFP_KERNEL,
        );
        let shared = step(pdev, "allocate device state", shared)?;

        // 4. MSI-X vectors, one handler each (vector 0 = AEQ).
        let handler_shared = shared.clone();
        let irqs = step(
            pdev,
            "allocate MSI-X vectors",
            KBox::pin_init(
                kext::MsixIrqs::new(
                    pdev,
                    2,
                    want,
                    1,
                    |index| eq::irq_name(index, pdev.as_ref().name()),
                    move |index| EqHandler {
                        shared: handler_shared.clone(),
                        index,
                    },
                ),
                GFP_KERNEL,
            ),
        )?;
        let nvec = irqs.len();

        // 5. Enable, poll for READY (or FATAL).
        step(
            pdev,
            "enable",
            shared.with_bar(|bar| bar.write_reg(regs::DEV_CTRL::zeroed().with_enable(true))),
        )?;
        // The BAR guard is an RCU read section: take it per read, never
        // across the sleeps of the poll.
        let status = step(
            pdev,
            "device did not become ready",
            poll_status(
                || shared.with_bar(|bar| bar.read(regs::DEV_STATUS)),
                reset_timeout,
                |s| s.ready() || s.fatal(),
            ),
        )?;
        if status.fatal() {
            let code = shared.with_bar(|bar| bar.read(regs::FATAL_CODE).into_raw())?;
            dev_err!(
                pdev,
                "probe failed: device FATAL on enable, code {}\n",
                code
            );
            return Err(EIO);
        }

        // 6. Capabilities, port, completion EQs.
        let caps = step(pdev, "QUERY_CAPS", query_caps(&shared))?;
        let (port, up) = step(pdev, "QUERY_PORT", query_port(&shared))?;
        shared.update_port(|s| s.link = up);
        for eq in shared.eqs.iter().take(nvec).skip(1) {
            let cmd = hw::ferroce_cmd_create_eq {
                base: eq.dma_addr(),
                depth: u32::from(eq.depth()),
                vector: u16::from(eq.eqn()),
                ..Default::default()
            };
            let out = step(pdev, "CREATE_EQ", shared.exec(&cmd))?.out;
            if out[0] != u32::from(eq.eqn()) {
                dev_err!(
                    pdev,
                    "probe failed: CREATE_EQ gave eqn {} for vector {}\n",
                    out[0],
                    eq.eqn()
                );
                return Err(EIO);
            }
        }
        let num_ceqs = step(
            pdev,
            "count completion vectors",
            u32::try_from(nvec - 1).map_err(Error::from),
        )?;

        // 7. The ib_device: node GUID = EUI-64 of the port MAC. It is paired
        // with its netdev by the notifier registered below.
        let node_guid = ib::node_guid(&port.mac);
        let db_region = step(
            pdev,
            "doorbell BAR",
            rdma::MmioRegion::new(
                pdev,
                hw::FERROCE_BAR_DB,
                0,
                u64::from(hw::FERROCE_BAR2_SIZE),
            ),
        )?;
        let ibdev = IbDev {
            shared: shared.clone(),
            caps,
            port,
            node_guid,
            num_ceqs,
            db_region,
            db_pages: DbPages::new(
                caps.db_pages.min(hw::FERROCE_DB_PAGES),
                hw::FERROCE_DB_KERNEL_PAGES,
                verbs::DB_PAGES_PER_MAPPING,
            ),
            key_variant: AtomicU8::new(0),
            cqs_live: AtomicU32::new(0),
            gid_vlans: [const { AtomicU16::new(0) }; hw::FERROCE_GID_TABLE_LEN as usize],
        };
        let mut builder = step(
            pdev,
            "allocate ib_device",
            rdma::Builder::new(
                kernel::module::this_module::<crate::LocalModule>(),
                ibdev,
                cqs,
                qps,
                srqs,
            ),
        )?;
        builder.set_node_guid(node_guid);
        builder.set_num_comp_vectors(num_ceqs)?;
        builder.set_phys_port_cnt(hw::FERROCE_NUM_PORTS);
        let reg = step(
            pdev,
            "ib_register_device",
            builder.register(c"ferroce%d", dev),
        )?;
        // 8. The netdev notifier: registering it replays NETDEV_REGISTER for
        // every existing netdev, which pairs the port if its netdev exists.
        // Port events must reach ib_core by then (its cached port state).
        let watch_ref = reg.event_ref();
        shared.port.lock().events = reg.event_ref();
        let notifier = watch_ref.ok_or(ENODEV).and_then(|ib| {
            NetdevNotifier::register(PortWatch::new(
                shared.clone(),
                ib,
                port.mac,
                caps.device_caps & hw::FERROCE_CAP_PORT_MAC != 0,
            ))
        });
        let notifier = match step(pdev, "register netdev notifier", notifier) {
            Ok(n) => n,
            Err(e) => {
                // The handles must not outlive the registration.
                let events = shared.port.lock().events.take();
                drop(events);
                return Err(e);
            }
        };
        if reg.device().netdev(1).is_some() {
            // Paired by the replay, which roce_gid_mgmt does not see: have it
            // scan the netdevs now (outside RTNL, which the scan takes).
            notifier.handler().rescan_gids();
        } else {
            dev_info!(
                pdev,
                "no netdev with MAC {} yet; GID table stays empty until one registers\n",
                Mac(&port.mac)
            );
        }
        dev_info!(
            pdev,
            "{}: programming model {}.{}, MAC {}, {} completion vectors, link {}\n",
            reg.device().name(),
            major,
            minor,
            Mac(&port.mac),
            num_ceqs,
            if up { "up" } else { "down" }
        );
        let debugfs = Debugfs::new(&shared, reg.device().name().as_cstr());
        Ok(Self {
            debugfs,
            notifier: Some(notifier),
            ib: Some(reg),
            irqs,
            shared,
        })
    }
}
