//! vfio GPUs named through the whole probe (session, vfio source, pci.ids search) from the
//! system's pci.ids where it names them, and from the built-in copy where it does not or where
//! the system has none: the system search pointed at this test's own files. A plain run's search
//! is the distributions' paths: the default options and configuration hold them, and the binary
//! with no pci.ids setting reads a copy placed at each (in a mount namespace of its own).

use crate::common;

use nvlabel::probe::{self, ProbeOptions, Session, Strategy};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The bundled vfio host (three H100 PCIe, 10de:2331, bound to vfio-pci), its pci.ids search
/// pointed at `search`.
fn vfio_host(search: Vec<PathBuf>) -> ProbeOptions {
    ProbeOptions {
        strategy: Strategy::Vfio,
        sysfs_root: concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/platforms/h100-vfio/sys").into(),
        pci_ids_search: search,
        ..ProbeOptions::default()
    }
}

fn names(opts: &ProbeOptions) -> Vec<String> {
    let snapshot = probe::probe(&Session::new(), opts).expect("the vfio host probes");
    snapshot.gpus.iter().map(|g| g.name.clone()).collect()
}

#[test]
fn the_systems_copy_names_the_gpus_it_knows() {
    let dir = tempfile::tempdir().unwrap();
    let system = dir.path().join("pci.ids");
    std::fs::write(&system, "10de  NVIDIA Corporation\n\t2331  GH100 [H100 PCIe, system copy]\n").unwrap();
    let opts = vfio_host(vec![dir.path().join("missing.ids"), system]);
    assert!(names(&opts).contains(&"GH100 [H100 PCIe, system copy]".to_string()), "{:?}", names(&opts));
}

#[test]
fn the_built_in_copy_names_what_the_systems_copy_lacks_or_where_there_is_none() {
    let dir = tempfile::tempdir().unwrap();
    let system = dir.path().join("pci.ids");
    std::fs::write(&system, "10de  NVIDIA Corporation\n\t20b0  GA100 [A100 SXM4 40GB]\n").unwrap();
    for search in [vec![system], vec![dir.path().join("missing.ids")]] {
        let got = names(&vfio_host(search.clone()));
        assert!(got.contains(&"GH100 [H100 PCIe]".to_string()), "{search:?}: {got:?}");
        assert!(!got.iter().any(|n| n == "UNKNOWN_DEVICE"), "{search:?}: {got:?}");
    }
}

/// Where the distributions keep the system's pci.ids, in go-nvlib's order: Debian and Ubuntu
/// (pciutils), RHEL's copy updated by hand, RHEL and Fedora (hwdata), SUSE. Written out here, not
/// taken from `pci_ids::SYSTEM_PATHS`, so that emptying or changing that list fails.
const DISTRIBUTION_PATHS: [&str; 4] = [
    "/usr/share/misc/pci.ids",
    "/usr/local/share/pci.ids",
    "/usr/share/hwdata/pci.ids",
    "/usr/share/pci.ids",
];

/// A plain run searches the system's copies: the default options, and a configuration from no
/// flags at all (what the binary and the daemon start from), hold the distributions' paths.
#[test]
fn the_default_search_is_the_distributions_paths() {
    let want: Vec<PathBuf> = DISTRIBUTION_PATHS.iter().map(PathBuf::from).collect();
    assert_eq!(ProbeOptions::default().pci_ids_search, want);
    assert_eq!(ProbeOptions::default().pci_ids, None, "no --pci-ids: the system's copy");
    let dir = tempfile::tempdir().unwrap();
    let config = common::file_daemon_config(&dir.path().join("gfd"), &[]);
    assert_eq!(config.loaded().pass_config().probe.pci_ids_search, want);
}

/// Makes `unshare --mount` run `sh -c script` with `args` in a mount namespace of its own, where
/// `/usr/share` and `/usr/local/share` are empty tmpfs mounts (the host's files untouched).
fn private_mounts(script: &str, args: &[&OsStr]) -> Command {
    let hide = "mount -t tmpfs tmpfs /usr/share && { [ ! -d /usr/local/share ] || mount -t tmpfs tmpfs /usr/local/share; }";
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-ec"]).arg(format!("{hide}\n{script}")).arg("sh");
    cmd.args(args).env_clear().env("PATH", std::env::var_os("PATH").unwrap_or_default());
    cmd
}

/// The binary with its default configuration on the vfio host names its GPUs from a pci.ids at
/// each of the distributions' paths, the only copy there: the default search reaches the probe.
/// Each run in a mount namespace of its own (root, util-linux's `unshare`); skipped with one line
/// where none can be made.
#[test]
fn a_plain_run_names_vfio_gpus_from_the_pci_ids_at_each_system_path() {
    let probe = private_mounts("true", &[]).output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: no private mount namespace here (needs root and unshare): {probe:?}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (i, at) in DISTRIBUTION_PATHS.iter().enumerate() {
        if at.starts_with("/usr/local/share/") && !Path::new("/usr/local/share").is_dir() {
            eprintln!("skipped {at}: no /usr/local/share to hide it in");
            continue;
        }
        let ids = dir.path().join(format!("pci-{i}.ids"));
        std::fs::write(&ids, format!("10de  NVIDIA Corporation\n\t2331  GH100 [H100 PCIe copy{i}]\n"))
            .unwrap();
        let script =
            "mkdir -p \"$(dirname \"$2\")\"\ncp \"$1\" \"$2\"\nshift 2\ncd \"$1\"\nshift\nexec \"$@\"";
        let repo = common::repo();
        let binary = Path::new(env!("CARGO_BIN_EXE_nvlabel"));
        let mut args: Vec<&OsStr> = vec![ids.as_os_str(), at.as_ref(), repo.as_os_str(), binary.as_os_str()];
        args.extend(common::PRINT.iter().map(OsStr::new));
        args.extend(
            ["--device-discovery-strategy=vfio", "--sysfs-root=testdata/platforms/h100-vfio/sys"]
                .map(OsStr::new),
        );
        let mut cmd = private_mounts(script, &args);
        cmd.env("RUST_LOG", "info").env("NVLABEL_METRICS_ADDR", "127.0.0.1:0");
        let (code, out, stderr) = common::run(&mut cmd);
        assert_eq!(code, 0, "{at}: {stderr}");
        assert!(
            out.contains(&format!("nvidia.com/gpu.product=GH100-H100-PCIe-copy{i}\n")),
            "{at}: {out}\n{stderr}"
        );
        assert!(stderr.contains(&format!("pci_ids={at}")), "{at}: the log names the copy read: {stderr}");
    }
}
