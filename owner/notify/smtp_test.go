package notify_test

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/owner/notify"
)

// smtpSink is a minimal SMTP receiver on loopback (RFC 5321 happy path)
// that hands back the message data.
func smtpSink(t *testing.T) (addr string, msgs chan string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	msgs = make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		say := func(s string) { _, _ = c.Write([]byte(s + "\r\n")) }
		say("220 sink ESMTP")
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			cmd := strings.ToUpper(strings.TrimSpace(line))
			switch {
			case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
				say("250 sink")
			case strings.HasPrefix(cmd, "DATA"):
				say("354 go on")
				var b strings.Builder
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if l == ".\r\n" {
						break
					}
					b.WriteString(l)
				}
				msgs <- b.String()
				say("250 queued")
			case strings.HasPrefix(cmd, "QUIT"):
				say("221 bye")
				return
			default:
				say("250 ok")
			}
		}
	}()
	return ln.Addr().String(), msgs
}

func TestSMTPDelivers(t *testing.T) {
	addr, msgs := smtpSink(t)
	host, port, _ := net.SplitHostPort(addr)
	var p int
	for _, c := range port {
		p = p*10 + int(c-'0')
	}
	m := &notify.SMTP{Host: host, Port: p, From: "agentvault@example.com", To: []string{"owner@example.com"}}
	if err := m.Notify(context.Background(), event()); err != nil {
		t.Fatal(err)
	}
	msg := <-msgs
	if !strings.Contains(msg, "Subject: agentvault: the owner's decision is needed (purchase, shop.example)") || !strings.Contains(msg, "80.00 EUR") {
		t.Fatalf("message:\n%s", msg)
	}
}
