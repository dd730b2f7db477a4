package owner

import "time"

// NotifyPrefs are the owner's switches for notifications outside the
// dashboard (seed 004): which configured channels are on, whether the open
// dashboard shows the browser's own notifications, and the switch "A
// checkout needs me to clear a bank or verification step" for challenge
// hand-offs. The dashboard's banner is always on: a switch never hides a
// pending request from the dashboard.
type NotifyPrefs struct {
	Webhook bool `json:"webhook"`
	Email   bool `json:"email"`
	Browser bool `json:"browser"`
	// Challenges: tell the owner when an agent hands a challenge over.
	Challenges bool `json:"challenges"`
}

// DefaultNotifyPrefs are the switches before the owner touched them: every
// channel the deployment configured is on, and so are hand-offs (an agent
// waiting on a bank step that nobody hears of just times out).
var DefaultNotifyPrefs = NotifyPrefs{Webhook: true, Email: true, Browser: true, Challenges: true}

// Handoff is the public face of a challenge hand-off in an Event: what
// kind of step, on which site, until when, never a frame or an input.
type Handoff struct {
	ID            string
	ChallengeType string // three_ds, otp, captcha, blocked
	Site          string
	Created       time.Time
	Expires       time.Time
}
