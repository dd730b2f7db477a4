package proxyd

import (
	"runtime"
	"runtime/debug"
)

// moduleVersion is the main module's version as the Go toolchain stamped
// it (a tag, a pseudo-version, or "(devel)" plus the VCS revision).
func moduleVersion() (version, goversion string) {
	version, goversion = "unknown", runtime.Version()
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	version = bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			version += "+" + s.Value[:12]
		}
	}
	return
}
