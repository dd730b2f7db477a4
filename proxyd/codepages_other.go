//go:build !linux

package proxyd

// trimCodePages is Linux only (codepages_linux.go).
func trimCodePages() {}
