// SPDX-License-Identifier: GPL-2.0
//! Data path test kit: nodes (a device with PD, CQ, MRs, QPs) driven the
//! way a provider drives them (WQEs in rings, doorbell records, doorbells,
//! CQ polling), and a deterministic lossy wire between two nodes.

use super::*;
use ferroce_dev::doorbell::{cq_db, qp_db};

pub const CQ_DEPTH: u32 = 1024;

/// xorshift64*: deterministic pseudo-random numbers.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// True with probability `pct` percent.
    pub fn pct(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

#[derive(Clone, Copy, Debug)]
pub struct QpInfo {
    pub qpn: u32,
    pub sq_base: u64,
    pub rq_base: u64,
    pub sq_dbrec: u64,
    pub rq_dbrec: u64,
    pub sq_pi: u16,
    pub rq_pi: u16,
    pub sq_depth: u32,
    pub rq_depth: u32,
}

#[derive(Clone, Copy, Debug)]
pub struct MrInfo {
    pub key: u32,
    pub iova: u64,
    pub gpa: u64,
    pub len: u64,
}

impl MrInfo {
    /// Guest physical address of MR offset `off`.
    pub fn at(&self, off: u64) -> u64 {
        self.gpa + off
    }
    /// MR address (iova) of offset `off`.
    pub fn va(&self, off: u64) -> u64 {
        self.iova + off
    }
}

/// One send work request.
#[derive(Clone, Debug, Default)]
pub struct SendWr {
    pub wr_id: u64,
    pub opcode: u8,
    pub flags: u8,
    pub imm: [u8; 4],
    pub remote_addr: u64,
    pub rkey: u32,
    /// (addr, len, lkey)
    pub sges: Vec<(u64, u32, u32)>,
    pub inline: Option<Vec<u8>>,
    /// UD: (ahn, remote qpn, qkey)
    pub ud: Option<(u32, u32, u32)>,
    /// Atomics: compare (CMP_SWP) or addend (FETCH_ADD), and swap.
    pub compare_add: u64,
    pub swap: u64,
}

/// A shared receive queue of a [`Node`] (1.6).
#[derive(Clone, Copy, Debug)]
pub struct SrqInfo {
    pub srqn: u32,
    pub ring: u64,
    pub dbrec: u64,
    pub depth: u32,
    /// Software's producer index.
    pub pi: u16,
}

pub struct Node {
    pub h: Harness,
    pub mac: [u8; 6],
    pub ip: [u8; 4],
    pub pdn: u32,
    pub cqn: u32,
    pub cq_ring: u64,
    pub cq_dbrec: u64,
    pub cq_ci: u16,
    pub qps: Vec<QpInfo>,
    pub srqs: Vec<SrqInfo>,
}

/// The bytes of a receive WQE (64-byte stride) with `sges` (addr, len,
/// lkey).
pub fn rq_wqe(wr_id: u64, sges: &[(u64, u32, u32)]) -> Vec<u8> {
    let mut raw = vec![0u8; 64];
    raw[0..8].copy_from_slice(&wr_id.to_le_bytes());
    raw[8] = sges.len() as u8;
    for (i, (addr, len, lkey)) in sges.iter().enumerate() {
        let o = 16 + i * 16;
        raw[o..o + 8].copy_from_slice(&addr.to_le_bytes());
        raw[o + 8..o + 12].copy_from_slice(&len.to_le_bytes());
        raw[o + 12..o + 16].copy_from_slice(&lkey.to_le_bytes());
    }
    raw
}

/// The bytes of a BIND_MW send WQE (1.7; 256-byte stride) with `flags`
/// and segment `seg`.
pub fn bind_mw_wqe(wr_id: u64, flags: u8, seg: &SqWqeBindMw) -> Vec<u8> {
    let mut raw = vec![0u8; 256];
    raw[0..8].copy_from_slice(&wr_id.to_le_bytes());
    raw[8] = WR_BIND_MW;
    raw[9] = flags;
    raw[SQ_WQE_SEG_OFFSET..SQ_WQE_DATA_OFFSET].copy_from_slice(seg.as_bytes());
    raw
}

/// The segment of a BIND_MW WQE binding `[addr, addr + length)` of MR
/// `mr_key` with `access` to window `mw_key` (its new key).
pub fn bind_seg(mw_key: u32, mr_key: u32, addr: u64, length: u64, access: u32) -> SqWqeBindMw {
    SqWqeBindMw {
        addr,
        length,
        mw_key,
        mr_key,
        access,
        reserved: 0,
    }
}

pub fn node_mac(i: u8) -> [u8; 6] {
    [0x52, 0x54, 0x00, 0xfe, 0x00, i]
}

pub fn v6_gid(i: u8) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xfd;
    g[15] = i;
    g
}

