package proxyd_test

import (
	"context"
	"slices"
	"testing"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/proxyd"
)

// TestSeed004_ConnectedAppsChoiceOutlivesARestart: what the holder chose on
// Connected apps for a key is still chosen after proxyd restarts on the
// same data directory (a hosted connection is not refused again until the
// holder chooses a second time).
func TestSeed004_ConnectedAppsChoiceOutlivesARestart(t *testing.T) {
	dir := t.TempDir()
	start := func() (*proxyd.Main, func()) {
		m := proxyd.NewMain()
		m.Config.DataDir = dir
		m.Config.Listen = proxyd.ListenConfig{Proxy: "127.0.0.1:0", Control: "127.0.0.1:0", Admin: "127.0.0.1:0"}
		ctx, cancel := context.WithCancel(context.Background())
		if err := m.Open(ctx); err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		return m, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			m.Close()
		}
	}
	m, stop := start()
	key, err := m.Broker.LookupKey(context.Background(), m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, chosen := m.ConnectedApps().Uses(key.ID); chosen {
		t.Fatal("a fresh deployment already has a choice for its key")
	}
	if err := m.ConnectedApps().Choose(key.ID, []string{control.AppUses[0]}); err != nil {
		t.Fatal(err)
	}
	stop()

	m, stop = start()
	defer stop()
	uses, chosen := m.ConnectedApps().Uses(key.ID)
	if !chosen || !slices.Equal(uses, []string{control.AppUses[0]}) {
		t.Fatalf("after a restart: chosen %v, uses %v", chosen, uses)
	}
}
