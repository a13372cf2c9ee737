// SPDX-License-Identifier: GPL-2.0
//! Memory registration through the send queue and invalidation (device
//! 1.1, `CAP_MEM_MGT_EXT`): the REG_MR WQE (IBTA "Fast Register Physical
//! MR", the kernel's `IB_WR_REG_MR`) makes a FREE fast-register MR VALID,
//! LOCAL_INV and a received SEND with invalidate make it FREE again. The
//! same two invalidate type 2 memory windows (1.7, `mw.rs`), whose
//! BIND_MW WQE is the third local operation.
//!
//! The three WQEs are local operations: the requester executes one when it
//! has reached the head of the SQ (every earlier WQE completed) and
//! fetches nothing after it before that, so later WQEs see the new state
//! and earlier ones (and their retransmissions) do not.
//!
//! Every invalidation (and MODIFY_MR, which takes effect as one does, and
//! every change of a memory window) bumps `State::mr_epoch`; translations
//! the engine cached (SGEs of fetched WQEs, the receive WQE of a
//! multi-packet SEND) are redone before their next use when the epoch
//! moved, against the MR's PD and rights of that moment. R_Keys are
//! translated anew for every packet (and every chunk of READ responses),
//! so they see every change at once.

use super::codes::WcStatus;
use super::QpCtx;
use crate::device::State;
use crate::hw::*;
use crate::objects::{FastRegState, MrKind, MwType};

/// A local memory operation of an RC send queue.
#[derive(Debug, Clone, Copy)]
pub(super) enum LocalOp {
    /// REG_MR WQE: its segment and page list, checked when it executes.
    RegMr {
        /// `struct ferroce_sq_wqe_reg_mr` at SEG_OFFSET.
        seg: SqWqeRegMr,
        /// `struct ferroce_pbl` at DATA_OFFSET.
        pbl: Pbl,
    },
    /// LOCAL_INV WQE: the key from `imm_data`.
    LocalInv {
        /// The key to invalidate.
        key: u32,
    },
    /// BIND_MW WQE (1.7, `CAP_MW`): its segment, checked when it executes.
    BindMw {
        /// `struct ferroce_sq_wqe_bind_mw` at SEG_OFFSET.
        seg: SqWqeBindMw,
    },
}

impl LocalOp {
    /// The status a failed operation completes with: `MW_BIND_ERR` for a
    /// bind, `LOC_PROT_ERR` for the others.
    pub(super) fn failure_status(&self) -> WcStatus {
        match self {
            Self::BindMw { .. } => WcStatus::MwBindErr,
            Self::RegMr { .. } | Self::LocalInv { .. } => WcStatus::LocProtErr,
        }
    }
}

/// Why a registration, an invalidation or a bind was refused (the WQE
/// completes with [`LocalOp::failure_status`]; a received SEND with
/// invalidate is NAKed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MemOpError {
    /// No MR has the key's index.
    NoSuchMr,
    /// The MR belongs to another PD.
    WrongPd,
    /// The MR is not a fast-register MR.
    NotFastReg,
    /// The key's variant is not the MR's current one.
    StaleKey,
    /// REG_MR of an MR that is still VALID; BIND_MW of a type 2 window
    /// that is still BOUND.
    NotFree,
    /// Reserved fields set, or an access flag not allowed.
    BadFields,
    /// Bad page list: level, page size, count, alignment.
    BadPageList,
    /// `iova`/`length` do not fit the pages.
    BadRange,
    /// The page list or a page is not DMA-able.
    NotDmaAble,
    /// BIND_MW: the key names no memory window (or a type 1 window was
    /// named to LOCAL_INV or SEND_INV).
    NotMw,
    /// BIND_MW: the MR is not one a window may be bound to (a window, a
    /// FREE fast-register MR), or lacks `MW_BIND` or the LOCAL_WRITE
    /// the window's rights need.
    NotBindable,
    /// SEND with invalidate of a type 2 window bound to another QP.
    OtherQp,
}

impl State {
    /// Records that some MR stopped translating as before.
    pub(crate) fn mr_invalidated(&mut self) {
        self.mr_epoch = self.mr_epoch.wrapping_add(1);
    }

    /// Executes a REG_MR, LOCAL_INV or BIND_MW WQE of QP `qp`.
    pub(super) fn execute_local_op(&mut self, qp: &QpCtx, op: &LocalOp) -> Result<(), MemOpError> {
        match op {
            LocalOp::RegMr { seg, pbl } => self.fast_register(qp.pdn, seg, pbl),
            LocalOp::LocalInv { key } => self.invalidate_key(qp.pdn, *key, None),
            LocalOp::BindMw { seg } => {
                self.bind_mw(qp.qpn, qp.pdn, seg)?;
                self.data.mw_binds += 1;
                Ok(())
            }
        }
    }

