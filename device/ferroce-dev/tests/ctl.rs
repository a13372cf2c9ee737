// SPDX-License-Identifier: GPL-2.0
//! Control socket tests: the request handler, the socket server/client,
//! and the `ferroce-dev` binary's `ctl` subcommands against a running
//! `ferroce-dev` process.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use ferroce_dev::ctl::{self, handle_line, Request};
use ferroce_dev::hw::*;
use serde_json::Value;

fn sock_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ferroce-ctl-{}-{name}.sock", std::process::id()))
}

#[test]
fn handler_answers_every_request() {
    let mut h = Harness::new();
    h.default_gids();
    h.setup_qp(QPT_RC);
    let v = handle_line(&h.dev, r#"{"cmd":"gids"}"#);
    assert_eq!(v["ok"], true);
    let gids = v["data"].as_array().unwrap();
    assert_eq!(gids.len(), 4);
    assert_eq!(gids[0]["gid"], "fe80::fa27:ff:fe00:1da7");
    assert_eq!(gids[3]["gid"], "::ffff:10.0.1.36");
    assert_eq!(gids[3]["smac"], "f8:27:00:00:1d:a7");

    let v = handle_line(&h.dev, r#"{"cmd":"objects"}"#);
    let d = &v["data"];
    assert_eq!(d["pds"].as_array().unwrap().len(), 1);
    assert_eq!(d["cqs"].as_array().unwrap().len(), 1);
    assert_eq!(d["eqs"].as_array().unwrap().len(), 2); // AEQ + CEQ 1
    let qp = &d["qps"][0];
    assert_eq!(qp["handle"], FIRST_QPN);
    assert_eq!(qp["state"], "RESET");

    let v = handle_line(&h.dev, r#"{"cmd":"counters"}"#);
    assert!(v["data"]["cmds_ok"].as_u64().unwrap() >= 7);

    let v = handle_line(&h.dev, r#"{"cmd":"link","up":false}"#);
    assert_eq!(v["data"]["link_up"], false);
    assert_eq!(h.reg_r(REG_PORT_STATE), 0);
    assert_eq!(h.take_events(), vec![(EQE_PORT_DOWN, 1, 0)]);
    let v = handle_line(&h.dev, r#"{"cmd":"status"}"#);
    assert_eq!(v["data"]["link_up"], false);
    assert_eq!(v["data"]["mac"], "f8:27:00:00:1d:a7");
    assert_eq!(v["data"]["dev_status"], DEV_STATUS_READY);

    for bad in [
        "",
        "nonsense",
        r#"{"cmd":"frobnicate"}"#,
        r#"{"cmd":"link"}"#,
    ] {
        let v = handle_line(&h.dev, bad);
        assert_eq!(v["ok"], false, "{bad}");
        assert!(v["error"].as_str().unwrap().contains("bad request"));
    }
}

#[test]
fn socket_server_and_client() {
    let h = Harness::new();
    let dev = h.dev.clone();
    let path = sock_path("lib");
    let listener = ctl::bind(&path).unwrap();
    let d2 = Arc::clone(&dev);
    std::thread::spawn(move || ctl::serve(listener, d2));
    let v = ctl::request(&path, &Request::Link { up: false }).unwrap();
    assert_eq!(v["link_up"], false);
    let v = ctl::request(&path, &Request::Status).unwrap();
    assert_eq!(v["link_up"], false);
    let v = ctl::request(&path, &Request::Gids).unwrap();
    assert_eq!(v, Value::Array(vec![]));
    let v = ctl::request(&path, &Request::Counters).unwrap();
    assert_eq!(v["async_events"], 1);
    assert!(ctl::request(&sock_path("absent"), &Request::Gids).is_err());
    // a stale socket file is replaced on bind
    let again = ctl::bind(&path);
    assert!(again.is_ok());
    let _ = std::fs::remove_file(&path);
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the binary with `args`.
fn output<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ferroce-dev"))
        .args(args)
        .output()
        .unwrap()
}

fn cli(path: &std::path::Path, args: &[&str]) -> (bool, String) {
    let mut all = vec!["ctl".into(), "--socket".into(), path.as_os_str().to_owned()];
    all.extend(args.iter().map(Into::into));
    let out = output(&all);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn binary_ctl_subcommands() {
    let path = sock_path("bin");
    let _ = std::fs::remove_file(&path);
    let child = Command::new(env!("CARGO_BIN_EXE_ferroce-dev"))
        .args([
            "--ctl",
            path.to_str().unwrap(),
            "--mac",
            "02:00:00:00:00:07",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _proc = Proc(child);
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "socket never appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (ok, out) = cli(&path, &["status"]);
    assert!(ok);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["mac"], "02:00:00:00:00:07");
    assert_eq!(v["link_up"], true);
    let (ok, out) = cli(&path, &["link", "down"]);
    assert!(ok, "{out}");
    let (_, out) = cli(&path, &["status"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["link_up"], false);
    let (ok, _) = cli(&path, &["link", "up"]);
    assert!(ok);
    for sub in ["gids", "objects", "counters"] {
        let (ok, out) = cli(&path, &[sub]);
        assert!(ok, "{sub}");
        let _: Value = serde_json::from_str(&out).unwrap();
    }
    let (ok, _) = cli(&path, &["bogus"]);
    assert!(!ok);
    let (ok, _) = cli(&path, &["link", "sideways"]);
    assert!(!ok);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn binary_rejects_bad_arguments() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_ferroce-dev"))
            .args(args)
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(!run(&[]));
    assert!(!run(&["--mac", "zz", "--ctl", "/tmp/x"]));
    assert!(!run(&["--frob"]));
    assert!(!run(&["ctl", "gids"]));
    assert!(run(&["--help"]));
}

/// Runs the binary with `args`, returning its exit code and stderr.
fn run_bin(args: &[&str]) -> (Option<i32>, String) {
    let out = output(args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn binary_usage_errors_name_the_bad_argument() {
    // Each is refused while parsing (exit 2, usage error), before any
    // socket is made or asked; stderr names what was wrong.
    let ctl = sock_path("usage");
    let _ = std::fs::remove_file(&ctl);
    let c = ctl.to_str().unwrap();
    for (args, says) in [
        (&["--ctl", c, "--mac", "zz"][..], "--mac"),
        (&["--ctl", c, "--mac", "02:00:00:00:00"][..], "--mac"),
        (&["--ctl", c, "--mtu", "100"][..], "--mtu"),
        (&["--ctl", c, "--mtu", "9001"][..], "--mtu"),
        (&["--ctl", c, "--mtu", "big"][..], "--mtu"),
        (&["--ctl", c, "--fault", "drop=2"][..], "--fault"),
        (&["--ctl", c, "--fault", "frob=1%"][..], "--fault"),
        (&["--ctl", c, "--pcap", "/tmp/x.pcap"][..], "--tap"),
        (&["--ctl", c, "--netdev-socket", "/tmp/x.sock"][..], "--tap"),
        (&["--ctl"][..], "--ctl"),
        (&["--ctl", c, "--frob"][..], "--frob"),
        (&["--ctl", c, "ctl", "--socket", c, "gids"][..], "ctl"),
        (&["ctl", "--socket", c][..], "Usage"),
        (&["ctl", "--socket", c, "frob"][..], "frob"),
        (&["ctl", "--socket", c, "link"][..], "STATE"),
        (&["ctl", "--socket", c, "link", "sideways"][..], "sideways"),
        (&["ctl", "--socket", c, "stall", "maybe"][..], "maybe"),
        (&["ctl", "--socket", c, "fault", "drop=x"][..], "drop"),
        (&["ctl", "--socket", c, "gids", "extra"][..], "extra"),
        (&["ctl", "gids"][..], "--socket"),
    ] {
        let (code, err) = run_bin(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!ctl.exists(), "{args:?} made the control socket");
    }
    // Asking a device that is not there is a runtime error, not a usage
    // error.
    let (code, err) = run_bin(&["ctl", "--socket", c, "fault", "none"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("ferroce-dev: "), "{err}");
}

#[test]
fn binary_help_lists_every_option_and_request() {
    let help = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_ferroce-dev"))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = help(&["--help"]);
    for opt in [
        "--vfio-user",
        "--ctl",
        "--mac",
        "--mtu",
        "--tap",
        "--netdev-socket",
        "--pcap",
        "--fault",
        "ctl",
    ] {
        assert!(text.contains(opt), "--help lacks {opt}:\n{text}");
    }
    let text = help(&["ctl", "--help"]);
    for req in [
        "--socket", "gids", "objects", "counters", "status", "link", "fault", "stall", "kill",
    ] {
        assert!(text.contains(req), "ctl --help lacks {req}:\n{text}");
    }
    assert!(help(&["ctl", "link", "--help"]).contains("up, down"));
    assert!(help(&["ctl", "stall", "--help"]).contains("on, off"));
    assert!(help(&["--version"]).starts_with("ferroce-dev "));
}

/// Starts a device with `--fault drop=1%` and `RUST_LOG` set to `rust_log`
/// (unset for `None`), checks the fault option over the control socket,
/// kills the device through it and returns the device's stderr.
fn device_stderr(name: &str, rust_log: Option<&str>) -> String {
    let path = sock_path(name);
    let _ = std::fs::remove_file(&path);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferroce-dev"));
    cmd.args(["--ctl", path.to_str().unwrap(), "--fault", "drop=1%"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(filter) = rust_log {
        cmd.env("RUST_LOG", filter);
    }
    let mut proc = Proc(cmd.spawn().unwrap());
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "socket never appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (_, out) = cli(&path, &["fault"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["config"]["drop_ppm"], 10_000, "--fault applied: {v}");
    // The device logs before it serves requests, so its lines are there
    // once it has been killed through its control socket.
    let (ok, _) = cli(&path, &["kill"]);
    assert!(!ok, "kill gets no answer");
    let status = proc.0.wait().unwrap();
    assert_eq!(status.code(), Some(137));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut proc.0.stderr.take().unwrap(), &mut err).unwrap();
    let _ = std::fs::remove_file(&path);
    err
}

#[test]
fn binary_logs_to_stderr() {
    let path = sock_path("log");
    assert_eq!(
        device_stderr("log", None),
        format!("ferroce-dev: control socket {}\n", path.display())
    );
    // RUST_LOG filters the log: warnings only hide the info line.
    assert_eq!(device_stderr("log-warn", Some("warn")), "");
}

#[test]
fn unusable_vfio_user_socket_is_a_clear_error() {
    let ctl = sock_path("badvu");
    let _ = std::fs::remove_file(&ctl);
    let out = Command::new(env!("CARGO_BIN_EXE_ferroce-dev"))
        .args(["--ctl", ctl.to_str().unwrap()])
        .args(["--vfio-user", "/nonexistent/dir/vfio-user.sock"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/dir/vfio-user.sock"), "{err}");
    // Nothing is left behind: the control socket is only made once the
    // vfio-user socket is bound.
    assert!(!ctl.exists());
}

#[test]
fn fault_and_stall_requests() {
    let h = Harness::new();
    let v = handle_line(
        &h.dev,
        r#"{"cmd":"fault","spec":"drop=1%,delay=2%:100us,seed=5"}"#,
    );
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["data"]["config"]["drop_ppm"], 10_000);
    assert_eq!(v["data"]["config"]["delay_ns"], 100_000);
    assert_eq!(v["data"]["injected"]["frames"], 0);
    let v = handle_line(&h.dev, r#"{"cmd":"fault","spec":"drop=2"}"#);
    assert_eq!(v["ok"], false, "rate above 1 refused: {v}");
    let v = handle_line(&h.dev, r#"{"cmd":"fault"}"#);
    assert_eq!(v["data"]["config"]["seed"], 5, "unchanged without spec");
    let v = handle_line(&h.dev, r#"{"cmd":"stall","on":true}"#);
    assert_eq!(v["data"]["stalled"], true);
    assert!(h.dev.faults().2);
    handle_line(&h.dev, r#"{"cmd":"stall","on":false}"#);
    assert!(!h.dev.faults().2);
    let v = handle_line(&h.dev, r#"{"cmd":"counters"}"#);
    assert_eq!(v["data"]["data"]["rx_frames"], 0, "data path counters: {v}");
}