impl Node {
    /// A device with GIDs 0 (v1, fd00::i), 1 (v2 IPv6 fd00::i), 3 (v2 IPv4 10.0.1.i).
    pub fn new(i: u8) -> Self {
        Self::on(i, Harness::with_mac(node_mac(i)))
    }

    /// [`Self::new`] on an enabled harness `h` with MAC `node_mac(i)` (for
    /// example one over a recording memory).
    pub fn on(i: u8, mut h: Harness) -> Self {
        let mac = node_mac(i);
        let ip = [10, 0, 1, i];
        let gid = |index: u16, gid: [u8; 16], ty: u8, net: u8| {
            let mut c = set_gid(index, gid, ty, net);
            c.smac = mac;
            c
        };
        h.ok(&gid(0, v6_gid(i), GID_TYPE_ROCE_V1, NET_ROCE_V1));
        h.ok(&gid(1, v6_gid(i), GID_TYPE_ROCE_V2, NET_IPV6));
        h.ok(&gid(3, ipv4_gid(ip), GID_TYPE_ROCE_V2, NET_IPV4));
        let pdn = h.alloc_pd();
        h.create_eq(1, 256);
        let (c, ring, dbrec) = h.cq_cmd(1, CQ_DEPTH, 0);
        let cqn = h.ok(&c);
        Self {
            h,
            mac,
            ip,
            pdn,
            cqn,
            cq_ring: ring,
            cq_dbrec: dbrec,
            cq_ci: 0,
            qps: Vec::new(),
            srqs: Vec::new(),
        }
    }

    /// Creates a QP (SQ 64 x 256 B, RQ 64 x 64 B); returns its index in `qps`.
    pub fn create_qp(&mut self, qp_type: u8) -> usize {
        let cqn = self.cqn;
        let pdn = self.pdn;
        let mut c = self.h.qp_cmd(pdn, cqn, qp_type, 0);
        c.max_inline = 128;
        let qpn = self.h.ok(&c);
        let mut b = [0u8; 8];
        self.h.mem.read(c.sq_buf.addr, &mut b).unwrap();
        let sq_base = u64::from_le_bytes(b);
        self.qps.push(QpInfo {
            qpn,
            sq_base,
            rq_base: c.rq_buf.addr,
            sq_dbrec: c.sq_dbrec_addr,
            rq_dbrec: c.rq_dbrec_addr,
            sq_pi: 0,
            rq_pi: 0,
            sq_depth: c.sq_depth,
            rq_depth: c.rq_depth,
        });
        self.qps.len() - 1
    }

    /// Creates an SRQ of `depth` WQEs (64 B) with limit `limit` in the
    /// node's PD; returns its index in `srqs`.
    pub fn create_srq(&mut self, depth: u32, limit: u32) -> usize {
        let pdn = self.pdn;
        let (c, ring) = self.h.srq_cmd(pdn, depth, limit);
        let srqn = self.h.ok(&c);
        self.srqs.push(SrqInfo {
            srqn,
            ring,
            dbrec: c.dbrec_addr,
            depth,
            pi: 0,
        });
        self.srqs.len() - 1
    }

