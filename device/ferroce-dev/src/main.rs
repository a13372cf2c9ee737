// SPDX-License-Identifier: GPL-2.0
//! `ferroce-dev`: the ferroce device process.
//!
//! ```text
//! ferroce-dev [--vfio-user PATH] --ctl PATH [--mac aa:bb:cc:dd:ee:ff] [--mtu N]
//!             [--tap NAME] [--netdev-socket PATH] [--pcap FILE] [--fault SPEC]
//! ferroce-dev ctl --socket PATH gids|objects|counters|status|link up|link down
//!                 |fault [SPEC]|stall on|stall off|kill
//! ```
//! `--tap NAME` attaches the port's wire side to tap interface NAME;
//! `--netdev-socket PATH` listens for QEMU's `-netdev stream` (the paired
//! virtio-net); `--pcap FILE` records the wire; `--fault SPEC` injects
//! faults into the RDMA engine's egress frames (`drop=1%,dup=0.1%,reorder=1%,
//! corrupt=0.1%,delay=1%:200us,seed=N`).
//! With `--vfio-user PATH` the device serves QEMU's `vfio-user-pci` on that
//! socket (DMA into guest RAM, MSI-X through QEMU's eventfds) and exits 0
//! when QEMU disconnects; without it only the control socket runs, against
//! a device with no guest memory (for tools and tests).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use ferroce_dev::ctl::{self, Request};
use ferroce_dev::fault::FaultConfig;
use ferroce_dev::gid::parse_mac;
use ferroce_dev::port::{Port, Tap};
use ferroce_dev::vfio::{self, VfioDevice, VfioIrq, VfioMemory};
use ferroce_dev::{Device, DeviceConfig, NullIrq, NullMemory};

const USAGE: &str = "usage:
  ferroce-dev [--vfio-user PATH] --ctl PATH [--mac aa:bb:cc:dd:ee:ff] [--mtu N]
              [--tap NAME] [--netdev-socket PATH] [--pcap FILE] [--fault SPEC]
  ferroce-dev ctl --socket PATH gids|objects|counters|status|link up|link down
                  |fault [SPEC]|stall on|stall off|kill";

fn ctl_main(args: &[String]) -> Result<(), String> {
    let mut socket = None;
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--socket" => socket = it.next().cloned(),
            _ => rest.push(a.as_str()),
        }
    }
    let socket = PathBuf::from(socket.ok_or("ctl: --socket PATH is required")?);
    let req = match rest.as_slice() {
        ["gids"] => Request::Gids,
        ["objects"] => Request::Objects,
        ["counters"] => Request::Counters,
        ["status"] => Request::Status,
        ["link", "up"] => Request::Link { up: true },
        ["link", "down"] => Request::Link { up: false },
        ["fault"] => Request::Fault { spec: None },
        ["fault", spec] => Request::Fault {
            spec: Some(spec.to_string()),
        },
        ["stall", "on"] => Request::Stall { on: true },
        ["stall", "off"] => Request::Stall { on: false },
        ["kill"] => Request::Kill,
        _ => return Err(USAGE.to_string()),
    };
    let data = ctl::request(&socket, &req).map_err(|e| e.to_string())?;
    let text = serde_json::to_string_pretty(&data).map_err(|e| e.to_string())?;
    println!("{text}");
    Ok(())
}

