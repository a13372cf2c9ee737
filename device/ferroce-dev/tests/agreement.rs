// SPDX-License-Identifier: GPL-2.0
//! Agreement test: the C header (compiled by the C compiler in build.rs) and
//! the Rust definitions in `ferroce_dev::hw` must describe the same
//! constants, struct sizes, field offsets and field widths.

use std::collections::BTreeMap;

use ferroce_dev::hw::{self, StructLayout};

const C_LAYOUT: &str = include_str!(concat!(env!("OUT_DIR"), "/hw_c_layout.txt"));

type Fields = Vec<(String, usize, usize)>;

#[derive(Debug, Clone, Default)]
struct Side {
    consts: BTreeMap<String, u64>,
    structs: BTreeMap<String, (usize, Fields)>,
}

fn parse_c(text: &str) -> Side {
    let mut side = Side::default();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["const", name, v] => {
                side.consts
                    .insert(name.to_string(), v.parse().expect("const value"));
            }
            ["struct", name, size] => {
                side.structs
                    .insert(name.to_string(), (size.parse().expect("size"), Vec::new()));
            }
            ["field", s, f, off, size] => {
                side.structs
                    .get_mut(*s)
                    .expect("struct before field")
                    .1
                    .push((
                        f.to_string(),
                        off.parse().expect("offset"),
                        size.parse().expect("size"),
                    ));
            }
            _ => panic!("unexpected line from hw_layout: {line}"),
        }
    }
    side
}

fn rust_side(consts: Vec<(String, u64)>, layouts: Vec<StructLayout>) -> Side {
    let mut side = Side::default();
    for (n, v) in consts {
        assert!(side.consts.insert(n.clone(), v).is_none(), "duplicate {n}");
    }
    for l in layouts {
        let fields = l
            .fields
            .iter()
            .map(|(f, o, s)| (f.to_string(), *o, *s))
            .collect();
        side.structs.insert(l.name.to_string(), (l.size, fields));
    }
    side
}

/// Every difference between the two sides, as text.
fn compare(c: &Side, r: &Side) -> Vec<String> {
    let mut diffs = Vec::new();
    for (n, v) in &c.consts {
        match r.consts.get(n) {
            None => diffs.push(format!("constant {n} only in C")),
            Some(rv) if rv != v => diffs.push(format!("constant {n}: C {v:#x}, Rust {rv:#x}")),
            _ => {}
        }
    }
    for n in r.consts.keys() {
        if !c.consts.contains_key(n) {
            diffs.push(format!("constant {n} only in Rust"));
        }
    }
    for (n, (size, fields)) in &c.structs {
        match r.structs.get(n) {
            None => diffs.push(format!("struct {n} only in C")),
            Some((rsize, rfields)) => {
                if size != rsize {
                    diffs.push(format!("struct {n}: size C {size}, Rust {rsize}"));
                }
                if fields != rfields {
                    diffs.push(format!("struct {n}: fields C {fields:?}, Rust {rfields:?}"));
                }
            }
        }
    }
    for n in r.structs.keys() {
        if !c.structs.contains_key(n) {
            diffs.push(format!("struct {n} only in Rust"));
        }
    }
    diffs
}

fn both() -> (Side, Side) {
    (
        parse_c(C_LAYOUT),
        rust_side(hw::all_consts(), hw::all_layouts()),
    )
}

#[test]
fn c_header_and_rust_agree() {
    let (c, r) = both();
    assert!(
        c.consts.len() > 250,
        "only {} constants parsed",
        c.consts.len()
    );
    assert!(
        c.structs.len() > 35,
        "only {} structs parsed",
        c.structs.len()
    );
    let diffs = compare(&c, &r);
    assert!(
        diffs.is_empty(),
        "C and Rust disagree:\n{}",
        diffs.join("\n")
    );
}

