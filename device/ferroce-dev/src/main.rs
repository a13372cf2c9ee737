// SPDX-License-Identifier: GPL-2.0
//! `ferroce-dev`: the ferroce device process.
//!
//! ```text
//! ferroce-dev [--vfio-user PATH] --ctl PATH [--mac aa:bb:cc:dd:ee:ff] [--mtu N]
//!             [--tap NAME] [--netdev-socket PATH] [--pcap FILE] [--no-tx-gso] [--no-rx-gso]
//!             [--fault SPEC]
//! ferroce-dev ctl --socket PATH gids|objects|counters|status|link up|link down
//!                 |fault [SPEC]|stall on|stall off|kill
//! ```
//! The command line is parsed by clap (`--help` lists every option); the
//! values reuse the library's parsers (`gid::parse_mac`,
//! `FaultConfig::parse`). Diagnostics go to stderr through `log`
//! (`RUST_LOG` filters them; the default shows `info` and above).

use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand, ValueEnum};
use ferroce_dev::ctl::{self, Request};
use ferroce_dev::fault::FaultConfig;
use ferroce_dev::gid::{fmt_mac, parse_mac};
use ferroce_dev::hw::{PORT_MTU_MAX, PORT_MTU_MIN};
use ferroce_dev::port::{Port, Tap};
use ferroce_dev::vfio::{self, VfioDevice, VfioIrq, VfioMemory};
use ferroce_dev::wire::pcap::PcapWriter;
use ferroce_dev::{Device, DeviceConfig, NullIrq, NullMemory};
use log::{error, info};

/// The ferroce device process: the emulated RoCE v2 NIC behind QEMU's
/// `vfio-user-pci`.
///
/// With `--vfio-user PATH` the device serves QEMU's `vfio-user-pci` on that
/// socket (DMA into guest RAM, MSI-X through QEMU's eventfds) and exits 0
/// when QEMU disconnects; without it only the control socket runs, against
/// a device with no guest memory (for tools and tests). `ferroce-dev ctl`
/// asks a running device process over its control socket.
#[derive(Parser)]
#[command(
    name = "ferroce-dev",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    device: DeviceArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Ask a running device process over its control socket and print the
    /// JSON answer.
    Ctl(CtlArgs),
}

/// The device process's options.
#[derive(Args)]
struct DeviceArgs {
    /// Serve QEMU's vfio-user-pci on this unix socket (replaced if stale).
    #[arg(long, value_name = "PATH")]
    vfio_user: Option<PathBuf>,
    /// Serve the JSON-lines control socket here (see `ferroce-dev ctl`).
    #[arg(long, value_name = "PATH", required = true)]
    ctl: Option<PathBuf>,
    /// The port's MAC address.
    #[arg(long, value_name = "MAC", value_parser = mac_value,
          default_value_t = Mac(DeviceConfig::default().mac))]
    mac: Mac,
    /// The port's initial Ethernet MTU.
    #[arg(long, value_name = "N", default_value_t = DeviceConfig::default().mtu,
          value_parser = clap::value_parser!(u32).range(i64::from(PORT_MTU_MIN)..=i64::from(PORT_MTU_MAX)))]
    mtu: u32,
    #[command(flatten)]
    port: PortArgs,
}

/// Port options.
#[derive(Args)]
struct PortArgs {
    /// Attach the port's wire side to this tap interface.
    #[arg(long, value_name = "NAME")]
    tap: Option<String>,
    /// Listen here for QEMU's `-netdev stream` (the paired virtio-net).
    #[arg(long, value_name = "PATH", requires = "tap")]
    netdev_socket: Option<PathBuf>,
    /// Record the wire into this pcap file.
    #[arg(long, value_name = "FILE", requires = "tap")]
    pcap: Option<PathBuf>,
    /// Record frames whole until the pcap file holds this many MiB; after
    /// that, frames longer than 512 bytes keep their first 128 (their
    /// headers), so that bulk data does not fill the disk.
    #[arg(long, value_name = "MIB", default_value_t = 64, requires = "pcap")]
    pcap_whole_mib: u64,
    /// Write every frame to the tap on its own. By default runs of one
    /// QP's RoCE v2 data packets go to the tap as UDP GSO super-frames
    /// (`IFF_VNET_HDR`), which the kernel cuts back into the packets where
    /// they leave the host's stack: one write and one trip through a
    /// bridge per run instead of per packet. A capture on a bridge or
    /// tunnel between the hosts' taps then records the super-frames
    /// (`--pcap` records the packets either way).
    #[arg(long, requires = "tap")]
    no_tx_gso: bool,
    /// Read every frame from the tap on its own. By default the tap hands
    /// over UDP GSO super-frames whole (`TUNSETOFFLOAD`), and the device
    /// cuts them into their packets and fills in the checksums the kernel
    /// would have: one read per super-frame instead of per packet.
    #[arg(long, requires = "tap")]
    no_rx_gso: bool,
    /// Inject faults into the RDMA engine's egress frames, e.g.
    /// `drop=1%,dup=0.1%,reorder=1%,corrupt=0.1%,delay=1%:200us,seed=N`.
    #[arg(long, value_name = "SPEC", value_parser = FaultConfig::parse)]
    fault: Option<FaultConfig>,
}

/// A MAC address as `aa:bb:cc:dd:ee:ff`.
#[derive(Clone, Copy)]
struct Mac([u8; 6]);

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&fmt_mac(&self.0))
    }
}

