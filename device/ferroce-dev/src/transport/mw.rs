// SPDX-License-Identifier: GPL-2.0
//! Memory windows (device 1.7, `CAP_MW`; IBTA 10.6.7): keys of the MR key
//! space (REG_MR with `mr_type` MW1 or MW2) that grant remote access to a
//! range of an MR with rights of their own.
//!
//! A window is FREE or BOUND. The BIND_MW WQE (a local operation of an RC
//! send queue, executed in SQ order as REG_MR is: `memreg.rs`) binds it,
//! and for a type 1 window with length 0 unbinds it; either gives it the
//! variant of the WQE's `mw_key`. LOCAL_INV and a received SEND with
//! invalidate free a type 2 window (`State::invalidate_key`); DEREG_MR and
//! the invalidation of the MR unbind the windows bound to it, DESTROY_QP
//! those bound to the QP.
//!
//! An R_Key that names a window is checked against the window (variant,
//! state, PD, QP, range, rights) and then translated through the MR at the
//! same addresses. Every change of a window bumps `State::mr_epoch` as an
//! invalidation does; R_Keys are translated anew for every use anyway.
//!
//! A window never grants a flush right (1.8): its rights are the remote
//! ones of `MW_BIND_ACCESS`, so a FLUSH through a window's key is a
//! remote access error.

use super::memreg::MemOpError;
use super::QpCtx;
use crate::device::State;
use crate::hw::*;
use crate::objects::{FastRegState, Mr, MrKind, MwType, MwWindow, SegList};

/// The rights a window may grant; `LOCAL_WRITE` is taken and ignored. No
/// flush right (1.8, device.rst "Atomic write and flush").
const MW_BIND_ACCESS: u32 =
    ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;

/// The flush rights an MR may have (1.8): `FLUSH_GLOBAL`, never
/// `FLUSH_PERSISTENT` (guest RAM is not persistent; REG_MR refuses it).
const MR_FLUSH_ACCESS: u32 = ACCESS_FLUSH_GLOBAL;

impl State {
    /// Executes a BIND_MW WQE of QP `qpn` of PD `pdn`: checks everything,
    /// then binds (or, type 1 with length 0, unbinds: `addr`, `mr_key` and
    /// `access` ignored) the window with the new variant. A type 2 window
    /// bound with length 0 is a window of no bytes. A failure changes
    /// nothing.
    pub(super) fn bind_mw(
        &mut self,
        qpn: u32,
        pdn: u32,
        seg: &SqWqeBindMw,
    ) -> Result<(), MemOpError> {
        if seg.reserved != 0 {
            return Err(MemOpError::BadFields);
        }
        let index = seg.mw_key >> KEY_INDEX_SHIFT;
        let mw = self.mrs.get(index).ok_or(MemOpError::NoSuchMr)?;
        let MrKind::Mw { mw_type, window } = mw.kind else {
            return Err(MemOpError::NotMw);
        };
        if mw.pdn != pdn {
            return Err(MemOpError::WrongPd);
        }
        // A type 2 window is bound once until it is invalidated; a type 1
        // window may be bound again (the bind replaces the window).
        if mw_type == MwType::Two && window.is_some() {
            return Err(MemOpError::NotFree);
        }
        let window = if mw_type == MwType::One && seg.length == 0 {
            // Unbind: no MR, no range.
            None
        } else {
            if seg.access & !MW_BIND_ACCESS != 0 {
                return Err(MemOpError::BadFields);
            }
            let access = seg.access & !ACCESS_LOCAL_WRITE;
            let mr_index = seg.mr_key >> KEY_INDEX_SHIFT;
            let mr = self
                .mrs
                .get(mr_index)
                .filter(|m| m.key == seg.mr_key)
                .ok_or(MemOpError::NoSuchMr)?;
            if mr.pdn != pdn {
                return Err(MemOpError::WrongPd);
            }
            let bindable = match mr.kind {
                MrKind::User | MrKind::Phys => true,
                MrKind::FastReg { state, .. } => state == FastRegState::Valid,
                MrKind::Mw { .. } => false,
            };
            let writes = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC;
            if !bindable
                || mr.access & ACCESS_MW_BIND == 0
                || (access & writes != 0 && mr.access & ACCESS_LOCAL_WRITE == 0)
            {
                return Err(MemOpError::NotBindable);
            }
            // A physical MR holds guest memory only.
            let in_memory =
                mr.kind != MrKind::Phys || self.mem.check_range(seg.addr, seg.length).is_ok();
            if !mr.holds(seg.addr, seg.length) || !in_memory {
                return Err(MemOpError::BadRange);
            }
            Some(MwWindow {
                mr_index,
                addr: seg.addr,
                length: seg.length,
                access,
                qpn: (mw_type == MwType::Two).then_some(qpn),
            })
        };
        self.set_window(index, window);
        let mw = self.mrs.get_mut(index).ok_or(MemOpError::NoSuchMr)?;
        mw.key = index << KEY_INDEX_SHIFT | (seg.mw_key & KEY_VARIANT_MASK);
        self.mr_invalidated();
        Ok(())
    }

    /// Gives the memory window at `index` the window `window` (`None`:
    /// FREE), keeping the count of the windows bound to each MR.
    pub(crate) fn set_window(&mut self, index: u32, window: Option<MwWindow>) {
        let Some(MrKind::Mw {
            mw_type,
            window: old,
        }) = self.mrs.get(index).map(|m| m.kind)
        else {
            return;
        };
        if let Some(mr) = old.and_then(|w| self.mrs.get_mut(w.mr_index)) {
            mr.windows = mr.windows.saturating_sub(1);
        }
        if let Some(mr) = window.and_then(|w| self.mrs.get_mut(w.mr_index)) {
            mr.windows = mr.windows.saturating_add(1);
        }
        if let Some(mw) = self.mrs.get_mut(index) {
            mw.kind = MrKind::Mw { mw_type, window };
        }
    }

