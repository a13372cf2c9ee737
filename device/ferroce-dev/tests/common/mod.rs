// SPDX-License-Identifier: GPL-2.0
//! Test harness: a device on fake memory, driven the way the driver will
//! drive it (registers, admin queue, AEQ).

#![allow(dead_code)]

pub mod rdma;

use std::sync::Arc;

use ferroce_dev::hw::*;
use ferroce_dev::{Device, DeviceConfig, FakeMemory, GuestMemory, Limits, RecordingIrq};
use zerocopy::{FromBytes, IntoBytes};

pub const RAM: u64 = 0x1000_0000;
pub const RAM_SIZE: usize = 32 << 20;
pub const ADMINQ: u64 = RAM;
pub const ADMINCQ: u64 = RAM + 0x1_0000;
pub const AEQ: u64 = RAM + 0x2_0000;
pub const HEAP: u64 = RAM + 0x10_0000;
/// An address nothing is mapped at.
pub const UNMAPPED: u64 = 0x7000_0000;

/// The WQE stride (log2) of the SRQs of [`Harness::srq_cmd`]: 64 bytes,
/// as the nodes' RQs.
pub const SRQ_WQE_SHIFT: u8 = 6;

pub struct Harness {
    pub dev: Arc<Device>,
    pub mem: Arc<FakeMemory>,
    pub irq: Arc<RecordingIrq>,
    pub depth: u32,
    pub aeq_depth: u32,
    pub pi: u16,
    pub aeq_ci: u16,
    pub next_id: u16,
    pub heap: u64,
    /// Async events drained so far (type, obj, data).
    pub events: Vec<(u8, u32, u32)>,
}

pub fn mac() -> [u8; 6] {
    [0xf8, 0x27, 0x00, 0x00, 0x1d, 0xa7]
}

impl Harness {
    pub fn new() -> Self {
        Self::with(Limits::default(), 16, 64)
    }

    pub fn with(limits: Limits, depth: u32, aeq_depth: u32) -> Self {
        let h = Self::unenabled(limits, depth, aeq_depth);
        h.reg_w(REG_DEV_CTRL, CTRL_ENABLE);
        assert_eq!(h.reg_r(REG_DEV_STATUS), DEV_STATUS_READY);
        h
    }

    pub fn unenabled(limits: Limits, depth: u32, aeq_depth: u32) -> Self {
        Self::unenabled_mac(limits, depth, aeq_depth, mac())
    }

    /// An enabled device with port MAC `m`.
    pub fn with_mac(m: [u8; 6]) -> Self {
        let h = Self::unenabled_mac(Limits::default(), 16, 256, m);
        h.reg_w(REG_DEV_CTRL, CTRL_ENABLE);
        assert_eq!(h.reg_r(REG_DEV_STATUS), DEV_STATUS_READY);
        h
    }

    pub fn unenabled_mac(limits: Limits, depth: u32, aeq_depth: u32, m: [u8; 6]) -> Self {
        let mem = Arc::new(FakeMemory::new());
        mem.add_region(RAM, RAM_SIZE);
        Self::unenabled_over(mem.clone(), mem, limits, depth, aeq_depth, m)
    }

    /// A device with programmed queues, not enabled, that does its DMA
    /// through `guest` (for example a recording wrapper of `mem`), while
    /// the harness reads and writes `mem` directly.
    fn unenabled_over(
        mem: Arc<FakeMemory>,
        guest: Arc<dyn GuestMemory>,
        limits: Limits,
        depth: u32,
        aeq_depth: u32,
        m: [u8; 6],
    ) -> Self {
        let irq = Arc::new(RecordingIrq::new());
        let cfg = DeviceConfig {
            mac: m,
            limits,
            ..DeviceConfig::default()
        };
        let dev = Arc::new(Device::new(cfg, guest, irq.clone()));
        let h = Self {
            dev,
            mem,
            irq,
            depth,
            aeq_depth,
            pi: 0,
            aeq_ci: 0,
            next_id: 1,
            heap: HEAP,
            events: Vec::new(),
        };
        h.program_queues();
        h
    }

