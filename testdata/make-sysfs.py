#!/usr/bin/env python3
"""Regenerates the fake sysfs trees under testdata/ (run from the repository root).

sysfs/       PCI devices for every bus id the machine fixtures use, a DMI product name, and the
             kernel modules nvidia, nvidia_peermem (GPUDirect RDMA) and gdrdrv (GDRCopy).
sysfs-vgpu/  one vGPU (GFD's mock vendor capability: host driver 460.16, branch r460_00), and
             the modules nvidia, nv_peer_mem (the older RDMA module) and nvidia_fs (GPUDirect
             Storage).
sysfs-machines/<machine>/
             one tree per bundled machine (testdata/machines/<machine>.yaml) and per health fixture
             (testdata/health/<machine>.yaml): the PCI bus holds the host bridge and exactly that
             machine's GPUs, so `nvlabel health` finds no GPU missing; every entry is a symlink
             into sysfs/ (as /sys/bus/pci/devices links into /sys/devices), so the labels equal
             sysfs/'s.
platforms/h100-vfio/sys/
             a host passing GPUs through to virtual machines, laid out as the kernel does
             (bus/pci/devices links into devices/, driver links into bus/pci/drivers/): two H100
             PCIe bound to vfio-pci on NUMA nodes 0 and 1, an SR-IOV virtual function of the first,
             an RTX 4090 the host keeps (driver nvidia) with its audio function, a ConnectX-7 and
             the host bridge. The vfio backend keeps the two H100s.
Each NVIDIA device has 256 bytes of config space with a realistic capability list
(PM -> MSI -> PCIe -> vendor-specific), so the vGPU walker runs on every golden test.
"""
import glob
import os
import shutil

import yaml


def config(vendor_cap, device=0):
    c = bytearray(256)
    c[0:2] = (0x10DE).to_bytes(2, "little")
    c[2:4] = device.to_bytes(2, "little")
    c[6] = 0x10  # status: capability list present
    c[0x34] = 0x60
    c[0x60:0x62] = bytes([0x01, 0x68])  # power management
    c[0x68:0x6A] = bytes([0x05, 0x78])  # MSI
    c[0x78:0x7A] = bytes([0x10, 0xB4])  # PCI Express
    c[0xB4:0xB4 + len(vendor_cap)] = vendor_cap  # vendor-specific, last in the list
    return bytes(c)


PASSTHROUGH = bytes([0x09, 0x00, 0x14]) + bytes(17)  # 20 bytes, no "VF" signature
VGPU = bytes([0x09, 0x00, 0x1B, 0x56, 0x46, 0x00, 0x16]) + b"460.16\0\0\0\0" + b"r460_00\0\0\0"


def device(root, address, cls, vendor="0x10de", cap=PASSTHROUGH):
    d = os.path.join(root, "bus/pci/devices", address)
    os.makedirs(d)
    with open(os.path.join(d, "vendor"), "w") as f:
        f.write(vendor + "\n")
    with open(os.path.join(d, "class"), "w") as f:
        f.write(cls + "\n")
    with open(os.path.join(d, "config"), "wb") as f:
        f.write(config(cap) if vendor == "0x10de" else bytes(64))


def machine(root, name):
    d = os.path.join(root, "class/dmi/id")
    os.makedirs(d)
    with open(os.path.join(d, "product_name"), "w") as f:
        f.write(name + "\n")


def modules(root, names):
    """Loaded modules are directories under module/; `initstate` is what a live one has."""
    for name in names:
        d = os.path.join(root, "module", name)
        os.makedirs(d)
        with open(os.path.join(d, "initstate"), "w") as f:
            f.write("live\n")


def bus_ids(fixture):
    """The sysfs addresses of a fixture's GPUs (the fake NVML's default bus id when absent)."""
    with open(fixture) as f:
        gpus = yaml.safe_load(f).get("gpus") or []
    ids = [g.get("pci_bus_id") or f"00000000:{i + 1:02x}:00.0" for i, g in enumerate(gpus)]
    return [i.lower()[4:] if len(i) > 8 and i[8] == ":" else i.lower() for i in ids]


def link(target, name):
    os.makedirs(os.path.dirname(name), exist_ok=True)
    os.symlink(os.path.relpath(target, os.path.dirname(name)), name)


def machine_tree(shared, fixture):
    root = os.path.join("testdata/sysfs-machines", os.path.basename(fixture)[: -len(".yaml")])
    for part in ("class", "module"):
        link(os.path.join(shared, part), os.path.join(root, part))
    for address in ["0000:00:00.0"] + bus_ids(fixture):
        device = os.path.join(shared, "bus/pci/devices", address)
        if not os.path.isdir(device):
            raise SystemExit(f"{fixture}: no device {address} in {shared}")
        link(device, os.path.join(root, "bus/pci/devices", address))


def write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(content, bytes) else "w") as f:
        f.write(content)


def resource(bars):
    """The kernel's `resource` file of an endpoint: 13 `start end flags` lines (6 BARs, the ROM,
    6 SR-IOV BARs), a 64-bit BAR taking two slots; `bars` maps a slot to (start, size, flags)."""
    lines = []
    for i in range(13):
        start, size, flags = bars.get(i, (0, 0, 0))
        end = start + size - 1 if size else 0
        lines.append(f"0x{start:016x} 0x{end:016x} 0x{flags:016x}\n")
    return "".join(lines)


MEM32 = 0x40200  # IORESOURCE_MEM | IORESOURCE_SIZEALIGN
MEM64_PREFETCH = 0x14220C  # ... | IORESOURCE_MEM_64 | IORESOURCE_PREFETCH, 64-bit prefetchable