    /// Translates `len` bytes at `addr` through R_Key `key` at the
    /// responder of QP `qp` (RDMA WRITE and READ, atomics), needing the
    /// remote right `need`: the key of an MR of the QP's PD, or (1.7) of a
    /// memory window. The QP's own access flags are the caller's to check.
    pub(super) fn translate_rkey(
        &self,
        qp: &QpCtx,
        key: u32,
        addr: u64,
        len: u64,
        need: u32,
    ) -> Option<SegList> {
        match self.mrs.get(key >> KEY_INDEX_SHIFT) {
            Some(mw) if mw.is_mw() && len > 0 => {
                self.translate_window(qp, mw, key, addr, len, need)
            }
            _ => self.translate(key, qp.pdn, addr, len, need),
        }
    }

    /// Checks R_Key `key` of a FLUSH (1.8, device.rst "Atomic write and
    /// flush") at the responder of QP `qp`, needing the MR flush rights
    /// `need` (`ACCESS_FLUSH_GLOBAL` / `ACCESS_FLUSH_PERSISTENT`): the key
    /// of an MR of the QP's PD with those rights and, for level `RANGE`
    /// (`range` = `(addr, len)`), whose range holds `[addr, addr + len)`,
    /// a length of 0 included (its key and address are checked all the
    /// same); for level `MR` (`range` `None`) the whole MR, whatever the
    /// request's range. A window's key is refused (windows grant no flush
    /// right), and so is every key for `FLUSH_PERSISTENT`, which no MR has.
    /// The checks are those of a translation (bounds as `Mr::holds`, a
    /// FREE fast-register MR holds nothing, a physical MR's range must be
    /// guest memory) without building the page segments a FLUSH does not
    /// use: a range may be as long as the MR.
    pub(super) fn flush_rkey(
        &self,
        qp: &QpCtx,
        key: u32,
        range: Option<(u64, u64)>,
        need: u32,
    ) -> bool {
        let Some(mr) = self.mr_for(key, qp.pdn) else {
            return false;
        };
        if mr.is_mw() || need & !MR_FLUSH_ACCESS != 0 || mr.access & need != need {
            return false;
        }
        let Some((addr, len)) = range else {
            // Level MR: a valid MR (an empty range at its start).
            return mr.holds(mr.start(), 0);
        };
        let in_memory = mr.kind != MrKind::Phys || self.mem.check_range(addr, len).is_ok();
        mr.holds(addr, len) && in_memory
    }

    /// [`Self::translate_rkey`] for a key whose index names window `mw`:
    /// the key's variant is the window's, the window BOUND, of the QP's PD,
    /// bound to the QP if it is of type 2, holds the range and grants
    /// `need`; the bytes are those of the MR at the same addresses.
    fn translate_window(
        &self,
        qp: &QpCtx,
        mw: &Mr,
        key: u32,
        addr: u64,
        len: u64,
        need: u32,
    ) -> Option<SegList> {
        let w = mw.mw_window()?;
        let usable = mw.key == key
            && mw.pdn == qp.pdn
            && w.qpn.is_none_or(|qpn| qpn == qp.qpn)
            && w.access & need == need
            && w.holds(addr, len);
        if !usable {
            return None;
        }
        // The MR of the window is of the window's PD (MODIFY_MR is BUSY
        // while windows are bound, DEREG_MR and invalidation unbind them);
        // checked again all the same, as its rights for what the window
        // lets the peer do to it.
        let mr = self.mrs.get(w.mr_index).filter(|m| m.pdn == qp.pdn)?;
        let local = if need & (ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC) != 0 {
            ACCESS_LOCAL_WRITE
        } else {
            0
        };
        self.translate_mr(mr, addr, len, local)
    }

    /// Whether memory windows are bound to the MR at `mr_index`.
    pub(crate) fn windows_bound_to(&self, mr_index: u32) -> bool {
        self.mrs.get(mr_index).is_some_and(|m| m.windows > 0)
    }

    /// Unbinds (makes FREE, keeping their keys) every memory window bound
    /// to the MR at `mr_index`, which is about to go away or stop
    /// translating. Free of cost for an MR without windows (a fast-register
    /// MR invalidated for every I/O).
    pub(crate) fn unbind_windows_of(&mut self, mr_index: u32) {
        if self.windows_bound_to(mr_index) {
            self.unbind_windows_where(|w| w.mr_index == mr_index);
        }
    }

    /// Unbinds every type 2 memory window bound to QP `qpn` (destroyed).
    pub(crate) fn unbind_windows_of_qp(&mut self, qpn: u32) {
        self.unbind_windows_where(|w| w.qpn == Some(qpn));
    }

    /// Makes FREE every BOUND window whose window matches `pred`.
    fn unbind_windows_where(&mut self, pred: impl Fn(&MwWindow) -> bool) {
        let handles: Vec<u32> = self
            .mrs
            .iter()
            .filter(|(_, m)| m.mw_window().is_some_and(|w| pred(&w)))
            .map(|(handle, _)| handle)
            .collect();
        if handles.is_empty() {
            return;
        }
        for handle in handles {
            self.set_window(handle, None);
        }
        self.mr_invalidated();
    }
}
