// SPDX-License-Identifier: GPL-2.0
//! The control socket: JSON lines over a unix stream socket.
//!
//! Each request is one JSON object on one line, each answer one line:
//!
//! | request | answer `data` |
//! |---|---|
//! | `{"cmd":"gids"}` | array of valid GID entries |
//! | `{"cmd":"objects"}` | EQs, PDs, MRs, CQs, QPs, SRQs, AHs, multicast groups |
//! | `{"cmd":"counters"}` | the device counters |
//! | `{"cmd":"status"}` | DEV_STATUS, fatal code, link, MTU, MAC |
//! | `{"cmd":"link","up":true}` | new link state |
//! | `{"cmd":"fault","spec":"drop=1%"}` | fault config and injected counts (`spec` optional) |
//! | `{"cmd":"stall","on":true}` | stall / resume the device |
//! | `{"cmd":"kill"}` | the process exits at once (137) |
//!
//! Answers are `{"ok":true,"data":...}` or `{"ok":false,"error":"..."}`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::device::Device;

/// A control request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum Request {
    /// Dump the hardware GID table.
    Gids,
    /// Dump all objects.
    Objects,
    /// Dump the counters.
    Counters,
    /// Device status.
    Status,
    /// Set the link up or down.
    Link {
        /// New state.
        up: bool,
    },
    /// Set fault injection (`FaultConfig::parse` syntax; "none" clears)
    /// and return the fault counters.
    Fault {
        /// The spec, e.g. `drop=1%,reorder=0.5%,seed=3`.
        spec: Option<String>,
    },
    /// Stall (or resume) the data path.
    Stall {
        /// Stalled.
        on: bool,
    },
    /// Kill the device process at once (exit status 137, no cleanup).
    Kill,
}

/// Errors of the control client.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// Socket I/O failed.
    #[error("control socket: {0}")]
    Io(#[from] std::io::Error),
    /// The answer was not valid JSON.
    #[error("bad answer: {0}")]
    Json(#[from] serde_json::Error),
    /// The device refused the request.
    #[error("device: {0}")]
    Device(String),
}

/// Answers one request line.
pub fn handle_line(dev: &Device, line: &str) -> Value {
    let req: Request = match serde_json::from_str(line) {
        Ok(r) => r,
        Err(e) => return json!({"ok": false, "error": format!("bad request: {e}")}),
    };
    let data = match req {
        Request::Gids => serde_json::to_value(dev.gids()),
        Request::Objects => serde_json::to_value(dev.objects()),
        Request::Counters => serde_json::to_value(dev.counters()),
        Request::Status => serde_json::to_value(dev.status()),
        Request::Link { up } => {
            dev.set_link(up);
            Ok(json!({"link_up": dev.status().link_up}))
        }
        Request::Fault { spec } => {
            if let Some(spec) = spec {
                match crate::fault::FaultConfig::parse(&spec) {
                    Ok(c) => dev.set_faults(c),
                    Err(e) => return json!({"ok": false, "error": e}),
                }
            }
            let (cfg, counters, stalled) = dev.faults();
            Ok(json!({"config": cfg, "injected": counters, "stalled": stalled}))
        }
        Request::Stall { on } => {
            dev.set_stall(on);
            Ok(json!({"stalled": on}))
        }
        Request::Kill => std::process::exit(137),
    };
    match data {
        Ok(d) => json!({"ok": true, "data": d}),
        Err(e) => json!({"ok": false, "error": e.to_string()}),
    }
}

fn serve_conn(dev: &Device, stream: UnixStream) -> std::io::Result<()> {
    let mut out = stream.try_clone()?;
    let reader = BufReader::new(stream);
    for line in reader.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let mut answer = handle_line(dev, &line).to_string();
        answer.push('\n');
        out.write_all(answer.as_bytes())?;
    }
    Ok(())
}

/// Binds `path` (removing a stale socket first).
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if path.exists() {
        std::fs::remove_file(path)?;
    }
    UnixListener::bind(path)
}

/// Serves connections on `listener` forever, one thread per connection.
pub fn serve(listener: UnixListener, dev: Arc<Device>) -> std::io::Result<()> {
    for conn in listener.incoming() {
        let stream = conn?;
        let dev = Arc::clone(&dev);
        std::thread::spawn(move || {
            let _ = serve_conn(&dev, stream);
        });
    }
    Ok(())
}

/// Sends one request to the control socket at `path`; returns its `data`.
pub fn request(path: &Path, req: &Request) -> Result<Value, CtlError> {
    let mut stream = UnixStream::connect(path)?;
    let mut line = serde_json::to_string(req)?;
    line.push('\n');
    stream.write_all(line.as_bytes())?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer)?;
    let v: Value = serde_json::from_str(&answer)?;
    if v.get("ok") == Some(&Value::Bool(true)) {
        Ok(v.get("data").cloned().unwrap_or(Value::Null))
    } else {
        let e = v
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown error");
        Err(CtlError::Device(e.to_string()))
    }
}