    /// Creates a QP (SQ 64 x 256 B) that receives from SRQ `si`; returns
    /// its index in `qps`.
    pub fn create_srq_qp(&mut self, qp_type: u8, si: usize) -> usize {
        let (cqn, pdn, srqn) = (self.cqn, self.pdn, self.srqs[si].srqn);
        let mut c = self.h.srq_qp_cmd(pdn, cqn, qp_type, srqn);
        c.max_inline = 128;
        let qpn = self.h.ok(&c);
        let mut b = [0u8; 8];
        self.h.mem.read(c.sq_buf.addr, &mut b).unwrap();
        self.qps.push(QpInfo {
            qpn,
            sq_base: u64::from_le_bytes(b),
            rq_base: 0,
            sq_dbrec: c.sq_dbrec_addr,
            rq_dbrec: 0,
            sq_pi: 0,
            rq_pi: 0,
            sq_depth: c.sq_depth,
            rq_depth: 0,
        });
        self.qps.len() - 1
    }

    /// Writes `raw` as the WQE at SRQ `si`'s producer index and advances
    /// the index, without publishing it in the record.
    pub fn write_srq_wqe(&mut self, si: usize, raw: &[u8]) {
        let s = self.srqs[si];
        let slot = u64::from(u32::from(s.pi) & (s.depth - 1));
        let at = s.ring + (slot << SRQ_WQE_SHIFT);
        self.h.mem.write(at, raw).unwrap();
        self.srqs[si].pi = s.pi.wrapping_add(1);
    }

    /// Writes `pi` to SRQ `si`'s record (software's half).
    pub fn set_srq_pi(&mut self, si: usize, pi: u16) {
        self.h.mem.write_u32(self.srqs[si].dbrec, u32::from(pi));
    }

    /// Posts a receive WQE with `sges` (addr, len, lkey) to SRQ `si`: the
    /// WQE, then the new `pi` in the record (an SRQ has no doorbell).
    pub fn post_srq_recv(&mut self, si: usize, wr_id: u64, sges: &[(u64, u32, u32)]) {
        self.write_srq_wqe(si, &rq_wqe(wr_id, sges));
        let pi = self.srqs[si].pi;
        self.set_srq_pi(si, pi);
    }

    /// The consumer index the device wrote to SRQ `si`'s record.
    pub fn srq_ci(&self, si: usize) -> u32 {
        self.h.mem.read_u32(self.srqs[si].dbrec + 4)
    }

    pub fn reg_mr(&mut self, len: u64, access: u32) -> MrInfo {
        let pages = len.div_ceil(4096) as u32;
        let gpa = self.h.alloc(u64::from(pages) * 4096, 4096);
        let mut c = CmdRegMr::zeroed();
        c.hdr.opcode = CMD_REG_MR;
        c.pbl = self.h.pbl_contig(gpa, pages, 12);
        let iova = 0x7f00_0000_0000 + gpa;
        c.iova = iova;
        c.length = len;
        c.pdn = self.pdn;
        c.access = access;
        c.key_variant = 0x11;
        let key = self.h.ok(&c);
        MrInfo {
            key,
            iova,
            gpa,
            len,
        }
    }

    /// Walks an RC QP to RTS towards `peer` (qpn, mac, gid) via `sgid_index`.
    #[allow(clippy::too_many_arguments)]
    pub fn connect(
        &mut self,
        qi: usize,
        peer_qpn: u32,
        peer_mac: [u8; 6],
        dgid: [u8; 16],
        sgid_index: u8,
        net: u8,
        tweak: impl Fn(&mut QpAttr),
    ) {
        let qpn = self.qps[qi].qpn;
        let mut a = full_attr(qpn);
        a.av.dgid = dgid;
        a.av.dmac = peer_mac;
        a.av.sgid_index = sgid_index;
        a.av.network_type = net;
        a.dest_qp_num = peer_qpn;
        a.rq_psn = 0xff_fff0; // wraps early
        a.sq_psn = 0xff_fff0;
        a.timeout = 10;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.min_rnr_timer = 1;
        a.max_rd_atomic = 4;
        a.max_dest_rd_atomic = 4;
        a.path_mtu = MTU_1024;
        tweak(&mut a);
        let mut m = a;
        m.qp_state = QPS_INIT;
        m.attr_mask = QP_ATTR_STATE | QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_ACCESS_FLAGS;
        assert_eq!(self.h.modify(m), STATUS_SUCCESS);
        m.qp_state = QPS_RTR;
        m.attr_mask = QP_ATTR_STATE
            | QP_ATTR_AV
            | QP_ATTR_PATH_MTU
            | QP_ATTR_DEST_QPN
            | QP_ATTR_RQ_PSN
            | QP_ATTR_MAX_DEST_RD_ATOMIC
            | QP_ATTR_MIN_RNR_TIMER;
        assert_eq!(self.h.modify(m), STATUS_SUCCESS);
        m.qp_state = QPS_RTS;
        m.attr_mask = QP_ATTR_STATE
            | QP_ATTR_TIMEOUT
            | QP_ATTR_RETRY_CNT
            | QP_ATTR_RNR_RETRY
            | QP_ATTR_SQ_PSN
            | QP_ATTR_MAX_QP_RD_ATOMIC;
        assert_eq!(self.h.modify(m), STATUS_SUCCESS);
    }

