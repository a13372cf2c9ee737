// SPDX-License-Identifier: GPL-2.0
//! Object tables (PD, MR, CQ, QP, SRQ, AH, EQ), multicast groups and their
//! contents.

use serde::Serialize;

use crate::hw::{self, Av, QpAttr};

/// Guest physical segments `(address, length)` of a translated range.
pub type SegList = crate::inline_vec::InlineVec<(u64, u64), 4>;

/// A fixed-capacity table whose handles are `first..first+capacity`.
#[derive(Debug, Clone)]
pub struct Table<T> {
    first: u32,
    slots: Vec<Option<T>>,
    /// Bit `i` is set when `slots[i]` holds an object: iterating walks the
    /// set bits instead of every slot (the engine asks every QP for its
    /// next deadline on each pass, with a few QPs in 1024 slots).
    live: Vec<u64>,
    /// Where [`Table::insert_next`] starts looking.
    cursor: usize,
}

impl<T> Table<T> {
    /// A table of `capacity` slots with handles starting at `first`.
    pub fn new(first: u32, capacity: u32) -> Self {
        let mut slots = Vec::new();
        slots.resize_with(capacity as usize, || None);
        Self {
            first,
            slots,
            live: vec![0; (capacity as usize).div_ceil(64)],
            cursor: 0,
        }
    }

    fn mark(&mut self, i: usize, live: bool) {
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        if live {
            self.live[word] |= bit;
        } else {
            self.live[word] &= !bit;
        }
    }

    fn index(&self, handle: u32) -> Option<usize> {
        let i = handle.checked_sub(self.first)? as usize;
        (i < self.slots.len()).then_some(i)
    }

    /// Inserts `v` at the lowest free handle; `None` when full.
    pub fn insert(&mut self, v: T) -> Option<u32> {
        self.insert_min(self.first, v)
    }

    /// Inserts `v` at the lowest free handle `>= min`; `None` when full.
    pub fn insert_min(&mut self, min: u32, v: T) -> Option<u32> {
        let skip = min.saturating_sub(self.first) as usize;
        let i = skip + self.slots.iter().skip(skip).position(Option::is_none)?;
        let slot = self.slots.get_mut(i)?;
        *slot = Some(v);
        self.mark(i, true);
        self.first.checked_add(u32::try_from(i).ok()?)
    }

    /// Inserts `v` at the first free handle `>= min` after the one this
    /// function handed out last, wrapping around: a freed handle is reused
    /// only after every other one was (QPNs: late packets and CM timewait
    /// entries of a destroyed QP do not meet a new QP with its number).
    /// `None` when full.
    pub fn insert_next(&mut self, min: u32, v: T) -> Option<u32> {
        let skip = min.saturating_sub(self.first) as usize;
        let n = self.slots.len().checked_sub(skip).filter(|&n| n > 0)?;
        let start = self.cursor.max(skip) - skip;
        let i = (0..n)
            .map(|k| skip + (start + k) % n)
            .find(|&i| self.slots[i].is_none())?;
        self.slots[i] = Some(v);
        self.mark(i, true);
        self.cursor = i + 1;
        self.first.checked_add(u32::try_from(i).ok()?)
    }

    /// The object with `handle`.
    pub fn get(&self, handle: u32) -> Option<&T> {
        self.slots.get(self.index(handle)?)?.as_ref()
    }

    /// The object with `handle`, mutably.
    pub fn get_mut(&mut self, handle: u32) -> Option<&mut T> {
        let i = self.index(handle)?;
        self.slots.get_mut(i)?.as_mut()
    }

    /// Removes and returns the object with `handle`.
    pub fn remove(&mut self, handle: u32) -> Option<T> {
        let i = self.index(handle)?;
        let v = self.slots.get_mut(i)?.take()?;
        self.mark(i, false);
        Some(v)
    }

    /// Whether `handle` names a live object.
    pub fn contains(&self, handle: u32) -> bool {
        self.get(handle).is_some()
    }