#[test]
fn comparison_detects_every_kind_of_disagreement() {
    let (c, r) = both();
    assert!(compare(&c, &r).is_empty());

    let mut x = r.clone();
    *x.consts.get_mut("FERROCE_REG_EQ_DB").unwrap() += 4;
    assert_eq!(compare(&c, &x).len(), 1, "changed constant value");

    let mut x = r.clone();
    x.consts.remove("FERROCE_CMD_CREATE_QP");
    assert_eq!(compare(&c, &x).len(), 1, "constant missing in Rust");

    let mut x = c.clone();
    x.consts.remove("FERROCE_CMD_CREATE_QP");
    assert_eq!(compare(&x, &r).len(), 1, "constant missing in C");

    let mut x = r.clone();
    x.structs.get_mut("ferroce_cqe").unwrap().0 += 8;
    assert_eq!(compare(&c, &x).len(), 1, "struct size");

    let mut x = r.clone();
    x.structs.get_mut("ferroce_cqe").unwrap().1[2].1 += 1;
    assert_eq!(compare(&c, &x).len(), 1, "field offset");

    let mut x = r.clone();
    x.structs.get_mut("ferroce_av").unwrap().1[0].2 = 8;
    assert_eq!(compare(&c, &x).len(), 1, "field width");

    let mut x = r.clone();
    x.structs.get_mut("ferroce_eqe").unwrap().1[5].0 = "kind".into();
    assert_eq!(compare(&c, &x).len(), 1, "field name");

    let mut x = r;
    x.structs.remove("ferroce_sge");
    assert_eq!(compare(&c, &x).len(), 1, "struct missing in Rust");
}

