// SPDX-License-Identifier: GPL-2.0

//! PCI bring-up and teardown of the ferroce function
//! (`Documentation/ferroce/device.rst`, "Bring-up: reset and ready
//! handshake").

#![forbid(unsafe_code)]

use crate::{
    bindings::{self as hw, Command},
    cmdq::{self, CmdQ, Completion},
    eq::{self, Eq, Eqe},
    ib::{self, IbDev},
    rdma::{self, kext, EventRef, NetDevRef, PortEvent},
    regs::{self, Bar0, DevresBar0},
};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::{
    device::{Bound, Core},
    dma::Coherent,
    io::{io_read, poll::read_poll_timeout, Io},
    irq::{self, IrqReturn},
    new_mutex, new_spinlock_irq, pci,
    prelude::*,
    sync::aref::ARef,
    sync::{Arc, Mutex, SpinLockIrq},
    time::Delta,
};

/// What QUERY_CAPS reported (`struct ferroce_caps`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Caps {
    pub(crate) device_caps: u32,
    pub(crate) max_qp: u32,
    pub(crate) max_qp_wr: u32,
    pub(crate) max_sge: u32,
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

/// Driver counters.
#[derive(Default)]
pub(crate) struct Stats {
    /// COMPLETION events for a CQ number the driver does not know (dropped).
    pub(crate) unknown_cq_events: AtomicU64,
    /// Async events for objects the driver does not know (dropped).
    pub(crate) unknown_obj_events: AtomicU64,
    /// EQEs of an unknown type (dropped).
    pub(crate) unknown_events: AtomicU64,
    /// CMD_COMPLETION events (commands are polled; counted only).
    pub(crate) cmd_events: AtomicU64,
}

/// Device state shared by the PCI driver, the IRQ handlers and the
/// `ib_device`.
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

#[pin_data]
pub(crate) struct Shared {
    /// First field: dropped (device reset) before the rings.
    bar: Regs,
    pdev: ARef<pci::Device>,
    #[pin]
    cmdq: Mutex<CmdQ>,
    eqs: KVec<Eq>,
    cmd_timeout: Delta,
    /// Set when the device stopped answering or reported FATAL: every
    /// further command fails with `EIO` at once.
    dead: AtomicBool,
    pub(crate) link_up: AtomicBool,
    pub(crate) stats: Stats,
    /// Where async events go once the `ib_device` is registered; emptied
    /// before it is unregistered.
    #[pin]
    events: SpinLockIrq<Option<EventRef>>,
}

impl Shared {
    fn dev(&self) -> &kernel::device::Device {
        self.pdev.as_ref()
    }