    /// The slot indices whose bit is set in `live`, in order. Takes the
    /// bitmap alone, so that the slots can be borrowed mutably meanwhile.
    fn live_indices(live: &[u64]) -> impl Iterator<Item = usize> + '_ {
        live.iter().enumerate().flat_map(|(w, &bits)| {
            let mut bits = bits;
            core::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let i = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(i)
            })
        })
    }

    /// Iterates over `(handle, object)`.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        let first = self.first;
        let slots = &self.slots;
        Self::live_indices(&self.live)
            .filter_map(move |i| slots[i].as_ref().map(|v| (first + i as u32, v)))
    }

    /// Runs `f` on every live object.
    pub fn for_each_mut(&mut self, mut f: impl FnMut(&mut T)) {
        for i in Self::live_indices(&self.live) {
            if let Some(Some(v)) = self.slots.get_mut(i) {
                f(v);
            }
        }
    }

    /// Number of live objects.
    pub fn len(&self) -> usize {
        self.live.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the table holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every object.
    pub fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = None);
        self.live.iter_mut().for_each(|w| *w = 0);
    }
}

/// Protection domain.
#[derive(Debug, Clone, Serialize)]
pub struct Pd {}

/// State of a fast-register MR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FastRegState {
    /// No translation: its key is refused as an invalid key.
    Free,
    /// Registered by a REG_MR WQE.
    Valid,
}

/// The type of a memory window (1.7, `CAP_MW`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MwType {
    /// `MR_TYPE_MW1`: bound by `ibv_bind_mw`, usable by every QP of its PD.
    One,
    /// `MR_TYPE_MW2` (IBTA type 2B): bound by a BIND_MW WQE of the QP that
    /// may then use it.
    Two,
}

/// The range of an MR a BOUND memory window grants remote access to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MwWindow {
    /// Index (key bits 31:8) of the MR the window is bound to. DEREG_MR
    /// and the invalidation of that MR unbind the window first, so the
    /// index names the same MR for as long as the window is bound.
    pub mr_index: u32,
    /// Start of the window in the MR's address space.
    pub addr: u64,
    /// Length in bytes (0 only for a type 2 window bound with length 0).
    pub length: u64,
    /// Remote rights: `ACCESS_REMOTE_*`.
    pub access: u32,
    /// Type 2: the QP it is bound to (the only one that may use it).
    pub qpn: Option<u32>,
}

impl MwWindow {
    /// Whether `[addr, addr + len)` lies inside the window.
    pub fn holds(&self, addr: u64, len: u64) -> bool {
        let (Some(end), Some(win_end)) =
            (addr.checked_add(len), self.addr.checked_add(self.length))
        else {
            return false;
        };
        addr >= self.addr && end <= win_end
    }
}

/// How an MR translates (REG_MR `mr_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MrKind {
    /// `MR_TYPE_USER`: a page list fixed at REG_MR.
    User,
    /// `MR_TYPE_PHYS`: addresses are guest physical addresses.
    Phys,
    /// `MR_TYPE_FAST_REG`: the page list comes from REG_MR WQEs.
    FastReg {
        /// Most pages a REG_MR WQE may give it.
        max_pages: u32,
        /// FREE or VALID.
        state: FastRegState,
    },
    /// `MR_TYPE_MW1` / `MR_TYPE_MW2` (1.7): a memory window, a key of the
    /// MR key space that translates nothing itself. Its key is never an
    /// lkey; as an R_Key it grants access to part of an MR.
    Mw {
        /// Type 1 or type 2.
        mw_type: MwType,
        /// `None`: FREE (bound to nothing); else BOUND to this window.
        window: Option<MwWindow>,
    },
}

