// SPDX-License-Identifier: GPL-2.0
//! BAR0 register file: reads and writes, DEV_CTRL (reset and the enable
//! handshake with its configuration check), FATAL and the capabilities
//! QUERY_CAPS reports.

use super::{is_pow2_in, AdminQ, State};
use crate::hw::{self, *};
use crate::objects::Eq;

impl State {
    /// DEV_CAPS: every capability of device 1.8 (`0xffffff`, device.rst
    /// "DEV_CAPS").
    fn device_caps() -> u32 {
        CAP_RC
            | CAP_UD
            | CAP_RDMA_READ
            | CAP_ATOMIC
            | CAP_INLINE
            | CAP_SEND_IMM
            | CAP_WRITE_IMM
            | CAP_MR_2LEVEL
            | CAP_ZERO_BASED_MR
            | CAP_ROCE_V1
            | CAP_ROCE_V2
            | CAP_GSI
            | CAP_PHYS_MR
            | CAP_MEM_MGT_EXT
            | CAP_PORT_MAC
            | CAP_VLAN
            | CAP_UC
            | CAP_SRQ
            | CAP_MODIFY_MR
            | CAP_RESIZE_CQ
            | CAP_MCAST
            | CAP_MW
            | CAP_ATOMIC_WRITE
            | CAP_FLUSH
    }

    pub(crate) fn caps(&self) -> hw::Caps {
        let limits = &self.cfg.limits;
        hw::Caps {
            device_caps: Self::device_caps(),
            max_qp: limits.max_qp,
            max_qp_wr: limits.max_qp_wr,
            max_sge: limits.max_sge,
            max_inline: limits.max_inline,
            max_cq: limits.max_cq,
            max_cqe: limits.max_cqe,
            max_mr: limits.max_mr,
            max_pd: limits.max_pd,
            max_ah: limits.max_ah,
            max_eq: u32::from(self.cfg.num_vectors),
            max_eqe: EQ_DEPTH_MAX,
            max_qp_rd_atom: u32::from(MAX_RD_ATOMIC),
            max_qp_init_rd_atom: u32::from(MAX_RD_ATOMIC),
            gid_table_len: GID_TABLE_LEN as u32,
            pkey_table_len: PKEY_TABLE_LEN,
            num_ports: NUM_PORTS,
            max_msg_size: crate::transport::MAX_MSG_ADVERTISED,
            max_pbl_pages: PBL_MAX_PAGES,
            db_pages: DB_PAGES,
            local_ca_ack_delay: 15,
            max_path_mtu: u32::from(MTU_4096),
            max_mr_size: limits.max_mr_size,
            page_size_cap: PAGE_SIZE_CAP,
            fw_version: u64::from(VERSION_MAJOR) << 32 | u64::from(VERSION_MINOR) << 16,
        }
    }

