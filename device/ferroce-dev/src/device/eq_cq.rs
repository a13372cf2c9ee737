// SPDX-License-Identifier: GPL-2.0
//! Event queues and completion queues: posting EQEs and async events,
//! EQ_DB, CQ doorbells (consumer index and arming), posting CQEs and
//! putting a CQ in error.

use zerocopy::IntoBytes;

use super::bus_master::DeferredEvent;
use super::{PostError, State};
use crate::hw::{self, *};
use crate::objects::Arm;

impl State {
    /// Writes one EQE to EQ `eqn`; raises its vector if armed.
    pub(crate) fn post_eqe_raw(&mut self, eqn: usize, ty: u8, obj: u32, data: u32, data2: u32) {
        if !self.bus_master() {
            let event_type = ty;
            return self.defer_event(DeferredEvent {
                eqn,
                event_type,
                obj,
                data,
                data2,
            });
        }
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

    pub(super) fn eq_doorbell(&mut self, value: u32) {
        let eqn = ((value & EQ_DB_EQN_MASK) >> EQ_DB_EQN_SHIFT) as usize;
        let ci = (value & EQ_DB_CI_MASK) as u16;
        let arm = value & EQ_DB_ARM != 0;
        if value & EQ_DB_RSVD_MASK != 0 {
            return self.bad_doorbell(format!("EQ_DB reserved bits {value:#x}"));
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
        if arm {
            eq.armed = true;
        }
        self.counters.hw.eq_doorbells += 1;
        if arm {
            // Entries the driver has not consumed yet: interrupt now.
            self.eq_fire_if_pending(eqn);
        }
    }

    /// Raises the vector of EQ `eqn` if it is armed and holds entries the
    /// driver has not consumed; not while BME is clear (an MSI-X message
    /// is a bus-master write): the EQ stays armed and fires when BME is set.
    pub(super) fn eq_fire_if_pending(&mut self, eqn: usize) {
        if !self.bus_master() {
            return;
        }
        let Some(Some(eq)) = self.eqs.get_mut(eqn) else {
            return;
        };
        if !eq.armed || eq.pi == eq.ci {
            return;
        }
        eq.armed = false;
        let vector = eq.vector;
        self.counters.hw.interrupts += 1;
        self.irq.trigger(vector);
    }

    pub(super) fn cq_doorbell(&mut self, page: u32, value: u64) {
        if value & DB_CQ_RSVD_MASK != 0 {
            return self.bad_doorbell(format!("CQ doorbell reserved bits {value:#x}"));
        }
        let cqn = (value & DB_QN_MASK) as u32;
        let sn = ((value & DB_CQ_SN_MASK) >> DB_CQ_SN_SHIFT) as u8;
        let cmd = ((value & DB_CQ_CMD_MASK) >> DB_CQ_CMD_SHIFT) as u32;
        let ci = ((value & DB_IDX_MASK) >> DB_CQ_CI_SHIFT) as u16;
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
        if let Some(requested) = arm {
            // ARM_NEXT wins over ARM_SOLICITED until the event fires.
            cq.arm = match (cq.arm, requested) {
                (Arm::Next, _) => Arm::Next,
                (_, requested) => requested,
            };
            cq.arm_sn = sn;
            // CQEs beyond the arm's consumer index that no event announced
            // yet fire it at once: software that arms with the index of what
            // it has polled never waits for an event that already happened,
            // and software that re-arms before polling the CQE an event
            // announced (perftest -e) gets no second event for it.
            let unpolled = cq.pi.wrapping_sub(ci);
            let from = if cq.announced.wrapping_sub(ci) <= unpolled {
                cq.announced
            } else {
                ci
            };
            let pending = cq.pi.wrapping_sub(from);
            let now = match cq.arm {
                Arm::None => false,
                Arm::Next => pending != 0,
                Arm::Solicited => cq
                    .last_solicited
                    .is_some_and(|s| s.wrapping_sub(from) < pending),
            };
            if now {
                cq.arm = Arm::None;
                cq.announced = cq.pi;
                fire = Some((cq.eqn, sn));
            }
        }
        cq.doorbells += 1;
        self.counters.hw.cq_doorbells += 1;
        if let Some((eqn, sn)) = fire {
            self.post_eqe_raw(eqn as usize, EQE_COMPLETION, cqn, u32::from(sn), 0);
        }
    }

    fn cq_error(&mut self, cqn: u32, syndrome: u32) {
        if let Some(cq) = self.cqs.get_mut(cqn) {
            cq.error = true;
        }
        self.post_async(EQE_CQ_ERROR, cqn, syndrome, 0);
    }

    /// Writes CQE `pi` of CQ `cqn`. Everything about the ring (pages, page
    /// size, depth: slot, owner bit, overflow check) is read from the CQ
    /// for each CQE, so a RESIZE_CQ takes effect with the next CQE.
    pub(crate) fn post_cqe(&mut self, cqn: u32, mut cqe: Cqe) -> Result<(), PostError> {
        if !self.bus_master() {
            return Err(PostError::NoBusMaster);
        }
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
            cq.announced = cq.pi;
            let (eqn, sn) = (cq.eqn, cq.arm_sn);
            self.post_eqe_raw(eqn as usize, EQE_COMPLETION, cqn, u32::from(sn), 0);
        }
        Ok(())
    }
}
