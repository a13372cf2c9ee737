// SPDX-License-Identifier: GPL-2.0
//! Build script: the C half of the hardware-layout agreement test.
//!
//! It parses `include/ferroce/ferroce-hw.h`, generates a C program that prints
//! the value of every object-like `FERROCE_*` macro and the size, field
//! offsets and field sizes of every `struct ferroce_*`, compiles that program
//! with the C compiler the `cc` crate finds, runs it and stores its output in
//! `$OUT_DIR/hw_c_layout.txt`. The test `tests/agreement.rs` compares that
//! file with the Rust definitions in `src/hw.rs`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let include_dir = manifest.join("../../include");
    let header = include_dir.join("ferroce/ferroce-hw.h");
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-changed=build.rs");
    let text = std::fs::read_to_string(&header).expect("read ferroce-hw.h");

    let mut prog = String::new();
    prog.push_str("#include <stdio.h>\n#include <stddef.h>\n#include <ferroce/ferroce-hw.h>\n");
    prog.push_str("int main(void)\n{\n");

    // Object-like macros: `#define FERROCE_NAME value` (no '(' right after the name).
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix("#define") else {
            continue;
        };
        let rest = rest.trim_start();
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.starts_with("FERROCE_") || name == "FERROCE_HW_H" {
            continue;
        }
        if rest[name.len()..].starts_with('(') {
            continue; // function-like helper
        }
        writeln!(
            prog,
            "\tprintf(\"const {name} %llu\\n\", (unsigned long long)({name}));"
        )
        .unwrap();
    }

    // Structs: `struct ferroce_x {` ... `};`, one field per line.
    let mut current: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(cur) = &current {
            if t.starts_with("};") {
                current = None;
                continue;
            }
            let decl = t.split(';').next().unwrap_or("").trim();
            if decl.is_empty() || decl.starts_with("/*") || decl.starts_with('*') {
                continue;
            }
            let last = decl.split_whitespace().last().unwrap_or("");
            let field: String = last
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if field.is_empty() {
                continue;
            }
            writeln!(
                prog,
                "\tprintf(\"field {cur} {field} %zu %zu\\n\", offsetof(struct {cur}, {field}), sizeof(((struct {cur} *)0)->{field}));"
            )
            .unwrap();
        } else if let Some(rest) = t.strip_prefix("struct ") {
            if let Some(name) = rest.strip_suffix(" {") {
                if name.starts_with("ferroce_") {
                    writeln!(
                        prog,
                        "\tprintf(\"struct {name} %zu\\n\", sizeof(struct {name}));"
                    )
                    .unwrap();
                    current = Some(name.to_string());
                }
            }
        }
    }
    prog.push_str("\treturn 0;\n}\n");

    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let src = out.join("hw_layout.c");
    std::fs::write(&src, prog).expect("write hw_layout.c");
    let exe = out.join("hw_layout");

    let compiler = cc::Build::new()
        .include(&include_dir)
        .std("c11")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .cargo_metadata(false)
        .get_compiler();
    let mut cmd = compiler.to_command();
    cmd.arg(format!("-I{}", include_dir.display()))
        .arg("-std=c11")
        .arg("-Wall")
        .arg("-Wextra")
        .arg("-Werror")
        .arg("-o")
        .arg(&exe)
        .arg(&src);
    let status = cmd.status().expect("run the C compiler");
    assert!(status.success(), "compiling {} failed", src.display());
    let output = Command::new(&exe).output().expect("run hw_layout");
    assert!(output.status.success(), "hw_layout failed");
    std::fs::write(out.join("hw_c_layout.txt"), output.stdout).expect("write hw_c_layout.txt");
}
