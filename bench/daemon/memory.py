"""Memory for the benchmark's DPDK processes: huge pages when the script can reserve them, else
--no-huge -m MB, the same for every program of a run; and how much a case needs."""
import math
import os
import subprocess
import sys

MIB = 1 << 20
HUGE_PAGE = 2 * MIB
HUGE_DIR = "/dev/hugepages"

# Pool sizing: the preloaded capture, plus what is in flight (bursts, per-lcore mempool caches of up
# to 512, descriptors) with room to spare; rx_nombuf is checked after every run.
MBUFS_IN_FLIGHT = 16384
# tricolord's default --shape-capacity: each worker may hold that many packets for shaping rules, and
# the daemon refuses a --mbufs without room for them (with 4 workers and more the in-flight spare no
# longer covered it, and tricolord would not start).
SHAPE_CAPACITY_PER_WORKER = 4096
MBUF_BYTES = 2432            # 2176-byte buffer (2048 data + 128 headroom) + rte_mbuf + mempool header
MBUF_BYTES_NO_HUGE = 4096    # without huge pages a mempool object may not cross a 4 KiB page: one a page
EAL_BASE_MB = 512            # the EAL, rings (infinite_rx's ring holds 2 x packets pointers), tables
KEY_ENTRY_BYTES = 256        # tricolord per-5-tuple: 128-byte entries, index and chunks, with slack
KEY_INDEX_MB = 64            # the default capacity 1m: 16.1 MiB of key index (tricolor-replay says so), with room


def mbufs_for(packets, workers=1):
    return packets + MBUFS_IN_FLIGHT + workers * SHAPE_CAPACITY_PER_WORKER


def memory_mb_for(packets, flows, huge=True, workers=1):
    """One figure for every program of a case: the pool, the EAL, tricolord's per-5-tuple keys."""
    pool = mbufs_for(packets, workers) * (MBUF_BYTES if huge else MBUF_BYTES_NO_HUGE)
    keys = flows * KEY_ENTRY_BYTES + KEY_INDEX_MB * MIB
    return math.ceil((pool + keys) / MIB) + EAL_BASE_MB


class Memory:
    def __init__(self, mode, need_mb):
        self.mode = mode
        self.need_mb = need_mb
        self.huge = False
        self.restore_pages = None
        self.mounted = False
        self.why = ""

    def __enter__(self):
        if self.mode == "no-huge":
            self.why = "--memory no-huge"
        else:
            self.huge, self.why = self._reserve()
            if not self.huge and self.mode == "huge":
                self.__exit__(None, None, None)
                sys.exit(f"run_bench: huge pages asked for but not available: {self.why}")
        return self

    def _reserve(self):
        pages = math.ceil(self.need_mb * MIB / HUGE_PAGE)
        if not self._hugetlbfs_mounted():
            if os.geteuid() != 0:
                return False, f"no hugetlbfs at {HUGE_DIR} and not root"
            os.makedirs(HUGE_DIR, exist_ok=True)
            result = subprocess.run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "nodev", HUGE_DIR],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                return False, f"mount hugetlbfs {HUGE_DIR}: {result.stderr.strip()}"
            self.mounted = True
        total, free = self._pages()
        if free < pages:
            try:
                with open("/proc/sys/vm/nr_hugepages", "w") as f:
                    f.write(str(total + pages - free))
                self.restore_pages = total
            except OSError as e:
                return False, f"cannot raise /proc/sys/vm/nr_hugepages: {e}"
            total, free = self._pages()
        if free < pages:
            return False, (f"{free} free 2 MiB huge pages after asking for {pages} "
                           f"({self.need_mb} MB; memory too fragmented?)")
        return True, f"{pages} huge pages of 2 MiB ({free} free of {total})"

    @staticmethod
    def _hugetlbfs_mounted():
        with open("/proc/mounts") as f:
            return any(line.split()[1] == HUGE_DIR and line.split()[2] == "hugetlbfs" for line in f)

    @staticmethod
    def _pages():
        info = {}
        with open("/proc/meminfo") as f:
            for line in f:
                key, value = line.split(":", 1)
                info[key] = int(value.split()[0])
        return info["HugePages_Total"], info["HugePages_Free"]

    def eal_args(self, packets, flows, workers=1):
        if self.huge:
            return ["--huge-dir", HUGE_DIR]
        return ["--no-huge", "-m", str(memory_mb_for(packets, flows, huge=False, workers=workers))]

    def describe(self):
        if self.huge:
            return f"huge pages: {self.why}, hugetlbfs at {HUGE_DIR}"
        return f"--no-huge -m MB (4 KiB pages): {self.why}"

    def __exit__(self, *exc):
        if self.restore_pages is not None:
            try:
                with open("/proc/sys/vm/nr_hugepages", "w") as f:
                    f.write(str(self.restore_pages))
            except OSError as e:
                print(f"run_bench: could not give back the huge pages: {e}", file=sys.stderr)
            self.restore_pages = None
        if self.mounted:
            result = subprocess.run(["umount", HUGE_DIR], capture_output=True, text=True)
            if result.returncode != 0:
                print(f"run_bench: hugetlbfs stays mounted at {HUGE_DIR}: {result.stderr.strip()}", file=sys.stderr)
            self.mounted = False
        return False
