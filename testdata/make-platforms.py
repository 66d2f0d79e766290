#!/usr/bin/env python3
"""Regenerates the sysfs and host-root trees of the platform samples (run from the repository
root). Each testdata/platforms/<machine>/ holds machine.yaml (written by hand: what NVML and CUDA
answer there), sys/ (its sysfs root) and, on a Tegra system, host/ (its host root, with
etc/nv_tegra_release).

jetson-*      Tegra: soc0 reads "Tegra", /etc/nv_tegra_release exists; the PCI bus holds only the
              SoC's own PCIe root port (an NVIDIA bridge, not a GPU), so the vGPU scan finds none.
igx-orin-dgpu Tegra files too, and the discrete GPU at 0005:01:00.0 (a VGA controller).
dgx-spark     the GB10 at 000f:01:00.0 (a 3D controller).
h100-vfio     (its sys/ is made by testdata/make-sysfs.py) two H100 PCIe bound to vfio-pci.
wsl-rtx4090   no PCI function of the GPU: WSL 2 shows Linux only Microsoft's virtual render device.
"""
import os
import shutil

PLATFORMS = "testdata/platforms"


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def config(cls, vendor):
    """256 bytes of config space: vendor, class, and a capability list without a vGPU entry."""
    c = bytearray(256)
    c[0:2] = vendor.to_bytes(2, "little")
    c[6] = 0x10
    c[9:12] = cls.to_bytes(3, "little")
    c[0x34] = 0x60
    c[0x60:0x62] = bytes([0x01, 0x68])  # power management
    c[0x68:0x6A] = bytes([0x10, 0x00])  # PCI Express, last
    return bytes(c)


def device(sys, address, cls, device_id, vendor=0x10DE):
    d = os.path.join(sys, "bus/pci/devices", address)
    write(os.path.join(d, "vendor"), f"0x{vendor:04x}\n")
    write(os.path.join(d, "device"), f"0x{device_id:04x}\n")
    write(os.path.join(d, "class"), f"0x{cls:06x}\n")
    write(os.path.join(d, "numa_node"), "-1\n")
    write(os.path.join(d, "config"), config(cls, vendor))


def tegra(root, release, family="Tegra"):
    write(os.path.join(root, "host/etc/nv_tegra_release"), release + "\n")
    write(os.path.join(root, "sys/devices/soc0/family"), family + "\n")


def modules(root, names):
    """Loaded modules are directories under module/ (`initstate` is what a live one has)."""
    for name in names:
        write(os.path.join(root, "sys/module", name, "initstate"), "live\n")


def dmi(root, name):
    write(os.path.join(root, "sys/class/dmi/id/product_name"), name + "\n")


def main():
    # h100-vfio's tree is testdata/make-sysfs.py's (it shares that script's device layout).
    for name in sorted(set(os.listdir(PLATFORMS)) - {"h100-vfio"}):
        for part in ("sys", "host"):
            shutil.rmtree(os.path.join(PLATFORMS, name, part), ignore_errors=True)
    p = lambda name: os.path.join(PLATFORMS, name)
    tegra(p("jetson-agx-orin-jp5"), "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64")
    dmi(p("jetson-agx-orin-jp5"), "Jetson AGX Orin Developer Kit")
    device(p("jetson-agx-orin-jp5") + "/sys", "0001:00:00.0", 0x060400, 0x229E)
    modules(p("jetson-agx-orin-jp5"), ["nvgpu"])
    tegra(p("jetson-orin-nano-jp6"), "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64")
    dmi(p("jetson-orin-nano-jp6"), "NVIDIA Jetson Orin Nano Developer Kit")
    device(p("jetson-orin-nano-jp6") + "/sys", "0001:00:00.0", 0x060400, 0x229E)
    modules(p("jetson-orin-nano-jp6"), ["nvgpu"])
    tegra(p("jetson-agx-thor"), "# R38 (release), REVISION: 2.0, GCID: 41844464, BOARD: generic, EABI: aarch64")
    dmi(p("jetson-agx-thor"), "NVIDIA Jetson AGX Thor Developer Kit")
    device(p("jetson-agx-thor") + "/sys", "0001:00:00.0", 0x060400, 0x22D8)
    modules(p("jetson-agx-thor"), ["nvidia"])
    tegra(p("igx-orin-dgpu"), "# R36 (release), REVISION: 3.0, GCID: 36923193, BOARD: generic, EABI: aarch64")
    dmi(p("igx-orin-dgpu"), "IGX Orin Developer Kit")
    device(p("igx-orin-dgpu") + "/sys", "0005:01:00.0", 0x030000, 0x26B1)
    modules(p("igx-orin-dgpu"), ["nvidia"])
    dmi(p("dgx-spark"), "NVIDIA DGX Spark")
    device(p("dgx-spark") + "/sys", "000f:01:00.0", 0x030200, 0x2E12)
    modules(p("dgx-spark"), ["nvidia"])
    dmi(p("wsl-rtx4090"), "Virtual Machine")
    # GPU paravirtualisation's own device (Microsoft's "Basic Render Driver"), not the GPU.
    device(p("wsl-rtx4090") + "/sys", "5c5e:00:00.0", 0x030200, 0x008E, vendor=0x1414)
    modules(p("wsl-rtx4090"), ["dxgkrnl"])


if __name__ == "__main__":
    main()