    fn mac_lo(&self) -> u32 {
        let mac = self.cfg.mac;
        u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]])
    }

    fn mac_hi(&self) -> u32 {
        let mac = self.cfg.mac;
        u32::from(u16::from_be_bytes([mac[0], mac[1]]))
    }

    pub(super) fn reg_read(&mut self, off: u64) -> u32 {
        let Ok(off32) = u32::try_from(off) else {
            return 0;
        };
        match off32 {
            REG_VERSION => VERSION_MAJOR << VERSION_MAJOR_SHIFT | VERSION_MINOR,
            REG_DEV_CAPS => Self::device_caps(),
            REG_MAGIC => MAGIC_VALUE,
            REG_DEV_CTRL if self.enabled => CTRL_ENABLE,
            REG_DEV_CTRL => 0,
            REG_DEV_STATUS => self.status,
            REG_FATAL_CODE => self.fatal_code,
            REG_RESET_TIMEOUT_MS => RESET_TIMEOUT_MS,
            REG_CMD_TIMEOUT_MS => CMD_TIMEOUT_MS,
            REG_SCRATCH => self.scratch,
            REG_ADMINQ_BASE_LO => self.adminq_base as u32,
            REG_ADMINQ_BASE_HI => (self.adminq_base >> 32) as u32,
            REG_ADMINCQ_BASE_LO => self.admincq_base as u32,
            REG_ADMINCQ_BASE_HI => (self.admincq_base >> 32) as u32,
            REG_ADMINQ_DEPTH => self.adminq_depth,
            REG_ADMINQ_CI => self
                .adminq
                .as_ref()
                .map_or(0, |adminq| u32::from(adminq.ci)),
            REG_AEQ_BASE_LO => self.aeq_base as u32,
            REG_AEQ_BASE_HI => (self.aeq_base >> 32) as u32,
            REG_AEQ_DEPTH => self.aeq_depth,
            REG_NUM_VECTORS => u32::from(self.cfg.num_vectors),
            REG_DB_PAGES => DB_PAGES,
            REG_DB_KERNEL_PAGES => DB_KERNEL_PAGES,
            REG_PORT_MAC_LO => self.mac_lo(),
            REG_PORT_MAC_HI => self.mac_hi(),
            REG_PORT_MTU => self.mtu,
            REG_PORT_STATE if self.link_up => PORT_STATE_LINK_UP,
            REG_PORT_STATE => 0,
            // write-only, reserved, MSI-X table and PBA (QEMU owns those)
            _ => 0,
        }
    }

    pub(super) fn reg_write(&mut self, off: u64, value: u32) {
        let Ok(off32) = u32::try_from(off) else {
            return;
        };
        let config_reg = matches!(
            off32,
            REG_ADMINQ_BASE_LO
                | REG_ADMINQ_BASE_HI
                | REG_ADMINCQ_BASE_LO
                | REG_ADMINCQ_BASE_HI
                | REG_ADMINQ_DEPTH
                | REG_AEQ_BASE_LO
                | REG_AEQ_BASE_HI
                | REG_AEQ_DEPTH
        );
        if config_reg && self.enabled {
            self.counters.hw.bad_reg_access += 1;
            self.note(format!("write {value:#x} to {off32:#x} while enabled"));
            return;
        }
        let set_lo = |r: &mut u64, value: u32| *r = (*r & !0xffff_ffff) | u64::from(value);
        let set_hi = |r: &mut u64, value: u32| *r = (*r & 0xffff_ffff) | u64::from(value) << 32;
        match off32 {
            REG_DEV_CTRL => self.write_ctrl(value),
            REG_SCRATCH => self.scratch = value,
            REG_ADMINQ_BASE_LO => set_lo(&mut self.adminq_base, value),
            REG_ADMINQ_BASE_HI => set_hi(&mut self.adminq_base, value),
            REG_ADMINCQ_BASE_LO => set_lo(&mut self.admincq_base, value),
            REG_ADMINCQ_BASE_HI => set_hi(&mut self.admincq_base, value),
            REG_ADMINQ_DEPTH => self.adminq_depth = value,
            REG_AEQ_BASE_LO => set_lo(&mut self.aeq_base, value),
            REG_AEQ_BASE_HI => set_hi(&mut self.aeq_base, value),
            REG_AEQ_DEPTH => self.aeq_depth = value,
            REG_ADMINQ_DB => self.adminq_doorbell(value),
            REG_EQ_DB => self.eq_doorbell(value),
            REG_PORT_MTU => {
                if (PORT_MTU_MIN..=PORT_MTU_MAX).contains(&value) {
                    self.mtu = value;
                } else {
                    self.counters.hw.bad_reg_access += 1;
                    self.note(format!("PORT_MTU {value} out of range"));
                }
            }
            _ => {
                // read-only or reserved
                self.counters.hw.bad_reg_access += 1;
                self.note(format!("write {value:#x} to RO/reserved {off32:#x}"));
            }
        }
    }

    fn write_ctrl(&mut self, value: u32) {
        if value & !CTRL_VALID_MASK != 0 {
            self.counters.hw.bad_reg_access += 1;
            self.note(format!("DEV_CTRL reserved bits {value:#x}"));
            return;
        }
        if value & CTRL_RESET != 0 {
            self.reset();
            return;
        }
        let enable = value & CTRL_ENABLE != 0;
        if enable == self.enabled {
            return;
        }
        if !enable {
            self.reset();
            return;
        }
        self.enabled = true;
        match self.check_config() {
            Ok(()) => {
                self.adminq = Some(AdminQ {
                    sq_base: self.adminq_base,
                    cq_base: self.admincq_base,
                    depth: self.adminq_depth,
                    ci: 0,
                });
                if let Some(slot) = self.eqs.get_mut(0) {
                    *slot = Some(Eq {
                        vector: 0,
                        base: self.aeq_base,
                        depth: self.aeq_depth,
                        pi: 0,
                        ci: 0,
                        armed: true,
                        posted: 0,
                        overflows: 0,
                    });
                }
                self.status = DEV_STATUS_READY;
            }
            Err(code) => self.fatal(code),
        }
    }

    fn check_config(&mut self) -> Result<(), u32> {
        let adminq_depth = self.adminq_depth;
        let aeq_depth = self.aeq_depth;
        let aligned = |x: u64| x != 0 && x % u64::from(RING_ALIGN) == 0;
        if !is_pow2_in(adminq_depth, ADMINQ_DEPTH_MIN, ADMINQ_DEPTH_MAX)
            || !is_pow2_in(aeq_depth, EQ_DEPTH_MIN, EQ_DEPTH_MAX)
            || !aligned(self.adminq_base)
            || !aligned(self.admincq_base)
            || !aligned(self.aeq_base)
        {
            self.note("ENABLE with bad admin queue/AEQ configuration".into());
            return Err(FATAL_BAD_CONFIG);
        }
        let sq = self
            .mem
            .check_range(self.adminq_base, u64::from(adminq_depth) * CMD_SIZE as u64);
        let cq = self.mem.check_range(
            self.admincq_base,
            u64::from(adminq_depth) * CMD_COMP_SIZE as u64,
        );
        if sq.is_err() || cq.is_err() {
            self.counters.hw.bad_dma += 1;
            self.note("admin queue not DMA-able".into());
            return Err(FATAL_ADMINQ_DMA);
        }
        if self
            .mem
            .check_range(self.aeq_base, u64::from(aeq_depth) * EQE_SIZE as u64)
            .is_err()
        {
            self.counters.hw.bad_dma += 1;
            self.note("AEQ not DMA-able".into());
            return Err(FATAL_AEQ_DMA);
        }
        Ok(())
    }

    pub(crate) fn fatal(&mut self, code: u32) {
        self.status = (self.status & !DEV_STATUS_READY) | DEV_STATUS_FATAL;
        self.fatal_code = code;
        self.note(format!("device fatal, code {code}"));
        // Best effort: tell the driver through the AEQ if it still works.
        if code != FATAL_AEQ_DMA {
            self.post_eqe_raw(0, EQE_DEVICE_FATAL, 0, code, 0);
        }
    }

    pub(crate) fn reset(&mut self) {
        self.enabled = false;
        self.status = 0;
        self.fatal_code = FATAL_NONE;
        self.scratch = 0;
        self.adminq_base = 0;
        self.admincq_base = 0;
        self.adminq_depth = 0;
        self.aeq_base = 0;
        self.aeq_depth = 0;
        self.adminq = None;
        self.eqs.iter_mut().for_each(|e| *e = None);
        self.pds.clear();
        self.mrs.clear();
        self.cqs.clear();
        self.qps.clear();
        self.srqs.clear();
        self.ahs.clear();
        self.mcast.clear();
        self.gids.iter_mut().for_each(|g| *g = None);
        self.sync_gid_macs();
        self.tx.clear();
        self.loopback.clear();
        self.ack_list.clear();
        self.deferred = Default::default();
        self.set_mac(self.cfg.mac);
        self.counters.hw.resets += 1;
    }

    /// Sets the port's current MAC (device.rst "Port MAC").
    pub(crate) fn set_mac(&mut self, mac: [u8; 6]) {
        self.mac = mac;
        self.mac_shared.set(mac);
        self.sync_gid_macs();
    }

    /// Publishes the source MACs of VLAN GID entries that differ from the
    /// current MAC to receive steering (device.rst "Port MAC"). Untagged
    /// entries belong to the paired netdev, whose address is the current
    /// MAC; theirs may lag behind a MAC change and is not answered to.
    pub(crate) fn sync_gid_macs(&mut self) {
        let mut others: Vec<[u8; 6]> = Vec::new();
        for g in self.gids.iter().flatten().filter(|g| g.vlan.is_some()) {
            if g.smac != self.mac && !others.contains(&g.smac) {
                others.push(g.smac);
            }
        }
        self.mac_shared.set_others(others.clone());
        self.gid_macs = others;
    }

    /// Whether the port answers to `mac`: its current MAC or a VLAN GID
    /// entry's source MAC. Called for every frame sent and received: the
    /// list is the one [`State::sync_gid_macs`] keeps, not a table scan.
    pub(crate) fn answers_mac(&self, mac: &[u8; 6]) -> bool {
        *mac == self.mac || self.gid_macs.contains(mac)
    }
}