    /// Invalidates `key` (LOCAL_INV, or the IETH of a SEND with invalidate
    /// that QP `receiver` received): a fast-register MR or (1.7) a type 2
    /// memory window of PD `pdn` whose current key is `key`, FREE or
    /// VALID/BOUND, becomes FREE. A SEND with invalidate may not take a
    /// window bound to another QP; a type 1 window is not invalidated this
    /// way. The windows bound to a fast-register MR are unbound with it
    /// (a later REG_MR WQE gives the MR other pages).
    pub(super) fn invalidate_key(
        &mut self,
        pdn: u32,
        key: u32,
        receiver: Option<u32>,
    ) -> Result<(), MemOpError> {
        let index = key >> KEY_INDEX_SHIFT;
        let mr = self.mrs.get_mut(index).ok_or(MemOpError::NoSuchMr)?;
        if mr.pdn != pdn {
            return Err(MemOpError::WrongPd);
        }
        if mr.key != key {
            return Err(MemOpError::StaleKey);
        }
        match mr.kind {
            MrKind::FastReg { max_pages, .. } => {
                mr.kind = MrKind::FastReg {
                    max_pages,
                    state: FastRegState::Free,
                };
                self.unbind_windows_of(index);
            }
            MrKind::Mw {
                mw_type: MwType::Two,
                window,
            } => {
                let bound_elsewhere = window
                    .and_then(|w| w.qpn)
                    .zip(receiver)
                    .is_some_and(|(bound, receiver)| bound != receiver);
                if bound_elsewhere {
                    return Err(MemOpError::OtherQp);
                }
                self.set_window(index, None);
            }
            MrKind::Mw {
                mw_type: MwType::One,
                ..
            } => return Err(MemOpError::NotMw),
            MrKind::User | MrKind::Phys => return Err(MemOpError::NotFastReg),
        }
        self.mr_invalidated();
        Ok(())
    }

    /// Executes a REG_MR WQE: checks everything, reads the page list and
    /// only then makes the MR VALID with the new key.
    fn fast_register(&mut self, pdn: u32, seg: &SqWqeRegMr, pbl: &Pbl) -> Result<(), MemOpError> {
        let index = seg.key >> KEY_INDEX_SHIFT;
        let mr = self.mrs.get(index).ok_or(MemOpError::NoSuchMr)?;
        let MrKind::FastReg { max_pages, state } = mr.kind else {
            return Err(MemOpError::NotFastReg);
        };
        if mr.pdn != pdn {
            return Err(MemOpError::WrongPd);
        }
        if state != FastRegState::Free {
            return Err(MemOpError::NotFree);
        }
        check_reg_fields(seg, pbl)?;
        if pbl.page_count > max_pages {
            return Err(MemOpError::BadPageList);
        }
        let page_size = 1u64 << pbl.page_shift;
        let offset = seg.iova & (page_size - 1);
        let room = u64::from(pbl.page_count) << pbl.page_shift;
        let fits = offset
            .checked_add(seg.length)
            .is_some_and(|end| end <= room);
        if seg.length == 0 || !fits || seg.iova.checked_add(seg.length).is_none() {
            return Err(MemOpError::BadRange);
        }
        let pages = self.read_fast_reg_pages(pbl)?;
        let mr = self.mrs.get_mut(index).ok_or(MemOpError::NoSuchMr)?;
        mr.kind = MrKind::FastReg {
            max_pages,
            state: FastRegState::Valid,
        };
        mr.key = index << KEY_INDEX_SHIFT | (seg.key & KEY_VARIANT_MASK);
        mr.access = seg.access;
        mr.iova = seg.iova;
        mr.length = seg.length;
        mr.offset = offset as u32;
        mr.page_shift = pbl.page_shift;
        mr.page_count = pages.len();
        mr.pages = pages;
        Ok(())
    }

    /// Copies the page addresses of a REG_MR WQE's list and checks every
    /// page (aligned, DMA-able).
    fn read_fast_reg_pages(&mut self, pbl: &Pbl) -> Result<Vec<u64>, MemOpError> {
        let pages = if pbl.level == PBL_LEVEL_0 {
            vec![pbl.addr]
        } else {
            let mut list = vec![0u8; pbl.page_count as usize * 8];
            if self.mem.read(pbl.addr, &mut list).is_err() {
                self.counters.hw.bad_dma += 1;
                return Err(MemOpError::NotDmaAble);
            }
            list.chunks_exact(8)
                .map(|entry| {
                    let mut bytes = [0u8; 8];
                    bytes.copy_from_slice(entry);
                    u64::from_le_bytes(bytes)
                })
                .collect()
        };
        let page_size = 1u64 << pbl.page_shift;
        if pages.iter().any(|page| page % page_size != 0) {
            return Err(MemOpError::BadPageList);
        }
        if pages
            .iter()
            .any(|page| self.mem.check_range(*page, page_size).is_err())
        {
            self.counters.hw.bad_dma += 1;
            return Err(MemOpError::NotDmaAble);
        }
        Ok(pages)
    }
}

/// The checks of a REG_MR WQE that need no MR and no memory. Its rights
/// are those of REG_MR (1.7: `MW_BIND` too; 1.8: `FLUSH_GLOBAL`, never
/// `FLUSH_PERSISTENT`) but `ZERO_BASED`.
fn check_reg_fields(seg: &SqWqeRegMr, pbl: &Pbl) -> Result<(), MemOpError> {
    let remote_write = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC;
    let mr_rights = ACCESS_MR_MASK | ACCESS_MW_BIND | ACCESS_FLUSH_GLOBAL;
    let access_ok = seg.access & !mr_rights == 0
        && seg.access & ACCESS_ZERO_BASED == 0
        && (seg.access & remote_write == 0 || seg.access & ACCESS_LOCAL_WRITE != 0);
    if seg.reserved != 0 || pbl.reserved != 0 || !access_ok {
        return Err(MemOpError::BadFields);
    }
    let list_ok = (PAGE_SHIFT_MIN..=PAGE_SHIFT_MAX).contains(&pbl.page_shift)
        && pbl.page_count >= 1
        && match pbl.level {
            PBL_LEVEL_0 => pbl.page_count == 1,
            PBL_LEVEL_1 => pbl.page_count <= PBL_L1_ENTRIES && pbl.addr % 8 == 0,
            _ => false,
        };
    if list_ok {
        Ok(())
    } else {
        Err(MemOpError::BadPageList)
    }
}