impl MrKind {
    /// The kind of a REG_MR `mr_type` with its `max_pages`; `None` if the
    /// type is unknown.
    pub fn from_hw(mr_type: u8, max_pages: u32) -> Option<Self> {
        match mr_type {
            hw::MR_TYPE_USER => Some(Self::User),
            hw::MR_TYPE_PHYS => Some(Self::Phys),
            hw::MR_TYPE_FAST_REG => Some(Self::FastReg {
                max_pages,
                state: FastRegState::Free,
            }),
            hw::MR_TYPE_MW1 => Some(Self::Mw {
                mw_type: MwType::One,
                window: None,
            }),
            hw::MR_TYPE_MW2 => Some(Self::Mw {
                mw_type: MwType::Two,
                window: None,
            }),
            _ => None,
        }
    }
}

/// Memory region.
#[derive(Debug, Clone, Serialize)]
pub struct Mr {
    /// User, physical or fast-register (with its state).
    pub kind: MrKind,
    /// Full key (index << 8 | variant); lkey == rkey.
    pub key: u32,
    /// Owning PD.
    pub pdn: u32,
    /// `ACCESS_*` flags.
    pub access: u32,
    /// Start of the region in the key's address space (0 if zero-based).
    pub iova: u64,
    /// Length in bytes.
    pub length: u64,
    /// Offset of the region start in the first page.
    pub offset: u32,
    /// log2 of the page size.
    pub page_shift: u8,
    /// Guest physical page addresses.
    #[serde(skip)]
    pub pages: Vec<u64>,
    /// Number of pages (for dumps).
    pub page_count: usize,
    /// Memory windows bound to this MR (1.7): MODIFY_MR is BUSY while
    /// there are any, DEREG_MR and invalidation unbind them.
    pub windows: u32,
}

/// Why a memory access through an MR was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TranslateError {
    /// Outside `iova..iova+length` (or arithmetic overflow).
    OutOfBounds,
    /// The MR lacks a required access right.
    Access,
    /// A fast-register MR in state FREE: the key is not valid.
    Free,
    /// A memory window's key: it translates nothing by itself (never an
    /// lkey; an R_Key naming it is resolved through the MR it is bound to).
    Window,
}

impl Mr {
    /// Whether this is a fast-register MR (in either state).
    pub fn is_fast_reg(&self) -> bool {
        matches!(self.kind, MrKind::FastReg { .. })
    }

    /// The state of a fast-register MR, `None` for other kinds.
    pub fn fast_reg_state(&self) -> Option<FastRegState> {
        match self.kind {
            MrKind::FastReg { state, .. } => Some(state),
            MrKind::User | MrKind::Phys | MrKind::Mw { .. } => None,
        }
    }

    /// Whether this is a memory window (of either type, in either state).
    pub fn is_mw(&self) -> bool {
        matches!(self.kind, MrKind::Mw { .. })
    }

    /// The window of a BOUND memory window; `None` for a FREE one and for
    /// every other kind.
    pub fn mw_window(&self) -> Option<MwWindow> {
        match self.kind {
            MrKind::Mw { window, .. } => window,
            _ => None,
        }
    }

    /// The address of the region's first byte in its address space: 0 for
    /// a zero-based MR, its iova otherwise.
    pub fn start(&self) -> u64 {
        if self.access & hw::ACCESS_ZERO_BASED != 0 {
            0
        } else {
            self.iova
        }
    }

