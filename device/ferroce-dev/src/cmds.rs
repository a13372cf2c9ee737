// SPDX-License-Identifier: GPL-2.0
//! Admin command execution.
//!
//! Checks run in a fixed order so every malformed command gets one
//! documented status: BAD_OPCODE, then BAD_RESERVED (reserved fields and
//! undefined flag bits), then BAD_PARAM (value ranges, alignment, sizes),
//! BAD_HANDLE (objects named by the command), BAD_STATE / BAD_ATTR_MASK
//! (QP state machine), BUSY (object still referenced / slot taken),
//! NO_RESOURCES (table full), and last DMA_ERROR (host memory the command
//! points at is not DMA-able).

use crate::device::{is_pow2_in, State};
use crate::gid::{expected_network_type, is_multicast, GidEntry};
use crate::hw::*;
use crate::objects::{Ah, Arm, Cq, Eq, McastGroup, Mr, MrKind, Pd, Qp, Srq};
use crate::qp_state::{check_modify, ModifyError};
use zerocopy::IntoBytes;

type CmdResult = Result<[u32; 5], u8>;

const OK: CmdResult = Ok([0; 5]);

fn ok1(v: u32) -> CmdResult {
    Ok([v, 0, 0, 0, 0])
}

fn rsvd<T: Into<u64>>(v: T) -> Result<(), u8> {
    if v.into() == 0 {
        Ok(())
    } else {
        Err(STATUS_BAD_RESERVED)
    }
}

fn rsvd_bytes(b: &[u8]) -> Result<(), u8> {
    if b.iter().all(|x| *x == 0) {
        Ok(())
    } else {
        Err(STATUS_BAD_RESERVED)
    }
}

fn param(ok: bool) -> Result<(), u8> {
    if ok {
        Ok(())
    } else {
        Err(STATUS_BAD_PARAM)
    }
}

/// Largest IB MTU (`MTU_*`) whose packets fit an Ethernet MTU, allowing for
/// the largest RoCE headers (IPv6 40 + UDP 8 + BTH 12 + extended headers 32
/// + ICRC 4).
pub fn active_ib_mtu(eth_mtu: u32) -> u8 {
    let avail = eth_mtu.saturating_sub(96);
    match avail {
        a if a >= 4096 => MTU_4096,
        a if a >= 2048 => MTU_2048,
        a if a >= 1024 => MTU_1024,
        a if a >= 512 => MTU_512,
        _ => MTU_256,
    }
}

impl State {
    /// Executes one raw command; returns (cmd_id, status, out).
    pub(crate) fn execute(&mut self, raw: &[u8]) -> (u16, u8, [u32; 5]) {
        let hdr: CmdHdr = match Self::parse(raw) {
            Ok(h) => h,
            Err(s) => return (0, s, [0; 5]),
        };
        let r = self.dispatch(&hdr, raw);
        match r {
            Ok(out) => (hdr.cmd_id, STATUS_SUCCESS, out),
            Err(s) => (hdr.cmd_id, s, [0; 5]),
        }
    }

    fn dispatch(&mut self, hdr: &CmdHdr, raw: &[u8]) -> CmdResult {
        let known = matches!(
            hdr.opcode,
            CMD_QUERY_CAPS
                | CMD_QUERY_PORT
                | CMD_SET_PORT_MTU
                | CMD_SET_PORT_MAC
                | CMD_QUERY_COUNTERS
                | CMD_CREATE_EQ
                | CMD_DESTROY_EQ
                | CMD_CREATE_CQ
                | CMD_DESTROY_CQ
                | CMD_RESIZE_CQ
                | CMD_ALLOC_PD
                | CMD_DEALLOC_PD
                | CMD_REG_MR
                | CMD_DEREG_MR
                | CMD_MODIFY_MR
                | CMD_CREATE_QP
                | CMD_DESTROY_QP
                | CMD_MODIFY_QP
                | CMD_QUERY_QP
                | CMD_CREATE_SRQ
                | CMD_DESTROY_SRQ
                | CMD_MODIFY_SRQ
                | CMD_QUERY_SRQ
                | CMD_RESIZE_SRQ
                | CMD_ATTACH_MCAST
                | CMD_DETACH_MCAST
                | CMD_CREATE_AH
                | CMD_DESTROY_AH
                | CMD_SET_GID
                | CMD_CLEAR_GID
        );
        if !known {
            return Err(STATUS_BAD_OPCODE);
        }
        rsvd(hdr.flags)?;
        rsvd(hdr.reserved)?;
        match hdr.opcode {
            CMD_QUERY_CAPS => self.cmd_query_caps(Self::parse(raw)?),
            CMD_QUERY_PORT => self.cmd_query_port(Self::parse(raw)?),
            CMD_SET_PORT_MTU => self.cmd_set_port_mtu(Self::parse(raw)?),
            CMD_SET_PORT_MAC => self.cmd_set_port_mac(Self::parse(raw)?),
            CMD_QUERY_COUNTERS => self.cmd_query_counters(Self::parse(raw)?),
            CMD_CREATE_EQ => self.cmd_create_eq(Self::parse(raw)?),
            CMD_DESTROY_EQ => self.cmd_destroy_eq(Self::parse(raw)?),
            CMD_CREATE_CQ => self.cmd_create_cq(Self::parse(raw)?),
            CMD_DESTROY_CQ => self.cmd_destroy_cq(Self::parse(raw)?),
            CMD_RESIZE_CQ => self.cmd_resize_cq(Self::parse(raw)?),
            CMD_ALLOC_PD => self.cmd_alloc_pd(Self::parse(raw)?),
            CMD_DEALLOC_PD => self.cmd_dealloc_pd(Self::parse(raw)?),
            CMD_REG_MR => self.cmd_reg_mr(Self::parse(raw)?),
            CMD_DEREG_MR => self.cmd_dereg_mr(Self::parse(raw)?),
            CMD_MODIFY_MR => self.cmd_modify_mr(Self::parse(raw)?),
            CMD_CREATE_QP => self.cmd_create_qp(Self::parse(raw)?),
            CMD_DESTROY_QP => self.cmd_destroy_qp(Self::parse(raw)?),
            CMD_MODIFY_QP => self.cmd_modify_qp(Self::parse(raw)?),
            CMD_QUERY_QP => self.cmd_query_qp(Self::parse(raw)?),
            CMD_CREATE_SRQ => self.cmd_create_srq(Self::parse(raw)?),
            CMD_DESTROY_SRQ => self.cmd_destroy_srq(Self::parse(raw)?),
            CMD_MODIFY_SRQ => self.cmd_modify_srq(Self::parse(raw)?),
            CMD_QUERY_SRQ => self.cmd_query_srq(Self::parse(raw)?),
            CMD_RESIZE_SRQ => self.cmd_resize_srq(Self::parse(raw)?),
            CMD_ATTACH_MCAST => self.cmd_attach_mcast(Self::parse(raw)?),
            CMD_DETACH_MCAST => self.cmd_detach_mcast(Self::parse(raw)?),
            CMD_CREATE_AH => self.cmd_create_ah(Self::parse(raw)?),
            CMD_DESTROY_AH => self.cmd_destroy_ah(Self::parse(raw)?),
            CMD_SET_GID => self.cmd_set_gid(Self::parse(raw)?),
            CMD_CLEAR_GID => self.cmd_clear_gid(Self::parse(raw)?),
            _ => Err(STATUS_BAD_OPCODE),
        }
    }

