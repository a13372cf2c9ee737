// SPDX-License-Identifier: GPL-2.0
//! Table-driven test of the QP state machine through MODIFY_QP: every
//! (cur, next) pair for RC and UD, against a table written out here
//! independently of the device's own table.

mod common;

use common::*;
use ferroce_dev::hw::*;

const STATES: [u8; 7] = [
    QPS_RESET, QPS_INIT, QPS_RTR, QPS_RTS, QPS_SQD, QPS_SQE, QPS_ERR,
];

/// The legal transitions (IBTA 1.4 table 91 for RC and UD) and the
/// attributes each one requires.
fn expected(qp_type: u8, cur: u8, next: u8) -> Option<u32> {
    let rc = qp_type == QPT_RC;
    match (cur, next) {
        (_, QPS_RESET) | (_, QPS_ERR) => Some(0),
        (QPS_RESET, QPS_INIT) if rc => {
            Some(QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_ACCESS_FLAGS)
        }
        (QPS_RESET, QPS_INIT) => Some(QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_QKEY),
        (QPS_INIT, QPS_INIT) => Some(0),
        (QPS_INIT, QPS_RTR) if rc => Some(
            QP_ATTR_AV
                | QP_ATTR_PATH_MTU
                | QP_ATTR_DEST_QPN
                | QP_ATTR_RQ_PSN
                | QP_ATTR_MAX_DEST_RD_ATOMIC
                | QP_ATTR_MIN_RNR_TIMER,
        ),
        (QPS_INIT, QPS_RTR) => Some(0),
        (QPS_RTR, QPS_RTS) if rc => Some(
            QP_ATTR_TIMEOUT
                | QP_ATTR_RETRY_CNT
                | QP_ATTR_RNR_RETRY
                | QP_ATTR_SQ_PSN
                | QP_ATTR_MAX_QP_RD_ATOMIC,
        ),
        (QPS_RTR, QPS_RTS) => Some(QP_ATTR_SQ_PSN),
        (QPS_RTS, QPS_RTS) | (QPS_RTS, QPS_SQD) | (QPS_SQD, QPS_RTS) | (QPS_SQD, QPS_SQD) => {
            Some(0)
        }
        (QPS_SQE, QPS_RTS) if !rc => Some(0),
        _ => None,
    }
}

/// An attribute no transition of `qp_type` accepts.
fn never_allowed(qp_type: u8) -> u32 {
    if qp_type == QPT_RC {
        QP_ATTR_QKEY
    } else {
        QP_ATTR_DEST_QPN
    }
}

/// Drives a fresh QP to `state`; returns its qpn.
fn qp_in(h: &mut Harness, qp_type: u8, cqn: u32, pdn: u32, state: u8) -> u32 {
    let c = h.qp_cmd(pdn, cqn, qp_type, 0);
    let qpn = h.ok(&c);
    let path: &[u8] = match state {
        QPS_RESET => &[],
        QPS_INIT => &[QPS_INIT],
        QPS_RTR => &[QPS_INIT, QPS_RTR],
        QPS_RTS | QPS_SQE => &[QPS_INIT, QPS_RTR, QPS_RTS],
        QPS_SQD => &[QPS_INIT, QPS_RTR, QPS_RTS, QPS_SQD],
        QPS_ERR => &[QPS_ERR],
        _ => unreachable!(),
    };
    let mut cur = QPS_RESET;
    for &next in path {
        let req = expected(qp_type, cur, next).expect("path is legal");
        assert_eq!(h.modify(attr_with(qpn, next, req)), STATUS_SUCCESS);
        cur = next;
    }
    if state == QPS_SQE {
        assert!(h.dev.qp_async_transition(qpn, QPS_SQE));
    }
    assert_eq!(h.dev.qp_state(qpn), Some(state));
    qpn
}

fn destroy(h: &mut Harness, qpn: u32) {
    let mut d = CmdDestroyQp::zeroed();
    d.hdr.opcode = CMD_DESTROY_QP;
    d.qpn = qpn;
    h.ok(&d);
}