    /// Runs `f` with the mapped BAR; `ENODEV` once the device is unbound.
    /// `f` runs in an RCU read section (the devres guard): it must not sleep.
    fn with_bar<R>(&self, f: impl FnOnce(&Bar0<'_>) -> R) -> Result<R> {
        let bar = self.bar.0.try_access().ok_or(ENODEV)?;
        Ok(f(&bar))
    }

    fn mark_dead(&self, why: &str) {
        if !self.dead.swap(true, Ordering::Relaxed) {
            dev_err!(
                self.dev(),
                "device dead: {}; commands fail from now on\n",
                why
            );
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
        match q.exec(&self.bar.0, cmd, self.cmd_timeout) {
            Err(e) if e == ETIMEDOUT => {
                self.mark_dead("admin command timed out");
                Err(ETIMEDOUT)
            }
            r => r,
        }
    }

    /// Resets the device: stops its DMA and interrupts, destroys its
    /// objects. Best effort (the device may be gone).
    fn reset(&self) {
        self.bar.reset();
    }

    fn handle_eqe(&self, eqe: Eqe) {
        let s = &self.stats;
        match u32::from(eqe.event_type) {
            hw::FERROCE_EQE_COMPLETION => {
                // No CQ exists yet: every CQ number is unknown.
                s.unknown_cq_events.fetch_add(1, Ordering::Relaxed);
            }
            hw::FERROCE_EQE_CMD_COMPLETION => {
                // Commands are polled; the event is only counted.
                s.cmd_events.fetch_add(1, Ordering::Relaxed);
                dev_dbg!(
                    self.dev(),
                    "command {} done, status {}, slot {}\n",
                    eqe.obj,
                    eqe.data,
                    eqe.data2
                );
            }
            hw::FERROCE_EQE_PORT_ACTIVE | hw::FERROCE_EQE_PORT_DOWN => {
                let active = u32::from(eqe.event_type) == hw::FERROCE_EQE_PORT_ACTIVE;
                self.link_up.store(active, Ordering::Relaxed);
                dev_info!(
                    self.dev(),
                    "port {} {}\n",
                    eqe.obj,
                    if active { "active" } else { "down" }
                );
                let ev = if active {
                    PortEvent::Active
                } else {
                    PortEvent::Err
                };
                if let Some(ib) = self.events.lock().as_ref() {
                    ib.port_event(eqe.obj, ev);
                }
            }
            hw::FERROCE_EQE_DEVICE_FATAL => {
                dev_err!(self.dev(), "DEVICE_FATAL event, code {}\n", eqe.data);
                self.mark_dead("device reported FATAL");
                if let Some(ib) = self.events.lock().as_ref() {
                    ib.device_fatal();
                }
            }
            hw::FERROCE_EQE_QP_FATAL..=hw::FERROCE_EQE_QP_ACCESS_ERR | hw::FERROCE_EQE_CQ_ERROR => {
                s.unknown_obj_events.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                s.unknown_events.fetch_add(1, Ordering::Relaxed);
                dev_dbg!(self.dev(), "dropped unknown EQE {:?}\n", eqe);
            }
        }
    }

    /// Drains EQ `index` and re-arms it.
    fn handle_eq(&self, index: usize) -> IrqReturn {
        let Some(eq) = self.eqs.get(index) else {
            return IrqReturn::None;
        };
        let Ok(ci) = eq.drain(|eqe| self.handle_eqe(eqe)) else {
            return IrqReturn::Handled;
        };
        let db = regs::EQ_DB::zeroed()
            .with_ci(ci)
            .with_eqn(eq.eqn())
            .with_arm(true);
        let _ = self.with_bar(|bar| bar.write_reg(db));
        IrqReturn::Handled
    }
}

/// The IRQ handler of one vector: drains that vector's EQ.
pub(crate) struct EqHandler {
    shared: Arc<Shared>,
    index: usize,
}

impl irq::Handler for EqHandler {
    fn handle(&self) -> IrqReturn {
        self.shared.handle_eq(self.index)
    }
}

/// A bound ferroce function.
pub(crate) struct Ferroce<'bound> {
    /// The `ib_device`; unregistered first.
    ib: Option<rdma::Registration<IbDev>>,
    irqs: kext::MsixIrqs<'bound, EqHandler>,
    shared: Arc<Shared>,
}

impl Drop for Ferroce<'_> {
    fn drop(&mut self) {
        // Reverse of probe: unregister the ib_device (waits for its users,
        // drops its state), stop the device, then free IRQs, vectors and
        // rings (field drops).
        let events = self.shared.events.lock().take();
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

fn query_caps(shared: &Shared, dev: &kernel::device::Device<Bound>) -> Result<Caps> {
    const WORDS: usize = core::mem::size_of::<hw::ferroce_caps>() / 4;
    let resp: Coherent<[u32]> = Coherent::zeroed_slice(dev, WORDS, GFP_KERNEL)?;
    let cmd = hw::ferroce_cmd_query_caps {
        resp_addr: resp.dma_address(),
        resp_len: (WORDS * 4) as u32,
        ..Default::default()
    };
    shared.exec(&cmd)?;
    kext::dma_rmb();
    macro_rules! w {
        ($f:ident) => {{
            let i = core::mem::offset_of!(hw::ferroce_caps, $f) / 4;
            io_read!(&resp, [try: i])
        }};
    }
    macro_rules! q {
        ($f:ident) => {{
            let i = core::mem::offset_of!(hw::ferroce_caps, $f) / 4;
            let lo: u32 = io_read!(&resp, [try: i]);
            let hi: u32 = io_read!(&resp, [try: i + 1]);
            u64::from(lo) | (u64::from(hi) << 32)
        }};
    }
    Ok(Caps {
        device_caps: w!(device_caps),
        max_qp: w!(max_qp),
        max_qp_wr: w!(max_qp_wr),
        max_sge: w!(max_sge),
        max_cq: w!(max_cq),
        max_cqe: w!(max_cqe),
        max_mr: w!(max_mr),
        max_pd: w!(max_pd),
        max_ah: w!(max_ah),
        max_qp_rd_atom: w!(max_qp_rd_atom),
        max_qp_init_rd_atom: w!(max_qp_init_rd_atom),
        gid_table_len: w!(gid_table_len),
        pkey_table_len: w!(pkey_table_len),
        max_msg_size: w!(max_msg_size),
        local_ca_ack_delay: w!(local_ca_ack_delay),
        max_path_mtu: w!(max_path_mtu),
        max_mr_size: q!(max_mr_size),
        page_size_cap: q!(page_size_cap),
        fw_version: q!(fw_version),
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
struct Mac<'a>(&'a [u8; 6]);

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
        step(
            pdev,
            "set 64-bit DMA mask",
            kext::dma_set_mask_and_coherent(pdev, 64),
        )?;
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
        let mut eqs = step(
            pdev,
            "allocate EQs",
            KVec::with_capacity(want as usize, GFP_KERNEL).map_err(Error::from),
        )?;
        for i in 0..want {
            let depth = if i == 0 { eq::AEQ_DEPTH } else { eq::CEQ_DEPTH };
            eqs.push(
                step(pdev, "allocate EQ", Eq::new(dev, i as u8, depth))?,
                GFP_KERNEL,
            )?;
        }
        let (sq, cq) = cmdq.dma_addrs();
        let aeq = eqs[0].dma_addr();
        bar.write_reg(regs::ADMINQ_BASE_LO::from_raw(sq as u32));
        bar.write_reg(regs::ADMINQ_BASE_HI::from_raw((sq >> 32) as u32));
        bar.write_reg(regs::ADMINCQ_BASE_LO::from_raw(cq as u32));
        bar.write_reg(regs::ADMINCQ_BASE_HI::from_raw((cq >> 32) as u32));
        bar.write_reg(regs::ADMINQ_DEPTH::from_raw(u32::from(cmdq::DEPTH)));
        bar.write_reg(regs::AEQ_BASE_LO::from_raw(aeq as u32));
        bar.write_reg(regs::AEQ_BASE_HI::from_raw((aeq >> 32) as u32));
        bar.write_reg(regs::AEQ_DEPTH::from_raw(u32::from(eqs[0].depth())));

        let bar = step(pdev, "register BAR0 with devres", bar.into_devres())?;
        let shared = Arc::pin_init(
            try_pin_init!(Shared {
                bar: Regs(bar),
                pdev: pdev.into(),
                cmdq <- new_mutex!(cmdq),
                eqs,
                cmd_timeout,
                dead: AtomicBool::new(false),
                link_up: AtomicBool::new(false),
                stats: Stats::default(),
                events <- new_spinlock_irq!(None),
            }? Error),
            GFP_KERNEL,
        );
        let shared = step(pdev, "allocate device state", shared)?;

        // 4. MSI-X vectors, one handler each (vector 0 = AEQ).
        let irqs = step(
            pdev,
            "allocate MSI-X vectors",
            kext::MsixIrqs::new(pdev, 2, want, c"ferroce", |index| EqHandler {
                shared: shared.clone(),
                index,
            }),
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
        let caps = step(pdev, "QUERY_CAPS", query_caps(&shared, dev))?;
        let (port, up) = step(pdev, "QUERY_PORT", query_port(&shared))?;
        shared.link_up.store(up, Ordering::Relaxed);
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
        let num_ceqs = (nvec - 1) as u32;

        // 7. The ib_device: node GUID = EUI-64 of the port MAC, paired with
        // the netdev of the same MAC if it already exists.
        let node_guid = ib::node_guid(&port.mac);
        let ibdev = IbDev {
            shared: shared.clone(),
            caps,
            port,
            node_guid,
        };
        let mut builder = step(pdev, "allocate ib_device", rdma::Builder::new(ibdev))?;
        builder.set_node_guid(node_guid);
        builder.set_num_comp_vectors(num_ceqs)?;
        builder.set_phys_port_cnt(hw::FERROCE_NUM_PORTS);
        // ib_core takes its own reference on the netdev; ours is dropped at
        // once so that the netdev can always be unregistered.
        match NetDevRef::find_by_mac(&port.mac) {
            Some(nd) => step(
                pdev,
                "ib_device_set_netdev",
                builder.set_netdev(nd.get(), 1),
            )?,
            None => dev_info!(
                pdev,
                "no netdev with MAC {} yet; GID table stays empty\n",
                Mac(&port.mac)
            ),
        }
        let reg = step(
            pdev,
            "ib_register_device",
            builder.register(c"ferroce%d", dev),
        )?;
        *shared.events.lock() = reg.event_ref();
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
        Ok(Self {
            ib: Some(reg),
            irqs,
            shared,
        })
    }
}
