package intercept

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/intercept/rewrite"
)

// step is one message from the site and the messages the client must get
// right after it (nil: held back). flush ends the stream instead.
type step struct {
	in     string
	binary bool
	flush  bool
	out    []string
}

func TestP10_WebSocketStreamHoldBack(t *testing.T) {
	// testScrubber: card 4242424242424242 -> 4242420000004242, CVV 737 ->
	// 123, password "p&ss w0rd" -> "q#tt x1sf".
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"whole messages go at once", []step{
			{in: `{"a":1}`, out: []string{`{"a":1}`}},
			{in: "card 4242424242424242 ok", out: []string{"card 4242420000004242 ok"}},
			// "7" after a digit cannot begin the CVV as text, but it can
			// begin its UTF-16 form ("7\x003\x007\x00"), which matches
			// anywhere: held until the next message shows it does not.
			{in: "count 17"},
			{in: "done.", out: []string{"count 17", "done."}},
		}},
		{"split where the stand-in differs", []step{
			{in: "card 4242424242"},
			{in: "424242 end", out: []string{"card 4242420000", "004242 end"}},
		}},
		{"split inside the shared first digits is not held", []step{
			{in: "again 4242", out: []string{"again 4242"}},
			{in: "424242424242 x", binary: true, out: []string{"420000004242 x"}},
		}},
		{"one digit a message", func() []step {
			var s []step
			n, si := "4242424242424242", "4242420000004242"
			for i := 0; i < 6; i++ {
				s = append(s, step{in: n[i : i+1], out: []string{si[i : i+1]}})
			}
			for i := 6; i < 15; i++ {
				s = append(s, step{in: n[i : i+1]})
			}
			var rest []string
			for i := 6; i < 16; i++ {
				rest = append(rest, si[i:i+1])
			}
			return append(s, step{in: n[15:], out: rest})
		}()},
		{"short value split", []step{
			{in: "cvv 73"},
			{in: "", out: nil},
			{in: "7 ok", out: []string{"cvv 12", "", "3 ok"}},
		}},
		{"prefix that never completes goes out at the next message", []step{
			{in: "p&ss"},
			{in: " word", out: []string{"p&ss", " word"}},
		}},
		{"held bytes go out unchanged at the end", []step{
			{in: "card 42424242"},
			{flush: true, out: []string{"card 42424242"}},
		}},
		{"a whole value at the end that could begin another is still sent", []step{
			{in: "4242424242424242", out: []string{"4242420000004242"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWSScrub(testScrubber(), nil, 1<<20)
			defer w.wipe()
			for i, s := range tc.steps {
				var got []rewrite.Message
				var err error
				if s.flush {
					got, err = w.Flush()
				} else {
					got, err = w.Message(s.binary, []byte(s.in))
				}
				if err != nil {
					t.Fatal(err)
				}
				var texts []string
				for _, m := range got {
					texts = append(texts, string(m.Payload))
				}
				if strings.Join(texts, "|") != strings.Join(s.out, "|") || len(texts) != len(s.out) {
					t.Fatalf("step %d: got %q, want %q", i, texts, s.out)
				}
			}
		})
	}
}

func TestP10_WebSocketStreamBounded(t *testing.T) {
	w := newWSScrub(testScrubber(), nil, 1<<20)
	defer w.wipe()
	if _, err := w.Message(false, []byte("card 4242424")); err != nil {
		t.Fatal(err)
	}
	var err error
	for i := 0; i < maxHeldMessages+1 && err == nil; i++ {
		_, err = w.Message(false, nil)
	}
	if err == nil {
		t.Fatal("empty messages held without bound")
	}
}

// FuzzP10_WebSocketStreamNoLeak splits a text into binary messages at
// random places: the messages keep their number and order, and their
// joined bytes hold no real value.
func FuzzP10_WebSocketStreamNoLeak(f *testing.F) {
	f.Add([]byte("a 4242424242424242 b 737 c p&ss w0rd"), []byte{3, 1, 7, 0, 2})
	f.Add([]byte("4242 4242 4242 4242|737|cCZzcyB3MHJk"), []byte{5, 5, 5})
	f.Fuzz(func(t *testing.T, text, cuts []byte) {
		sc := testScrubber()
		w := newWSScrub(sc, nil, 1<<20)
		defer w.wipe()
		var msgs [][]byte
		for _, c := range cuts {
			k := min(int(c)%8, len(text))
			msgs = append(msgs, text[:k])
			text = text[k:]
		}
		msgs = append(msgs, text)
		var out []rewrite.Message
		for _, m := range msgs {
			got, err := w.Message(true, m)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, got...)
		}
		got, _ := w.Flush()
		out = append(out, got...)
		if len(out) != len(msgs) {
			t.Fatalf("%d messages in, %d out", len(msgs), len(out))
		}
		var all []byte
		for _, m := range out {
			all = append(all, m.Payload...)
		}
		if _, n := sc.apply(bytes.Clone(all), nil); n > 0 {
			t.Fatalf("a real value left in %q", all)
		}
	})
}