#[test]
fn spot_checks_of_the_layout() {
    assert_eq!(std::mem::size_of::<hw::Cmd>(), hw::CMD_SIZE);
    assert_eq!(std::mem::size_of::<hw::CmdComp>(), hw::CMD_COMP_SIZE);
    assert_eq!(std::mem::size_of::<hw::Eqe>(), hw::EQE_SIZE);
    assert_eq!(std::mem::size_of::<hw::Cqe>(), hw::CQE_SIZE);
    assert_eq!(std::mem::offset_of!(hw::Cqe, owner), hw::CQE_SIZE - 1);
    assert_eq!(std::mem::offset_of!(hw::Eqe, owner), hw::EQE_SIZE - 1);
    assert_eq!(
        std::mem::offset_of!(hw::CmdComp, flags),
        hw::CMD_COMP_SIZE - 1
    );
    // MSI-X structures do not overlap the registers.
    const { assert!(hw::MSIX_TABLE_OFFSET >= hw::REGS_SIZE) };
    assert!(hw::MSIX_TABLE_OFFSET + 16 * u64::from(hw::MSIX_VECTORS) <= hw::MSIX_PBA_OFFSET);
    const { assert!(hw::MSIX_PBA_OFFSET + 8 <= hw::BAR0_SIZE) };
    assert_eq!(
        u64::from(hw::DB_PAGES) * hw::DB_PAGE_SIZE,
        hw::BAR2_SIZE,
        "BAR2 is exactly the doorbell pages"
    );
    // 1.1: REG_MR grew to 64 bytes and still fits a command slot; the
    // fields a 1.0 driver zero-pads come after the 1.0 ones.
    assert_eq!(std::mem::size_of::<hw::CmdRegMr>(), 64);
    assert_eq!(std::mem::offset_of!(hw::CmdRegMr, mr_type), 53);
    assert_eq!(std::mem::offset_of!(hw::CmdRegMr, max_pages), 56);
    // REG_MR WQE: its segment fills the segment area, its page list the
    // start of the data area.
    assert_eq!(
        hw::SQ_WQE_SEG_OFFSET + std::mem::size_of::<hw::SqWqeRegMr>(),
        hw::SQ_WQE_DATA_OFFSET
    );
    // Inline AV: the AV and 8 reserved bytes, then the data.
    assert_eq!(
        hw::SQ_WQE_DATA_OFFSET + std::mem::size_of::<hw::Av>() + 8,
        hw::SQ_WQE_AV_DATA_OFFSET
    );
    // The new CQE flag is a free bit.
    let used = hw::CQE_WITH_IMM | hw::CQE_GRH | hw::CQE_SOLICITED | hw::CQE_NET_TYPE_MASK;
    assert_eq!(hw::CQE_WITH_INV & used, 0);
    // Kernel opcode values: IB_WR_LOCAL_INV 7, IB_WR_SEND_WITH_INV 9,
    // IB_WR_REG_MR 0x20, IB_WC_LOCAL_INV 6. WC_REG_MR 0x20 mirrors the WQE
    // opcode (the kernel's IB_WC_REG_MR is 10: the driver translates).
    assert_eq!(
        (hw::WR_LOCAL_INV, hw::WR_SEND_INV, hw::WR_REG_MR),
        (7, 9, 0x20)
    );
    assert_eq!((hw::WC_LOCAL_INV, hw::WC_REG_MR), (6, 0x20));
    // 1.6: CREATE_QP grew from 88 to 96 bytes, srqn and reserved after the
    // 1.5 fields, still inside the zero-filled command slot (a 1.5 driver's
    // command reads srqn 0); the SRQ commands fit a slot; the device's ci
    // is the record's second word.
    assert_eq!(std::mem::size_of::<hw::CmdCreateQp>(), 96);
    assert_eq!(std::mem::offset_of!(hw::CmdCreateQp, srqn), 88);
    assert_eq!(std::mem::offset_of!(hw::CmdCreateQp, reserved), 92);
    for size in [
        std::mem::size_of::<hw::CmdCreateQp>(),
        std::mem::size_of::<hw::CmdCreateSrq>(),
        std::mem::size_of::<hw::CmdDestroySrq>(),
        std::mem::size_of::<hw::CmdModifySrq>(),
        std::mem::size_of::<hw::CmdQuerySrq>(),
        std::mem::size_of::<hw::CmdModifyMr>(),
        std::mem::size_of::<hw::CmdResizeSrq>(),
        std::mem::size_of::<hw::CmdResizeCq>(),
    ] {
        assert!(size <= hw::CMD_SIZE);
    }
    assert_eq!(std::mem::offset_of!(hw::SrqDbrec, ci), 4);
    // New bits are free bits; QUERY_SRQ's results fit `out`.
    assert_eq!(hw::CAP_SRQ & 0x1ffff, 0);
    assert_eq!(hw::QP_FLAG_SRQ & hw::QP_FLAG_SQ_SIG_ALL, 0);
    const { assert!(hw::SRQ_OUT_CI < 5) };
    // MODIFY_MR (1.6): a 24-byte command, its capability a free bit next
    // to SRQ, its two flags distinct, its opcode next to DEREG_MR.
    assert_eq!(std::mem::size_of::<hw::CmdModifyMr>(), 24);
    assert_eq!(std::mem::offset_of!(hw::CmdModifyMr, key), 8);
    assert_eq!(std::mem::offset_of!(hw::CmdModifyMr, access), 20);
    assert_eq!(hw::CAP_MODIFY_MR & 0x3ffff, 0);
    assert_eq!(hw::MODIFY_MR_PD & hw::MODIFY_MR_ACCESS, 0);
    assert_eq!(hw::CMD_MODIFY_MR, hw::CMD_DEREG_MR + 1);
    // RESIZE_SRQ (1.6): a 40-byte command, the page list where CREATE_SRQ
    // has it, its opcode after QUERY_SRQ and before CREATE_AH.
    assert_eq!(std::mem::size_of::<hw::CmdResizeSrq>(), 40);
    assert_eq!(
        std::mem::offset_of!(hw::CmdResizeSrq, buf),
        std::mem::offset_of!(hw::CmdCreateSrq, buf)
    );
    assert_eq!(std::mem::offset_of!(hw::CmdResizeSrq, srqn), 24);
    assert_eq!(std::mem::offset_of!(hw::CmdResizeSrq, wqe_shift), 32);
    assert_eq!(std::mem::offset_of!(hw::CmdResizeSrq, reserved1), 36);
    assert_eq!(hw::CMD_RESIZE_SRQ, hw::CMD_QUERY_SRQ + 1);
    const { assert!(hw::CMD_RESIZE_SRQ < hw::CMD_CREATE_AH) };
    // RESIZE_CQ (1.6): a 40-byte command, the page list where CREATE_CQ
    // has it, its capability a free bit next to MODIFY_MR, its opcode next
    // to DESTROY_CQ and before ALLOC_PD.
    assert_eq!(std::mem::size_of::<hw::CmdResizeCq>(), 40);
    assert_eq!(
        std::mem::offset_of!(hw::CmdResizeCq, buf),
        std::mem::offset_of!(hw::CmdCreateCq, buf)
    );
    assert_eq!(std::mem::offset_of!(hw::CmdResizeCq, cqn), 24);
    assert_eq!(std::mem::offset_of!(hw::CmdResizeCq, depth), 28);
    assert_eq!(std::mem::offset_of!(hw::CmdResizeCq, reserved), 32);
    assert_eq!(hw::CAP_RESIZE_CQ & 0x7ffff, 0);
    assert_eq!(hw::CMD_RESIZE_CQ, hw::CMD_DESTROY_CQ + 1);
    const { assert!(hw::CMD_RESIZE_CQ < hw::CMD_ALLOC_PD) };
    // ATTACH/DETACH_MCAST (1.7): one 32-byte command, the group's GID
    // after the QP; the capability a free bit next to RESIZE_CQ; the
    // opcodes after RESIZE_SRQ and before CREATE_AH; the group QPN the
    // largest 24-bit QPN, which no QP has.
    assert_eq!(std::mem::size_of::<hw::CmdMcast>(), 32);
    assert!(std::mem::size_of::<hw::CmdMcast>() <= hw::CMD_SIZE);
    assert_eq!(std::mem::offset_of!(hw::CmdMcast, qpn), 8);
    assert_eq!(std::mem::offset_of!(hw::CmdMcast, reserved), 12);
    assert_eq!(std::mem::offset_of!(hw::CmdMcast, gid), 16);
    assert_eq!(hw::CAP_MCAST & 0xfffff, 0);
    assert_eq!(hw::CAP_MCAST, hw::CAP_RESIZE_CQ << 1);
    assert_eq!(hw::CMD_ATTACH_MCAST, hw::CMD_RESIZE_SRQ + 1);
    assert_eq!(hw::CMD_DETACH_MCAST, hw::CMD_ATTACH_MCAST + 1);
    const { assert!(hw::CMD_DETACH_MCAST < hw::CMD_CREATE_AH) };
    assert_eq!(hw::MCAST_QPN, hw::QPN_MASK);
    assert_eq!((hw::MAX_MCAST_GRP, hw::MAX_MCAST_QP_ATTACH), (64, 16));
}