    fn dma_check(&mut self, addr: u64, len: u64) -> Result<(), u8> {
        if self.mem.check_range(addr, len).is_err() {
            self.counters.hw.bad_dma += 1;
            return Err(STATUS_DMA_ERROR);
        }
        Ok(())
    }

    fn dma_read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), u8> {
        if self.mem.read(addr, buf).is_err() {
            self.counters.hw.bad_dma += 1;
            return Err(STATUS_DMA_ERROR);
        }
        Ok(())
    }

    fn read_u64s(&mut self, addr: u64, n: u32) -> Result<Vec<u64>, u8> {
        let mut buf = vec![0u8; n as usize * 8];
        self.dma_read(addr, &mut buf)?;
        Ok(buf
            .chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                u64::from_le_bytes(b)
            })
            .collect())
    }

    /// Checks the static fields of a page list (no DMA).
    fn check_pbl(pbl: &Pbl, min_bytes: u64) -> Result<(), u8> {
        rsvd(pbl.reserved)?;
        param((PAGE_SHIFT_MIN..=PAGE_SHIFT_MAX).contains(&pbl.page_shift))?;
        param(pbl.page_count >= 1 && pbl.page_count <= PBL_MAX_PAGES)?;
        let bytes = u64::from(pbl.page_count) << pbl.page_shift;
        param(bytes >= min_bytes)?;
        match pbl.level {
            PBL_LEVEL_0 => param(pbl.page_count == 1),
            PBL_LEVEL_1 => param(pbl.page_count <= PBL_L1_ENTRIES && pbl.addr % 8 == 0),
            PBL_LEVEL_2 => param(pbl.addr % 8 == 0),
            _ => Err(STATUS_BAD_PARAM),
        }
    }

    /// Reads a page list and checks every page (alignment, DMA-ability).
    fn read_pbl(&mut self, pbl: &Pbl) -> Result<Vec<u64>, u8> {
        let count = pbl.page_count;
        let pages = match pbl.level {
            PBL_LEVEL_0 => vec![pbl.addr],
            PBL_LEVEL_1 => self.read_u64s(pbl.addr, count)?,
            PBL_LEVEL_2 => {
                let n1 = count.div_ceil(PBL_L1_ENTRIES);
                let l1 = self.read_u64s(pbl.addr, n1)?;
                let mut pages = Vec::with_capacity(count as usize);
                let mut left = count;
                for list in l1 {
                    param(list % DB_PAGE_SIZE == 0)?;
                    let n = left.min(PBL_L1_ENTRIES);
                    pages.extend(self.read_u64s(list, n)?);
                    left -= n;
                }
                pages
            }
            _ => return Err(STATUS_BAD_PARAM),
        };
        let size = 1u64 << pbl.page_shift;
        for p in &pages {
            param(p % size == 0)?;
        }
        for p in &pages {
            self.dma_check(*p, size)?;
        }
        Ok(pages)
    }

    fn cmd_query_caps(&mut self, c: CmdQueryCaps) -> CmdResult {
        rsvd(c.reserved)?;
        let caps = self.caps();
        self.write_resp(c.resp_addr, c.resp_len, &caps)?;
        OK
    }

    fn cmd_query_port(&mut self, c: CmdQueryPort) -> CmdResult {
        rsvd(c.reserved)?;
        param(c.port == NUM_PORTS)?;
        let mut out = [0u32; 5];
        out[PORT_OUT_STATE] = if self.link_up { PORT_ACTIVE } else { PORT_DOWN };
        out[PORT_OUT_MTU] = self.mtu;
        out[PORT_OUT_ACTIVE_MTU] = u32::from(active_ib_mtu(self.mtu));
        let m = self.mac;
        out[PORT_OUT_MAC_LO] = u32::from_be_bytes([m[2], m[3], m[4], m[5]]);
        out[PORT_OUT_MAC_HI] = u32::from(u16::from_be_bytes([m[0], m[1]]));
        Ok(out)
    }

    fn cmd_set_port_mtu(&mut self, c: CmdSetPortMtu) -> CmdResult {
        param(c.port == NUM_PORTS)?;
        param((PORT_MTU_MIN..=PORT_MTU_MAX).contains(&c.mtu))?;
        self.mtu = c.mtu;
        OK
    }

    fn cmd_set_port_mac(&mut self, c: CmdSetPortMac) -> CmdResult {
        rsvd(c.reserved)?;
        rsvd_bytes(&c.reserved2)?;
        param(c.port == NUM_PORTS)?;
        // Unicast and non-zero: bit 0 of the first byte is the group bit.
        param(c.mac != [0; 6] && c.mac[0] & 1 == 0)?;
        self.set_mac(c.mac);
        OK
    }

    /// Growable (1.4): any `resp_len` of at least the 1.0 size gets a
    /// prefix of `struct ferroce_counters`, as long as both sides know.
    fn cmd_query_counters(&mut self, c: CmdQueryCounters) -> CmdResult {
        rsvd(c.reserved)?;
        param(c.resp_len as usize >= COUNTERS_SIZE_1_0)?;
        let counters = self.guest_counters();
        let bytes = counters.as_bytes();
        let len = bytes.len().min(c.resp_len as usize);
        let prefix = bytes.get(..len).ok_or(STATUS_BAD_PARAM)?;
        self.write_resp_bytes(c.resp_addr, prefix)?;
        OK
    }

    fn cmd_create_eq(&mut self, c: CmdCreateEq) -> CmdResult {
        rsvd(c.reserved)?;
        let n = self.cfg.num_vectors;
        param(c.vector >= 1 && c.vector < n)?;
        param(is_pow2_in(c.depth, EQ_DEPTH_MIN, EQ_DEPTH_MAX))?;
        param(c.base != 0 && c.base % u64::from(RING_ALIGN) == 0)?;
        let slot = usize::from(c.vector);
        if matches!(self.eqs.get(slot), Some(Some(_))) {
            return Err(STATUS_BUSY);
        }
        self.dma_check(c.base, u64::from(c.depth) * EQE_SIZE as u64)?;
        let eq = Eq {
            vector: c.vector,
            base: c.base,
            depth: c.depth,
            pi: 0,
            ci: 0,
            armed: true,
            posted: 0,
            overflows: 0,
        };
        let s = self.eqs.get_mut(slot).ok_or(STATUS_BAD_PARAM)?;
        *s = Some(eq);
        ok1(u32::from(c.vector))
    }

    fn cmd_destroy_eq(&mut self, c: CmdDestroyEq) -> CmdResult {
        rsvd(c.reserved)?;
        param(c.eqn >= 1 && c.eqn < u32::from(self.cfg.num_vectors))?;
        let slot = c.eqn as usize;
        if !matches!(self.eqs.get(slot), Some(Some(_))) {
            return Err(STATUS_BAD_HANDLE);
        }
        if self.cqs.iter().any(|(_, cq)| cq.eqn == c.eqn) {
            return Err(STATUS_BUSY);
        }
        if let Some(s) = self.eqs.get_mut(slot) {
            *s = None;
        }
        OK
    }

    fn cmd_create_cq(&mut self, c: CmdCreateCq) -> CmdResult {
        rsvd(c.reserved)?;
        rsvd(c.buf.reserved)?;
        param(is_pow2_in(c.depth, 2, self.cfg.limits.max_cqe))?;
        param(c.eqn >= 1 && c.eqn < u32::from(self.cfg.num_vectors))?;
        param(c.db_page < DB_PAGES)?;
        param(c.dbrec_addr % u64::from(DBREC_ALIGN) == 0)?;
        Self::check_pbl(&c.buf, u64::from(c.depth) * CQE_SIZE as u64)?;
        if !matches!(self.eqs.get(c.eqn as usize), Some(Some(_))) {
            return Err(STATUS_BAD_HANDLE);
        }
        if self.cqs.len() >= self.cfg.limits.max_cq as usize {
            return Err(STATUS_NO_RESOURCES);
        }
        self.dma_check(c.dbrec_addr, 8)?;
        let pages = self.read_pbl(&c.buf)?;
        let cq = Cq {
            eqn: c.eqn,
            depth: c.depth,
            db_page: c.db_page,
            dbrec: c.dbrec_addr,
            page_shift: c.buf.page_shift,
            pages,
            pi: 0,
            ci: 0,
            arm: Arm::None,
            arm_sn: 0,
            last_solicited: None,
            announced: 0,
            error: false,
            doorbells: 0,
        };
        let cqn = self.cqs.insert(cq).ok_or(STATUS_NO_RESOURCES)?;
        ok1(cqn)
    }

    fn cmd_destroy_cq(&mut self, c: CmdDestroyCq) -> CmdResult {
        rsvd(c.reserved)?;
        if !self.cqs.contains(c.cqn) {
            return Err(STATUS_BAD_HANDLE);
        }
        if self
            .qps
            .iter()
            .any(|(_, q)| q.send_cqn == c.cqn || q.recv_cqn == c.cqn)
        {
            return Err(STATUS_BUSY);
        }
        self.cqs.remove(c.cqn);
        OK
    }

    /// RESIZE_CQ (1.6): CQ `cqn` gets the ring `buf` of `depth` CQEs from
    /// its current producer index on, the *switch index* returned in
    /// `out[0]`. Software copies the CQEs it has not polled (from its
    /// consumer index up to the switch index) into the new ring itself.
    /// The indices, the arm state, what was announced, the last solicited
    /// index and an error state stay. Posting caches nothing of the ring
    /// (each CQE is written at the CQ's pages and depth at that moment,
    /// the overflow check against that depth), so every CQE after the
    /// completion goes to the new ring.
    ///
    /// Order: reserved fields; the CQ-independent values (`depth`, the page
    /// list's fields and size); the CQ (BAD_HANDLE); its record's `ci`
    /// (DMA_ERROR if unreadable; BAD_PARAM if the CQEs not yet consumed do
    /// not fit `depth`); last the page list's pages (BAD_PARAM misaligned,
    /// DMA_ERROR). A failed command changes nothing.
    fn cmd_resize_cq(&mut self, c: CmdResizeCq) -> CmdResult {
        rsvd(c.reserved)?;
        rsvd(c.buf.reserved)?;
        param(is_pow2_in(c.depth, 2, self.cfg.limits.max_cqe))?;
        Self::check_pbl(&c.buf, u64::from(c.depth) * CQE_SIZE as u64)?;
        let cq = self.cqs.get(c.cqn).ok_or(STATUS_BAD_HANDLE)?;
        let (dbrec, pi) = (cq.dbrec, cq.pi);
        let mut rec = [0u8; 4];
        self.dma_read(dbrec, &mut rec)?;
        // 16-bit indices, read as posting reads them.
        let ci = u32::from_le_bytes(rec) as u16;
        param(u32::from(pi.wrapping_sub(ci)) <= c.depth)?;
        let pages = self.read_pbl(&c.buf)?;
        let cq = self.cqs.get_mut(c.cqn).ok_or(STATUS_BAD_HANDLE)?;
        cq.depth = c.depth;
        cq.page_shift = c.buf.page_shift;
        cq.pages = pages;
        ok1(u32::from(cq.pi))
    }

    fn cmd_alloc_pd(&mut self, c: CmdAllocPd) -> CmdResult {
        rsvd(c.reserved)?;
        let pdn = self.pds.insert(Pd {}).ok_or(STATUS_NO_RESOURCES)?;
        ok1(pdn)
    }

    fn cmd_dealloc_pd(&mut self, c: CmdDeallocPd) -> CmdResult {
        rsvd(c.reserved)?;
        if !self.pds.contains(c.pdn) {
            return Err(STATUS_BAD_HANDLE);
        }
        let used = self.mrs.iter().any(|(_, m)| m.pdn == c.pdn)
            || self.qps.iter().any(|(_, q)| q.pdn == c.pdn)
            || self.srqs.iter().any(|(_, s)| s.pdn == c.pdn)
            || self.ahs.iter().any(|(_, a)| a.pdn == c.pdn);
        if used {
            return Err(STATUS_BUSY);
        }
        self.pds.remove(c.pdn);
        OK
    }

    fn cmd_reg_mr(&mut self, c: CmdRegMr) -> CmdResult {
        rsvd_bytes(&c.reserved0)?;
        rsvd(c.reserved1)?;
        rsvd(c.pbl.reserved)?;
        Self::check_mr_access(c.access)?;
        let kind = MrKind::from_hw(c.mr_type, c.max_pages).ok_or(STATUS_BAD_PARAM)?;
        match kind {
            MrKind::User => self.reg_user_mr(c),
            MrKind::Phys | MrKind::FastReg { .. } | MrKind::Mw { .. } => {
                self.reg_pageless_mr(c, kind)
            }
        }
    }

    /// The access flags of an MR (REG_MR, MODIFY_MR): only `ACCESS_*`
    /// bits (1.7: `MW_BIND` too; 1.8: `FLUSH_GLOBAL`, but never
    /// `FLUSH_PERSISTENT`: guest RAM is not persistent, device.rst "Access
    /// flags"), and REMOTE_WRITE or REMOTE_ATOMIC only with LOCAL_WRITE
    /// (IBTA rule).
    fn check_mr_access(access: u32) -> Result<(), u8> {
        param(access & !(ACCESS_MR_MASK | ACCESS_MW_BIND | ACCESS_FLUSH_GLOBAL) == 0)?;
        let remote_w = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC;
        param(access & remote_w == 0 || access & ACCESS_LOCAL_WRITE != 0)
    }

    /// REG_MR of a page-list MR (`MR_TYPE_USER`, the only type of 1.0).
    fn reg_user_mr(&mut self, c: CmdRegMr) -> CmdResult {
        param(c.max_pages == 0)?;
        param(c.length >= 1 && c.length <= self.cfg.limits.max_mr_size)?;
        param((PAGE_SHIFT_MIN..=PAGE_SHIFT_MAX).contains(&c.pbl.page_shift))?;
        let page_size = 1u64 << c.pbl.page_shift;
        param(u64::from(c.offset) < page_size)?;
        if c.access & ACCESS_ZERO_BASED != 0 {
            param(c.iova == 0)?;
        } else {
            param(c.iova & (page_size - 1) == u64::from(c.offset))?;
            param(c.iova.checked_add(c.length).is_some())?;
        }
        let need = u64::from(c.offset)
            .checked_add(c.length)
            .ok_or(STATUS_BAD_PARAM)?;
        Self::check_pbl(&c.pbl, need)?;
        if !self.pds.contains(c.pdn) {
            return Err(STATUS_BAD_HANDLE);
        }
        if self.mrs.len() >= self.cfg.limits.max_mr as usize {
            return Err(STATUS_NO_RESOURCES);
        }
        let pages = self.read_pbl(&c.pbl)?;
        let mr = Mr {
            kind: MrKind::User,
            key: 0,
            pdn: c.pdn,
            access: c.access,
            iova: c.iova,
            length: c.length,
            offset: c.offset,
            page_shift: c.pbl.page_shift,
            page_count: pages.len(),
            pages,
            windows: 0,
        };
        self.insert_mr(mr, c.key_variant)
    }

    /// REG_MR of a physical or a fast-register MR, or (1.7) the allocation
    /// of a memory window (FREE, in the MR key space, counted against
    /// `max_mr`): no page list, no range.
    fn reg_pageless_mr(&mut self, c: CmdRegMr, kind: MrKind) -> CmdResult {
        param(c.pbl == Pbl::zeroed())?;
        param(c.iova == 0 && c.length == 0 && c.offset == 0)?;
        param(c.access & ACCESS_ZERO_BASED == 0)?;
        match kind {
            MrKind::FastReg { max_pages, .. } => {
                param(c.access == 0)?;
                param((1..=FAST_REG_MAX_PAGES).contains(&max_pages))?;
            }
            MrKind::Mw { .. } => {
                param(c.access == 0)?;
                param(c.max_pages == 0)?;
            }
            MrKind::User | MrKind::Phys => param(c.max_pages == 0)?,
        }
        if !self.pds.contains(c.pdn) {
            return Err(STATUS_BAD_HANDLE);
        }
        if self.mrs.len() >= self.cfg.limits.max_mr as usize {
            return Err(STATUS_NO_RESOURCES);
        }
        let mr = Mr {
            kind,
            key: 0,
            pdn: c.pdn,
            access: c.access,
            iova: 0,
            length: 0,
            offset: 0,
            page_shift: PAGE_SHIFT_MIN,
            page_count: 0,
            pages: Vec::new(),
            windows: 0,
        };
        self.insert_mr(mr, c.key_variant)
    }

    /// Inserts `mr` at the lowest free index; out[0] is its key.
    fn insert_mr(&mut self, mr: Mr, key_variant: u8) -> CmdResult {
        let idx = self.mrs.insert(mr).ok_or(STATUS_NO_RESOURCES)?;
        let key = idx << KEY_INDEX_SHIFT | u32::from(key_variant);
        if let Some(m) = self.mrs.get_mut(idx) {
            m.key = key;
        }
        ok1(key)
    }

    /// DEREG_MR of an MR, or (1.7) the deallocation of a memory window in
    /// any state. An MR takes the memory windows bound to it along: they
    /// are FREE after it.
    fn cmd_dereg_mr(&mut self, c: CmdDeregMr) -> CmdResult {
        rsvd(c.reserved)?;
        let idx = c.key >> KEY_INDEX_SHIFT;
        // A fast-register MR's and a memory window's variant belong to
        // their consumer (REG_MR and BIND_MW WQEs change it): DEREG_MR
        // names them by index alone.
        match self.mrs.get(idx) {
            Some(m) if m.key == c.key || m.is_fast_reg() || m.is_mw() => {
                if m.is_mw() {
                    self.set_window(idx, None);
                } else {
                    self.unbind_windows_of(idx);
                }
                self.mrs.remove(idx);
                self.mr_invalidated();
                OK
            }
            _ => Err(STATUS_BAD_HANDLE),
        }
    }

    /// MODIFY_MR (1.6): moves a USER or PHYS MR to another PD and/or
    /// gives it other rights, keeping its key, translation and bounds. It
    /// takes effect as an invalidation does: translations the engine cached
    /// (under the old PD and rights) are redone before their next use, and
    /// every later access is checked against the new PD and rights. An MR
    /// with memory windows bound to it is BUSY (1.7, the last check): it
    /// must not change under its windows.
    fn cmd_modify_mr(&mut self, c: CmdModifyMr) -> CmdResult {
        rsvd(c.flags & !(MODIFY_MR_PD | MODIFY_MR_ACCESS))?;
        let new_pd = c.flags & MODIFY_MR_PD != 0;
        let new_access = c.flags & MODIFY_MR_ACCESS != 0;
        if !new_pd {
            rsvd(c.pdn)?;
        }
        if !new_access {
            rsvd(c.access)?;
        }
        param(new_pd || new_access)?;
        if new_access {
            Self::check_mr_access(c.access)?;
        }
        // The exact key, variant included (a stale key names no MR).
        let idx = c.key >> KEY_INDEX_SHIFT;
        let mr = self
            .mrs
            .get(idx)
            .filter(|m| m.key == c.key)
            .ok_or(STATUS_BAD_HANDLE)?;
        // A fast-register MR gets its PD at REG_MR and its rights from
        // REG_MR WQEs; a memory window is no MR to modify.
        param(!mr.is_fast_reg() && !mr.is_mw())?;
        // The address space does not change.
        param(!new_access || (c.access ^ mr.access) & ACCESS_ZERO_BASED == 0)?;
        if new_pd && !self.pds.contains(c.pdn) {
            return Err(STATUS_BAD_HANDLE);
        }
        if self.windows_bound_to(idx) {
            return Err(STATUS_BUSY);
        }
        let mr = self.mrs.get_mut(idx).ok_or(STATUS_BAD_HANDLE)?;
        if new_pd {
            // DEALLOC_PD finds the MR under its new PD from now on.
            mr.pdn = c.pdn;
        }
        if new_access {
            mr.access = c.access;
        }
        self.mr_invalidated();
        OK
    }

    fn cmd_create_qp(&mut self, c: CmdCreateQp) -> CmdResult {
        rsvd(c.flags & !(QP_FLAG_SQ_SIG_ALL | QP_FLAG_SRQ))?;
        rsvd(c.reserved)?;
        let with_srq = c.flags & QP_FLAG_SRQ != 0;
        if !with_srq {
            rsvd(c.srqn)?;
        }
        rsvd(c.sq_buf.reserved)?;
        rsvd(c.rq_buf.reserved)?;
        let l = self.cfg.limits.clone();
        param(c.qp_type <= QPT_UC)?;
        if with_srq {
            // Receive WQEs from the SRQ: no RQ of its own (its fields are
            // checked to be 0 below), and a type that receives from one.
            param(matches!(c.qp_type, QPT_RC | QPT_UC | QPT_UD))?;
            param(c.rq_depth == 0)?;
        }
        param(is_pow2_in(c.sq_depth, 1, l.max_qp_wr))?;
        param(c.rq_depth == 0 || is_pow2_in(c.rq_depth, 1, l.max_qp_wr))?;
        param((SQ_WQE_SHIFT_MIN..=SQ_WQE_SHIFT_MAX).contains(&c.sq_wqe_shift))?;
        param(c.db_page < DB_PAGES)?;
        let sq_stride = 1u32 << c.sq_wqe_shift;
        let inline_cap = (sq_stride - SQ_WQE_DATA_OFFSET as u32).min(l.max_inline);
        param(c.max_inline <= inline_cap)?;
        param(c.sq_dbrec_addr % u64::from(DBREC_ALIGN) == 0)?;
        Self::check_pbl(&c.sq_buf, u64::from(c.sq_depth) << c.sq_wqe_shift)?;
        if c.rq_depth == 0 {
            param(c.rq_dbrec_addr == 0 && c.rq_buf == Pbl::zeroed() && c.rq_wqe_shift == 0)?;
        } else {
            param((RQ_WQE_SHIFT_MIN..=RQ_WQE_SHIFT_MAX).contains(&c.rq_wqe_shift))?;
            param(c.rq_dbrec_addr % u64::from(DBREC_ALIGN) == 0)?;
            Self::check_pbl(&c.rq_buf, u64::from(c.rq_depth) << c.rq_wqe_shift)?;
        }
        if !self.pds.contains(c.pdn)
            || !self.cqs.contains(c.send_cqn)
            || !self.cqs.contains(c.recv_cqn)
        {
            return Err(STATUS_BAD_HANDLE);
        }
        if with_srq {
            let srq = self.srqs.get(c.srqn).ok_or(STATUS_BAD_HANDLE)?;
            param(srq.pdn == c.pdn)?;
        }
        let gsi = c.qp_type == QPT_GSI;
        if gsi && self.qps.contains(GSI_QPN) {
            return Err(STATUS_BUSY);
        }
        let regular = self.qps.iter().filter(|(n, _)| *n != GSI_QPN).count();
        if !gsi && regular >= l.max_qp as usize {
            return Err(STATUS_NO_RESOURCES);
        }
        self.dma_check(c.sq_dbrec_addr, 8)?;
        if c.rq_depth != 0 {
            self.dma_check(c.rq_dbrec_addr, 8)?;
        }
        let sq_pages = self.read_pbl(&c.sq_buf)?;
        let rq_pages = if c.rq_depth != 0 {
            self.read_pbl(&c.rq_buf)?
        } else {
            Vec::new()
        };
        let mut attr = QpAttr::zeroed();
        attr.qp_type = c.qp_type;
        let qp = Qp {
            qp_type: c.qp_type,
            pdn: c.pdn,
            send_cqn: c.send_cqn,
            recv_cqn: c.recv_cqn,
            sq_depth: c.sq_depth,
            rq_depth: c.rq_depth,
            sq_wqe_shift: c.sq_wqe_shift,
            rq_wqe_shift: c.rq_wqe_shift,
            max_inline: c.max_inline,
            flags: c.flags,
            srqn: if with_srq { c.srqn } else { 0 },
            db_page: c.db_page,
            sq_dbrec: c.sq_dbrec_addr,
            rq_dbrec: c.rq_dbrec_addr,
            sq_pages,
            rq_pages,
            sq_page_shift: c.sq_buf.page_shift,
            rq_page_shift: c.rq_buf.page_shift,
            state: QPS_RESET,
            attr,
            sq_pi: 0,
            rq_pi: 0,
            sq_doorbells: 0,
            rq_doorbells: 0,
            engine: Default::default(),
        };
        let qpn = if gsi {
            self.qps.insert_min(GSI_QPN, qp)
        } else {
            self.qps.insert_next(FIRST_QPN, qp)
        }
        .ok_or(STATUS_NO_RESOURCES)?;
        if gsi && qpn != GSI_QPN {
            self.qps.remove(qpn);
            return Err(STATUS_BUSY);
        }
        if let Some(q) = self.qps.get_mut(qpn) {
            q.attr.qpn = qpn;
        }
        ok1(qpn)
    }

    /// DESTROY_QP; the QP leaves every multicast group (1.7) it was
    /// attached to, and type 2 memory windows bound to it become FREE: no
    /// QP may use them any more (not a later QP with the same number).
    fn cmd_destroy_qp(&mut self, c: CmdDestroyQp) -> CmdResult {
        rsvd(c.reserved)?;
        self.qps.remove(c.qpn).ok_or(STATUS_BAD_HANDLE)?;
        self.mcast_detach_all(c.qpn);
        self.unbind_windows_of_qp(c.qpn);
        OK
    }

    /// The checks ATTACH_MCAST and DETACH_MCAST (1.7) share, in the
    /// documented order: `reserved` (BAD_RESERVED), a multicast `gid`
    /// (BAD_PARAM), a QP `qpn` (BAD_HANDLE) of type UD (GSI and connected
    /// QPs: BAD_PARAM). Membership and limits are the commands' own.
    fn check_mcast(&self, c: &CmdMcast) -> Result<(), u8> {
        rsvd(c.reserved)?;
        param(is_multicast(&c.gid))?;
        let qp = self.qps.get(c.qpn).ok_or(STATUS_BAD_HANDLE)?;
        param(qp.qp_type == QPT_UD)
    }

    /// ATTACH_MCAST (1.7): attaches UD QP `qpn` to group `gid`, creating
    /// the group. A pair already attached succeeds unchanged; a new group
    /// beyond `MAX_MCAST_GRP` or a QP beyond `MAX_MCAST_QP_ATTACH` in one
    /// group is NO_RESOURCES.
    fn cmd_attach_mcast(&mut self, c: CmdMcast) -> CmdResult {
        self.check_mcast(&c)?;
        let groups = self.mcast.len();
        match self.mcast.iter_mut().find(|g| g.gid == c.gid) {
            Some(g) if g.qpns.contains(&c.qpn) => {}
            Some(g) if g.qpns.len() >= MAX_MCAST_QP_ATTACH => return Err(STATUS_NO_RESOURCES),
            Some(g) => g.qpns.push(c.qpn),
            None if groups >= MAX_MCAST_GRP => return Err(STATUS_NO_RESOURCES),
            None => self.mcast.push(McastGroup {
                gid: c.gid,
                qpns: vec![c.qpn],
            }),
        }
        OK
    }

    /// DETACH_MCAST (1.7): detaches UD QP `qpn` from group `gid`; a pair
    /// that is not attached is BAD_PARAM. A group whose last QP left no
    /// longer exists.
    fn cmd_detach_mcast(&mut self, c: CmdMcast) -> CmdResult {
        self.check_mcast(&c)?;
        let gi = self
            .mcast
            .iter()
            .position(|g| g.gid == c.gid)
            .ok_or(STATUS_BAD_PARAM)?;
        let group = self.mcast.get_mut(gi).ok_or(STATUS_BAD_PARAM)?;
        let qi = group
            .qpns
            .iter()
            .position(|q| *q == c.qpn)
            .ok_or(STATUS_BAD_PARAM)?;
        group.qpns.remove(qi);
        if group.qpns.is_empty() {
            self.mcast.remove(gi);
        }
        OK
    }

    /// Detaches QP `qpn` from every multicast group (DESTROY_QP); groups
    /// left without a QP disappear.
    fn mcast_detach_all(&mut self, qpn: u32) {
        for g in &mut self.mcast {
            g.qpns.retain(|q| *q != qpn);
        }
        self.mcast.retain(|g| !g.qpns.is_empty());
    }

    /// CREATE_SRQ (1.6): a ring of RQ WQEs; the device writes its consumer
    /// index (0) to the record at once.
    fn cmd_create_srq(&mut self, c: CmdCreateSrq) -> CmdResult {
        rsvd_bytes(&c.reserved0)?;
        rsvd(c.reserved1)?;
        rsvd(c.buf.reserved)?;
        let l = &self.cfg.limits;
        param(is_pow2_in(c.depth, 1, l.max_qp_wr))?;
        param((RQ_WQE_SHIFT_MIN..=RQ_WQE_SHIFT_MAX).contains(&c.wqe_shift))?;
        param(c.limit <= c.depth)?;
        param(c.dbrec_addr % u64::from(DBREC_ALIGN) == 0)?;
        Self::check_pbl(&c.buf, u64::from(c.depth) << c.wqe_shift)?;
        if !self.pds.contains(c.pdn) {
            return Err(STATUS_BAD_HANDLE);
        }
        if self.srqs.len() >= self.cfg.limits.max_qp as usize {
            return Err(STATUS_NO_RESOURCES);
        }
        let dbrec_len = core::mem::size_of::<SrqDbrec>() as u64;
        self.dma_check(c.dbrec_addr, dbrec_len)?;
        let pages = self.read_pbl(&c.buf)?;
        self.write_resp_bytes(Srq::ci_addr(c.dbrec_addr), &0u32.to_le_bytes())?;
        let srq = Srq {
            pdn: c.pdn,
            depth: c.depth,
            wqe_shift: c.wqe_shift,
            page_shift: c.buf.page_shift,
            pages,
            dbrec: c.dbrec_addr,
            ci: 0,
            limit: c.limit,
            taken: 0,
            limit_events: 0,
        };
        let srqn = self.srqs.insert(srq).ok_or(STATUS_NO_RESOURCES)?;
        ok1(srqn)
    }

    fn cmd_destroy_srq(&mut self, c: CmdDestroySrq) -> CmdResult {
        rsvd(c.reserved)?;
        if !self.srqs.contains(c.srqn) {
            return Err(STATUS_BAD_HANDLE);
        }
        if self.qps.iter().any(|(_, q)| q.srqn == c.srqn) {
            return Err(STATUS_BUSY);
        }
        self.srqs.remove(c.srqn);
        OK
    }

    /// MODIFY_SRQ (1.6): arms the limit event (0 disarms).
    fn cmd_modify_srq(&mut self, c: CmdModifySrq) -> CmdResult {
        let srq = self.srqs.get_mut(c.srqn).ok_or(STATUS_BAD_HANDLE)?;
        param(c.limit <= srq.depth)?;
        srq.limit = c.limit;
        OK
    }

    fn cmd_query_srq(&mut self, c: CmdQuerySrq) -> CmdResult {
        rsvd(c.reserved)?;
        let srq = self.srqs.get(c.srqn).ok_or(STATUS_BAD_HANDLE)?;
        let mut out = [0u32; 5];
        out[SRQ_OUT_LIMIT] = srq.limit;
        out[SRQ_OUT_DEPTH] = srq.depth;
        out[SRQ_OUT_CI] = u32::from(srq.ci);
        Ok(out)
    }

    /// RESIZE_SRQ (1.6): the SRQ gets the ring `buf` of `depth` WQEs, into
    /// which software copied the WQEs the device may not have taken yet, at
    /// the same indices. The consumer index, the record and the armed limit
    /// stay. The data path caches nothing of the ring (a take reads the
    /// SRQ's pages and depth at that moment; a WQE taken was read whole),
    /// so every take after the completion reads the new ring at
    /// `ci & (depth - 1)`.
    ///
    /// Order: reserved fields; the SRQ-independent values (`depth`, a
    /// `wqe_shift` no SRQ can have, the page list's fields and size);
    /// the SRQ (BAD_HANDLE); its stride; its record's `pi` (DMA_ERROR if
    /// unreadable; BAD_PARAM if more than the old or the new depth ahead
    /// of `ci`); last the page list's pages (BAD_PARAM misaligned,
    /// DMA_ERROR).
    fn cmd_resize_srq(&mut self, c: CmdResizeSrq) -> CmdResult {
        rsvd_bytes(&c.reserved0)?;
        rsvd(c.reserved1)?;
        rsvd(c.buf.reserved)?;
        param(is_pow2_in(c.depth, 1, self.cfg.limits.max_qp_wr))?;
        param((RQ_WQE_SHIFT_MIN..=RQ_WQE_SHIFT_MAX).contains(&c.wqe_shift))?;
        Self::check_pbl(&c.buf, u64::from(c.depth) << c.wqe_shift)?;
        let srq = self.srqs.get(c.srqn).ok_or(STATUS_BAD_HANDLE)?;
        param(c.wqe_shift == srq.wqe_shift)?;
        let (dbrec, ci, old_depth) = (srq.dbrec, srq.ci, srq.depth);
        let mut b = [0u8; 4];
        self.dma_read(Srq::pi_addr(dbrec), &mut b)?;
        // 16-bit indices; a `pi` the data path would not take from (more
        // than the old depth ahead) is no valid state to resize from.
        let pi = u32::from_le_bytes(b) as u16;
        let outstanding = u32::from(pi.wrapping_sub(ci));
        param(outstanding <= old_depth && outstanding <= c.depth)?;
        let pages = self.read_pbl(&c.buf)?;
        let srq = self.srqs.get_mut(c.srqn).ok_or(STATUS_BAD_HANDLE)?;
        srq.depth = c.depth;
        srq.page_shift = c.buf.page_shift;
        srq.pages = pages;
        OK
    }

    /// Checks an address vector against the GID table.
    pub(crate) fn check_av(&self, av: &Av) -> Result<(), u8> {
        rsvd_bytes(&av.reserved)?;
        param(av.sl <= 7)?;
        param(av.flow_label & !FLOW_LABEL_MASK == 0)?;
        param(av.network_type <= NET_IPV6)?;
        let entry = self
            .gids
            .get(usize::from(av.sgid_index))
            .and_then(Option::as_ref)
            .ok_or(STATUS_BAD_PARAM)?;
        param(entry.network_type == av.network_type)?;
        // `vlan` only repeats the sgid entry's; the entry tags the frames.
        param(av.vlan == 0 || Some(av.vlan) == entry.vlan.map(|v| VLAN_VALID | v))?;
        let dgid_v4 = crate::gid::is_ipv4_mapped(&av.dgid);
        match av.network_type {
            NET_IPV4 => param(dgid_v4)?,
            NET_IPV6 => param(!dgid_v4)?,
            _ => {}
        }
        param(av.dgid.iter().any(|b| *b != 0))?;
        let mcast_mac = av.dmac[0] & 1 != 0;
        param(av.dmac.iter().any(|b| *b != 0))?;
        param(!mcast_mac || is_multicast(&av.dgid))?;
        Ok(())
    }

    fn cmd_modify_qp(&mut self, c: CmdModifyQp) -> CmdResult {
        let a = c.attr;
        rsvd(a.reserved0)?;
        rsvd(a.reserved1)?;
        rsvd(a.sq_draining)?;
        rsvd(a.qp_type)?;
        let mask = a.attr_mask;
        let unsupported = QP_ATTR_ALT_PATH | QP_ATTR_PATH_MIG_STATE | QP_ATTR_CAP;
        if mask & unsupported != 0 {
            return Err(STATUS_NOT_SUPPORTED);
        }
        if mask & !QP_ATTR_SUPPORTED != 0 {
            return Err(STATUS_BAD_ATTR_MASK);
        }
        if mask & QP_ATTR_STATE != 0 {
            param(a.qp_state <= QPS_ERR)?;
        }
        if mask & QP_ATTR_CUR_STATE != 0 {
            param(a.cur_qp_state <= QPS_ERR)?;
        }
        let has = |bit: u32| mask & bit != 0;
        if has(QP_ATTR_AV) {
            rsvd_bytes(&a.av.reserved)?;
        }
        let qp = self.qps.get(a.qpn).ok_or(STATUS_BAD_HANDLE)?;
        let next =
            check_modify(qp.qp_type, qp.state, mask, a.qp_state, a.cur_qp_state).map_err(|e| {
                match e {
                    ModifyError::BadState => STATUS_BAD_STATE,
                    ModifyError::BadAttrMask => STATUS_BAD_ATTR_MASK,
                }
            })?;
        let cur = qp.state;
        let qp_type = qp.qp_type;
        // Values of the attributes present.
        if has(QP_ATTR_PATH_MTU) {
            param((MTU_256..=MTU_4096).contains(&a.path_mtu))?;
        }
        if has(QP_ATTR_PORT) {
            param(u32::from(a.port_num) == NUM_PORTS)?;
        }
        if has(QP_ATTR_PKEY_INDEX) {
            param(u32::from(a.pkey_index) < PKEY_TABLE_LEN)?;
        }
        if has(QP_ATTR_ACCESS_FLAGS) {
            // 1.8: an RC QP may also serve FLUSH requests (device.rst
            // MODIFY_QP "ACCESS_FLAGS"), a UC QP never.
            let flush = ACCESS_FLUSH_GLOBAL | ACCESS_FLUSH_PERSISTENT;
            param(a.qp_access_flags & !(ACCESS_QP_MASK | flush) == 0)?;
            param(qp_type == QPT_RC || a.qp_access_flags & flush == 0)?;
            // A UC QP serves no READ and no atomic.
            let rc_only = ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;
            param(qp_type != QPT_UC || a.qp_access_flags & rc_only == 0)?;
        }
        if has(QP_ATTR_DEST_QPN) {
            param(a.dest_qp_num & !QPN_MASK == 0)?;
        }
        if has(QP_ATTR_RQ_PSN) {
            param(a.rq_psn & !PSN_MASK == 0)?;
        }
        if has(QP_ATTR_SQ_PSN) {
            param(a.sq_psn & !PSN_MASK == 0)?;
        }
        if has(QP_ATTR_TIMEOUT) {
            param(a.timeout <= MAX_TIMEOUT)?;
        }
        if has(QP_ATTR_RETRY_CNT) {
            param(a.retry_cnt <= MAX_RETRY_CNT)?;
        }
        if has(QP_ATTR_RNR_RETRY) {
            param(a.rnr_retry <= MAX_RNR_RETRY)?;
        }
        if has(QP_ATTR_MIN_RNR_TIMER) {
            param(a.min_rnr_timer <= MAX_MIN_RNR_TIMER)?;
        }
        if has(QP_ATTR_MAX_QP_RD_ATOMIC) {
            param(a.max_rd_atomic <= MAX_RD_ATOMIC)?;
        }
        if has(QP_ATTR_MAX_DEST_RD_ATOMIC) {
            param(a.max_dest_rd_atomic <= MAX_RD_ATOMIC)?;
        }
        if has(QP_ATTR_EN_SQD_ASYNC_NOTIFY) {
            param(a.en_sqd_async_notify <= 1)?;
        }
        if has(QP_ATTR_AV) {
            self.check_av(&a.av)?;
        }
        // Apply.
        let Some(qp) = self.qps.get_mut(a.qpn) else {
            return Err(STATUS_BAD_HANDLE);
        };
        let t = &mut qp.attr;
        if next == QPS_RESET {
            let (qpn, ty) = (t.qpn, t.qp_type);
            *t = QpAttr::zeroed();
            t.qpn = qpn;
            t.qp_type = ty;
            qp.sq_pi = 0;
            qp.rq_pi = 0;
        }
        macro_rules! take {
            ($bit:expr, $($f:ident),+) => {
                if has($bit) { $( t.$f = a.$f; )+ }
            };
        }
        take!(QP_ATTR_PATH_MTU, path_mtu);
        take!(QP_ATTR_PORT, port_num);
        take!(QP_ATTR_PKEY_INDEX, pkey_index);
        take!(QP_ATTR_ACCESS_FLAGS, qp_access_flags);
        take!(QP_ATTR_QKEY, qkey);
        take!(QP_ATTR_DEST_QPN, dest_qp_num);
        take!(QP_ATTR_RQ_PSN, rq_psn);
        take!(QP_ATTR_SQ_PSN, sq_psn);
        take!(QP_ATTR_TIMEOUT, timeout);
        take!(QP_ATTR_RETRY_CNT, retry_cnt);
        take!(QP_ATTR_RNR_RETRY, rnr_retry);
        take!(QP_ATTR_MIN_RNR_TIMER, min_rnr_timer);
        take!(QP_ATTR_MAX_QP_RD_ATOMIC, max_rd_atomic);
        take!(QP_ATTR_MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
        take!(QP_ATTR_EN_SQD_ASYNC_NOTIFY, en_sqd_async_notify);
        take!(QP_ATTR_AV, av);
        t.qp_state = next;
        t.cur_qp_state = next;
        qp.state = next;
        // The engine posts QP_SQ_DRAINED (RTS -> SQD with
        // en_sqd_async_notify) once no WQE is outstanding.
        self.engine_modified(a.qpn, cur, next);
        OK
    }

    fn cmd_query_qp(&mut self, c: CmdQueryQp) -> CmdResult {
        let qp = self.qps.get(c.qpn).ok_or(STATUS_BAD_HANDLE)?;
        let mut attr = qp.attr;
        attr.qpn = c.qpn;
        attr.qp_state = qp.state;
        attr.cur_qp_state = qp.state;
        attr.qp_type = qp.qp_type;
        attr.attr_mask = 0;
        attr.sq_draining = 0;
        self.write_resp(c.resp_addr, c.resp_len, &attr)?;
        OK
    }

    fn cmd_create_ah(&mut self, c: CmdCreateAh) -> CmdResult {
        rsvd(c.reserved)?;
        self.check_av(&c.av)?;
        if !self.pds.contains(c.pdn) {
            return Err(STATUS_BAD_HANDLE);
        }
        let ah = Ah {
            pdn: c.pdn,
            av: c.av,
            dgid: std::net::Ipv6Addr::from(c.av.dgid).to_string(),
            sgid_index: c.av.sgid_index,
        };
        let ahn = self.ahs.insert(ah).ok_or(STATUS_NO_RESOURCES)?;
        ok1(ahn)
    }

    fn cmd_destroy_ah(&mut self, c: CmdDestroyAh) -> CmdResult {
        rsvd(c.reserved)?;
        self.ahs.remove(c.ahn).ok_or(STATUS_BAD_HANDLE)?;
        OK
    }

    fn cmd_set_gid(&mut self, c: CmdSetGid) -> CmdResult {
        rsvd(c.vlan & !(VLAN_VALID | VLAN_ID_MASK))?;
        let vlan = if c.vlan & VLAN_VALID != 0 {
            let vid = c.vlan & VLAN_ID_MASK;
            param((1..VLAN_ID_MASK).contains(&vid))?;
            Some(vid)
        } else {
            rsvd(c.vlan)?;
            None
        };
        param(c.port == NUM_PORTS)?;
        param(usize::from(c.index) < GID_TABLE_LEN)?;
        param(c.gid_type <= GID_TYPE_ROCE_V2)?;
        param(c.gid.iter().any(|b| *b != 0))?;
        param(c.network_type == expected_network_type(c.gid_type, &c.gid))?;
        param(c.smac[0] & 1 == 0 && c.smac.iter().any(|b| *b != 0))?;
        let e = GidEntry {
            index: c.index,
            gid: c.gid,
            gid_type: c.gid_type,
            network_type: c.network_type,
            smac: c.smac,
            vlan,
        };
        let slot = self
            .gids
            .get_mut(usize::from(c.index))
            .ok_or(STATUS_BAD_PARAM)?;
        *slot = Some(e);
        self.sync_gid_macs();
        OK
    }

    fn cmd_clear_gid(&mut self, c: CmdClearGid) -> CmdResult {
        rsvd(c.reserved0)?;
        param(c.port == NUM_PORTS)?;
        let slot = self
            .gids
            .get_mut(usize::from(c.index))
            .ok_or(STATUS_BAD_PARAM)?;
        *slot = None;
        self.sync_gid_macs();
        OK
    }
}