    /// [`Self::unenabled_over`], enabled.
    #[allow(dead_code)]
    pub fn enabled_over(
        mem: Arc<FakeMemory>,
        guest: Arc<dyn GuestMemory>,
        limits: Limits,
        depth: u32,
        aeq_depth: u32,
    ) -> Self {
        Self::enabled_over_mac(mem, guest, limits, depth, aeq_depth, mac())
    }

    /// [`Self::enabled_over`] with port MAC `m`.
    pub fn enabled_over_mac(
        mem: Arc<FakeMemory>,
        guest: Arc<dyn GuestMemory>,
        limits: Limits,
        depth: u32,
        aeq_depth: u32,
        m: [u8; 6],
    ) -> Self {
        let h = Self::unenabled_over(mem, guest, limits, depth, aeq_depth, m);
        h.reg_w(REG_DEV_CTRL, CTRL_ENABLE);
        assert_eq!(h.reg_r(REG_DEV_STATUS), DEV_STATUS_READY);
        h
    }

    pub fn program_queues(&self) {
        self.reg_w(REG_ADMINQ_BASE_LO, ADMINQ as u32);
        self.reg_w(REG_ADMINQ_BASE_HI, (ADMINQ >> 32) as u32);
        self.reg_w(REG_ADMINCQ_BASE_LO, ADMINCQ as u32);
        self.reg_w(REG_ADMINCQ_BASE_HI, (ADMINCQ >> 32) as u32);
        self.reg_w(REG_ADMINQ_DEPTH, self.depth);
        self.reg_w(REG_AEQ_BASE_LO, AEQ as u32);
        self.reg_w(REG_AEQ_BASE_HI, (AEQ >> 32) as u32);
        self.reg_w(REG_AEQ_DEPTH, self.aeq_depth);
    }

    pub fn reg_r(&self, off: u32) -> u32 {
        let mut b = [0u8; 4];
        self.dev.bar_read(BAR_REGS as u8, u64::from(off), &mut b);
        u32::from_le_bytes(b)
    }

    pub fn reg_w(&self, off: u32, v: u32) {
        self.dev
            .bar_write(BAR_REGS as u8, u64::from(off), &v.to_le_bytes());
    }

    pub fn db(&self, page: u32, reg: u64, v: u64) {
        let off = u64::from(page) * DB_PAGE_SIZE + reg;
        self.dev.bar_write(BAR_DB as u8, off, &v.to_le_bytes());
    }

    /// Bump allocator in fake RAM.
    pub fn alloc(&mut self, size: u64, align: u64) -> u64 {
        let a = self.heap.div_ceil(align) * align;
        self.heap = a + size;
        assert!(self.heap <= RAM + RAM_SIZE as u64, "fake RAM exhausted");
        a
    }

    pub fn read<T: FromBytes>(&self, addr: u64) -> T {
        let mut buf = vec![0u8; std::mem::size_of::<T>()];
        self.mem.read(addr, &mut buf).unwrap();
        T::read_from_bytes(&buf).unwrap()
    }

    pub fn write<T: IntoBytes + zerocopy::Immutable>(&self, addr: u64, v: &T) {
        self.mem.write(addr, v.as_bytes()).unwrap();
    }

    /// Submits raw command bytes (header included) and waits for the completion.
    pub fn submit_raw(&mut self, bytes: &[u8]) -> CmdComp {
        let mut raw = [0u8; CMD_SIZE];
        raw[..bytes.len()].copy_from_slice(bytes);
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        raw[2..4].copy_from_slice(&id.to_le_bytes());
        let slot = u64::from(u32::from(self.pi) & (self.depth - 1));
        self.mem
            .write(ADMINQ + slot * CMD_SIZE as u64, &raw)
            .unwrap();
        let phase = ((u32::from(self.pi) >> self.depth.trailing_zeros()) & 1) as u8 ^ 1;
        self.pi = self.pi.wrapping_add(1);
        self.reg_w(REG_ADMINQ_DB, u32::from(self.pi));
        let comp: CmdComp = self.read(ADMINCQ + slot * CMD_COMP_SIZE as u64);
        assert_eq!(comp.flags & COMP_PHASE, phase, "completion phase");
        assert_eq!(comp.cmd_id, id, "completion cmd_id");
        assert_eq!(comp.sq_ci, self.pi);
        assert_eq!(self.reg_r(REG_ADMINQ_CI), u32::from(self.pi));
        self.drain_aeq();
        let last = self.events.iter().rev().find(|e| e.0 == EQE_CMD_COMPLETION);
        assert_eq!(
            last,
            Some(&(EQE_CMD_COMPLETION, u32::from(id), u32::from(comp.status)))
        );
        comp
    }

