// SPDX-License-Identifier: GPL-2.0
//! PCI Bus Master Enable (COMMAND bit 2).
//!
//! While the guest keeps BME clear the device issues no DMA and no MSI-X
//! message (both are bus-master writes). Nothing is lost: doorbells and
//! ADMINQ_DB are recorded, events are held in order, looped-back frames
//! stay queued, timers wait; frames from the wire are dropped (the peer
//! retransmits, as when a NIC has no receive buffer). Setting BME again
//! resumes everything in the order it happened. As a backstop every DMA
//! goes through [`BusMasterGate`], which refuses data transfers while BME
//! is clear.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;

use super::State;
use crate::mem::{DmaError, GuestMemory};

/// Most events held while BME is clear; further ones are dropped and
/// counted as EQ overflows.
pub(crate) const DEFERRED_EVENTS_MAX: usize = 1024;

/// Counters of the bus-master gate (control socket only).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct BusMasterCounters {
    /// Whether BME is set now.
    pub enabled: bool,
    /// Times BME was cleared.
    pub disabled: u64,
    /// Frames from the wire dropped while BME was clear.
    pub rx_dropped: u64,
    /// Events held while BME was clear and posted when it was set again.
    pub events_deferred: u64,
    /// Admin doorbells held while BME was clear.
    pub adminq_deferred: u64,
    /// DMA transfers the gate refused (none in correct operation: the
    /// device does not start work while BME is clear).
    pub dma_refused: u64,
}

/// Guest memory behind the Bus Master Enable bit: data transfers are
/// refused while it is clear. `check_range` (a look-up in the mapping
/// table, no bus cycle) is always answered.
pub(crate) struct BusMasterGate {
    inner: Arc<dyn GuestMemory>,
    enabled: AtomicBool,
    refused: AtomicU64,
}

impl BusMasterGate {
    pub(crate) fn new(inner: Arc<dyn GuestMemory>) -> Self {
        Self {
            inner,
            enabled: AtomicBool::new(true),
            refused: AtomicU64::new(0),
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    fn set(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    fn refuse(&self, gpa: u64, len: usize) -> DmaError {
        self.refused.fetch_add(1, Ordering::Relaxed);
        DmaError {
            gpa,
            len: len as u64,
        }
    }
}

impl GuestMemory for BusMasterGate {
    fn read(&self, gpa: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        if !self.enabled() {
            return Err(self.refuse(gpa, buf.len()));
        }
        self.inner.read(gpa, buf)
    }

    fn write(&self, gpa: u64, buf: &[u8]) -> Result<(), DmaError> {
        if !self.enabled() {
            return Err(self.refuse(gpa, buf.len()));
        }
        self.inner.write(gpa, buf)
    }

    fn write_u64(&self, gpa: u64, value: u64) -> Result<(), DmaError> {
        if !self.enabled() {
            return Err(self.refuse(gpa, 8));
        }
        self.inner.write_u64(gpa, value)
    }

    fn check_range(&self, gpa: u64, len: u64) -> Result<(), DmaError> {
        self.inner.check_range(gpa, len)
    }
}

/// An EQE held while BME was clear.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeferredEvent {
    pub eqn: usize,
    pub event_type: u8,
    pub obj: u32,
    pub data: u32,
    pub data2: u32,
}

/// What is held while BME is clear.
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    /// Events, oldest first.
    pub events: VecDeque<DeferredEvent>,
    /// The last accepted ADMINQ_DB producer index.
    pub adminq_pi: Option<u16>,
}

impl State {
    /// Whether the device may master the bus (DMA, MSI-X).
    pub(crate) fn bus_master(&self) -> bool {
        self.gate.enabled()
    }

    /// Whether the data path may run: BME set and not stalled.
    pub(crate) fn data_path_runs(&self) -> bool {
        self.bus_master() && !self.faults.stalled
    }

    /// Holds an event while BME is clear.
    pub(crate) fn defer_event(&mut self, event: DeferredEvent) {
        if self.deferred.events.len() >= DEFERRED_EVENTS_MAX {
            self.counters.hw.eq_overflows += 1;
            let ty = event.event_type;
            self.note(format!(
                "event {ty:#x} dropped: too many held while BME is clear"
            ));
            return;
        }
        self.bus_master_counters.events_deferred += 1;
        self.deferred.events.push_back(event);
    }

    /// Follows PCI COMMAND.BME; on a 0 -> 1 change resumes what was held.
    pub(crate) fn set_bus_master(&mut self, on: bool) {
        if on == self.bus_master() {
            return;
        }
        self.gate.set(on);
        self.bus_master_counters.enabled = on;
        if !on {
            self.bus_master_counters.disabled += 1;
            return;
        }
        // Events first: they happened before anything resumed now.
        while let Some(event) = self.deferred.events.pop_front() {
            self.post_eqe_raw(
                event.eqn,
                event.event_type,
                event.obj,
                event.data,
                event.data2,
            );
        }
        // EQs armed while BME was clear with entries pending: interrupt now.
        for eqn in 0..self.eqs.len() {
            self.eq_fire_if_pending(eqn);
        }
        if let Some(pi) = self.deferred.adminq_pi.take() {
            self.adminq_doorbell(u32::from(pi));
        }
        if self.data_path_runs() {
            let qpns: Vec<u32> = self.qps.iter().map(|(qpn, _)| qpn).collect();
            for qpn in qpns {
                self.rq_progress(qpn);
                self.sq_progress(qpn);
            }
        }
        self.pump();
    }
}