/// The names spec 1.6 added are on both sides, so the comparison covers
/// them (a header parser that lost them would not notice otherwise).
#[test]
fn spec_1_6_names_are_compared() {
    let (c, r) = both();
    for name in [
        "FERROCE_CAP_SRQ",
        "FERROCE_CMD_CREATE_SRQ",
        "FERROCE_CMD_DESTROY_SRQ",
        "FERROCE_CMD_MODIFY_SRQ",
        "FERROCE_CMD_QUERY_SRQ",
        "FERROCE_CMD_RESIZE_SRQ",
        "FERROCE_QP_FLAG_SRQ",
        "FERROCE_FIRST_SRQN",
        "FERROCE_SRQ_OUT_LIMIT",
        "FERROCE_SRQ_OUT_DEPTH",
        "FERROCE_SRQ_OUT_CI",
        "FERROCE_EQE_SRQ_LIMIT_REACHED",
        "FERROCE_CAP_MODIFY_MR",
        "FERROCE_CMD_MODIFY_MR",
        "FERROCE_MODIFY_MR_PD",
        "FERROCE_MODIFY_MR_ACCESS",
        "FERROCE_CAP_RESIZE_CQ",
        "FERROCE_CMD_RESIZE_CQ",
    ] {
        assert!(c.consts.contains_key(name), "{name} not in C");
        assert_eq!(c.consts.get(name), r.consts.get(name), "{name}");
    }
    for name in [
        "ferroce_cmd_create_qp",
        "ferroce_cmd_create_srq",
        "ferroce_cmd_destroy_srq",
        "ferroce_cmd_modify_srq",
        "ferroce_cmd_query_srq",
        "ferroce_cmd_resize_srq",
        "ferroce_srq_dbrec",
        "ferroce_cmd_modify_mr",
        "ferroce_cmd_resize_cq",
    ] {
        assert!(c.structs.contains_key(name), "{name} not in C");
        assert_eq!(c.structs.get(name), r.structs.get(name), "{name}");
    }
    let srqn = c.structs["ferroce_cmd_create_qp"]
        .1
        .iter()
        .find(|f| f.0 == "srqn")
        .cloned();
    assert_eq!(srqn, Some(("srqn".to_string(), 88, 4)));
}

