// SPDX-License-Identifier: GPL-2.0
//! PCI Bus Master Enable: while the guest keeps COMMAND.BME clear the
//! device issues no DMA (no command or WQE fetch, no completion, CQE or
//! EQE write, no RX scatter) and no MSI-X message; everything it was asked
//! to do in the meantime happens when BME is set again
//! (`Documentation/ferroce/device.rst`, "Bus mastering").

mod common;
#[path = "common/recording.rs"]
mod recording;

use std::sync::Arc;

use common::rdma::*;
use common::*;
use ferroce_dev::doorbell::cq_db;
use ferroce_dev::hw::*;
use ferroce_dev::{FakeMemory, GuestMemory, Limits};
use recording::RecordingMemory;
use zerocopy::IntoBytes;

const ALL_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;

/// An enabled device whose every DMA is logged.
fn recorded_harness() -> (Harness, Arc<RecordingMemory>) {
    let fake = Arc::new(FakeMemory::new());
    fake.add_region(RAM, RAM_SIZE);
    let recording = Arc::new(RecordingMemory::new(fake.clone()));
    let h = Harness::enabled_over(fake, recording.clone(), Limits::default(), 16, 64);
    (h, recording)
}

#[test]
fn admin_commands_and_events_wait_for_bus_master_enable() {
    let (mut h, recording) = recorded_harness();
    h.drain_aeq();
    h.irq.take();
    recording.take();

    h.dev.set_bus_master(false);
    assert!(!h.dev.bus_master());
    // ALLOC_PD in slot 0, ADMINQ_DB, and a link change (PORT_DOWN event).
    let mut raw = [0u8; CMD_SIZE];
    let cmd = alloc_pd();
    raw[..cmd.as_bytes().len()].copy_from_slice(cmd.as_bytes());
    raw[2..4].copy_from_slice(&7u16.to_le_bytes());
    h.mem.write(ADMINQ, &raw).unwrap();
    h.reg_w(REG_ADMINQ_DB, 1);
    h.dev.set_link(false);
    // The EQ doorbell is not DMA: accepted, but the re-armed AEQ fires
    // nothing while BME is clear.
    h.reg_w(REG_EQ_DB, u32::from(h.aeq_ci) | EQ_DB_ARM);

    assert_eq!(recording.take(), vec![], "no DMA while BME is clear");
    assert_eq!(
        h.irq.take(),
        Vec::<u16>::new(),
        "no MSI-X while BME is clear"
    );
    assert_eq!(h.reg_r(REG_ADMINQ_CI), 0, "the command was not fetched");
    let comp: CmdComp = h.read(ADMINCQ);
    assert_eq!(comp.flags & COMP_PHASE, 0, "no completion written");
    assert_eq!(h.reg_r(REG_DEV_STATUS), DEV_STATUS_READY, "not fatal");

    h.dev.set_bus_master(true);
    let comp: CmdComp = h.read(ADMINCQ);
    assert_eq!(comp.flags & COMP_PHASE, 1, "completed once BME is set");
    assert_eq!((comp.cmd_id, comp.status), (7, STATUS_SUCCESS));
    assert_eq!(h.reg_r(REG_ADMINQ_CI), 1);
    assert_eq!(h.irq.take(), vec![0], "one AEQ interrupt");
    h.drain_aeq();
    let kinds: Vec<u8> = h.events.iter().map(|e| e.0).collect();
    assert_eq!(
        kinds,
        vec![EQE_PORT_DOWN, EQE_CMD_COMPLETION],
        "held events are posted in the order they happened"
    );
    let counters = h.dev.counters().bus_master;
    assert!(counters.enabled);
    assert_eq!(counters.disabled, 1);
    assert_eq!(counters.adminq_deferred, 1);
    assert_eq!(counters.events_deferred, 1);
    assert_eq!(counters.dma_refused, 0);
}

/// One device, two RC QPs connected to each other through the device's
/// own MAC.
fn loopback_node() -> Node {
    let mut node = Node::new(41);
    node.create_qp(QPT_RC);
    node.create_qp(QPT_RC);
    let (q0, q1) = (node.qps[0].qpn, node.qps[1].qpn);
    let (mac, gid) = (node.mac, ipv4_gid(node.ip));
    node.connect(0, q1, mac, gid, 3, NET_IPV4, |_| {});
    node.connect(1, q0, mac, gid, 3, NET_IPV4, |_| {});
    node
}

fn run_alone(node: &Node) {
    for _ in 0..100_000 {
        assert!(node.h.dev.take_tx().is_empty());
        match node.h.dev.next_timer() {
            Some(t) => node.h.dev.tick(t),
            None => return,
        }
    }
    panic!("loopback did not converge");
}