    /// Whether `[addr, addr + len)` (in the MR's address space) lies inside
    /// the region, without overflow: what a memory window may be bound to.
    /// A physical MR covers the whole address space here (the caller
    /// checks guest memory); a FREE fast-register MR and a window nothing.
    pub fn holds(&self, addr: u64, len: u64) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        match self.kind {
            MrKind::Phys => true,
            MrKind::FastReg {
                state: FastRegState::Free,
                ..
            }
            | MrKind::Mw { .. } => false,
            MrKind::User | MrKind::FastReg { .. } => {
                let start = self.start();
                addr >= start && end - start <= self.length
            }
        }
    }

    /// Translates `len` bytes at `addr` (in the MR's address space) needing
    /// the `ACCESS_*` rights `need` into guest physical segments.
    pub fn translate(
        &self,
        addr: u64,
        len: u64,
        need: u32,
    ) -> Result<Vec<(u64, u64)>, TranslateError> {
        let mut out = SegList::new();
        self.translate_into(addr, len, need, &mut out)?;
        Ok(out.to_vec())
    }

    /// [`Self::translate`], appending the segments to `out` (merged with its
    /// last one where they follow it in guest memory). On an error `out`
    /// may hold part of them.
    pub fn translate_into(
        &self,
        addr: u64,
        len: u64,
        need: u32,
        out: &mut SegList,
    ) -> Result<(), TranslateError> {
        match self.kind {
            MrKind::FastReg {
                state: FastRegState::Free,
                ..
            } => return Err(TranslateError::Free),
            MrKind::Mw { .. } => return Err(TranslateError::Window),
            MrKind::Phys => {
                if self.access & need != need {
                    return Err(TranslateError::Access);
                }
                addr.checked_add(len).ok_or(TranslateError::OutOfBounds)?;
                out.push((addr, len));
                return Ok(());
            }
            MrKind::User | MrKind::FastReg { .. } => {}
        }
        if self.access & need != need {
            return Err(TranslateError::Access);
        }
        let rel = if self.access & hw::ACCESS_ZERO_BASED != 0 {
            addr
        } else {
            addr.checked_sub(self.iova)
                .ok_or(TranslateError::OutOfBounds)?
        };
        let end = rel.checked_add(len).ok_or(TranslateError::OutOfBounds)?;
        if end > self.length {
            return Err(TranslateError::OutOfBounds);
        }
        let page_size = 1u64 << self.page_shift;
        let mut pos = rel
            .checked_add(u64::from(self.offset))
            .ok_or(TranslateError::OutOfBounds)?;
        let mut left = len;
        while left > 0 {
            let page =
                usize::try_from(pos >> self.page_shift).map_err(|_| TranslateError::OutOfBounds)?;
            let base = *self.pages.get(page).ok_or(TranslateError::OutOfBounds)?;
            let in_page = pos & (page_size - 1);
            let chunk = left.min(page_size - in_page);
            let gpa = base
                .checked_add(in_page)
                .ok_or(TranslateError::OutOfBounds)?;
            // Pages that follow each other in guest memory form one segment.
            match out.last_mut() {
                Some((last, n)) if last.checked_add(*n) == Some(gpa) => *n += chunk,
                _ => out.push((gpa, chunk)),
            }
            pos += chunk;
            left -= chunk;
        }
        Ok(())
    }
}

/// CQ arm state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Arm {
    /// Not armed.
    None,
    /// Event on the next CQE.
    Next,
    /// Event on the next solicited or error CQE.
    Solicited,
}

/// Completion queue.
#[derive(Debug, Clone, Serialize)]
pub struct Cq {
    /// Completion EQ.
    pub eqn: u32,
    /// Entries (power of two).
    pub depth: u32,
    /// Doorbell page allowed to ring it.
    pub db_page: u32,
    /// Doorbell record address.
    pub dbrec: u64,
    /// log2 of the buffer page size.
    pub page_shift: u8,
    /// Guest physical pages of the CQE ring.
    #[serde(skip)]
    pub pages: Vec<u64>,
    /// Device producer index (free-running, 16 bit).
    pub pi: u16,
    /// Consumer index from the last doorbell.
    pub ci: u16,
    /// Arm state.
    pub arm: Arm,
    /// arm_sn of the last arm doorbell.
    pub arm_sn: u8,
    /// Index of the last CQE that was solicited or an error (fires a
    /// solicited arm that arrives while it is unconsumed).
    pub last_solicited: Option<u16>,
    /// Producer index when the last COMPLETION event fired: the CQEs
    /// before it were announced, and an arm does not announce them again.
    pub announced: u16,
    /// Overflowed or hit a DMA error; no more CQEs are written.
    pub error: bool,
    /// Number of CQ doorbells accepted.
    pub doorbells: u64,
}