#[test]
fn every_transition_legal_and_illegal() {
    let mut h = Harness::new();
    h.default_gids();
    let (pdn, cqn, first) = h.setup_qp(QPT_RC);
    destroy(&mut h, first);
    let mut legal = 0;
    let mut illegal = 0;
    for qp_type in [QPT_RC, QPT_UD] {
        for cur in STATES {
            if qp_type == QPT_RC && cur == QPS_SQE {
                continue; // an RC QP never is in SQE
            }
            for next in STATES {
                let qpn = qp_in(&mut h, qp_type, cqn, pdn, cur);
                match expected(qp_type, cur, next) {
                    Some(req) => {
                        // each missing required attribute is refused
                        for bit in (0..32).map(|b| 1u32 << b).filter(|b| req & b != 0) {
                            let s = h.modify(attr_with(qpn, next, req & !bit));
                            assert_eq!(
                                s, STATUS_BAD_ATTR_MASK,
                                "{qp_type} {cur}->{next} -{bit:#x}"
                            );
                            assert_eq!(h.dev.qp_state(qpn), Some(cur));
                        }
                        // an attribute the transition does not take is refused
                        let s = h.modify(attr_with(qpn, next, req | never_allowed(qp_type)));
                        assert_eq!(s, STATUS_BAD_ATTR_MASK, "{qp_type} {cur}->{next} extra");
                        assert_eq!(h.dev.qp_state(qpn), Some(cur));
                        // the right attributes work
                        let s = h.modify(attr_with(qpn, next, req));
                        assert_eq!(s, STATUS_SUCCESS, "{qp_type} {cur}->{next}");
                        assert_eq!(h.dev.qp_state(qpn), Some(next));
                        assert_eq!(h.query_qp(qpn).qp_state, next);
                        legal += 1;
                    }
                    None => {
                        // refused whatever attributes come with it
                        for req in [0, expected(qp_type, QPS_INIT, QPS_RTR).unwrap_or(0)] {
                            let s = h.modify(attr_with(qpn, next, req));
                            assert_eq!(s, STATUS_BAD_STATE, "{qp_type} {cur}->{next}");
                            assert_eq!(h.dev.qp_state(qpn), Some(cur));
                        }
                        illegal += 1;
                    }
                }
                destroy(&mut h, qpn);
            }
        }
    }
    // RC: 6 states x 7 = 42 pairs, UD: 49 pairs
    assert_eq!(legal + illegal, 42 + 49);
    // RC: ->RESET and ->ERR from 6 states + 8 others; UD: 7 * 2 + 8 + SQE->RTS
    assert_eq!(legal, (6 * 2 + 8) + (7 * 2 + 8 + 1));
}

#[test]
fn modify_without_state_keeps_the_state() {
    let mut h = Harness::new();
    h.default_gids();
    let (pdn, cqn, _) = h.setup_qp(QPT_UD);
    let qpn = qp_in(&mut h, QPT_UD, cqn, pdn, QPS_RTS);
    // RTS -> RTS with only QKEY, no STATE bit
    let mut a = full_attr(qpn);
    a.attr_mask = QP_ATTR_QKEY;
    a.qkey = 0x42;
    assert_eq!(h.modify(a), STATUS_SUCCESS);
    assert_eq!(h.query_qp(qpn).qkey, 0x42);
    assert_eq!(h.dev.qp_state(qpn), Some(QPS_RTS));
    // RESET QP: no attribute may change without a transition
    let q2 = qp_in(&mut h, QPT_UD, cqn, pdn, QPS_RESET);
    let mut a = full_attr(q2);
    a.attr_mask = QP_ATTR_QKEY;
    assert_eq!(h.modify(a), STATUS_BAD_ATTR_MASK);
    // CUR_STATE is only accepted for RTR/RTS/SQD/SQE
    let q3 = qp_in(&mut h, QPT_UD, cqn, pdn, QPS_INIT);
    let mut a = attr_with(q3, QPS_INIT, QP_ATTR_CUR_STATE);
    a.cur_qp_state = QPS_INIT;
    assert_eq!(h.modify(a), STATUS_BAD_ATTR_MASK);
}

#[test]
fn the_device_table_matches_the_expected_one() {
    use ferroce_dev::qp_state::transition;
    for qp_type in [QPT_RC, QPT_UD, QPT_GSI] {
        for cur in STATES {
            for next in STATES {
                let t = transition(qp_type, cur, next);
                let e = if qp_type == QPT_GSI && (cur, next) == (QPS_RESET, QPS_INIT) {
                    Some(QP_ATTR_PKEY_INDEX | QP_ATTR_QKEY)
                } else {
                    expected(if qp_type == QPT_GSI { QPT_UD } else { qp_type }, cur, next)
                };
                assert_eq!(t.map(|t| t.required), e, "{qp_type} {cur}->{next}");
                if qp_type == QPT_GSI {
                    // the GSI QP never takes PORT (ib_modify_qp_is_ok)
                    assert_eq!(t.map_or(0, |t| (t.required | t.optional) & QP_ATTR_PORT), 0);
                }
            }
        }
    }
    assert!(transition(QPT_RC, 7, 0).is_none());
    assert!(transition(QPT_RC, 0, 7).is_none());
}

#[test]
fn gsi_bring_up_like_ib_mad() {
    let mut h = Harness::new();
    let (pdn, cqn, _) = h.setup_qp(QPT_UD);
    let c = h.qp_cmd(pdn, cqn, QPT_GSI, 0);
    let qpn = h.ok(&c);
    assert_eq!(qpn, GSI_QPN);
    // ib_mad: RESET->INIT with PKEY_INDEX | QKEY (no PORT)
    let with_port = QP_ATTR_PKEY_INDEX | QP_ATTR_QKEY | QP_ATTR_PORT;
    assert_eq!(
        h.modify(attr_with(qpn, QPS_INIT, with_port)),
        STATUS_BAD_ATTR_MASK
    );
    let init = QP_ATTR_PKEY_INDEX | QP_ATTR_QKEY;
    assert_eq!(h.modify(attr_with(qpn, QPS_INIT, init)), STATUS_SUCCESS);
    assert_eq!(h.modify(attr_with(qpn, QPS_RTR, 0)), STATUS_SUCCESS);
    assert_eq!(
        h.modify(attr_with(qpn, QPS_RTS, QP_ATTR_SQ_PSN)),
        STATUS_SUCCESS
    );
    assert_eq!(h.query_qp(qpn).qp_type, QPT_GSI);
}