    /// Walks a UC QP to RTS towards `peer` over RoCE v2 IPv4 (sgid index
    /// 3), with the attributes ib_core's table has for UC: no timeout,
    /// retries, RNR timer or READ/atomic resources.
    pub fn connect_uc(&mut self, qi: usize, peer_qpn: u32, peer_mac: [u8; 6], dgid: [u8; 16]) {
        let qpn = self.qps[qi].qpn;
        let mut m = full_attr(qpn);
        m.av.dgid = dgid;
        m.av.dmac = peer_mac;
        m.av.sgid_index = 3;
        m.av.network_type = NET_IPV4;
        m.dest_qp_num = peer_qpn;
        m.rq_psn = 0xff_fffd; // wraps early
        m.sq_psn = 0xff_fffd;
        m.path_mtu = MTU_1024;
        m.qp_access_flags = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE;
        m.qp_state = QPS_INIT;
        m.attr_mask = QP_ATTR_STATE | QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_ACCESS_FLAGS;
        assert_eq!(self.h.modify(m), STATUS_SUCCESS);
        m.qp_state = QPS_RTR;
        m.attr_mask =
            QP_ATTR_STATE | QP_ATTR_AV | QP_ATTR_PATH_MTU | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN;
        assert_eq!(self.h.modify(m), STATUS_SUCCESS);
        m.qp_state = QPS_RTS;
        m.attr_mask = QP_ATTR_STATE | QP_ATTR_SQ_PSN;
        assert_eq!(self.h.modify(m), STATUS_SUCCESS);
    }

    /// Walks a UD/GSI QP to RTS.
    pub fn activate_ud(&mut self, qi: usize, qkey: u32) {
        let qpn = self.qps[qi].qpn;
        let gsi = qpn == GSI_QPN;
        let mut m = full_attr(qpn);
        m.qkey = qkey;
        m.sq_psn = 0;
        m.qp_state = QPS_INIT;
        m.attr_mask =
            QP_ATTR_STATE | QP_ATTR_PKEY_INDEX | QP_ATTR_QKEY | if gsi { 0 } else { QP_ATTR_PORT };
        assert_eq!(self.h.modify(m), STATUS_SUCCESS);
        m.qp_state = QPS_RTR;
        m.attr_mask = QP_ATTR_STATE;
        assert_eq!(self.h.modify(m), STATUS_SUCCESS);
        m.qp_state = QPS_RTS;
        m.attr_mask = QP_ATTR_STATE | QP_ATTR_SQ_PSN;
        assert_eq!(self.h.modify(m), STATUS_SUCCESS);
    }

    pub fn create_ah(&mut self, av: Av) -> u32 {
        let mut c = CmdCreateAh::zeroed();
        c.hdr.opcode = CMD_CREATE_AH;
        c.pdn = self.pdn;
        c.av = av;
        self.h.ok(&c)
    }

    /// Writes the WQE, the SQ doorbell record and rings the SQ doorbell.
    pub fn post_send(&mut self, qi: usize, wr: &SendWr) {
        self.write_send_wqe(qi, wr);
        self.ring_sq(qi);
    }