fn mac_value(s: &str) -> Result<Mac, String> {
    parse_mac(s)
        .map(Mac)
        .ok_or_else(|| "expected six hex bytes, aa:bb:cc:dd:ee:ff".into())
}

/// `ctl`'s options and request.
#[derive(Args)]
struct CtlArgs {
    /// The device process's control socket (its `--ctl PATH`).
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,
    #[command(subcommand)]
    request: CtlRequest,
}

/// A control socket request.
#[derive(Subcommand)]
enum CtlRequest {
    /// Dump the hardware GID table.
    Gids,
    /// Dump the device objects (PDs, MRs, CQs, QPs, AHs, EQs).
    Objects,
    /// Dump the device counters.
    Counters,
    /// Show the device and port status.
    Status,
    /// Take the port's link up or down (the driver sees a port event).
    Link {
        #[arg(value_enum)]
        state: UpDown,
    },
    /// Set fault injection (`none` clears) and print the fault counters;
    /// without SPEC only print them.
    Fault {
        /// e.g. `drop=1%,reorder=0.5%,delay=1%:200us,seed=3`.
        #[arg(value_parser = fault_spec)]
        spec: Option<String>,
    },
    /// Stall or resume the data path and the admin queue.
    Stall {
        #[arg(value_enum)]
        state: OnOff,
    },
    /// Kill the device process at once (exit status 137, no cleanup).
    Kill,
}

#[derive(Clone, Copy, ValueEnum)]
enum UpDown {
    Up,
    Down,
}

#[derive(Clone, Copy, ValueEnum)]
enum OnOff {
    On,
    Off,
}

/// Checks a fault spec here, for a clear error before the device is asked
/// (which checks it again); the device takes the text.
fn fault_spec(s: &str) -> Result<String, String> {
    FaultConfig::parse(s).map(|_| s.to_owned())
}

fn ctl_main(args: CtlArgs) -> Result<(), String> {
    let req = match args.request {
        CtlRequest::Gids => Request::Gids,
        CtlRequest::Objects => Request::Objects,
        CtlRequest::Counters => Request::Counters,
        CtlRequest::Status => Request::Status,
        CtlRequest::Link { state } => Request::Link {
            up: matches!(state, UpDown::Up),
        },
        CtlRequest::Fault { spec } => Request::Fault { spec },
        CtlRequest::Stall { state } => Request::Stall {
            on: matches!(state, OnOff::On),
        },
        CtlRequest::Kill => Request::Kill,
    };
    let data = ctl::request(&args.socket, &req).map_err(|e| e.to_string())?;
    let text = serde_json::to_string_pretty(&data).map_err(|e| e.to_string())?;
    println!("{text}");
    Ok(())
}

/// Sends `log` records to stderr as `ferroce-dev: MESSAGE` (warnings and
/// errors as `ferroce-dev: LEVEL: MESSAGE`); `RUST_LOG` overrides the
/// default `info` filter.
fn init_logging() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .format(|buf, record| match record.level() {
            log::Level::Info => writeln!(buf, "ferroce-dev: {}", record.args()),
            level => writeln!(
                buf,
                "ferroce-dev: {}: {}",
                level.as_str().to_lowercase(),
                record.args()
            ),
        })
        .init();
}

fn device_main(args: DeviceArgs) -> Result<(), String> {
    let cfg = DeviceConfig {
        mac: args.mac.0,
        mtu: args.mtu,
        ..DeviceConfig::default()
    };
    let ctl_path = args.ctl.ok_or("--ctl PATH is required")?;
    let port = args.port;
    let Some(socket) = args.vfio_user else {
        let listener = ctl::bind(&ctl_path).map_err(|e| format!("{}: {e}", ctl_path.display()))?;
        let dev = Arc::new(Device::new(cfg, Arc::new(NullMemory), Arc::new(NullIrq)));
        start_port(&dev, &port)?;
        info!("control socket {}", ctl_path.display());
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
                error!("control socket: {e}");
            }
        })
        .map_err(|e| e.to_string())?;
    info!(
        "serving vfio-user on {}, control socket {}",
        socket.display(),
        ctl_path.display()
    );
    server
        .run(&VfioDevice::new(dev))
        .map_err(|e| format!("vfio-user: {e}"))?;
    info!("client disconnected, shutting down");
    Ok(())
}

/// Applies the fault options and starts the port when a tap is given.
fn start_port(dev: &Arc<Device>, a: &PortArgs) -> Result<(), String> {
    if let Some(f) = a.fault {
        dev.set_faults(f);
    }
    let Some(tap) = &a.tap else {
        if a.netdev_socket.is_some() || a.pcap.is_some() {
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
    let link = Tap::open(tap, !a.no_tx_gso, !a.no_rx_gso).map_err(|e| format!("tap {tap}: {e}"))?;
    let pcap = match &a.pcap {
        Some(p) => {
            let f = std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let w = PcapWriter::new(f).map_err(|e| format!("{}: {e}", p.display()))?;
            Some(w.whole_until(a.pcap_whole_mib.saturating_mul(1 << 20)))
        }
        None => None,
    };
    let netdev = match &a.netdev_socket {
        Some(p) => Some(ctl::bind(p).map_err(|e| format!("{}: {e}", p.display()))?),
        None => None,
    };
    let port = Port::new(dev.clone(), Arc::new(link), pcap);
    port.spawn(netdev).map_err(|e| e.to_string())?;
    info!("port on tap {tap}");
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Some(Command::Ctl(args)) => ctl_main(args),
        None => {
            init_logging();
            device_main(cli.device)
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferroce-dev: {e}");
            ExitCode::FAILURE
        }
    }
}
