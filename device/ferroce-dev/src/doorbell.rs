// SPDX-License-Identifier: GPL-2.0
//! Doorbell value encoders (the Rust twins of the C helper macros
//! `FERROCE_DB_SQ_VAL` / `FERROCE_DB_CQ_VAL` in ferroce-hw.h).

use crate::hw::*;

/// SQ or RQ doorbell value: qpn in 23:0, producer index in 47:32.
pub fn qp_db(qpn: u32, pi: u32) -> u64 {
    (u64::from(pi & 0xffff) << DB_PI_SHIFT) | (u64::from(qpn) & DB_QN_MASK)
}

/// CQ doorbell value: cqn 23:0, arm_sn 25:24, cmd (`CQ_CMD_*`) 27:26, ci 47:32.
pub fn cq_db(cqn: u32, ci: u32, cmd: u32, sn: u32) -> u64 {
    (u64::from(ci & 0xffff) << DB_CQ_CI_SHIFT)
        | (u64::from(cmd & 3) << DB_CQ_CMD_SHIFT)
        | (u64::from(sn & 3) << DB_CQ_SN_SHIFT)
        | (u64::from(cqn) & DB_QN_MASK)
}

/// EQ_DB register value: ci 15:0, eqn 23:16, arm 31.
pub fn eq_db(eqn: u32, ci: u32, arm: bool) -> u32 {
    (ci & EQ_DB_CI_MASK)
        | ((eqn << EQ_DB_EQN_SHIFT) & EQ_DB_EQN_MASK)
        | if arm { EQ_DB_ARM } else { 0 }
}