fn device_main(args: &[String]) -> Result<(), String> {
    let mut cfg = DeviceConfig::default();
    let mut ctl_path = None;
    let mut vfio_user = None;
    let mut port = PortArgs::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--ctl" => ctl_path = Some(PathBuf::from(val()?)),
            "--vfio-user" => vfio_user = Some(PathBuf::from(val()?)),
            "--mac" => cfg.mac = parse_mac(&val()?).ok_or("bad --mac")?,
            "--mtu" => cfg.mtu = val()?.parse().map_err(|_| "bad --mtu")?,
            "--tap" => port.tap = Some(val()?),
            "--netdev-socket" => port.netdev = Some(PathBuf::from(val()?)),
            "--pcap" => port.pcap = Some(PathBuf::from(val()?)),
            "--fault" => port.fault = Some(FaultConfig::parse(&val()?)?),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    let ctl_path = ctl_path.ok_or(format!("--ctl PATH is required\n{USAGE}"))?;
    let Some(socket) = vfio_user else {
        let listener = ctl::bind(&ctl_path).map_err(|e| format!("{}: {e}", ctl_path.display()))?;
        let dev = Arc::new(Device::new(cfg, Arc::new(NullMemory), Arc::new(NullIrq)));
        start_port(&dev, &port)?;
        eprintln!("ferroce-dev: control socket {}", ctl_path.display());
        return ctl::serve(listener, dev).map_err(|e| e.to_string());
    };

    let mut server = vfio_user::Server::bind(&socket, vfio::pci_config(cfg.num_vectors))
        .map_err(|e| format!("{}: {e}", socket.display()))?;
    let listener = ctl::bind(&ctl_path).map_err(|e| format!("{}: {e}", ctl_path.display()))?;
    let dev = Arc::new(Device::new(
        cfg,
        Arc::new(VfioMemory(server.dma())),
        Arc::new(VfioIrq(server.irqs())),
    ));
    start_port(&dev, &port)?;
    let ctl_dev = dev.clone();
    std::thread::Builder::new()
        .name("ctl".into())
        .spawn(move || {
            if let Err(e) = ctl::serve(listener, ctl_dev) {
                eprintln!("ferroce-dev: control socket: {e}");
            }
        })
        .map_err(|e| e.to_string())?;
    eprintln!(
        "ferroce-dev: serving vfio-user on {}, control socket {}",
        socket.display(),
        ctl_path.display()
    );
    server
        .run(&VfioDevice::new(dev))
        .map_err(|e| format!("vfio-user: {e}"))?;
    eprintln!("ferroce-dev: client disconnected, shutting down");
    Ok(())
}

/// Port options.
#[derive(Default)]
struct PortArgs {
    tap: Option<String>,
    netdev: Option<PathBuf>,
    pcap: Option<PathBuf>,
    fault: Option<FaultConfig>,
}

/// Applies the fault options and starts the port when a tap is given.
fn start_port(dev: &Arc<Device>, a: &PortArgs) -> Result<(), String> {
    if let Some(f) = a.fault {
        dev.set_faults(f);
    }
    let Some(tap) = &a.tap else {
        if a.netdev.is_some() || a.pcap.is_some() {
            return Err("--netdev-socket and --pcap need --tap".into());
        }
        // No wire: still run the engine's clock (loopback retransmissions,
        // delayed frames, looped-back frames a doorbell left over) and
        // discard frames for other MACs.
        let engine = dev.clone();
        engine.use_real_clock();
        let (wake_tx, wake_rx) = std::sync::mpsc::sync_channel::<()>(1);
        engine.set_tx_waker(Box::new(move || {
            let _ = wake_tx.try_send(());
        }));
        std::thread::Builder::new()
            .name("engine-clock".into())
            .spawn(move || loop {
                engine.tick(0);
                drop(engine.take_tx());
                if !engine.has_backlog() {
                    let _ = wake_rx.recv_timeout(std::time::Duration::from_millis(1));
                }
            })
            .map_err(|e| e.to_string())?;
        return Ok(());
    };
    let link = Tap::open(tap).map_err(|e| format!("tap {tap}: {e}"))?;
    let pcap = match &a.pcap {
        Some(p) => Some(std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?),
        None => None,
    };
    let netdev = match &a.netdev {
        Some(p) => Some(ctl::bind(p).map_err(|e| format!("{}: {e}", p.display()))?),
        None => None,
    };
    let port = Port::new(dev.clone(), Arc::new(link), pcap).map_err(|e| e.to_string())?;
    port.spawn(netdev).map_err(|e| e.to_string())?;
    eprintln!("ferroce-dev: port on tap {tap}");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("ctl") => ctl_main(&args[1..]),
        _ => device_main(&args),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferroce-dev: {e}");
            ExitCode::FAILURE
        }
    }
}