/// The names spec 1.7 (UD multicast) added are on both sides.
#[test]
fn spec_1_7_names_are_compared() {
    let (c, r) = both();
    for name in [
        "FERROCE_CAP_MCAST",
        "FERROCE_CMD_ATTACH_MCAST",
        "FERROCE_CMD_DETACH_MCAST",
        "FERROCE_MAX_MCAST_GRP",
        "FERROCE_MAX_MCAST_QP_ATTACH",
        "FERROCE_MCAST_QPN",
    ] {
        assert!(c.consts.contains_key(name), "{name} not in C");
        assert_eq!(c.consts.get(name), r.consts.get(name), "{name}");
    }
    assert!(c.consts["FERROCE_VERSION_MINOR"] >= 7);
    assert_eq!(
        r.consts["FERROCE_VERSION_MINOR"],
        c.consts["FERROCE_VERSION_MINOR"]
    );
    let name = "ferroce_cmd_mcast";
    assert!(c.structs.contains_key(name), "{name} not in C");
    assert_eq!(c.structs.get(name), r.structs.get(name), "{name}");
    let fields: Vec<(String, usize, usize)> = c.structs[name].1.clone();
    assert_eq!(
        fields,
        vec![
            ("hdr".to_string(), 0, 8),
            ("qpn".to_string(), 8, 4),
            ("reserved".to_string(), 12, 4),
            ("gid".to_string(), 16, 16),
        ]
    );
}

/// The names spec 1.7 added for memory windows are on both sides, and
/// their values fit the rest of the programming model.
#[test]
fn spec_1_7_memory_window_names_are_compared() {
    let (c, r) = both();
    for name in [
        "FERROCE_CAP_MW",
        "FERROCE_ACCESS_MW_BIND",
        "FERROCE_MR_TYPE_MW1",
        "FERROCE_MR_TYPE_MW2",
        "FERROCE_WR_BIND_MW",
        "FERROCE_WC_BIND_MW",
    ] {
        assert!(c.consts.contains_key(name), "{name} not in C");
        assert_eq!(c.consts.get(name), r.consts.get(name), "{name}");
    }
    assert!(c.consts["FERROCE_VERSION_MINOR"] >= 7);
    let name = "ferroce_sq_wqe_bind_mw";
    assert!(c.structs.contains_key(name), "{name} not in C");
    assert_eq!(c.structs.get(name), r.structs.get(name), "{name}");
    // The segment fills the segment area, as REG_MR's does.
    assert_eq!(std::mem::size_of::<hw::SqWqeBindMw>(), 32);
    assert_eq!(
        hw::SQ_WQE_SEG_OFFSET + std::mem::size_of::<hw::SqWqeBindMw>(),
        hw::SQ_WQE_DATA_OFFSET
    );
    assert_eq!(std::mem::offset_of!(hw::SqWqeBindMw, mw_key), 16);
    assert_eq!(std::mem::offset_of!(hw::SqWqeBindMw, mr_key), 20);
    assert_eq!(std::mem::offset_of!(hw::SqWqeBindMw, access), 24);
    // A free capability bit next to MCAST; MW_BIND is IB_ACCESS_MW_BIND,
    // outside the 1.6 mask; the MW types follow FAST_REG; the opcodes are
    // IBV_WR_BIND_MW (8) and IBV_WC_BIND_MW (5).
    assert_eq!(hw::CAP_MW & 0x1fffff, 0);
    assert_eq!(hw::CAP_MW, hw::CAP_MCAST << 1);
    assert_eq!(hw::ACCESS_MW_BIND, 0x10);
    assert_eq!(hw::ACCESS_MW_BIND & hw::ACCESS_MR_MASK, 0);
    assert_eq!(
        (hw::MR_TYPE_MW1, hw::MR_TYPE_MW2),
        (hw::MR_TYPE_FAST_REG + 1, hw::MR_TYPE_FAST_REG + 2)
    );
    assert_eq!((hw::WR_BIND_MW, hw::WC_BIND_MW), (8, 5));
}