def pci_function(root, address, vendor, device, cls, numa, driver=None, iommu=None, bars=None, extra=None):
    """One function under devices/pci<domain>:<bus>/, linked from bus/pci/devices."""
    bus = address[:5] + ("%02x" % (int(address[5:7], 16) & 0xE0))
    real = os.path.join(root, "devices", "pci" + bus, address)
    files = {"vendor": vendor, "device": device, "class": cls, "numa_node": str(numa)}
    for name, value in {**files, **(extra or {})}.items():
        write(os.path.join(real, name), value + "\n")
    write(os.path.join(real, "resource"), resource(bars or {}))
    if vendor == "0x10de":
        write(os.path.join(real, "config"), config(PASSTHROUGH, int(device, 16)))
    link(real, os.path.join(root, "bus/pci/devices", address))
    if driver:
        drivers = os.path.join(root, "bus/pci/drivers", driver)
        link(drivers, os.path.join(real, "driver"))
        link(real, os.path.join(drivers, address))
    if iommu is not None:
        group = os.path.join(root, "kernel/iommu_groups", str(iommu))
        link(group, os.path.join(real, "iommu_group"))
        link(real, os.path.join(group, "devices", address))
    return real


def vfio_tree(root):
    machine(root, "PowerEdge R760xa")
    modules(root, ["vfio_pci"])
    h100 = {"subsystem_vendor": "0x10de", "subsystem_device": "0x1626"}
    pci_function(root, "0000:00:00.0", "0x1022", "0x14a4", "0x060000", 0, iommu=0)  # Genoa root complex
    pci_function(root, "0000:01:00.0", "0x10de", "0x2684", "0x030000", 0, "nvidia", 10,
                 {0: (0xF0000000, 16 << 20, MEM32), 1: (0x38000000000, 32 << 30, MEM64_PREFETCH)})
    pci_function(root, "0000:01:00.1", "0x10de", "0x22ba", "0x040300", 0, "snd_hda_intel", 10,
                 {0: (0xF1080000, 16 << 10, MEM32)})
    gpus = [("0000:41:00.0", 0, 20, 0xB8000000, 0x20000000000), ("0000:c1:00.0", 1, 40, 0xD8000000, 0x30000000000)]
    for address, numa, iommu, bar0, bar1 in gpus:
        pci_function(root, address, "0x10de", "0x2331", "0x030200", numa, "vfio-pci", iommu,
                     {0: (bar0, 16 << 20, MEM32), 1: (bar1, 128 << 30, MEM64_PREFETCH),
                      3: (bar1 + (128 << 30), 32 << 20, MEM64_PREFETCH)}, h100)
    # The first H100's one enabled virtual function (vfio-pci enable_sriov), also on vfio-pci.
    pf = os.path.join(root, "devices/pci0000:40/0000:41:00.0")
    write(os.path.join(pf, "sriov_totalvfs"), "32\n")
    write(os.path.join(pf, "sriov_numvfs"), "1\n")
    vf = pci_function(root, "0000:41:00.4", "0x10de", "0x2331", "0x030200", 0, "vfio-pci", 21,
                      {0: (0xB9000000, 16 << 20, MEM32)}, h100)
    link(pf, os.path.join(vf, "physfn"))
    link(vf, os.path.join(pf, "virtfn0"))
    pci_function(root, "0000:a1:00.0", "0x15b3", "0x1021", "0x020000", 1, "mlx5_core", 30,
                 {0: (0x3F000000000, 32 << 20, MEM64_PREFETCH)})  # ConnectX-7


def main():
    shutil.rmtree("testdata/platforms/h100-vfio/sys", ignore_errors=True)
    vfio_tree("testdata/platforms/h100-vfio/sys")
    for root in ("testdata/sysfs", "testdata/sysfs-vgpu", "testdata/sysfs-machines"):
        shutil.rmtree(root, ignore_errors=True)
    root = "testdata/sysfs"
    machine(root, "PowerEdge XE9680")
    device(root, "0000:00:00.0", "0x060000", vendor="0x8086")  # host bridge, not NVIDIA
    compute = [f"0000:{i:02x}:00.0" for i in range(1, 11)]  # default fixture bus ids
    compute += [f"0000:{b}:00.0" for b in ("1b", "43", "52", "61", "9d", "c3", "d1", "df")]  # DGX H100
    compute += [f"0000:{b}:00.0" for b in ("0f", "47", "4e", "87", "90", "b7", "bd")]  # DGX A100
    compute += ["0009:01:00.0", "0019:01:00.0"]  # GH200 NVL2
    compute += [f"0000:{b}:00.0" for b in ("17", "31", "b1", "ca")]  # A100 PCIe bridged in pairs
    compute += ["0008:01:00.0", "0018:01:00.0"]  # GB200 tray (with 0009 and 0019 above)
    compute += ["0000:41:00.0"]  # confidential-computing H100 PCIe
    for address in compute:
        device(root, address, "0x030200")
    for i in range(10):  # RTX 4090s are VGA controllers
        device(root, f"0000:{0x21 + i:02x}:00.0", "0x030000")
    modules(root, ["nvidia", "nvidia_peermem", "gdrdrv"])
    root = "testdata/sysfs-vgpu"
    machine(root, "VMware Virtual Platform")
    modules(root, ["nvidia", "nv_peer_mem", "nvidia_fs"])
    device(root, "0000:01:00.0", "0x030200", cap=VGPU)
    for fixture in sorted(glob.glob("testdata/machines/*.yaml") + glob.glob("testdata/health/*.yaml")):
        machine_tree("testdata/sysfs", fixture)


if __name__ == "__main__":
    main()