/// Queue pair.
#[derive(Debug, Clone, Serialize)]
pub struct Qp {
    /// `QPT_*`.
    pub qp_type: u8,
    /// Owning PD.
    pub pdn: u32,
    /// Send CQ.
    pub send_cqn: u32,
    /// Receive CQ.
    pub recv_cqn: u32,
    /// SQ entries.
    pub sq_depth: u32,
    /// RQ entries (0 = no RQ).
    pub rq_depth: u32,
    /// log2 SQ WQE stride.
    pub sq_wqe_shift: u8,
    /// log2 RQ WQE stride.
    pub rq_wqe_shift: u8,
    /// Max inline bytes.
    pub max_inline: u32,
    /// `QP_FLAG_*`.
    pub flags: u8,
    /// The SRQ its receive WQEs come from (`QP_FLAG_SRQ`), 0 = its own RQ.
    pub srqn: u32,
    /// Doorbell page allowed to ring it.
    pub db_page: u32,
    /// SQ doorbell record.
    pub sq_dbrec: u64,
    /// RQ doorbell record.
    pub rq_dbrec: u64,
    /// SQ buffer pages.
    #[serde(skip)]
    pub sq_pages: Vec<u64>,
    /// RQ buffer pages.
    #[serde(skip)]
    pub rq_pages: Vec<u64>,
    /// log2 of the SQ buffer page size.
    pub sq_page_shift: u8,
    /// log2 of the RQ buffer page size.
    pub rq_page_shift: u8,
    /// Current state (`QPS_*`).
    #[serde(serialize_with = "ser_state")]
    pub state: u8,
    /// Current attributes (as QUERY_QP returns them).
    #[serde(skip)]
    pub attr: QpAttr,
    /// Last SQ producer index rung.
    pub sq_pi: u16,
    /// Last RQ producer index rung.
    pub rq_pi: u16,
    /// SQ doorbells accepted.
    pub sq_doorbells: u64,
    /// RQ doorbells accepted.
    pub rq_doorbells: u64,
    /// The data path state of this QP (requester, completer, responder):
    /// born with the QP, cleared in RESET, gone with the QP.
    #[serde(skip)]
    pub(crate) engine: crate::transport::EngineSlot,
}

/// Shared receive queue (1.6): a ring of RQ WQEs that the QPs attached to
/// it take from, and its doorbell record (software's `pi`, the device's
/// `ci`).
#[derive(Debug, Clone, Serialize)]
pub struct Srq {
    /// Owning PD (the PD of every QP attached to it).
    pub pdn: u32,
    /// Entries (power of two).
    pub depth: u32,
    /// log2 WQE stride.
    pub wqe_shift: u8,
    /// log2 of the buffer page size.
    pub page_shift: u8,
    /// Buffer pages.
    #[serde(skip)]
    pub pages: Vec<u64>,
    /// Doorbell record (`struct ferroce_srq_dbrec`).
    pub dbrec: u64,
    /// Consumer index (free-running, 16 bit): the next WQE to take.
    pub ci: u16,
    /// Armed limit, 0 = not armed.
    pub limit: u32,
    /// WQEs taken.
    pub taken: u64,
    /// SRQ_LIMIT_REACHED events posted.
    pub limit_events: u64,
}

impl Srq {
    /// Where software writes `pi` in the record at `dbrec`.
    pub fn pi_addr(dbrec: u64) -> u64 {
        dbrec.wrapping_add(core::mem::offset_of!(crate::hw::SrqDbrec, pi) as u64)
    }

    /// Where the device writes back `ci` in the record at `dbrec`.
    pub fn ci_addr(dbrec: u64) -> u64 {
        dbrec.wrapping_add(core::mem::offset_of!(crate::hw::SrqDbrec, ci) as u64)
    }
}