/// The names spec 1.8 (ATOMIC_WRITE and FLUSH, IBTA 1.5's memory placement
/// extensions) added are on both sides, and their values are those of the
/// kernel and of the rest of the programming model.
#[test]
fn spec_1_8_placement_names_are_compared() {
    let (c, r) = both();
    for name in [
        "FERROCE_CAP_ATOMIC_WRITE",
        "FERROCE_CAP_FLUSH",
        "FERROCE_ACCESS_FLUSH_GLOBAL",
        "FERROCE_ACCESS_FLUSH_PERSISTENT",
        "FERROCE_WR_FLUSH",
        "FERROCE_WR_ATOMIC_WRITE",
        "FERROCE_WC_FLUSH",
        "FERROCE_WC_ATOMIC_WRITE",
        "FERROCE_FLUSH_GLOBAL",
        "FERROCE_FLUSH_PERSISTENT",
        "FERROCE_FLUSH_RANGE",
        "FERROCE_FLUSH_MR",
    ] {
        assert!(c.consts.contains_key(name), "{name} not in C");
        assert_eq!(c.consts.get(name), r.consts.get(name), "{name}");
    }
    assert!(c.consts["FERROCE_VERSION_MINOR"] >= 8);
    for name in ["ferroce_sq_wqe_atomic_write", "ferroce_sq_wqe_flush"] {
        assert!(c.structs.contains_key(name), "{name} not in C");
        assert_eq!(c.structs.get(name), r.structs.get(name), "{name}");
    }
    // Both segments fill the segment area, as the other segments do.
    for size in [
        std::mem::size_of::<hw::SqWqeAtomicWrite>(),
        std::mem::size_of::<hw::SqWqeFlush>(),
    ] {
        assert_eq!(hw::SQ_WQE_SEG_OFFSET + size, hw::SQ_WQE_DATA_OFFSET);
    }
    let fields = |name: &str| -> Vec<(String, usize, usize)> { c.structs[name].1.clone() };
    let f = |n: &str, o: usize, s: usize| (n.to_string(), o, s);
    assert_eq!(
        fields("ferroce_sq_wqe_atomic_write"),
        vec![
            f("remote_addr", 0, 8),
            f("rkey", 8, 4),
            f("reserved0", 12, 4),
            f("data", 16, 8),
            f("reserved1", 24, 8),
        ]
    );
    // The C field `type` (a Rust keyword) keeps its name on both sides.
    assert_eq!(
        fields("ferroce_sq_wqe_flush"),
        vec![
            f("remote_addr", 0, 8),
            f("rkey", 8, 4),
            f("length", 12, 4),
            f("type", 16, 1),
            f("level", 17, 1),
            f("reserved0", 18, 6),
            f("reserved1", 24, 8),
        ]
    );
    // Two free capability bits after MW: DEV_CAPS 0xffffff in all.
    assert_eq!((hw::CAP_ATOMIC_WRITE, hw::CAP_FLUSH), (0x400000, 0x800000));
    assert_eq!(hw::CAP_ATOMIC_WRITE, hw::CAP_MW << 1);
    assert_eq!(hw::CAP_FLUSH, hw::CAP_ATOMIC_WRITE << 1);
    // IB_ACCESS_FLUSH_GLOBAL / _PERSISTENT, outside both masks.
    assert_eq!(
        (hw::ACCESS_FLUSH_GLOBAL, hw::ACCESS_FLUSH_PERSISTENT),
        (0x100, 0x200)
    );
    for flag in [hw::ACCESS_FLUSH_GLOBAL, hw::ACCESS_FLUSH_PERSISTENT] {
        assert_eq!(
            flag & (hw::ACCESS_MR_MASK | hw::ACCESS_QP_MASK | hw::ACCESS_MW_BIND),
            0
        );
    }
    // IBV_WR_FLUSH 14, IBV_WR_ATOMIC_WRITE 15, IBV_WC_FLUSH 8,
    // IBV_WC_ATOMIC_WRITE 9; IB_FLUSH_GLOBAL 1, _PERSISTENT 2, IB_FLUSH_RANGE
    // 0, IB_FLUSH_MR 1.
    assert_eq!((hw::WR_FLUSH, hw::WR_ATOMIC_WRITE), (14, 15));
    assert_eq!((hw::WC_FLUSH, hw::WC_ATOMIC_WRITE), (8, 9));
    assert_eq!((hw::FLUSH_GLOBAL, hw::FLUSH_PERSISTENT), (1, 2));
    assert_eq!((hw::FLUSH_RANGE, hw::FLUSH_MR), (0, 1));
}