    /// Submits a command struct; returns (status, out).
    pub fn cmd<T: IntoBytes + zerocopy::Immutable>(&mut self, c: &T) -> (u8, [u32; 5]) {
        let comp = self.submit_raw(c.as_bytes());
        (comp.status, comp.out)
    }

    /// Submits and expects `status`; returns out[0].
    pub fn expect<T: IntoBytes + zerocopy::Immutable>(&mut self, c: &T, status: u8) -> u32 {
        let (s, out) = self.cmd(c);
        assert_eq!(s, status, "status of {:?}", c.as_bytes()[0]);
        out[0]
    }

    pub fn ok<T: IntoBytes + zerocopy::Immutable>(&mut self, c: &T) -> u32 {
        self.expect(c, STATUS_SUCCESS)
    }

    /// QUERY_CAPS into a 256-byte buffer; the capabilities it returned.
    pub fn query_caps(&mut self) -> Caps {
        let resp = self.alloc(256, 8);
        let mut c = CmdQueryCaps::zeroed();
        c.hdr.opcode = CMD_QUERY_CAPS;
        c.resp_addr = resp;
        c.resp_len = 256;
        self.ok(&c);
        self.read(resp)
    }

    /// Reads every new AEQ entry into `events` and re-arms the AEQ.
    pub fn drain_aeq(&mut self) {
        loop {
            let slot = u64::from(u32::from(self.aeq_ci) & (self.aeq_depth - 1));
            let e: Eqe = self.read(AEQ + slot * EQE_SIZE as u64);
            let phase = ((u32::from(self.aeq_ci) >> self.aeq_depth.trailing_zeros()) & 1) as u8 ^ 1;
            if e.owner & EQE_OWNER != phase {
                break;
            }
            self.events.push((e.event_type, e.obj, e.data));
            self.aeq_ci = self.aeq_ci.wrapping_add(1);
        }
        self.reg_w(REG_EQ_DB, u32::from(self.aeq_ci) | EQ_DB_ARM);
    }

    pub fn take_events(&mut self) -> Vec<(u8, u32, u32)> {
        self.drain_aeq();
        std::mem::take(&mut self.events)
            .into_iter()
            .filter(|e| e.0 != EQE_CMD_COMPLETION)
            .collect()
    }

    // ------------------------------------------------------------ builders

    pub fn alloc_pd(&mut self) -> u32 {
        self.ok(&alloc_pd())
    }

    pub fn create_eq(&mut self, vector: u16, depth: u32) -> (u32, u64) {
        let base = self.alloc(u64::from(depth) * EQE_SIZE as u64, 64);
        let eqn = self.ok(&create_eq(base, depth, vector));
        (eqn, base)
    }

    /// A CQ of `depth` on `eqn`; returns (cqn, ring base, dbrec).
    pub fn create_cq(&mut self, eqn: u32, depth: u32, db_page: u32) -> (u32, u64, u64) {
        let (c, ring, dbrec) = self.cq_cmd(eqn, depth, db_page);
        (self.ok(&c), ring, dbrec)
    }

    pub fn cq_cmd(&mut self, eqn: u32, depth: u32, db_page: u32) -> (CmdCreateCq, u64, u64) {
        let bytes = u64::from(depth) * CQE_SIZE as u64;
        let pages = bytes.div_ceil(4096).max(1);
        let ring = self.alloc(pages * 4096, 4096);
        let dbrec = self.alloc(8, 8);
        let mut c = CmdCreateCq::zeroed();
        c.hdr.opcode = CMD_CREATE_CQ;
        c.buf = self.pbl_contig(ring, pages as u32, 12);
        c.dbrec_addr = dbrec;
        c.depth = depth;
        c.eqn = eqn;
        c.db_page = db_page;
        (c, ring, dbrec)
    }