    /// Writes the WQE and the doorbell record only.
    pub fn write_send_wqe(&mut self, qi: usize, wr: &SendWr) {
        let q = self.qps[qi];
        let mut raw = vec![0u8; 256];
        raw[0..8].copy_from_slice(&wr.wr_id.to_le_bytes());
        raw[8] = wr.opcode;
        raw[9] = wr.flags;
        raw[12..16].copy_from_slice(&wr.imm);
        if let Some((ahn, rqpn, qkey)) = wr.ud {
            raw[32..36].copy_from_slice(&ahn.to_le_bytes());
            raw[36..40].copy_from_slice(&rqpn.to_le_bytes());
            raw[40..44].copy_from_slice(&qkey.to_le_bytes());
        } else {
            raw[32..40].copy_from_slice(&wr.remote_addr.to_le_bytes());
            raw[40..44].copy_from_slice(&wr.rkey.to_le_bytes());
            raw[48..56].copy_from_slice(&wr.compare_add.to_le_bytes());
            raw[56..64].copy_from_slice(&wr.swap.to_le_bytes());
        }
        if let Some(data) = &wr.inline {
            raw[9] |= WQE_INLINE;
            raw[16..20].copy_from_slice(&(data.len() as u32).to_le_bytes());
            raw[64..64 + data.len()].copy_from_slice(data);
        } else {
            raw[10] = wr.sges.len() as u8;
            for (i, (addr, len, lkey)) in wr.sges.iter().enumerate() {
                let o = 64 + i * 16;
                raw[o..o + 8].copy_from_slice(&addr.to_le_bytes());
                raw[o + 8..o + 12].copy_from_slice(&len.to_le_bytes());
                raw[o + 12..o + 16].copy_from_slice(&lkey.to_le_bytes());
            }
        }
        let slot = u64::from(u32::from(q.sq_pi) & (q.sq_depth - 1));
        self.h.mem.write(q.sq_base + (slot << 8), &raw).unwrap();
        let pi = q.sq_pi.wrapping_add(1);
        self.qps[qi].sq_pi = pi;
        self.h.mem.write_u32(q.sq_dbrec, u32::from(pi));
    }

    /// Writes a raw send WQE (the 256-byte stride), the doorbell record,
    /// and rings the SQ doorbell.
    pub fn post_send_raw(&mut self, qi: usize, raw: &[u8]) {
        let q = self.qps[qi];
        let slot = u64::from(u32::from(q.sq_pi) & (q.sq_depth - 1));
        self.h.mem.write(q.sq_base + (slot << 8), raw).unwrap();
        let pi = q.sq_pi.wrapping_add(1);
        self.qps[qi].sq_pi = pi;
        self.h.mem.write_u32(q.sq_dbrec, u32::from(pi));
        self.ring_sq(qi);
    }

    /// Allocates a memory window (1.7) of type `mr_type` (`MR_TYPE_MW1` or
    /// `MR_TYPE_MW2`) in the node's PD; returns its key (variant 0x40).
    pub fn alloc_mw(&mut self, mr_type: u8) -> u32 {
        let mut c = CmdRegMr::zeroed();
        c.hdr.opcode = CMD_REG_MR;
        c.pdn = self.pdn;
        c.mr_type = mr_type;
        c.key_variant = 0x40;
        self.h.ok(&c)
    }

    /// Posts a signaled BIND_MW WQE (1.7) on QP `qi`.
    pub fn post_bind_mw(&mut self, qi: usize, wr_id: u64, seg: &SqWqeBindMw) {
        self.post_send_raw(qi, &bind_mw_wqe(wr_id, WQE_SIGNALED, seg));
    }

    pub fn ring_sq(&mut self, qi: usize) {
        let q = self.qps[qi];
        self.h.db(0, DB_SQ, qp_db(q.qpn, u32::from(q.sq_pi)));
    }

    /// Posts a receive WQE with `sges` (addr, len, lkey) and rings the RQ
    /// doorbell.
    pub fn post_recv(&mut self, qi: usize, wr_id: u64, sges: &[(u64, u32, u32)]) {
        self.write_recv(qi, wr_id, sges);
        self.ring_rq(qi);
    }

