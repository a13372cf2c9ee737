// SPDX-License-Identifier: GPL-2.0
//! The engine's DMA: keys and addresses translated into segments of guest
//! memory (MRs and memory windows, checked against the PD and the rights a
//! request needs), and data gathered from and scattered into them.

use crate::device::State;
use crate::hw::*;
use crate::mem::GuestMemory;
use crate::objects::{MrKind, SegList};

use super::{RecvWqe, Segments, SendWqe};

impl State {
    pub(super) fn mr_for(&self, key: u32, pdn: u32) -> Option<&crate::objects::Mr> {
        self.mrs
            .get(key >> KEY_INDEX_SHIFT)
            .filter(|m| m.key == key && m.pdn == pdn)
    }

    /// Translates `len` bytes at `addr` through `key` of an MR of PD
    /// `pdn` needing `need`. A memory window's key translates nothing here
    /// (it is never an lkey): R_Keys go through
    /// [`State::translate_rkey`].
    pub(super) fn translate(
        &self,
        key: u32,
        pdn: u32,
        addr: u64,
        len: u64,
        need: u32,
    ) -> Option<SegList> {
        let mut segs = SegList::new();
        self.translate_into(key, pdn, addr, len, need, &mut segs)?;
        Some(segs)
    }

    /// [`Self::translate`], appending to `out`.
    pub(super) fn translate_into(
        &self,
        key: u32,
        pdn: u32,
        addr: u64,
        len: u64,
        need: u32,
        out: &mut SegList,
    ) -> Option<()> {
        if len == 0 {
            return Some(());
        }
        self.translate_mr_into(self.mr_for(key, pdn)?, addr, len, need, out)
    }

    /// Translates `len` bytes at `addr` through `mr` needing `need`.
    pub(super) fn translate_mr(
        &self,
        mr: &crate::objects::Mr,
        addr: u64,
        len: u64,
        need: u32,
    ) -> Option<SegList> {
        let mut segs = SegList::new();
        self.translate_mr_into(mr, addr, len, need, &mut segs)?;
        Some(segs)
    }

    /// [`Self::translate_mr`], appending to `out`.
    pub(super) fn translate_mr_into(
        &self,
        mr: &crate::objects::Mr,
        addr: u64,
        len: u64,
        need: u32,
        out: &mut SegList,
    ) -> Option<()> {
        // A physical MR covers guest memory, not the whole address space.
        if mr.kind == MrKind::Phys && self.mem.check_range(addr, len).is_err() {
            return None;
        }
        mr.translate_into(addr, len, need, out).ok()
    }

    /// Translates a list of SGEs needing `need` (None: one is refused).
    pub(super) fn translate_sges(&self, pdn: u32, sges: &[Sge], need: u32) -> Option<SegList> {
        let mut segs = SegList::new();
        for sge in sges {
            self.translate_into(
                sge.lkey,
                pdn,
                sge.addr,
                u64::from(sge.length),
                need,
                &mut segs,
            )?;
        }
        Some(segs)
    }

    /// Redoes the translation of a fetched WQE's SGEs if an MR was
    /// invalidated since it was made; false if it is refused now.
    pub(super) fn refresh_send_segs(&self, pdn: u32, wqe: &mut SendWqe) -> bool {
        if wqe.epoch == self.mr_epoch || wqe.inline.is_some() {
            return true;
        }
        match self.translate_sges(pdn, &wqe.sges, wqe.need) {
            Some(segs) => {
                wqe.segs = Segments::new(segs);
                wqe.epoch = self.mr_epoch;
                true
            }
            None => false,
        }
    }

    /// The same for the receive WQE of a SEND under way.
    pub(super) fn refresh_recv_segs(&self, pdn: u32, wqe: &mut RecvWqe) -> bool {
        if wqe.epoch == self.mr_epoch {
            return true;
        }
        match self.translate_sges(pdn, &wqe.sges, ACCESS_LOCAL_WRITE) {
            Some(segs) => {
                wqe.segs = Segments::new(segs);
                wqe.epoch = self.mr_epoch;
                true
            }
            None => false,
        }
    }

    /// Copies `len` bytes from offset `off` of a message's segments into
    /// `out`.
    pub(super) fn gather(
        &mut self,
        segs: &mut Segments,
        off: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> bool {
        let start = out.len();
        out.resize(start + len, 0);
        let mut dma_failed = false;
        let ok = Self::gather_into(
            &*self.mem,
            &mut self.data.sg_steps,
            segs,
            off,
            &mut out[start..],
            &mut dma_failed,
        );
        if dma_failed {
            self.counters.hw.bad_dma += 1;
        }
        ok
    }

    /// Fills `dst` from offset `off` of a message's segments; sets
    /// `dma_failed` if a guest memory read failed.
    pub(super) fn gather_into(
        mem: &dyn GuestMemory,
        steps: &mut u64,
        segs: &mut Segments,
        off: u64,
        dst: &mut [u8],
        dma_failed: &mut bool,
    ) -> bool {
        segs.walk(off, dst.len(), steps, |gpa, at, n| {
            let done = mem.read(gpa, &mut dst[at..at + n]).is_ok();
            *dma_failed |= !done;
            done
        })
    }

    /// Writes `data` at offset `off` of a message's segments.
    pub(super) fn scatter(&mut self, segs: &mut Segments, off: u64, data: &[u8]) -> bool {
        let (mem, mut dma_failed) = (&self.mem, false);
        let ok = segs.walk(off, data.len(), &mut self.data.sg_steps, |gpa, at, n| {
            let done = mem.write(gpa, &data[at..at + n]).is_ok();
            dma_failed |= !done;
            done
        });
        if dma_failed {
            self.counters.hw.bad_dma += 1;
        }
        ok
    }
}