/// Checks that C and Rust agree on `struct ferroce_counters` and on the
/// define `size` (its size in an older version); returns the structure's
/// size and its fields from offset `size` up to offset `end`.
fn counters_after(size: &str, end: usize) -> (usize, Fields) {
    let (c, r) = both();
    assert!(c.consts.contains_key(size), "{size} not in C");
    assert_eq!(c.consts.get(size), r.consts.get(size), "{size}");
    assert_eq!(
        c.structs.get("ferroce_counters"),
        r.structs.get("ferroce_counters")
    );
    let from = c.consts[size] as usize;
    let (len, fields) = &c.structs["ferroce_counters"];
    let tail = fields
        .iter()
        .filter(|f| (from..end).contains(&f.1))
        .cloned()
        .collect();
    (*len, tail)
}

/// Spec 1.9 appends the two end-to-end credit counters to `struct
/// ferroce_counters`: the 1.5..1.8 structure is its unchanged prefix.
#[test]
fn spec_1_9_credit_counters_are_compared() {
    let (c, _) = both();
    assert!(c.consts["FERROCE_VERSION_MINOR"] >= 9);
    let (len, tail) = counters_after("FERROCE_COUNTERS_SIZE_1_5", hw::COUNTERS_SIZE_1_9);
    assert_eq!(
        tail,
        [
            ("credit_waits".to_string(), 536, 8),
            ("credit_updates".to_string(), 544, 8),
        ]
    );
    assert_eq!(hw::COUNTERS_SIZE_1_9, hw::COUNTERS_SIZE_1_5 + 2 * 8);
    assert!(len >= hw::COUNTERS_SIZE_1_9);
}

/// Spec 1.10 appends the keep-alive counter to `struct ferroce_counters`:
/// the 1.9 structure is its unchanged prefix.
#[test]
fn spec_1_10_keepalive_counter_is_compared() {
    let (c, r) = both();
    assert_eq!(c.consts["FERROCE_VERSION_MINOR"], 10);
    assert_eq!(r.consts["FERROCE_VERSION_MINOR"], 10);
    let (len, tail) = counters_after("FERROCE_COUNTERS_SIZE_1_9", usize::MAX);
    assert_eq!(tail, [("credit_keepalives".to_string(), 552, 8)]);
    assert_eq!(len, hw::COUNTERS_SIZE_1_9 + 8);
}