    /// A RESIZE_CQ (1.6) of CQ `cqn` to `depth` CQEs, its new ring in fresh
    /// (zeroed) 4 KiB pages; returns it and the ring's base.
    pub fn cq_resize_cmd(&mut self, cqn: u32, depth: u32) -> (CmdResizeCq, u64) {
        let pages = (u64::from(depth) * CQE_SIZE as u64).div_ceil(4096).max(1);
        let ring = self.alloc(pages * 4096, 4096);
        let mut c = CmdResizeCq::zeroed();
        c.hdr.opcode = CMD_RESIZE_CQ;
        c.buf = self.pbl_contig(ring, pages as u32, 12);
        c.cqn = cqn;
        c.depth = depth;
        (c, ring)
    }

    /// A page list for `count` contiguous pages at `base` (level 0 or 1).
    pub fn pbl_contig(&mut self, base: u64, count: u32, shift: u8) -> Pbl {
        let mut p = Pbl::zeroed();
        p.page_shift = shift;
        p.page_count = count;
        if count == 1 {
            p.level = PBL_LEVEL_0;
            p.addr = base;
        } else {
            let list = self.alloc(u64::from(count) * 8, 8);
            for i in 0..u64::from(count) {
                self.mem
                    .write(list + i * 8, &(base + (i << shift)).to_le_bytes())
                    .unwrap();
            }
            p.level = PBL_LEVEL_1;
            p.addr = list;
        }
        p
    }

    /// A 2-level page list of `count` 4 KiB pages, page `i` at `page(i)`.
    pub fn pbl_2level(&mut self, count: u32, page: impl Fn(u32) -> u64) -> Pbl {
        let n1 = count.div_ceil(PBL_L1_ENTRIES);
        let top = self.alloc(u64::from(n1) * 8, 8);
        for j in 0..n1 {
            let list = self.alloc(4096, 4096);
            self.mem
                .write(top + u64::from(j) * 8, &list.to_le_bytes())
                .unwrap();
            for k in 0..PBL_L1_ENTRIES.min(count - j * PBL_L1_ENTRIES) {
                let i = j * PBL_L1_ENTRIES + k;
                self.mem
                    .write(list + u64::from(k) * 8, &page(i).to_le_bytes())
                    .unwrap();
            }
        }
        let mut p = Pbl::zeroed();
        p.addr = top;
        p.page_count = count;
        p.page_shift = 12;
        p.level = PBL_LEVEL_2;
        p
    }

    pub fn qp_cmd(&mut self, pdn: u32, cqn: u32, qp_type: u8, db_page: u32) -> CmdCreateQp {
        let mut c = CmdCreateQp::zeroed();
        c.hdr.opcode = CMD_CREATE_QP;
        c.qp_type = qp_type;
        c.pdn = pdn;
        c.send_cqn = cqn;
        c.recv_cqn = cqn;
        c.sq_depth = 64;
        c.rq_depth = 64;
        c.sq_wqe_shift = 8;
        c.rq_wqe_shift = 6;
        c.db_page = db_page;
        c.max_inline = 64;
        let sq = self.alloc(64 << 8, 4096);
        let rq = self.alloc(64 << 6, 4096);
        c.sq_buf = self.pbl_contig(sq, 4, 12);
        c.rq_buf = self.pbl_contig(rq, 1, 12);
        c.sq_dbrec_addr = self.alloc(8, 8);
        c.rq_dbrec_addr = self.alloc(8, 8);
        c
    }

    /// A CREATE_QP like [`Self::qp_cmd`] for a QP that takes its receive
    /// WQEs from SRQ `srqn` (1.6): `QP_FLAG_SRQ`, no RQ of its own.
    pub fn srq_qp_cmd(&mut self, pdn: u32, cqn: u32, qp_type: u8, srqn: u32) -> CmdCreateQp {
        let mut c = self.qp_cmd(pdn, cqn, qp_type, 0);
        c.rq_depth = 0;
        c.rq_wqe_shift = 0;
        c.rq_buf = Pbl::zeroed();
        c.rq_dbrec_addr = 0;
        c.flags |= QP_FLAG_SRQ;
        c.srqn = srqn;
        c
    }