#[test]
fn the_data_path_does_no_dma_without_bus_master_and_loses_nothing() {
    let mut node = loopback_node();
    let mr = node.reg_mr(64 << 10, ALL_ACCESS);
    let data: Vec<u8> = (0..8000u32).map(|i| (i * 13 + 5) as u8).collect();
    node.fill(mr.gpa, &data);
    node.arm_cq(CQ_CMD_ARM_NEXT);
    node.h.irq.take();

    node.h.dev.set_bus_master(false);
    let snapshot = node.bytes(mr.gpa, 64 << 10);
    node.post_recv(1, 9, &[(mr.va(40_000), 4096, mr.key)]);
    node.post_send(
        0,
        &SendWr {
            wr_id: 1,
            opcode: WR_RDMA_WRITE,
            flags: WQE_SIGNALED,
            remote_addr: mr.va(20_000),
            rkey: mr.key,
            sges: vec![(mr.va(0), 8000, mr.key)],
            ..SendWr::default()
        },
    );
    node.post_send(
        0,
        &SendWr {
            wr_id: 2,
            opcode: WR_SEND,
            flags: WQE_SIGNALED,
            inline: Some(b"after BME".to_vec()),
            ..SendWr::default()
        },
    );
    // A frame from the wire is dropped (no receive DMA).
    node.h.dev.receive(&[0u8; 64]);
    // Time passes: no timer runs (nothing was sent, nothing times out).
    let later = node.h.dev.now_ns() + 60_000_000_000;
    node.h.dev.tick(later);
    node.h.db(0, DB_CQ, cq_db(node.cqn, 0, CQ_CMD_ARM_NEXT, 0));

    assert_eq!(node.bytes(mr.gpa, 64 << 10), snapshot, "no RX scatter");
    assert!(node.poll().is_empty(), "no CQE written");
    assert!(node.h.dev.take_tx().is_empty(), "no WQE fetched");
    assert_eq!(node.h.irq.take(), Vec::<u16>::new(), "no interrupt");
    assert_eq!(
        node.h.dev.next_timer(),
        None,
        "nothing runs until BME is set"
    );
    let counters = node.h.dev.counters();
    assert_eq!(counters.bus_master.rx_dropped, 1);
    assert_eq!(counters.bus_master.dma_refused, 0, "no DMA was even tried");
    assert_eq!(counters.data.tx_frames, 0);

    node.h.dev.set_bus_master(true);
    run_alone(&node);
    let mut got: Vec<(u64, u8, u8)> = node
        .poll()
        .iter()
        .map(|c| (c.wr_id, c.opcode, c.status))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            (1, WC_RDMA_WRITE, WC_SUCCESS),
            (2, WC_SEND, WC_SUCCESS),
            (9, WC_RECV, WC_SUCCESS)
        ]
    );
    assert_eq!(node.bytes(mr.gpa + 20_000, 8000), data);
    assert_eq!(node.bytes(mr.gpa + 40_000, 9), b"after BME");
    assert!(!node.h.irq.take().is_empty(), "the armed CQ's event fired");
    assert_eq!(node.h.dev.counters().bus_master.dma_refused, 0);
}

#[test]
fn reset_of_the_vfio_function_clears_bus_master() {
    use vfio_user::Device as _;
    let h = Harness::new();
    let vfio = ferroce_dev::vfio::VfioDevice::new(h.dev.clone());
    assert!(!h.dev.bus_master(), "a fresh config space has COMMAND 0");
    vfio.config_written(4, &[0x06, 0], 0x0006);
    assert!(h.dev.bus_master());
    vfio.config_written(4, &[0x02, 0], 0x0002);
    assert!(!h.dev.bus_master());
    vfio.config_written(4, &[0x06, 0], 0x0006);
    vfio.reset();
    assert!(!h.dev.bus_master(), "FLR restores COMMAND 0");
}

/// A stalled device fetches no admin command either: a command rung
/// during a stall completes only once the device is unstalled.
#[test]
fn admin_commands_wait_for_unstall() {
    let (mut h, recording) = recorded_harness();
    h.drain_aeq();
    h.irq.take();
    recording.take();

    h.dev.set_stall(true);
    let mut raw = [0u8; CMD_SIZE];
    let cmd = alloc_pd();
    raw[..cmd.as_bytes().len()].copy_from_slice(cmd.as_bytes());
    raw[2..4].copy_from_slice(&9u16.to_le_bytes());
    h.mem.write(ADMINQ, &raw).unwrap();
    h.reg_w(REG_ADMINQ_DB, 1);

    assert_eq!(recording.take(), vec![], "no DMA while stalled");
    assert_eq!(h.irq.take(), Vec::<u16>::new(), "no MSI-X while stalled");
    assert_eq!(h.reg_r(REG_ADMINQ_CI), 0, "the command was not fetched");
    let comp: CmdComp = h.read(ADMINCQ);
    assert_eq!(comp.flags & COMP_PHASE, 0, "no completion written");

    h.dev.set_stall(false);
    let comp: CmdComp = h.read(ADMINCQ);
    assert_eq!(comp.flags & COMP_PHASE, 1, "completed once unstalled");
    assert_eq!((comp.cmd_id, comp.status), (9, STATUS_SUCCESS));
    assert_eq!(h.reg_r(REG_ADMINQ_CI), 1);
    assert_eq!(h.irq.take(), vec![0], "one AEQ interrupt");
}