/// Address handle.
#[derive(Debug, Clone, Serialize)]
pub struct Ah {
    /// Owning PD.
    pub pdn: u32,
    /// Address vector.
    #[serde(skip)]
    pub av: Av,
    /// Destination GID (for dumps).
    pub dgid: String,
    /// sgid index.
    pub sgid_index: u8,
}

/// A multicast group (1.7, device.rst "Multicast"): the UD QPs attached
/// to it by ATTACH_MCAST, in the order they were attached (the order a
/// datagram to the group is received in). A group exists while a QP is
/// attached to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McastGroup {
    /// The group's multicast GID (wire order).
    #[serde(serialize_with = "crate::gid::ser_gid")]
    pub gid: [u8; 16],
    /// The attached QPs, at most `MAX_MCAST_QP_ATTACH`.
    pub qpns: Vec<u32>,
}

/// Event queue.
#[derive(Debug, Clone, Serialize)]
pub struct Eq {
    /// MSI-X vector (== eqn).
    pub vector: u16,
    /// Ring base (contiguous).
    pub base: u64,
    /// Entries (power of two).
    pub depth: u32,
    /// Producer index (free-running, 16 bit).
    pub pi: u16,
    /// Consumer index from the last EQ doorbell.
    pub ci: u16,
    /// Whether the next EQE raises the vector.
    pub armed: bool,
    /// EQEs written.
    pub posted: u64,
    /// EQEs dropped because the ring was full.
    pub overflows: u64,
}

/// Name of a `QPS_*` state.
pub fn state_name(state: u8) -> &'static str {
    match state {
        hw::QPS_RESET => "RESET",
        hw::QPS_INIT => "INIT",
        hw::QPS_RTR => "RTR",
        hw::QPS_RTS => "RTS",
        hw::QPS_SQD => "SQD",
        hw::QPS_SQE => "SQE",
        hw::QPS_ERR => "ERR",
        _ => "?",
    }
}

fn ser_state<S: serde::Serializer>(state: &u8, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(state_name(*state))
}

#[cfg(test)]
mod table_tests {
    use super::Table;
    use std::collections::BTreeMap;

    /// `iter` and `len` follow every insert, remove and clear, across word
    /// boundaries of the live bitmap (a table of 200 slots from handle 5).
    #[test]
    fn iter_and_len_follow_the_live_slots() {
        let mut t = Table::new(5, 200);
        let mut model = BTreeMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..5000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let h = 5 + (x % 210) as u32;
            match x % 7 {
                0..=2 => {
                    if let Some(got) = t.insert_min(h.min(204), step) {
                        model.insert(got, step);
                    }
                }
                3 => {
                    if let Some(got) = t.insert_next(5, step) {
                        model.insert(got, step);
                    }
                }
                4 | 5 => assert_eq!(t.remove(h), model.remove(&h)),
                _ if step % 500 == 0 => {
                    t.clear();
                    model.clear();
                }
                _ => {}
            }
            assert_eq!(t.len(), model.len());
            let got: Vec<_> = t.iter().map(|(k, &v)| (k, v)).collect();
            let want: Vec<_> = model.iter().map(|(&k, &v)| (k, v)).collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn insert_next_reuses_a_handle_only_after_all_others() {
        let mut t = Table::new(1, 4);
        assert_eq!(t.insert_min(1, 'g'), Some(1));
        assert_eq!(t.insert_next(2, 'a'), Some(2));
        t.remove(2);
        // 2 is free again, but 3 and 4 come first.
        assert_eq!(t.insert_next(2, 'b'), Some(3));
        assert_eq!(t.insert_next(2, 'c'), Some(4));
        assert_eq!(t.insert_next(2, 'd'), Some(2));
        assert_eq!(t.insert_next(2, 'e'), None);
        t.remove(3);
        assert_eq!(t.insert_next(2, 'f'), Some(3));
        // The handle below `min` is never handed out by insert_next.
        t.remove(1);
        assert_eq!(t.insert_next(2, 'h'), None);
    }
}
