//go:build race

package tokens

// raceEnabled: sync.Pool drops items on purpose under the race detector,
// so allocation counts mean nothing there.
const raceEnabled = true
