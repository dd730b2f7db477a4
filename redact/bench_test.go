package redact

import "testing"

func BenchmarkScrubErrorText(b *testing.B) {
	filled := [][]byte{[]byte("4111111111111111"), []byte("737"), []byte("hunter2xyz")}
	for b.Loop() {
		ScrubErrorText("Card 4111 1111 1111 1111 was declined for jane@example.com, call +1 555 123 4567", filled)
	}
}

func BenchmarkCheckSelectorAfterFill(b *testing.B) {
	for b.Loop() {
		_ = CheckSelectorAfterFill("#checkout form >> iframe[title='Secure payment input frame'] >> button:has-text(\"Pay now\")")
	}
}