    /// A CREATE_SRQ of `depth` 64-byte RQ WQEs for `pdn` with limit
    /// `limit`, its ring and record in fresh memory; returns it and the
    /// ring's base.
    pub fn srq_cmd(&mut self, pdn: u32, depth: u32, limit: u32) -> (CmdCreateSrq, u64) {
        let pages = (u64::from(depth) << SRQ_WQE_SHIFT).div_ceil(4096).max(1);
        let ring = self.alloc(pages * 4096, 4096);
        let mut c = CmdCreateSrq::zeroed();
        c.hdr.opcode = CMD_CREATE_SRQ;
        c.buf = self.pbl_contig(ring, pages as u32, 12);
        c.dbrec_addr = self.alloc(8, 8);
        c.pdn = pdn;
        c.depth = depth;
        c.limit = limit;
        c.wqe_shift = SRQ_WQE_SHIFT;
        (c, ring)
    }

    /// A RESIZE_SRQ (1.6) of SRQ `srqn` to `depth` 64-byte WQEs, its new
    /// ring in fresh (zeroed) memory; returns it and the ring's base.
    pub fn srq_resize_cmd(&mut self, srqn: u32, depth: u32) -> (CmdResizeSrq, u64) {
        let pages = (u64::from(depth) << SRQ_WQE_SHIFT).div_ceil(4096).max(1);
        let ring = self.alloc(pages * 4096, 4096);
        let mut c = CmdResizeSrq::zeroed();
        c.hdr.opcode = CMD_RESIZE_SRQ;
        c.buf = self.pbl_contig(ring, pages as u32, 12);
        c.srqn = srqn;
        c.depth = depth;
        c.wqe_shift = SRQ_WQE_SHIFT;
        (c, ring)
    }

    /// PD + CEQ(vector 1) + CQ + QP of `qp_type`; returns (pdn, cqn, qpn).
    pub fn setup_qp(&mut self, qp_type: u8) -> (u32, u32, u32) {
        let pdn = self.alloc_pd();
        if self.dev.objects().eqs.iter().all(|e| e.handle != 1) {
            self.create_eq(1, 64);
        }
        let (cqn, _, _) = self.create_cq(1, 64, 0);
        let c = self.qp_cmd(pdn, cqn, qp_type, 0);
        let qpn = self.ok(&c);
        (pdn, cqn, qpn)
    }

    /// Installs the four GIDs of the seed's typical table for our MAC and
    /// 10.0.1.36: 0/1 link-local v1/v2, 2/3 IPv4-mapped v1/v2.
    pub fn default_gids(&mut self) {
        let ll = ferroce_dev::gid::eui64_link_local(mac());
        let v4 = ipv4_gid([10, 0, 1, 36]);
        self.ok(&set_gid(0, ll, GID_TYPE_ROCE_V1, NET_ROCE_V1));
        self.ok(&set_gid(1, ll, GID_TYPE_ROCE_V2, NET_IPV6));
        self.ok(&set_gid(2, v4, GID_TYPE_ROCE_V1, NET_ROCE_V1));
        self.ok(&set_gid(3, v4, GID_TYPE_ROCE_V2, NET_IPV4));
    }

    /// Sends MODIFY_QP.
    pub fn modify(&mut self, attr: QpAttr) -> u8 {
        let mut c = CmdModifyQp::zeroed();
        c.hdr.opcode = CMD_MODIFY_QP;
        c.attr = attr;
        self.cmd(&c).0
    }

    pub fn query_qp(&mut self, qpn: u32) -> QpAttr {
        let resp = self.alloc(128, 8);
        let mut c = CmdQueryQp::zeroed();
        c.hdr.opcode = CMD_QUERY_QP;
        c.resp_addr = resp;
        c.resp_len = 128;
        c.qpn = qpn;
        self.ok(&c);
        self.read(resp)
    }
}

