// SPDX-License-Identifier: GPL-2.0
//! The IB QP state machine (IBTA 1.4 section 10.3.1 / Linux `ib_modify_qp_is_ok`).
//!
//! [`transition`] says whether `cur -> next` is a legal MODIFY_QP transition
//! for a QP type and which attributes it requires and allows.

use crate::hw::*;

/// Attribute masks of one legal transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// Attributes that must be present (besides STATE).
    pub required: u32,
    /// Attributes that may be present (besides STATE).
    pub optional: u32,
}

/// Why a MODIFY_QP request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModifyError {
    /// `cur -> next` is not a legal transition, or CUR_STATE mismatched.
    BadState,
    /// A required attribute is missing or a forbidden one is present.
    BadAttrMask,
}

const RC_INIT_ATTRS: u32 = QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_ACCESS_FLAGS;
const UD_INIT_ATTRS: u32 = QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_QKEY;
const RC_RTR_REQ: u32 = QP_ATTR_AV
    | QP_ATTR_PATH_MTU
    | QP_ATTR_DEST_QPN
    | QP_ATTR_RQ_PSN
    | QP_ATTR_MAX_DEST_RD_ATOMIC
    | QP_ATTR_MIN_RNR_TIMER;
const RC_RTR_OPT: u32 = QP_ATTR_ALT_PATH | QP_ATTR_ACCESS_FLAGS | QP_ATTR_PKEY_INDEX;
const RC_RTS_REQ: u32 = QP_ATTR_TIMEOUT
    | QP_ATTR_RETRY_CNT
    | QP_ATTR_RNR_RETRY
    | QP_ATTR_SQ_PSN
    | QP_ATTR_MAX_QP_RD_ATOMIC;
const RC_RTS_OPT: u32 = QP_ATTR_CUR_STATE
    | QP_ATTR_ALT_PATH
    | QP_ATTR_ACCESS_FLAGS
    | QP_ATTR_MIN_RNR_TIMER
    | QP_ATTR_PATH_MIG_STATE;
const UD_RTS_OPT: u32 = QP_ATTR_CUR_STATE | QP_ATTR_QKEY;
// UC (ib_core's `qp_state_table`): RC's attributes without the ones of
// acknowledgements, retries and READ/atomic resources.
const UC_RTR_REQ: u32 = QP_ATTR_AV | QP_ATTR_PATH_MTU | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN;
const UC_RTS_OPT: u32 =
    QP_ATTR_CUR_STATE | QP_ATTR_ALT_PATH | QP_ATTR_ACCESS_FLAGS | QP_ATTR_PATH_MIG_STATE;
const UC_SQD_SQD_OPT: u32 = QP_ATTR_AV
    | QP_ATTR_ALT_PATH
    | QP_ATTR_ACCESS_FLAGS
    | QP_ATTR_PKEY_INDEX
    | QP_ATTR_PATH_MIG_STATE;
const RC_SQD_SQD_OPT: u32 = QP_ATTR_AV
    | QP_ATTR_TIMEOUT
    | QP_ATTR_RETRY_CNT
    | QP_ATTR_RNR_RETRY
    | QP_ATTR_MAX_QP_RD_ATOMIC
    | QP_ATTR_MAX_DEST_RD_ATOMIC
    | QP_ATTR_CUR_STATE
    | QP_ATTR_ALT_PATH
    | QP_ATTR_ACCESS_FLAGS
    | QP_ATTR_PKEY_INDEX
    | QP_ATTR_MIN_RNR_TIMER
    | QP_ATTR_PATH_MIG_STATE;

/// All QP states, in numeric order.
pub const ALL_STATES: [u8; 7] = [
    QPS_RESET, QPS_INIT, QPS_RTR, QPS_RTS, QPS_SQD, QPS_SQE, QPS_ERR,
];

