// SPDX-License-Identifier: GPL-2.0

//! The admin queue: a ring of 128-byte commands and a ring of 32-byte
//! completions of the same depth in coherent DMA memory
//! (`Documentation/ferroce/device.rst`, "Admin queue").
//!
//! Commands run one at a time (the caller holds the queue's mutex); the
//! driver polls the completion's phase bit, so commands work before and
//! without interrupts. A command that does not complete within the device's
//! CMD_TIMEOUT_MS fails with `ETIMEDOUT`; the caller then marks the device
//! dead.

#![forbid(unsafe_code)]

use crate::{
    bindings::{
        self as hw,
        Command, //
    },
    regs::{
        self,
        DevresBar0, //
    }, //
};
use core::mem::{
    offset_of,
    size_of, //
};
use kernel::{
    device::{
        Bound,
        Device, //
    },
    dma::{
        Coherent,
        DmaAddress, //
    },
    io::{
        io_read,
        io_write,
        poll::read_poll_timeout,
        Io, //
    },
    prelude::*,
    sync::barrier::{
        dma_mb,
        Read, //
    },
    time::Delta, //
};

/// Entries of both admin rings.
pub(crate) const DEPTH: u16 = 32;
const _: () = assert!(
    DEPTH.is_power_of_two()
        && DEPTH as u32 >= hw::FERROCE_ADMINQ_DEPTH_MIN
        && DEPTH as u32 <= hw::FERROCE_ADMINQ_DEPTH_MAX
);

const CMD_SIZE: usize = hw::FERROCE_CMD_SIZE as usize;
const CMD_WORDS: usize = CMD_SIZE / 8;
const COMP_WORDS: usize = hw::FERROCE_CMD_COMP_SIZE as usize / 4;
const _: () = assert!(size_of::<hw::ferroce_cmd>() == CMD_SIZE);
const _: () = assert!(size_of::<hw::ferroce_cmd_comp>() == COMP_WORDS * 4);

/// Position of a byte-sized completion field: (u32 word index, bit shift).
const fn comp_byte(offset: usize) -> (usize, u32) {
    (offset / 4, (offset % 4) as u32 * 8)
}
const COMP_FLAGS: (usize, u32) = comp_byte(offset_of!(hw::ferroce_cmd_comp, flags));
const COMP_STATUS: (usize, u32) = comp_byte(offset_of!(hw::ferroce_cmd_comp, status));
const COMP_ID_WORD: usize = offset_of!(hw::ferroce_cmd_comp, cmd_id) / 4;
const COMP_OUT_WORD: usize = offset_of!(hw::ferroce_cmd_comp, out) / 4;
const OUT_LEN: usize = 5;
const _: () = assert!(offset_of!(hw::ferroce_cmd_comp, cmd_id) % 4 == 0);
const _: () = assert!(size_of::<[u32; OUT_LEN]>() == 20);
const HDR_OPCODE: usize = offset_of!(hw::ferroce_cmd_hdr, opcode);
const HDR_CMD_ID: usize = offset_of!(hw::ferroce_cmd_hdr, cmd_id);

/// What a completed command returned.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Completion {
    /// `out[0..4]` of the completion.
    pub(crate) out: [u32; OUT_LEN],
}

/// The admin rings and the driver's indices.
pub(crate) struct CmdQ {
    sq: Coherent<[u64]>,
    cq: Coherent<[u32]>,
    /// Free-running producer index (16 bits, as the device's).
    pi: u16,
    next_id: u16,
}

impl CmdQ {
    /// Allocates both rings, zeroed.
    pub(crate) fn new(dev: &Device<Bound>) -> Result<Self> {
        let n = usize::from(DEPTH);
        Ok(Self {
            sq: Coherent::zeroed_slice(dev, n * CMD_WORDS, GFP_KERNEL)?,
            cq: Coherent::zeroed_slice(dev, n * COMP_WORDS, GFP_KERNEL)?,
            pi: 0,
            next_id: 1,
        })
    }

