// SPDX-License-Identifier: GPL-2.0
//! BAR2 doorbell pages: decoding a doorbell write and the SQ/RQ doorbells
//! (CQ doorbells are in `eq_cq`).

use super::State;
use crate::hw::*;

impl State {
    pub(crate) fn bad_doorbell(&mut self, msg: String) {
        self.counters.hw.malformed_doorbells += 1;
        self.note(msg);
    }

    pub(super) fn doorbell_write(&mut self, offset: u64, data: &[u8]) {
        if offset >= BAR2_SIZE {
            return self.bad_doorbell(format!("doorbell write beyond BAR2 at {offset:#x}"));
        }
        let page = (offset >> DB_PAGE_SHIFT) as u32;
        let reg = offset & (DB_PAGE_SIZE - 1);
        let Ok(bytes) = <[u8; 8]>::try_from(data) else {
            return self.bad_doorbell(format!("doorbell write of {} bytes", data.len()));
        };
        let value = u64::from_le_bytes(bytes);
        if !self.ready() {
            return self.bad_doorbell(format!("doorbell {value:#x} while not ready"));
        }
        match reg {
            DB_SQ | DB_RQ => self.qp_doorbell(page, reg == DB_SQ, value),
            DB_CQ => self.cq_doorbell(page, value),
            _ => self.bad_doorbell(format!("doorbell at reserved offset {reg:#x}")),
        }
    }

    fn qp_doorbell(&mut self, page: u32, sq: bool, value: u64) {
        let which = if sq { "SQ" } else { "RQ" };
        if value & DB_QP_RSVD_MASK != 0 {
            return self.bad_doorbell(format!("{which} doorbell reserved bits {value:#x}"));
        }
        let qpn = (value & DB_QN_MASK) as u32;
        let pi = ((value & DB_IDX_MASK) >> DB_PI_SHIFT) as u16;
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
        // The SQ doorbell is rung for every post, so a PI is checked against
        // the last one. The RQ doorbell is optional (the RQ's doorbell
        // record is what the device reads): the last one may be any number
        // of wraps behind, so a PI is checked against the WQEs taken, and
        // may also be a late one for WQEs the device already took from the
        // record.
        let (depth, last) = if sq {
            (qp.sq_depth, qp.sq_pi)
        } else {
            (qp.rq_depth, qp.engine.get().map_or(0, |e| e.rq_ci()))
        };
        let late = !sq && u32::from(last.wrapping_sub(pi)) <= depth;
        if depth == 0 || (u32::from(pi.wrapping_sub(last)) > depth && !late) {
            let msg = if sq {
                format!("SQ doorbell pi {pi} jumps more than depth {depth} from {last}")
            } else {
                format!("RQ doorbell pi {pi} is more than depth {depth} from ci {last}")
            };
            return self.bad_doorbell(msg);
        }
        if sq {
            qp.sq_pi = pi;
            qp.sq_doorbells += 1;
            self.counters.hw.sq_doorbells += 1;
            if self.data_path_runs() {
                self.sq_progress(qpn);
            }
        } else {
            qp.rq_pi = pi;
            qp.rq_doorbells += 1;
            self.counters.hw.rq_doorbells += 1;
            if self.bus_master() {
                self.rq_progress(qpn);
            }
        }
    }
}