pub fn ipv4_gid(ip: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&ip);
    g
}

pub fn alloc_pd() -> CmdAllocPd {
    let mut c = CmdAllocPd::zeroed();
    c.hdr.opcode = CMD_ALLOC_PD;
    c
}

/// A MODIFY_MR (1.6) of `key` with `flags` (`MODIFY_MR_*`), the new
/// `pdn` and the new `access`.
pub fn modify_mr(key: u32, flags: u32, pdn: u32, access: u32) -> CmdModifyMr {
    let mut c = CmdModifyMr {
        key,
        flags,
        pdn,
        access,
        ..CmdModifyMr::zeroed()
    };
    c.hdr.opcode = CMD_MODIFY_MR;
    c
}

pub fn create_eq(base: u64, depth: u32, vector: u16) -> CmdCreateEq {
    let mut c = CmdCreateEq::zeroed();
    c.hdr.opcode = CMD_CREATE_EQ;
    c.base = base;
    c.depth = depth;
    c.vector = vector;
    c
}

pub fn set_gid(index: u16, gid: [u8; 16], gid_type: u8, net: u8) -> CmdSetGid {
    let mut c = CmdSetGid::zeroed();
    c.hdr.opcode = CMD_SET_GID;
    c.gid = gid;
    c.smac = mac();
    c.index = index;
    c.gid_type = gid_type;
    c.network_type = net;
    c.port = 1;
    c
}

/// A RoCE v2 IPv4 address vector to 10.0.1.37 through sgid 3.
pub fn av_v4() -> Av {
    let mut av = Av::zeroed();
    av.dgid = ipv4_gid([10, 0, 1, 37]);
    av.dmac = [0x52, 0x54, 0, 0, 0, 2];
    av.sgid_index = 3;
    av.hop_limit = 64;
    av.network_type = NET_IPV4;
    av
}

/// Attributes with every value set validly (masks pick what is sent).
pub fn full_attr(qpn: u32) -> QpAttr {
    let mut a = QpAttr::zeroed();
    a.qpn = qpn;
    a.path_mtu = MTU_1024;
    a.port_num = 1;
    a.dest_qp_num = 0x123;
    a.rq_psn = 0x10;
    a.sq_psn = 0x20;
    a.qkey = 0x1111_1111;
    a.qp_access_flags = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_LOCAL_WRITE;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.min_rnr_timer = 12;
    a.max_rd_atomic = 1;
    a.max_dest_rd_atomic = 1;
    a.av = av_v4();
    a
}

pub fn attr_with(qpn: u32, state: u8, mask: u32) -> QpAttr {
    let mut a = full_attr(qpn);
    a.qp_state = state;
    a.attr_mask = mask | QP_ATTR_STATE;
    a
}

/// Every admin command opcode of the spec.
#[allow(dead_code)]
pub const ADMIN_OPCODES: [u8; 30] = [
    CMD_QUERY_CAPS,
    CMD_QUERY_PORT,
    CMD_SET_PORT_MTU,
    CMD_SET_PORT_MAC,
    CMD_QUERY_COUNTERS,
    CMD_CREATE_EQ,
    CMD_DESTROY_EQ,
    CMD_CREATE_CQ,
    CMD_DESTROY_CQ,
    CMD_RESIZE_CQ,
    CMD_ALLOC_PD,
    CMD_DEALLOC_PD,
    CMD_REG_MR,
    CMD_DEREG_MR,
    CMD_MODIFY_MR,
    CMD_CREATE_QP,
    CMD_DESTROY_QP,
    CMD_MODIFY_QP,
    CMD_QUERY_QP,
    CMD_CREATE_SRQ,
    CMD_DESTROY_SRQ,
    CMD_MODIFY_SRQ,
    CMD_QUERY_SRQ,
    CMD_RESIZE_SRQ,
    CMD_ATTACH_MCAST,
    CMD_DETACH_MCAST,
    CMD_CREATE_AH,
    CMD_DESTROY_AH,
    CMD_SET_GID,
    CMD_CLEAR_GID,
];
