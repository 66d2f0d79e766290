//! Writes NVIDIA's device names, from the PCI ID database the `pci-ids-rs` crate carries, into one
//! sorted text table (`<id> <name>` per line) that `probe/pci_ids.rs` builds in.
//!
//! Why not link the crate: its whole database (every vendor, device and subsystem) is static data
//! of pointers the loader relocates at every start: 1.7 MB of relocations and 1.8 MB of relocated
//! data touched before `main`, on every node, for names only a vfio host reads, and only
//! NVIDIA's. One string of NVIDIA's device lines (about 60 KB) needs no relocation, and its pages
//! are read only when the vfio source names a GPU.

use std::fmt::Write as _;

/// NVIDIA's PCI vendor id.
const NVIDIA_VENDOR: u16 = 0x10de;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    relative_relocations_packed();
    let vendor = pci_ids_rs::Vendors::iter()
        .find(|v| v.id() == NVIDIA_VENDOR)
        .expect("the PCI ID database has NVIDIA's vendor section");
    let mut devices: Vec<(u16, &str)> = vendor.devices().map(|d| (d.id(), d.name())).collect();
    devices.sort_unstable();
    let mut table = String::with_capacity(devices.len() * 48);
    for (id, name) in devices {
        // A name is one line of pci.ids: it cannot hold a newline, so the table needs no escapes.
        writeln!(table, "{id:04x} {}", name.trim()).expect("writing to a String");
    }
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("nvidia_pci_ids.txt"), table).expect("writing the NVIDIA pci.ids table");
}

/// Links the binary with DT_RELR (`-z pack-relative-relocs`): the loader reads every relocation
/// at each start, and the nvlabel binary's 15,000 relative ones took 372 KB of RELA entries, each
/// page of them resident before `main`; packed, they take a few KB. Needs GNU ld 2.38 and glibc
/// 2.36 (Debian 12, the image's base) where the binary runs; only the binary, not the tests.
fn relative_relocations_packed() {
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.ends_with("-linux-gnu") {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