    /// Writes a receive WQE with `sges` and the RQ's doorbell record, but
    /// rings no doorbell: the device reads the record when a message needs
    /// a WQE (device.rst "Posting rules").
    pub fn write_recv(&mut self, qi: usize, wr_id: u64, sges: &[(u64, u32, u32)]) {
        let q = self.qps[qi];
        let raw = rq_wqe(wr_id, sges);
        let slot = u64::from(u32::from(q.rq_pi) & (q.rq_depth - 1));
        self.h.mem.write(q.rq_base + (slot << 6), &raw).unwrap();
        let pi = q.rq_pi.wrapping_add(1);
        self.qps[qi].rq_pi = pi;
        self.h.mem.write_u32(q.rq_dbrec, u32::from(pi));
    }

    pub fn ring_rq(&mut self, qi: usize) {
        let q = self.qps[qi];
        self.h.db(0, DB_RQ, qp_db(q.qpn, u32::from(q.rq_pi)));
    }

    /// Polls every new CQE (updates the CQ doorbell record).
    pub fn poll(&mut self) -> Vec<Cqe> {
        let mut out = Vec::new();
        loop {
            let slot = u64::from(u32::from(self.cq_ci) & (CQ_DEPTH - 1));
            let c: Cqe = self.h.read(self.cq_ring + slot * CQE_SIZE as u64);
            let phase = ((u32::from(self.cq_ci) >> CQ_DEPTH.trailing_zeros()) & 1) as u8 ^ 1;
            if c.owner & CQE_OWNER != phase {
                break;
            }
            out.push(c);
            self.cq_ci = self.cq_ci.wrapping_add(1);
        }
        self.h.mem.write_u32(self.cq_dbrec, u32::from(self.cq_ci));
        out
    }

    /// The counters through QUERY_COUNTERS, as a driver reads them: the
    /// whole `struct ferroce_counters`.
    pub fn query_counters(&mut self) -> Counters {
        let size = core::mem::size_of::<Counters>() as u32;
        let resp = self.h.alloc(u64::from(size), 8);
        let mut c = CmdQueryCounters::zeroed();
        c.hdr.opcode = CMD_QUERY_COUNTERS;
        c.resp_addr = resp;
        c.resp_len = size;
        self.h.ok(&c);
        self.h.read(resp)
    }

    /// Arms the CQ for the next completion.
    pub fn arm_cq(&mut self, cmd: u32) {
        self.h
            .db(0, DB_CQ, cq_db(self.cqn, u32::from(self.cq_ci), cmd, 0));
    }

    pub fn fill(&self, gpa: u64, data: &[u8]) {
        self.h.mem.write(gpa, data).unwrap();
    }

    pub fn bytes(&self, gpa: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        self.h.mem.read(gpa, &mut b).unwrap();
        b
    }
}

/// An address vector to node `b` over `net` (its GID entry 3, 1 or 0).
pub fn av_to(b: &Node, net: u8) -> Av {
    let mut av = Av::zeroed();
    av.dmac = b.mac;
    av.hop_limit = 64;
    av.network_type = net;
    match net {
        NET_IPV4 => {
            av.dgid = ipv4_gid(b.ip);
            av.sgid_index = 3;
        }
        NET_IPV6 => {
            av.dgid = v6_gid(b.ip[3]);
            av.sgid_index = 1;
        }
        _ => {
            av.dgid = v6_gid(b.ip[3]);
            av.sgid_index = 0;
        }
    }
    av
}

/// Connects QP `qa` of `a` and QP `qb` of `b` over RoCE v2 IPv4.
pub fn connect_pair(
    a: &mut Node,
    qa: usize,
    b: &mut Node,
    qb: usize,
    tweak: impl Fn(&mut QpAttr) + Copy,
) {
    let (aq, bq) = (a.qps[qa].qpn, b.qps[qb].qpn);
    let (am, bm) = (a.mac, b.mac);
    let (ag, bg) = (ipv4_gid(a.ip), ipv4_gid(b.ip));
    a.connect(qa, bq, bm, bg, 3, NET_IPV4, tweak);
    b.connect(qb, aq, am, ag, 3, NET_IPV4, tweak);
}