/// Looks up the transition `cur -> next` for `qp_type` (`QPT_*`).
///
/// Returns `None` for an illegal transition (or invalid state numbers).
pub fn transition(qp_type: u8, cur: u8, next: u8) -> Option<Transition> {
    let ud = qp_type == QPT_UD || qp_type == QPT_GSI;
    let gsi = qp_type == QPT_GSI;
    let uc = qp_type == QPT_UC;
    let t = |required, optional| Some(Transition { required, optional });
    if cur > QPS_ERR || next > QPS_ERR {
        return None;
    }
    match (cur, next) {
        // Any state may go to RESET or ERR.
        (_, QPS_RESET) => t(0, 0),
        (_, QPS_ERR) => t(0, 0),
        (QPS_RESET, QPS_INIT) => {
            if gsi {
                // The port of the GSI QP is fixed at creation.
                t(QP_ATTR_PKEY_INDEX | QP_ATTR_QKEY, 0)
            } else if ud {
                t(UD_INIT_ATTRS, 0)
            } else {
                t(RC_INIT_ATTRS, 0)
            }
        }
        (QPS_INIT, QPS_INIT) => {
            if gsi {
                t(0, QP_ATTR_PKEY_INDEX | QP_ATTR_QKEY)
            } else if ud {
                t(0, UD_INIT_ATTRS)
            } else {
                t(0, RC_INIT_ATTRS)
            }
        }
        (QPS_INIT, QPS_RTR) => {
            if ud {
                t(0, QP_ATTR_PKEY_INDEX | QP_ATTR_QKEY)
            } else if uc {
                t(UC_RTR_REQ, RC_RTR_OPT)
            } else {
                t(RC_RTR_REQ, RC_RTR_OPT)
            }
        }
        (QPS_RTR, QPS_RTS) => {
            if ud {
                t(QP_ATTR_SQ_PSN, UD_RTS_OPT)
            } else if uc {
                t(QP_ATTR_SQ_PSN, UC_RTS_OPT)
            } else {
                t(RC_RTS_REQ, RC_RTS_OPT)
            }
        }
        (QPS_RTS, QPS_RTS) => {
            if ud {
                t(0, UD_RTS_OPT)
            } else if uc {
                t(0, UC_RTS_OPT)
            } else {
                t(
                    0,
                    QP_ATTR_CUR_STATE
                        | QP_ATTR_ACCESS_FLAGS
                        | QP_ATTR_ALT_PATH
                        | QP_ATTR_PATH_MIG_STATE
                        | QP_ATTR_MIN_RNR_TIMER,
                )
            }
        }
        (QPS_RTS, QPS_SQD) => t(0, QP_ATTR_EN_SQD_ASYNC_NOTIFY),
        (QPS_SQD, QPS_RTS) => {
            if ud {
                t(0, UD_RTS_OPT)
            } else if uc {
                t(0, UC_RTS_OPT)
            } else {
                t(0, RC_RTS_OPT)
            }
        }
        (QPS_SQD, QPS_SQD) => {
            if ud {
                t(0, QP_ATTR_PKEY_INDEX | QP_ATTR_QKEY)
            } else if uc {
                t(0, UC_SQD_SQD_OPT)
            } else {
                t(0, RC_SQD_SQD_OPT)
            }
        }
        (QPS_SQE, QPS_RTS) if ud => t(0, UD_RTS_OPT),
        (QPS_SQE, QPS_RTS) if uc => t(0, QP_ATTR_CUR_STATE | QP_ATTR_ACCESS_FLAGS),
        _ => None,
    }
}

/// Checks a MODIFY_QP request against the state machine.
///
/// `cur` is the QP's actual state, `mask` the request's attribute mask and
/// `next`/`claimed_cur` its `qp_state`/`cur_qp_state` fields. Returns the
/// state the QP ends in. Unsupported attributes (`ALT_PATH`,
/// `PATH_MIG_STATE`, `CAP`) are the caller's to refuse first.
pub fn check_modify(
    qp_type: u8,
    cur: u8,
    mask: u32,
    next: u8,
    claimed_cur: u8,
) -> Result<u8, ModifyError> {
    if mask & QP_ATTR_CUR_STATE != 0 {
        if claimed_cur != cur {
            return Err(ModifyError::BadState);
        }
        if !matches!(claimed_cur, QPS_RTR | QPS_RTS | QPS_SQD | QPS_SQE) {
            return Err(ModifyError::BadAttrMask);
        }
    }
    let next = if mask & QP_ATTR_STATE != 0 { next } else { cur };
    let tr = transition(qp_type, cur, next).ok_or(ModifyError::BadState)?;
    let attrs = mask & !QP_ATTR_STATE;
    if attrs & tr.required != tr.required {
        return Err(ModifyError::BadAttrMask);
    }
    if attrs & !(tr.required | tr.optional) != 0 {
        return Err(ModifyError::BadAttrMask);
    }
    Ok(next)
}
