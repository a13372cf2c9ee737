// SPDX-License-Identifier: GPL-2.0

//! Event queue dispatch: each MSI-X vector's handler drains its EQ and
//! passes every event on to the CQ, QP, SRQ or port it names
//! (`Documentation/ferroce/device.rst`, "Event queues").

#![forbid(unsafe_code)]

use super::Shared;
use crate::{
    bindings as hw,
    diag::RetryWarning,
    eq::Eqe,
    rdma::{
        CqEvent,
        QpEvent,
        SrqEvent, //
    },
    regs, //
};
use core::sync::atomic::Ordering;
use kernel::{
    io::Io,
    irq::{
        self,
        IrqReturn, //
    },
    prelude::*,
    sync::Arc, //
};

impl Shared {
    fn handle_eqe(&self, eqe: Eqe) {
        let s = &self.stats;
        match u32::from(eqe.event_type) {
            hw::FERROCE_EQE_COMPLETION => {
                let c = if self.cqs.notify(eqe.obj) {
                    &s.cq_events
                } else {
                    &s.unknown_cq_events
                };
                c.fetch_add(1, Ordering::Relaxed);
            }
            hw::FERROCE_EQE_CQ_ERROR => {
                dev_warn!(self.dev(), "CQ {} error, syndrome {}\n", eqe.obj, eqe.data);
                if !self.cqs.event(eqe.obj, CqEvent::Err) {
                    s.unknown_obj_events.fetch_add(1, Ordering::Relaxed);
                }
            }
            hw::FERROCE_EQE_SRQ_LIMIT_REACHED => {
                dev_dbg!(self.dev(), "SRQ {} limit {} reached\n", eqe.obj, eqe.data);
                if !self.srqs.event(eqe.obj, SrqEvent::LimitReached) {
                    s.unknown_obj_events.fetch_add(1, Ordering::Relaxed);
                }
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
                dev_info!(
                    self.dev(),
                    "port {} link {}\n",
                    eqe.obj,
                    if active { "up" } else { "down" }
                );
                self.update_port(|s| s.link = active);
            }
            hw::FERROCE_EQE_DEVICE_FATAL => {
                dev_err!(self.dev(), "DEVICE_FATAL event, code {}\n", eqe.data);
                self.mark_dead("device reported FATAL");
            }
            hw::FERROCE_EQE_QP_FATAL..=hw::FERROCE_EQE_QP_ACCESS_ERR => {
                let ev = match u32::from(eqe.event_type) {
                    hw::FERROCE_EQE_QP_FATAL => QpEvent::Fatal,
                    hw::FERROCE_EQE_QP_LAST_WQE_REACHED => QpEvent::LastWqeReached,
                    hw::FERROCE_EQE_QP_SQ_DRAINED => QpEvent::SqDrained,
                    hw::FERROCE_EQE_QP_COMM_EST => QpEvent::CommEst,
                    _ => QpEvent::AccessErr,
                };
                dev_dbg!(
                    self.dev(),
                    "QP {} event {:?}, syndrome {:#x}\n",
                    eqe.obj,
                    ev,
                    eqe.data
                );
                // The QP is in ERR: a kernel QP's receives must ring.
                if matches!(ev, QpEvent::Fatal | QpEvent::AccessErr) {
                    self.qps.with_qp(eqe.obj, |ib, qp| {
                        if let Some(k) = qp.kernel() {
                            k.rq_may_fail(ib, qp.qpn, true);
                        }
                    });
                }
                let c = if self.qps.event(eqe.obj, ev) {
                    &s.qp_events
                } else {
                    &s.unknown_obj_events
                };
                c.fetch_add(1, Ordering::Relaxed);
            }
            hw::FERROCE_EQE_QP_RETRY_EXCEEDED => {
                // Informational (device 1.3), no ib_event: the CQE tells
                // the consumer. Only ACK timeouts say the path may be dead
                // (an RNR NAK came from the peer).
                s.qp_retry_exceeded.fetch_add(1, Ordering::Relaxed);
                if eqe.data != 0 {
                    return;
                }
                let known = self.qps.with_qp(eqe.obj, |ib, qp| {
                    if let Some(note) = qp.path.take_warning() {
                        if self.path_warn.allow() {
                            s.path_warnings.fetch_add(1, Ordering::Relaxed);
                            let w = RetryWarning { qpn: qp.qpn, note };
                            ib.warn(format_args!("{w}\n"));
                        }
                    }
                });
                if known.is_none() {
                    s.unknown_obj_events.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => {
                s.unknown_events.fetch_add(1, Ordering::Relaxed);
                dev_dbg!(self.dev(), "dropped unknown EQE {:?}\n", eqe);
            }
        }
    }

    /// Drains EQ `index` and re-arms it.
    pub(super) fn handle_eq(&self, index: usize) -> IrqReturn {
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
        // Without the BAR (the device is being removed) there is no EQ
        // left to re-arm.
        if let Some(bar) = self.bar.0.try_access() {
            bar.write_reg(db);
        }
        IrqReturn::Handled
    }
}

/// The IRQ handler of one vector: drains that vector's EQ.
pub(crate) struct EqHandler {
    pub(super) shared: Arc<Shared>,
    pub(super) index: usize,
}

impl irq::Handler for EqHandler {
    fn handle(&self) -> IrqReturn {
        self.shared.handle_eq(self.index)
    }
}
