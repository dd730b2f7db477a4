package proxyd

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// trimCodePages lets the kernel keep only the program's code that runs.
// The executable's read-only mappings (machine code, read-only data and
// the runtime's tables: about 24 MiB here) are brought in 64 KiB around
// every first touch, and start-up touches most of them once (package
// initialisation, migrations, the CA). After start-up they are marked
// for random access (no fault-around: a page comes in when it is used)
// and dropped, so what stays resident is what serving actually runs.
// Read-only file mappings hold nothing of their own: a dropped page is
// read again from the file when it is next used. Best effort: any error
// leaves the mappings as they were.
func trimCodePages() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe {
			continue
		}
		if perms := fields[1]; perms != "r-xp" && perms != "r--p" {
			continue // never the writable data segment
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		madvise(uintptr(start), uintptr(end-start), unix.MADV_RANDOM)
		madvise(uintptr(start), uintptr(end-start), unix.MADV_DONTNEED)
	}
}

func madvise(addr, length uintptr, advice int) {
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, addr, length, uintptr(advice))
}