    /// Bus addresses of the SQ and CQ rings.
    pub(crate) fn dma_addrs(&self) -> (DmaAddress, DmaAddress) {
        (self.sq.dma_address(), self.cq.dma_address())
    }

    fn comp_word(&self, slot: usize, word: usize) -> Result<u32> {
        Ok(io_read!(&self.cq, [try: slot * COMP_WORDS + word]))
    }

    /// Posts `cmd`, rings the doorbell through `bar` and polls for its
    /// completion for at most `timeout`; `seen` is told the status of a
    /// matching completion.
    ///
    /// Errors: `ENODEV` if the BAR is gone, `ETIMEDOUT` if the device did not
    /// answer, `EIO` for a completion that does not match, and the errno of
    /// a failed status.
    pub(crate) fn exec<C: Command>(
        &mut self,
        bar: &DevresBar0,
        cmd: &C,
        timeout: Delta,
        seen: impl FnOnce(u32),
    ) -> Result<Completion> {
        let mut buf = [0u8; CMD_SIZE];
        let bytes = cmd.as_bytes();
        buf[..bytes.len()].copy_from_slice(bytes);
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        buf[HDR_OPCODE] = C::OPCODE;
        buf[HDR_CMD_ID..HDR_CMD_ID + 2].copy_from_slice(&id.to_le_bytes());

        let index = self.pi;
        let slot = usize::from(index & (DEPTH - 1));
        for (i, w) in buf.chunks_exact(8).enumerate() {
            let mut word = [0u8; 8];
            word.copy_from_slice(w);
            io_write!(&self.sq, [try: slot * CMD_WORDS + i], u64::from_le_bytes(word));
        }
        self.pi = index.wrapping_add(1);
        // The MMIO write orders the ring writes before it (writel semantics).
        let pi = self.pi;
        bar.try_access()
            .ok_or(ENODEV)?
            .write_reg(regs::ADMINQ_DB::zeroed().with_pi(pi));

        // Phase rule: 1 on the first pass through the ring, 0 on the second...
        let phase = (u32::from(index >> DEPTH.trailing_zeros()) & 1) ^ 1;
        read_poll_timeout(
            || self.comp_word(slot, COMP_FLAGS.0),
            |w| (w >> COMP_FLAGS.1) & hw::FERROCE_COMP_PHASE == phase,
            Delta::from_micros(20),
            timeout,
        )?;
        dma_mb(Read);

        let w0 = self.comp_word(slot, COMP_ID_WORD)?;
        let got_id = regs::lower_16_bits(w0);
        let status = (self.comp_word(slot, COMP_STATUS.0)? >> COMP_STATUS.1) & 0xff;
        if got_id != id {
            return Err(EIO);
        }
        seen(status);
        status_to_result(status)?;
        let mut out = [0u32; OUT_LEN];
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.comp_word(slot, COMP_OUT_WORD + i)?;
        }
        Ok(Completion { out })
    }
}

/// Maps a `FERROCE_STATUS_*` to an errno.
fn status_to_result(status: u32) -> Result {
    match status {
        hw::FERROCE_STATUS_SUCCESS => Ok(()),
        hw::FERROCE_STATUS_BAD_PARAM
        | hw::FERROCE_STATUS_BAD_RESERVED
        | hw::FERROCE_STATUS_BAD_ATTR_MASK
        | hw::FERROCE_STATUS_BAD_STATE => Err(EINVAL),
        hw::FERROCE_STATUS_BAD_HANDLE => Err(ENOENT),
        hw::FERROCE_STATUS_NO_RESOURCES => Err(ENOMEM),
        hw::FERROCE_STATUS_BUSY => Err(EBUSY),
        hw::FERROCE_STATUS_NOT_SUPPORTED | hw::FERROCE_STATUS_BAD_OPCODE => Err(EOPNOTSUPP),
        hw::FERROCE_STATUS_DMA_ERROR => Err(EFAULT),
        _ => Err(EIO),
    }
}
