package redact

import (
	"sync/atomic"

	"github.com/agentvault/agentvault"
)

// Tools the gate closes once a value has been filled (seed 004): the page
// chooses accessible names and frame names, so after a fill they could
// carry what was typed.
const (
	ToolSnapshotPage = "snapshot_page"
	ToolListFrames   = "list_frames"
)

// SnapshotGate remembers, for one session, whether any token was filled. It
// only ever closes: nothing reopens it for the rest of the session. The zero
// value is open and ready; it is safe for concurrent use.
type SnapshotGate struct {
	filled atomic.Bool
}

// MarkFilled closes the gate. Call it before the first token is typed, so
// a snapshot racing the fill is already refused.
func (g *SnapshotGate) MarkFilled() { g.filled.Store(true) }

// Filled reports whether a token was filled in this session.
func (g *SnapshotGate) Filled() bool { return g.filled.Load() }

// Check refuses snapshot_page and list_frames with sensitive_data_blocked
// once the gate is closed; other tools pass.
func (g *SnapshotGate) Check(tool string) error {
	if !g.filled.Load() {
		return nil
	}
	switch tool {
	case ToolSnapshotPage, ToolListFrames:
		return agentvault.Errorf(agentvault.CodeSensitiveDataBlocked,
			"%s is refused for the rest of the session once a token was filled; use observe_page and count", tool)
	}
	return nil
}
