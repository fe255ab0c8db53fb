"""CPU energy from RAPL through Linux powercap, with a configurable root.

Each RAPL zone is a folder ``<root>/intel-rapl:N`` (a CPU package; AMD
packages appear under the same driver) with sub-zones ``intel-rapl:N:M``
(core, uncore, dram, psys), each holding ``name``, ``energy_uj`` (a counter
in microjoules) and ``max_energy_range_uj``. The counter runs from 0 up to
``max_energy_range_uj`` and wraps to 0: a reading below the previous one is
taken as exactly one wrap, which adds ``max_energy_range_uj`` (exact to one
counter unit, tens of microjoules). More than one wrap between two reads
cannot be seen, so a long window must be read (:meth:`RaplCounter.poll`)
more often than the counter wraps: ``max_energy_range_uj / power``, minutes
at a typical range of ~262 kJ.

zeus 0.16 reads the same files, but its root is a module constant tried at
import (``/sys/class/powercap/intel-rapl``, then a container path) behind a
cached availability check and a process-wide singleton, and it tracks wraps
in a spawned polling process: it cannot be pointed at a test tree, so sbprof
reads powercap itself. Sub-zones are reported on their own, never summed
into the package (package already includes core and uncore; dram is separate).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Dict, List

from sbprof.base.errors import BackendUnavailable, MeasurementError

POWERCAP_ROOT = "/sys/class/powercap"
_ZONE = re.compile(r"^intel-rapl:(\d+)(?::(\d+))?$")


@dataclass(frozen=True)
class RaplZone:
    """One readable RAPL zone: its folder, report name and counter range."""

    path: str
    domain: str
    max_energy_range_uj: int


def _read_text(path: str) -> str:
    with open(path) as fh:
        return fh.read().strip()


def find_rapl_zones(root: str = POWERCAP_ROOT) -> List[RaplZone]:
    """The RAPL zones under ``root`` whose counters this process can read.

    Domains are named ``cpu:<package name>`` and ``cpu:<package name>/<sub-zone name>``.

    Raises
    ------
    BackendUnavailable
        No powercap folder, no RAPL zone, or counters this user may not read
        (Linux makes ``energy_uj`` root-only since the 2020 PLATYPUS fix).
    """
    if not os.path.isdir(root):
        raise BackendUnavailable(f"no {root}: this kernel or machine exposes no RAPL counters (e.g. a VM)")
    entries = []
    for name in os.listdir(root):
        match = _ZONE.match(name)
        if match:
            pkg, sub = match.groups()
            # Packages sort before their sub-zones, so each sub-zone finds its package's name.
            entries.append((int(pkg), -1 if sub is None else int(sub), name))
    if not entries:
        raise BackendUnavailable(f"no intel-rapl:* zone under {root}")
    packages: Dict[int, str] = {}
    zones = []
    for pkg, sub, name in sorted(entries):
        path = os.path.join(root, name)
        try:
            zone_name = _read_text(os.path.join(path, "name"))
            _read_text(os.path.join(path, "energy_uj"))
            max_range = int(_read_text(os.path.join(path, "max_energy_range_uj")))
        except PermissionError:
            raise BackendUnavailable(f"{path}/energy_uj is not readable by this user: RAPL counters are "
                                     "root-only on current kernels (run as root or grant read access)") from None
        except (OSError, ValueError) as err:
            raise BackendUnavailable(f"cannot read RAPL zone {path}: {err}") from None
        if sub < 0:
            packages[pkg] = zone_name
            domain = f"cpu:{zone_name}"
        else:
            domain = f"cpu:{packages.get(pkg, f'package-{pkg}')}/{zone_name}"
        zones.append(RaplZone(path=path, domain=domain, max_energy_range_uj=max_range))
    return zones


def counter_delta_uj(start_uj: int, end_uj: int, max_energy_range_uj: int) -> int:
    """Energy between two readings of a wrapping counter (at most one wrap).

    Example
    -------
    >>> counter_delta_uj(100, 350, 1000)
    250
    >>> counter_delta_uj(900, 50, 1000)   # wrapped: 100 to the top, 50 after
    150
    """
    return end_uj - start_uj if end_uj >= start_uj else end_uj + max_energy_range_uj - start_uj


class RaplCounter:
    """Energy accumulated by every RAPL zone since :meth:`start`, wraps included.

    Arguments
    ---------
    root : str
        The powercap folder (a fake tree in tests).

    Example
    -------
    >>> RaplCounter("/nonexistent/powercap")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.BackendUnavailable: no /nonexistent/powercap: ... no RAPL counters (e.g. a VM)
    """

    def __init__(self, root: str = POWERCAP_ROOT):
        self.zones = find_rapl_zones(root)
        self._last: Dict[str, int] = {}
        self._total_uj: Dict[str, int] = {}

    def _read(self) -> Dict[str, int]:
        return {z.domain: int(_read_text(os.path.join(z.path, "energy_uj"))) for z in self.zones}

    def start(self) -> None:
        """Take the first reading; accumulated energy restarts at zero."""
        self._last = self._read()
        self._total_uj = dict.fromkeys(self._last, 0)

    def poll(self) -> Dict[str, float]:
        """Read every counter, add what each gained since the last read; joules so far."""
        if not self._last:
            raise MeasurementError("RaplCounter.poll() called before start()")
        now = self._read()
        for zone in self.zones:
            d = zone.domain
            self._total_uj[d] += counter_delta_uj(self._last[d], now[d], zone.max_energy_range_uj)
        self._last = now
        return {d: uj / 1e6 for d, uj in self._total_uj.items()}