/// Two nodes (36 requester side, 37) with one RC QP each, connected over
/// RoCE v2 IPv4 with `tweak` applied to both QPs' attributes.
pub fn rc_pair(tweak: impl Fn(&mut QpAttr) + Copy) -> (Node, Node) {
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    a.create_qp(QPT_RC);
    b.create_qp(QPT_RC);
    connect_pair(&mut a, 0, &mut b, 0, tweak);
    (a, b)
}

/// Node 36 with `n` RC QPs, node 37 with one SRQ (`depth`, `limit`) and
/// `n` RC QPs on it; QP i of one connected to QP i of the other.
pub fn rc_srq_pair(n: usize, depth: u32, limit: u32) -> (Node, Node) {
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    let si = b.create_srq(depth, limit);
    for i in 0..n {
        a.create_qp(QPT_RC);
        b.create_srq_qp(QPT_RC, si);
        connect_pair(&mut a, i, &mut b, i, |_| {});
    }
    (a, b)
}

/// `rounds` round trips from `a` to `b` and back, each followed by `a`'s
/// next timer (an RNR wait, when `b` has no receive posted).
pub fn rnr_rounds(a: &Node, b: &Node, rounds: usize) {
    for _ in 0..rounds {
        let f = a.h.dev.take_tx();
        b.h.dev.receive_batch(f.iter().map(|f| f.as_slice()));
        let f = b.h.dev.take_tx();
        a.h.dev.receive_batch(f.iter().map(|f| f.as_slice()));
        let t = a.h.dev.next_timer().unwrap();
        a.h.dev.tick(t);
    }
}

/// Two nodes (36 requester side, 37) with one UC QP each, connected over
/// RoCE v2 IPv4.
pub fn uc_pair() -> (Node, Node) {
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    a.create_qp(QPT_UC);
    b.create_qp(QPT_UC);
    let (aq, bq) = (a.qps[0].qpn, b.qps[0].qpn);
    let (am, bm) = (a.mac, b.mac);
    a.connect_uc(0, bq, bm, ipv4_gid(b.ip));
    b.connect_uc(0, aq, am, ipv4_gid(a.ip));
    (a, b)
}

/// Impairments of a [`Wire`], in percent per frame.
#[derive(Clone, Copy, Debug, Default)]
pub struct Impair {
    pub drop: u64,
    pub dup: u64,
    pub corrupt: u64,
    pub reorder: u64,
}

/// A full-duplex link between two nodes that drops, duplicates, corrupts
/// and reorders frames deterministically.
pub struct Wire {
    pub rng: Rng,
    pub imp: Impair,
    pub delivered: u64,
    pub dropped: u64,
    pub corrupted: u64,
    pub duplicated: u64,
    pub reordered: u64,
    /// `FERROCE_WIRE_PCAP`, read once: the file every frame is appended to.
    pcap: Option<std::ffi::OsString>,
}

impl Wire {
    pub fn new(seed: u64, imp: Impair) -> Self {
        Self {
            rng: Rng(seed | 1),
            imp,
            delivered: 0,
            dropped: 0,
            corrupted: 0,
            duplicated: 0,
            reordered: 0,
            pcap: std::env::var_os("FERROCE_WIRE_PCAP"),
        }
    }

    fn impair(&mut self, frames: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let i = self.imp;
        if i.drop == 0 && i.dup == 0 && i.corrupt == 0 && i.reorder == 0 {
            // A lossless wire hands the frames over as they are.
            return frames;
        }
        let mut out = Vec::new();
        for f in frames {
            if self.rng.pct(self.imp.drop) {
                self.dropped += 1;
                continue;
            }
            let mut f = f;
            if self.rng.pct(self.imp.corrupt) {
                let i = 14 + self.rng.below(f.len() as u64 - 14) as usize;
                f[i] ^= 1 << self.rng.below(8);
                self.corrupted += 1;
            }
            if self.rng.pct(self.imp.dup) {
                out.push(f.clone());
                self.duplicated += 1;
            }
            out.push(f);
        }
        let n = out.len();
        for i in 0..n {
            if self.rng.pct(self.imp.reorder) {
                let j = self.rng.below(n as u64) as usize;
                out.swap(i, j);
                self.reordered += 1;
            }
        }
        out
    }

