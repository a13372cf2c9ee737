// SPDX-License-Identifier: GPL-2.0
//! The admin queue: ADMINQ_DB, fetching commands, writing their
//! completions and CMD_COMPLETION events; helpers the commands use to
//! parse their payload and write their responses.

use zerocopy::{FromBytes, IntoBytes};

use super::State;
use crate::hw::{self, *};

/// Admin queue state while enabled.
#[derive(Debug, Clone)]
pub(crate) struct AdminQ {
    pub sq_base: u64,
    pub cq_base: u64,
    pub depth: u32,
    pub ci: u16,
}

impl State {
    pub(super) fn adminq_doorbell(&mut self, value: u32) {
        if !self.ready() {
            return self.bad_doorbell(format!("ADMINQ_DB {value:#x} while not ready"));
        }
        if value & !ADMINQ_IDX_MASK != 0 {
            return self.bad_doorbell(format!("ADMINQ_DB reserved bits {value:#x}"));
        }
        let Some(adminq) = self.adminq.clone() else {
            return;
        };
        let pi = value as u16;
        if u32::from(pi.wrapping_sub(adminq.ci)) > adminq.depth {
            return self.bad_doorbell(format!("ADMINQ_DB pi {pi} > ci {} + depth", adminq.ci));
        }
        if !self.bus_master() || self.faults.stalled {
            // No command fetch while BME is clear or the device is
            // stalled: done when BME is set and the stall ends.
            self.deferred.adminq_pi = Some(pi);
            self.bus_master_counters.adminq_deferred += 1;
            return;
        }
        let mut ci = adminq.ci;
        while ci != pi && self.ready() {
            let slot = u32::from(ci) & (adminq.depth - 1);
            let mut raw = [0u8; CMD_SIZE];
            let cmd_addr = adminq
                .sq_base
                .wrapping_add(u64::from(slot) * CMD_SIZE as u64);
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
            if let Some(count) = self.counters.hw.cmd_status.get_mut(usize::from(status)) {
                *count += 1;
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
            let phase = ((u32::from(ci) >> adminq.depth.trailing_zeros()) & 1) as u8 ^ 1;
            let comp_addr = adminq
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
            if let Some(adminq) = self.adminq.as_mut() {
                adminq.ci = ci;
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

    pub(crate) fn write_resp<T: IntoBytes + zerocopy::Immutable>(
        &mut self,
        addr: u64,
        len: u32,
        resp: &T,
    ) -> Result<(), u8> {
        let bytes = resp.as_bytes();
        if (len as usize) < bytes.len() {
            return Err(STATUS_BAD_PARAM);
        }
        self.write_resp_bytes(addr, bytes)
    }

    /// Writes `bytes` of a response to guest memory at `addr`.
    pub(crate) fn write_resp_bytes(&mut self, addr: u64, bytes: &[u8]) -> Result<(), u8> {
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