    /// Moves frames both ways until both sides are quiet and no timer is
    /// pending; advances the clock to the next timer when nothing is in
    /// flight. Stops after `max_rounds` rounds; returns the rounds used.
    pub fn run(&mut self, a: &Node, b: &Node, max_rounds: usize) -> usize {
        // Each round gives the frames delivered in the last one back to
        // their sender, as a port does after writing them.
        let (mut fa, mut fb) = (Vec::new(), Vec::new());
        for round in 0..max_rounds {
            a.h.dev.swap_tx(&mut fa);
            b.h.dev.swap_tx(&mut fb);
            if fa.is_empty() && fb.is_empty() {
                let next = [a.h.dev.next_timer(), b.h.dev.next_timer()]
                    .into_iter()
                    .flatten()
                    .min();
                let Some(t) = next else {
                    return round;
                };
                a.h.dev.tick(t);
                b.h.dev.tick(t);
                continue;
            }
            fa = self.impair(std::mem::take(&mut fa));
            fb = self.impair(std::mem::take(&mut fb));
            if let Some(p) = &self.pcap {
                use std::io::Write;
                let new = !std::path::Path::new(p).exists();
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .unwrap();
                if new {
                    let mut h = Vec::new();
                    ferroce_dev::wire::pcap::PcapWriter::new(&mut h).unwrap();
                    f.write_all(&h).unwrap();
                }
                let mut w = Vec::new();
                for fr in fa.iter().chain(&fb) {
                    w.extend_from_slice(&0u64.to_le_bytes());
                    w.extend_from_slice(&(fr.len() as u32).to_le_bytes());
                    w.extend_from_slice(&(fr.len() as u32).to_le_bytes());
                    w.extend_from_slice(fr);
                }
                f.write_all(&w).unwrap();
            }
            self.delivered += (fa.len() + fb.len()) as u64;
            b.h.dev.receive_batch(fa.iter().map(|f| f.as_slice()));
            a.h.dev.receive_batch(fb.iter().map(|f| f.as_slice()));
        }
        max_rounds
    }
}

/// Runs a loss-free wire between `a` and `b` until both are idle.
pub fn run(a: &Node, b: &Node) {
    let rounds = Wire::new(1, Impair::default()).run(a, b, 10_000);
    assert!(rounds < 10_000, "did not converge");
}

/// `(wr_id, opcode, status)` of each CQE.
pub fn statuses(c: &[Cqe]) -> Vec<(u64, u8, u8)> {
    c.iter().map(|c| (c.wr_id, c.opcode, c.status)).collect()
}

/// A signaled send WR of `opcode`, everything else default.
pub fn wr(wr_id: u64, opcode: u8) -> SendWr {
    SendWr {
        wr_id,
        opcode,
        flags: WQE_SIGNALED,
        ..SendWr::default()
    }
}

/// A signaled RDMA WRITE of `len` bytes from the start of `src`.
pub fn write_wr(wr_id: u64, src: &MrInfo, len: u32, remote_addr: u64, rkey: u32) -> SendWr {
    SendWr {
        remote_addr,
        rkey,
        sges: vec![(src.va(0), len, src.key)],
        ..wr(wr_id, WR_RDMA_WRITE)
    }
}

/// `key` with its variant (bits 7:0) replaced.
pub fn with_variant(key: u32, variant: u8) -> u32 {
    (key & !KEY_VARIANT_MASK) | u32::from(variant)
}

/// The BTH opcodes of `frames`.
pub fn opcodes(frames: &[Vec<u8>]) -> Vec<u8> {
    frames
        .iter()
        .map(|f| ferroce_dev::wire::decode(f).unwrap().bth.opcode)
        .collect()
}

/// `frame` decoded, edited by `edit` and encoded again (with a new ICRC).
pub fn forged(frame: &[u8], edit: impl FnOnce(&mut ferroce_dev::wire::Packet<'_>)) -> Vec<u8> {
    let mut p = ferroce_dev::wire::decode(frame).unwrap();
    edit(&mut p);
    let mut out = Vec::new();
    assert!(ferroce_dev::wire::encode(&p, &mut out));
    out
}
